//! The options `cargo parprof`'s commands share: which target and how to build it
//! ([`BuildArgs`]), how a run is recorded and analysed ([`RecordingArgs`], with the thresholds
//! and the exact per-call counters), and the parsers of their values.

use super::limits::{self, parse_duration_ns};
use crate::record::collect::{CallGraph, CollectOptions};
use crate::record::counters::{CounterOptions, CounterSet};
use crate::record::perf::Follow;
use crate::record::session::Settings;
use crate::recording::Thresholds;
use crate::recording::{DetailRequest, RecordedOptions};
use clap::Args;
use clap::Parser;
use parprof_rt::slice_results::{DETAIL_ENV, SLICES_ENV};
use std::ffi::OsString;
use std::path::PathBuf;

/// Reading the counters more often than this costs the program more than it tells.
const MIN_COUNTER_READ_INTERVAL_NS: u64 = 100_000;

/// Which target to build for profiling, and how: what `cargo parprof` and `cargo parprof
/// build` share.
#[derive(Args, Debug, Clone, Default)]
pub struct BuildArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Package containing the target
    #[arg(short, long, value_name = "SPEC", help_heading = "Package Selection")]
    pub package: Option<String>,
    /// Path to Cargo.toml
    #[arg(long, value_name = "PATH", help_heading = "Manifest Options")]
    pub manifest_path: Option<PathBuf>,
    /// Space or comma separated list of features to activate
    #[arg(
        short = 'F',
        long,
        value_name = "FEATURES",
        help_heading = "Feature Selection"
    )]
    pub features: Vec<String>,
    /// Activate all available features
    #[arg(long, help_heading = "Feature Selection")]
    pub all_features: bool,
    /// Do not activate the `default` feature
    #[arg(long, help_heading = "Feature Selection")]
    pub no_default_features: bool,
    /// Build with the given profile (default: release, or bench for benches)
    #[arg(
        long,
        value_name = "PROFILE-NAME",
        help_heading = "Compilation Options"
    )]
    pub profile: Option<String>,
}

/// How the cpu and off-CPU flamegraphs (and their `.folded` text) show frames.
#[derive(Args, Debug, Clone, Copy, Default)]
pub struct FrameArgs {
    /// Every frame in the cpu and off-CPU flamegraphs (default: rayon's and std's frames
    /// between two frames of the program folded into one, `[rayon: 14 frames]`)
    #[arg(long)]
    pub all_frames: bool,
    /// Frames named as their symbols are, generic arguments included (default: the path
    /// alone, `demo::step::{closure}`)
    #[arg(long)]
    pub full_names: bool,
}

impl FrameArgs {
    pub fn view(&self) -> crate::report::FrameView {
        crate::report::FrameView {
            all_frames: self.all_frames,
            full_names: self.full_names,
        }
    }
}

/// How a run is recorded and analysed: what `cargo parprof` and `cargo parprof record` share.
#[derive(Args, Debug, Clone)]
pub struct RecordingArgs {
    /// cpu-clock sampling frequency, in Hz (1 to 100000)
    #[arg(long, value_name = "HZ", value_parser = limits::sampling_frequency, default_value_t = 999)]
    pub frequency: u64,
    /// Counters to attribute to probes, tasks and regions: perf's names, comma separated
    /// (e.g. `page-faults,task-clock,instructions`), or `none`. Default: instructions, cycles
    /// and cache-misses where the machine has hardware counters, plus task-clock,
    /// page-faults, context-switches and cpu-migrations
    #[arg(long, value_name = "LIST", value_parser = parse_counters)]
    pub counters: Option<CounterSet>,
    /// Period of the utilization over time, e.g. `500us`, `2ms` (at least 10us)
    #[arg(long, value_name = "DURATION", value_parser = limits::utilization_period, default_value = "1ms")]
    pub period: u64,
    /// Time between two reads of the counters, at least 100us. Every read interrupts the
    /// program on each CPU it runs on; between reads, the counters are interpolated and
    /// spread over the time the program's threads were switched in (from the switch records)
    #[arg(long, value_name = "DURATION", value_parser = parse_read_interval_ns, default_value = "10ms")]
    pub counter_interval: u64,
    /// Record N runs of the target into one folder (`run-1`, `run-2`, …): the spread of each
    /// probe and region over the runs, and what `cargo parprof diff` needs for its noise rule
    #[arg(long, value_name = "N", value_parser = limits::run_count, default_value_t = 1)]
    pub repeat: usize,
    /// One root for all threads in the cpu flamegraph (default: one root per thread)
    #[arg(long)]
    pub merge_threads: bool,
    #[command(flatten)]
    pub frames: FrameArgs,
    /// No off-CPU flamegraph: its samples cost about 3 µs per context switch (+30% for a
    /// program that switches 100,000 times a second)
    #[arg(long)]
    pub no_offcpu: bool,
    /// How cpu samples get their call chains: `dwarf` copies 16 KiB of user stack per sample
    /// and unwinds it with the files' call-frame information (complete chains through the
    /// standard library and other code without frame pointers), `fp` follows frame pointers
    /// only (cheaper; `cargo bench --bench unwind_overhead` measures both)
    #[arg(long, value_enum, value_name = "HOW", default_value_t = CallGraph::Dwarf)]
    pub call_graph: CallGraph,
    #[command(flatten)]
    pub thresholds: ThresholdArgs,
    #[command(flatten)]
    pub slices: SliceArgs,
}

/// Detailed instrumentation: counters read at every probe event (method 5 of the spec).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Exact Per-Call Counters")]
pub struct SliceArgs {
    /// Fork short slices of the program onto idle CPUs, each reading the counters at every
    /// probe event: exact page faults and task-clock (and instructions, where the machine has
    /// them) per probe call, at the cost of a fork per slice. Slices cannot write, signal or
    /// spawn: their output is dropped
    #[arg(long, conflicts_with = "detail")]
    pub slices: bool,
    /// `full`: read the counters at every probe event in the program itself, for the whole
    /// run — the reference that slices make affordable (a system call per probe event)
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub detail: Option<Detail>,
    /// Fork a slice only while running program threads ÷ usable CPUs is below this (above 0)
    #[arg(long, value_name = "LOAD", value_parser = limits::load_threshold, default_value_t = 1.0, requires = "slices")]
    pub load_threshold: f64,
    /// Slices alive at once (default: usable CPUs − program threads at start, at least 1)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), requires = "slices")]
    pub slice_threshold: Option<u32>,
    /// CPU time a slice runs before it hands its results back
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns, default_value = "10ms", requires = "slices")]
    pub slice_length: u64,
    /// CPU time of a thread between two chances to fork a slice of it
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns, default_value = "20ms", requires = "slices")]
    pub slice_period: u64,
}

/// `--detail`: how much the probes measure in the program itself.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// Counters read at every probe event, on every thread, for the whole run.
    Full,
}

impl SliceArgs {
    pub(super) fn request(&self) -> DetailRequest {
        match (self.slices, self.detail) {
            (_, Some(Detail::Full)) => DetailRequest::Full,
            (true, None) => DetailRequest::Slices,
            (false, None) => DetailRequest::Off,
        }
    }

    /// The variables that turn on the runtime's detailed instrumentation (none: off).
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        if self.detail == Some(Detail::Full) {
            return vec![(OsString::from(DETAIL_ENV), OsString::from("full"))];
        }
        if !self.slices {
            return Vec::new();
        }
        let mut config = format!(
            "period_ns={},length_ns={},load={}",
            self.slice_period, self.slice_length, self.load_threshold
        );
        if let Some(max) = self.slice_threshold {
            config.push_str(&format!(",max={max}"));
        }
        vec![(OsString::from(SLICES_ENV), OsString::from(config))]
    }
}

/// Which target to profile: at most one of these (none: cargo's default binary).
#[derive(Args, Debug, Clone, Default)]
#[group(id = "target", multiple = false)]
pub struct TargetArgs {
    /// Profile the binary NAME
    #[arg(long, value_name = "NAME", help_heading = "Target Selection")]
    pub bin: Option<String>,
    /// Profile the example NAME
    #[arg(long, value_name = "NAME", help_heading = "Target Selection")]
    pub example: Option<String>,
    /// Profile the bench NAME (run with `--bench`, as `cargo bench` does)
    #[arg(long, value_name = "NAME", help_heading = "Target Selection")]
    pub bench: Option<String>,
    /// Profile the integration test NAME
    #[arg(long, value_name = "NAME", help_heading = "Target Selection")]
    pub test: Option<String>,
}

/// One flag per threshold of the parallel-overhead diagnoses (method 2 of the spec).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Diagnosis Thresholds")]
pub struct ThresholdArgs {
    /// LQ + GS share of a region's worker time above which too fine granularity and
    /// excessive stealing are looked for
    #[arg(long, value_name = "SHARE", value_parser = non_negative, default_value_t = Thresholds::default().active_overhead)]
    pub active_overhead_threshold: f64,
    /// W share of a region's worker time above which insufficient parallel slack and load
    /// imbalance are looked for
    #[arg(long, value_name = "SHARE", value_parser = non_negative, default_value_t = Thresholds::default().inactive_overhead)]
    pub inactive_overhead_threshold: f64,
    /// Tasks (local + stolen) per worker per second above which granularity is too fine
    #[arg(long, value_name = "RATE", value_parser = non_negative, default_value_t = Thresholds::default().tasks_per_worker_per_s)]
    pub tasks_per_worker_per_s_threshold: f64,
    /// Stolen tasks per local task above which stealing is excessive
    #[arg(long, value_name = "RATIO", value_parser = non_negative, default_value_t = Thresholds::default().stolen_per_local)]
    pub stolen_per_local_threshold: f64,
    /// GS->GS + GS->W transitions per worker per second above which parallel slack is
    /// insufficient (below it, idle workers mean load imbalance)
    #[arg(long, value_name = "RATE", value_parser = non_negative, default_value_t = Thresholds::default().search_wait_per_worker_per_s)]
    pub search_wait_per_worker_per_s_threshold: f64,
    /// Share of a region's worker time switched out while runnable (in user code or finding
    /// tasks) above which the region is oversubscribed
    #[arg(long, value_name = "SHARE", value_parser = non_negative, default_value_t = Thresholds::default().preempted)]
    pub preempted_threshold: f64,
    /// Share of a region's worker time its tasks spent blocked (a lock, a channel, I/O, a
    /// sleep) above which the region is `blocking_in_tasks`
    #[arg(long, value_name = "SHARE", value_parser = non_negative, default_value_t = Thresholds::default().blocked)]
    pub blocked_threshold: f64,
    /// Regions that ran for less than this in all are not diagnosed, e.g. `500us`
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns, default_value = "1ms")]
    pub min_region_elapsed: u64,
}

impl ThresholdArgs {
    pub(super) fn thresholds(&self) -> Thresholds {
        self.given_over(&Thresholds::default(), |_| true)
    }

    /// The thresholds `given` on the command line (by their argument id), the others from
    /// `base`.
    pub(super) fn given_over(&self, base: &Thresholds, given: impl Fn(&str) -> bool) -> Thresholds {
        let pick = |id: &str, flag: f64, base: f64| if given(id) { flag } else { base };
        Thresholds {
            active_overhead: pick(
                "active_overhead_threshold",
                self.active_overhead_threshold,
                base.active_overhead,
            ),
            inactive_overhead: pick(
                "inactive_overhead_threshold",
                self.inactive_overhead_threshold,
                base.inactive_overhead,
            ),
            tasks_per_worker_per_s: pick(
                "tasks_per_worker_per_s_threshold",
                self.tasks_per_worker_per_s_threshold,
                base.tasks_per_worker_per_s,
            ),
            stolen_per_local: pick(
                "stolen_per_local_threshold",
                self.stolen_per_local_threshold,
                base.stolen_per_local,
            ),
            search_wait_per_worker_per_s: pick(
                "search_wait_per_worker_per_s_threshold",
                self.search_wait_per_worker_per_s_threshold,
                base.search_wait_per_worker_per_s,
            ),
            preempted: pick(
                "preempted_threshold",
                self.preempted_threshold,
                base.preempted,
            ),
            blocked: pick("blocked_threshold", self.blocked_threshold, base.blocked),
            min_elapsed_ns: if given("min_region_elapsed") {
                self.min_region_elapsed
            } else {
                base.min_elapsed_ns
            },
        }
    }
}

/// `--counters`: a list of known counter names, or `none`.
pub(super) fn parse_counters(text: &str) -> Result<CounterSet, String> {
    if text.trim().eq_ignore_ascii_case("none") {
        return CounterSet::parse("").map_err(|e| e.to_string());
    }
    CounterSet::parse(text).map_err(|e| e.to_string())
}

/// `--counter-interval`: a duration as for `--period`, not below the cheapest useful interval.
pub(super) fn parse_read_interval_ns(text: &str) -> Result<u64, String> {
    let ns = parse_duration_ns(text)?;
    if ns < MIN_COUNTER_READ_INTERVAL_NS {
        return Err(format!(
            "`{text}` is below 100us: reading the counters that often costs the program more \
             than it tells"
        ));
    }
    Ok(ns)
}

/// A threshold: a finite number, not negative.
pub(super) fn non_negative(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() && value >= 0.0 => Ok(value),
        Ok(_) => Err("expected a finite number, 0 or more".to_owned()),
        Err(error) => Err(error.to_string()),
    }
}

pub(super) fn positive_seconds(text: &str) -> Result<f64, String> {
    match non_negative(text)? {
        0.0 => Err("expected more than 0 seconds".to_owned()),
        seconds => Ok(seconds),
    }
}

impl RecordingArgs {
    /// The kernel collection and counters asked for.
    pub fn collect_options(&self) -> CollectOptions {
        let counters = self
            .counters
            .clone()
            .unwrap_or_else(CounterSet::default_set);
        // A slice is a forked copy of the program: not followed, so not counted as it.
        let follow = if self.slices.slices {
            Follow::ThreadsOnly
        } else {
            Follow::ThreadsAndProcesses
        };
        CollectOptions {
            frequency_hz: self.frequency,
            switch_stacks: !self.no_offcpu,
            call_graph: self.call_graph,
            counters: (!counters.is_empty()).then(|| CounterOptions {
                counters,
                read_interval_ns: self.counter_interval,
                follow,
                ..CounterOptions::default()
            }),
            follow,
            ..CollectOptions::default()
        }
    }

    /// How each run is recorded, and the options it is analysed with.
    pub fn settings(&self) -> Settings {
        Settings {
            collect: self.collect_options(),
            env: self.slices.env(),
            options: RecordedOptions {
                thresholds: self.thresholds.thresholds(),
                utilization_period_ns: self.period,
                merge_threads: self.merge_threads,
            },
            detail: self.slices.request(),
        }
    }
}

/// `cargo parprof diff`: what changed, for a pull request — two commits built and run
/// alternated (`--base REV`), or two recorded sides (`BASE HEAD`).
#[derive(Parser, Debug, Clone)]
#[command(
    name = "cargo parprof diff",
    version,
    after_help = "A pull request: `cargo parprof diff --base origin/main --bench NAME \
                  --fail-above 10` checks BASE out beside the work tree (under \
                  target/parprof/), builds both into one target folder, and runs them \
                  alternated (B H, H B, …) until every probe and region is decided or the \
                  budget is spent. Two recorded sides: `cargo parprof diff BASE_DIR HEAD_DIR`."
)]
pub struct DiffArgs {
    /// The base: a run folder of `cargo parprof`, or a folder of run folders (several runs)
    #[arg(
        value_name = "BASE",
        required_unless_present = "base_rev",
        conflicts_with = "base_rev"
    )]
    pub base: Option<PathBuf>,
    /// The head, likewise
    #[arg(value_name = "HEAD", required_unless_present = "base_rev")]
    pub head: Option<PathBuf>,
    /// Build and run this commit (a git revision) as BASE, alternated with HEAD
    #[arg(long = "base", value_name = "REV")]
    pub base_rev: Option<String>,
    /// HEAD's commit (default: the work tree as it is)
    #[arg(long = "head", value_name = "REV", conflicts_with = "base")]
    pub head_rev: Option<String>,
    /// With `--base`: the target to build and run, as for a run
    #[command(flatten)]
    pub build: BuildArgs,
    /// With `--base`: seconds the alternated runs may take (the builds not counted); rows
    /// still undecided then are `noisy`, with the pairs they would need
    #[arg(long, value_name = "SECONDS", value_parser = positive_seconds, default_value_t = 120.0)]
    pub budget: f64,
    /// With `--base` and a criterion bench: seconds of each benchmark's measured batch, as
    /// for a run
    #[arg(long, value_name = "SECONDS", value_parser = positive_seconds, default_value_t = 2.0)]
    pub bench_time: f64,
    /// Output folder for diff.md, diff.json and the differential flamegraphs (with `--base`,
    /// also the runs: `base/run-1`, `head/run-1`, …: run i of each side is pair i)
    #[arg(short, long, value_name = "DIR", default_value = "parprof-diff")]
    pub output: PathBuf,
    /// Exit with code 1 when a probe or region got slower, beyond noise, by more than PCT percent
    #[arg(long, value_name = "PCT", value_parser = non_negative)]
    pub fail_above: Option<f64>,
    /// With `--base`: arguments for the profiled program
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<OsString>,
}
