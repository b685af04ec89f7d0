//! The `cargo parprof` command line: parse, then build → run and collect → analyse → report.

use crate::analysis::diagnoses::Thresholds;
use crate::analysis::{ExitStatus, TargetInfo};
use crate::bench_harness::{self, BenchEntry, BenchIndex, Harness};
use crate::collect::{CallGraph, CollectOptions};
use crate::counters::{CounterOptions, CounterSet};
use crate::diff;
use crate::launch;
use crate::perf::Follow;
use crate::recording::{self, DetailRequest, RayonHooks, RecordedOptions, Recording, RunMeta};
use crate::run_history;
use crate::run_report::{self, ReportRequest};
use crate::target::{self, BuildOptions, ResolvedTarget, TargetKind, TargetRequest};
use anyhow::{Context, Result};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser};
use parprof_rt::slice_results::{DETAIL_ENV, SLICES_ENV};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Reading the counters more often than this costs the program more than it tells.
const MIN_COUNTER_READ_INTERVAL_NS: u64 = 100_000;

#[derive(Parser, Debug)]
#[command(name = "cargo", bin_name = "cargo", styles = clap::builder::styling::Styles::styled())]
pub enum CargoCli {
    /// Profile a cargo target: probe times corrected for overhead and preemption, rayon
    /// worker lifecycles with diagnoses, flamegraphs and a Perfetto timeline.
    Parprof(ParprofArgs),
}

#[derive(Args, Debug, Clone)]
#[command(version, about)]
pub struct ParprofArgs {
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
    /// Output folder (default: a new folder under target/parprof/)
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// cpu-clock sampling frequency, in Hz
    #[arg(long, value_name = "HZ", default_value_t = 999)]
    pub frequency: u64,
    /// Counters to attribute to probes, tasks and regions: perf's names, comma separated
    /// (e.g. `page-faults,task-clock,instructions`), or `none`. Default: instructions, cycles
    /// and cache-misses where the machine has hardware counters, plus task-clock,
    /// page-faults, context-switches and cpu-migrations
    #[arg(long, value_name = "LIST", value_parser = parse_counters)]
    pub counters: Option<CounterSet>,
    /// Period of the utilization over time, e.g. `500us`, `2ms`
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns, default_value = "1ms")]
    pub period: u64,
    /// Time between two reads of the counters, at least 100us. Every read interrupts the
    /// program on each CPU it runs on; between reads, the counters are interpolated and
    /// spread over the time the program's threads were switched in (from the switch records)
    #[arg(long, value_name = "DURATION", value_parser = parse_read_interval_ns, default_value = "10ms")]
    pub counter_interval: u64,
    /// Record N runs of the target into one folder (`run-1`, `run-2`, …): the spread of each
    /// probe and region over the runs, and what `cargo parprof diff` needs for its noise rule
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub repeat: usize,
    /// One root for all threads in the cpu flamegraph (default: one root per thread)
    #[arg(long)]
    pub merge_threads: bool,
    /// Run folders kept under `target/parprof/` (the newest; 0 keeps all). Folders given
    /// with `-o` are never removed
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub keep: usize,
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
    /// Seconds of each criterion benchmark's measured batch in its profile mode; criterion's
    /// warm-up (1 to 2 s, the same routine) runs before it and is profiled with it
    #[arg(long, value_name = "SECONDS", value_parser = positive_seconds, default_value_t = 2.0)]
    pub bench_time: f64,
    /// Arguments for the profiled program
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<OsString>,
    // Last, so that their help headings do not take in the arguments above.
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
    /// Fork a slice only while running program threads ÷ usable CPUs is below this
    #[arg(long, value_name = "LOAD", value_parser = non_negative, default_value_t = 1.0, requires = "slices")]
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
    fn request(&self) -> DetailRequest {
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
    /// Regions that ran for less than this in all are not diagnosed, e.g. `500us`
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns, default_value = "1ms")]
    pub min_region_elapsed: u64,
}

impl ThresholdArgs {
    fn thresholds(&self) -> Thresholds {
        self.given_over(&Thresholds::default(), |_| true)
    }

    /// The thresholds `given` on the command line (by their argument id), the others from
    /// `base`.
    fn given_over(&self, base: &Thresholds, given: impl Fn(&str) -> bool) -> Thresholds {
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
            min_elapsed_ns: if given("min_region_elapsed") {
                self.min_region_elapsed
            } else {
                base.min_elapsed_ns
            },
        }
    }
}

/// `--counters`: a list of known counter names, or `none`.
fn parse_counters(text: &str) -> Result<CounterSet, String> {
    if text.trim().eq_ignore_ascii_case("none") {
        return CounterSet::parse("").map_err(|e| e.to_string());
    }
    CounterSet::parse(text).map_err(|e| e.to_string())
}

/// `--period`: a positive duration with a unit (`ns`, `us` or `µs`, `ms`, `s`), in ns.
fn parse_duration_ns(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("`{text}` has no unit: write e.g. `500us` or `2ms`"))?;
    let (number, unit) = text.split_at(split);
    let scale = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        other => return Err(format!("unknown unit `{other}`: use ns, us, ms or s")),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{number}` is not a number"))?;
    let ns = (value * scale).round();
    if !(1.0..=u64::MAX as f64).contains(&ns) {
        return Err(format!(
            "`{text}` is not a positive duration of at least 1 ns"
        ));
    }
    Ok(ns as u64)
}

/// `--counter-interval`: a duration as for `--period`, not below the cheapest useful interval.
fn parse_read_interval_ns(text: &str) -> Result<u64, String> {
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
fn non_negative(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() && value >= 0.0 => Ok(value),
        Ok(_) => Err("expected a finite number, 0 or more".to_owned()),
        Err(error) => Err(error.to_string()),
    }
}

fn positive_seconds(text: &str) -> Result<f64, String> {
    match non_negative(text)? {
        0.0 => Err("expected more than 0 seconds".to_owned()),
        seconds => Ok(seconds),
    }
}

impl ParprofArgs {
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

    fn target_request(&self) -> TargetRequest {
        let t = &self.target;
        let kind_and_name = [
            (TargetKind::Bin, &t.bin),
            (TargetKind::Example, &t.example),
            (TargetKind::Bench, &t.bench),
            (TargetKind::Test, &t.test),
        ]
        .into_iter()
        .find_map(|(kind, name)| name.clone().map(|n| (kind, n)));
        TargetRequest {
            kind_and_name,
            package: self.package.clone(),
        }
    }

    fn build_options(&self) -> BuildOptions {
        BuildOptions {
            profile: self.profile.clone(),
            features: self.features.clone(),
            all_features: self.all_features,
            no_default_features: self.no_default_features,
        }
    }
}

/// Parses `cargo parprof ...` (as cargo passes it: program name, then `parprof`).
pub fn parse<I, T>(args: I) -> Result<ParprofArgs, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let CargoCli::Parprof(args) = CargoCli::try_parse_from(args)?;
    Ok(args)
}

/// What `cargo parprof ...` was asked to do.
#[derive(Debug)]
pub enum Invocation {
    /// Build, run, collect, analyse and report a target.
    Run(Box<ParprofArgs>),
    /// Compare two sets of runs.
    Diff(DiffArgs),
    /// Analyse saved runs again.
    Report(ReportArgs),
}

/// `cargo parprof report RUN`: analyse a saved run again (other thresholds, new reports),
/// without building or running anything.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "cargo parprof report",
    version,
    after_help = "Options not given are those the run was recorded with: without any, the \
                  reports are the run's own, figure for figure."
)]
pub struct ReportArgs {
    /// A run folder of `cargo parprof`, a folder of its `--repeat` runs, or a criterion bench's
    /// folder
    pub run: PathBuf,
    /// Output folder (default: RUN itself, whose reports are replaced)
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Period of the utilization over time, e.g. `500us`, `2ms` (default: the run's)
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub period: Option<u64>,
    /// One root for all threads in the cpu flamegraph (default: as the run was reported)
    #[arg(long)]
    pub merge_threads: bool,
    /// Analyse run records that were cut (disk full, an interrupted copy) up to their last
    /// complete part, instead of refusing them
    #[arg(long)]
    pub partial: bool,
    /// Thresholds given on the command line override the run's; the others are the run's.
    #[command(flatten)]
    pub thresholds: ThresholdArgs,
    /// The ids of the threshold flags given on the command line.
    #[arg(skip)]
    given_thresholds: Vec<String>,
}

impl ReportArgs {
    fn from_matches(matches: &ArgMatches) -> Result<ReportArgs, clap::Error> {
        let mut args = ReportArgs::from_arg_matches(matches)?;
        args.given_thresholds = matches
            .ids()
            .filter(|id| matches.value_source(id.as_str()) == Some(ValueSource::CommandLine))
            .map(|id| id.to_string())
            .collect();
        Ok(args)
    }

    /// The options of a run recorded with `recorded`, changed as asked.
    pub fn options(&self, recorded: &RecordedOptions) -> RecordedOptions {
        RecordedOptions {
            thresholds: self.thresholds.given_over(&recorded.thresholds, |id| {
                self.given_thresholds.iter().any(|g| g == id)
            }),
            utilization_period_ns: self.period.unwrap_or(recorded.utilization_period_ns),
            merge_threads: self.merge_threads || recorded.merge_threads,
        }
    }
}

/// `cargo parprof diff BASE HEAD`: what changed, for a pull request.
#[derive(Parser, Debug, Clone)]
#[command(name = "cargo parprof diff", version)]
pub struct DiffArgs {
    /// The base: a run folder of `cargo parprof`, or a folder of run folders (several runs)
    pub base: PathBuf,
    /// The head, likewise
    pub head: PathBuf,
    /// Output folder for diff.md, diff.json and the differential flamegraphs
    #[arg(short, long, value_name = "DIR", default_value = "parprof-diff")]
    pub output: PathBuf,
    /// Exit with code 1 when a probe or region got slower, beyond noise, by more than PCT percent
    #[arg(long, value_name = "PCT", value_parser = non_negative)]
    pub fail_above: Option<f64>,
}

/// Parses `cargo parprof diff ...` or `cargo parprof ...`.
pub fn parse_invocation<I, T>(args: I) -> Result<Invocation, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    if args.get(2).is_some_and(|a| a == "diff") {
        return DiffArgs::try_parse_from(args.into_iter().skip(2)).map(Invocation::Diff);
    }
    if args.get(2).is_some_and(|a| a == "report") {
        // A threshold not given is the run's, not the default the main command shows.
        let matches = ReportArgs::command()
            .mut_args(|arg| {
                let has_default = !arg.get_default_values().is_empty();
                arg.hide_default_value(has_default)
            })
            .try_get_matches_from(args.into_iter().skip(2))?;
        return ReportArgs::from_matches(&matches).map(Invocation::Report);
    }
    parse(args).map(|a| Invocation::Run(Box::new(a)))
}

/// Compares two sets of runs and writes the comparison's views; returns the exit code.
pub fn diff(args: &DiffArgs) -> Result<i32> {
    let base = diff::load_side(&args.base).context("BASE")?;
    let head = diff::load_side(&args.head).context("HEAD")?;
    let comparison = diff::compare(&base, &head)?;
    let mut files: Vec<(&str, Vec<u8>)> = Vec::new();
    for (folded, svg, title, unit) in [
        (
            "active.folded",
            "diff-active.svg",
            "Active time: BASE → HEAD",
            "ns",
        ),
        (
            "cpu.folded",
            "diff-cpu.svg",
            "CPU samples: BASE → HEAD",
            "samples",
        ),
    ] {
        if let Some(bytes) = diff::flame::differential_svg(&head, &comparison, folded, title, unit)?
        {
            files.push((svg, bytes));
        }
    }
    let figures: Vec<&str> = files.iter().map(|(name, _)| *name).collect();
    let md = diff::views::markdown(&comparison, &figures);
    files.push(("diff.md", md.into_bytes()));
    files.push(("diff.json", diff::views::json(&comparison)?.into_bytes()));
    // Everything was made; only now is anything written.
    std::fs::create_dir_all(&args.output)
        .with_context(|| format!("cannot create {}", args.output.display()))?;
    for (name, bytes) in &files {
        let path = args.output.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    }
    print!("{}", diff::views::terminal(&comparison));
    eprintln!("parprof: diff written to {}", args.output.display());
    let opts = diff::DiffOptions {
        fail_above_percent: args.fail_above,
    };
    let failing = diff::failing(&comparison, &opts);
    for r in &failing {
        eprintln!(
            "parprof: `{}` got slower by {} (limit {}%)",
            diff::views::row_name(r),
            diff::views::signed_percent(r.change),
            args.fail_above.unwrap_or(0.0)
        );
    }
    Ok(if failing.is_empty() { 0 } else { 1 })
}

/// Analyses saved runs again and writes their reports.
pub fn report(args: &ReportArgs) -> Result<()> {
    run_report::report_saved(
        &ReportRequest {
            run: args.run.clone(),
            output: args.output.clone(),
            partial: args.partial,
        },
        |recorded| args.options(recorded),
    )
}

/// Where a run's results went.
#[derive(Debug)]
pub struct RunSummary {
    pub output_dir: PathBuf,
    /// The profiled program's exit code, or 128 + signal.
    pub target_exit_code: i32,
}

/// Profiles a target end to end.
pub fn run(args: &ParprofArgs) -> Result<RunSummary> {
    let mut metadata_cmd = cargo_metadata::MetadataCommand::new();
    metadata_cmd.no_deps();
    if let Some(path) = &args.manifest_path {
        metadata_cmd.manifest_path(path);
    }
    let metadata = metadata_cmd
        .exec()
        .context("`cargo metadata` failed: is this a cargo project?")?;
    let target = target::resolve(&metadata, &args.target_request())?;
    let target_dir = metadata.target_directory.clone().into_std_path_buf();
    let output_dir = match &args.output {
        Some(dir) => dir.clone(),
        None => run_history::new_run_dir(&target_dir.join("parprof"), &target.name),
    };
    eprintln!(
        "parprof: building {} `{}` for profiling",
        target.kind, target.name
    );
    let (exe, rayon_hooks) = target::build_for_profiling(
        &target,
        &args.build_options(),
        &target_dir.join("parprof").join("build"),
    )?;
    let built = BuiltTarget {
        args,
        target: &target,
        exe: &exe,
        rayon_hooks: &rayon_hooks,
    };
    let target_exit_code = if target.harness == Harness::Criterion {
        profile_benchmarks(&built, &output_dir)?
    } else {
        let mut program_args = args.args.clone();
        if target.kind == TargetKind::Bench {
            // What `cargo bench` passes: criterion and divan run their measurements only then.
            program_args.push("--bench".into());
        }
        profile_repeated(&built, &program_args, &output_dir)?
    };
    if args.output.is_none() {
        match run_history::prune(&target_dir.join("parprof"), args.keep) {
            Ok(removed) if !removed.is_empty() => eprintln!(
                "parprof: removed {} older run folder(s) of target/parprof (--keep {})",
                removed.len(),
                args.keep
            ),
            Ok(_) => {}
            Err(e) => eprintln!("parprof: warning: could not remove older run folders: {e}"),
        }
    }
    Ok(RunSummary {
        output_dir,
        target_exit_code,
    })
}

/// A target built for profiling, with the options of the run.
struct BuiltTarget<'a> {
    args: &'a ParprofArgs,
    target: &'a ResolvedTarget,
    exe: &'a Path,
    rayon_hooks: &'a RayonHooks,
}

/// Profiles each benchmark of a criterion bench into a folder of its own (`--repeat` times),
/// then writes the bench's index and its combined `report.md`; returns the largest exit code.
fn profile_benchmarks(built: &BuiltTarget<'_>, output_dir: &Path) -> Result<i32> {
    let BuiltTarget {
        args, target, exe, ..
    } = *built;
    let ids = bench_harness::list_criterion(exe, &args.args, &target.package_root)?;
    eprintln!(
        "parprof: criterion bench with {} benchmark(s), each profiled for {} s: {}",
        ids.len(),
        args.bench_time,
        ids.join(", ")
    );
    let mut entries: Vec<BenchEntry> = Vec::new();
    let mut exit_code = 0;
    for id in ids {
        let taken: Vec<String> = entries.iter().map(|e| e.dir.clone()).collect();
        let dir = bench_harness::folder_name(&id, &taken);
        eprintln!("parprof: benchmark `{id}`");
        let mut seconds = bench_harness::profile_time(args.bench_time);
        let mut code = profile_benchmark(built, &id, seconds, &output_dir.join(&dir))?;
        if code == CRITERION_PANIC && seconds > bench_harness::WARM_UP_ONLY_S {
            // The measured batch may have had 0 iterations (criterion panics then): measure
            // the warm-up only, which never reaches that batch.
            eprintln!("parprof: `{id}` panicked; profiling criterion's warm-up only");
            seconds = bench_harness::WARM_UP_ONLY_S;
            code = profile_benchmark(built, &id, seconds, &output_dir.join(&dir))?;
        }
        exit_code = exit_code.max(code);
        entries.push(BenchEntry {
            name: id,
            dir,
            profile_time_s: Some(seconds),
        });
    }
    let index = BenchIndex::new(&target.name, entries);
    let report = run_report::write_bench_summary(&index, output_dir)?;
    println!(
        "parprof: {} benchmarks profiled; report written to {}",
        index.benchmarks.len(),
        report.display()
    );
    Ok(exit_code)
}

/// A Rust program's exit code after a panic.
const CRITERION_PANIC: i32 = 101;

/// One benchmark of a criterion bench in profile mode for `seconds`, `--repeat` times.
fn profile_benchmark(built: &BuiltTarget<'_>, id: &str, seconds: f64, dir: &Path) -> Result<i32> {
    let program_args = bench_harness::criterion_args(id, seconds);
    profile_repeated(built, &program_args, dir)
}

/// Profiles the target `--repeat` times into `output_dir` (`run-i` sub-folders when more than
/// once, then saves and prints the spread); returns the largest exit code.
fn profile_repeated(
    built: &BuiltTarget<'_>,
    program_args: &[OsString],
    output_dir: &Path,
) -> Result<i32> {
    let runs = built.args.repeat.max(1);
    let mut exit_code = 0;
    for i in 1..=runs {
        let dir = if runs == 1 {
            output_dir.to_path_buf()
        } else {
            eprintln!("parprof: run {i} of {runs}");
            output_dir.join(format!("run-{i}"))
        };
        exit_code = exit_code.max(profile_once(built, program_args, &dir)?);
    }
    if runs > 1 {
        println!("{}", diff::spread::write_summary(output_dir)?);
        println!("parprof: {runs} runs written to {}", output_dir.display());
    }
    Ok(exit_code)
}

/// What the analysis cannot know of a run: the target, how it was built, how it ended, and
/// the options it is analysed with.
fn run_meta(
    built: &BuiltTarget<'_>,
    program_args: &[OsString],
    outcome: &launch::RunOutcome,
) -> RunMeta {
    let BuiltTarget { args, target, .. } = *built;
    RunMeta {
        target: TargetInfo {
            name: target.name.clone(),
            kind: target.kind.to_string(),
            args: program_args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
        },
        harness: target.harness,
        rayon_hooks: built.rayon_hooks.clone(),
        child_pid: outcome.child_pid,
        exit: ExitStatus {
            code: outcome.exit.code,
            signal: outcome.exit.signal,
        },
        interrupted: outcome.interrupted,
        options: RecordedOptions {
            thresholds: args.thresholds.thresholds(),
            utilization_period_ns: args.period,
            merge_threads: args.merge_threads,
        },
        detail: args.slices.request(),
        ..RunMeta::default()
    }
}

/// Runs the built target once under the profiler, analyses the run and writes its reports
/// into `output_dir`; returns the target's exit code.
fn profile_once(
    built: &BuiltTarget<'_>,
    program_args: &[OsString],
    output_dir: &Path,
) -> Result<i32> {
    let BuiltTarget {
        args, target, exe, ..
    } = *built;
    std::fs::create_dir_all(output_dir)
        .with_context(|| format!("cannot create the output folder {}", output_dir.display()))?;

    // `cargo run` keeps the caller's directory; `cargo bench`/`cargo test` run in the package root.
    let working_dir = matches!(target.kind, TargetKind::Bench | TargetKind::Test)
        .then_some(target.package_root.as_path());
    let collect_opts = args.collect_options();
    let mut env = vec![(
        OsString::from("PARPROF_OUT"),
        output_dir.as_os_str().to_owned(),
    )];
    env.extend(args.slices.env());
    eprintln!("parprof: running {}", exe.display());
    let outcome = launch::run_and_collect(exe, program_args, &env, working_dir, &collect_opts)?;
    eprintln!("parprof: the target {}", outcome.exit);
    let exit_code = outcome.exit.shell_code();
    let recording = Recording {
        run: run_meta(built, program_args, &outcome),
        kernel: outcome.kernel,
        counters: outcome.counters,
    };
    // Saved first: should the analysis fail, `cargo parprof report` can try again.
    recording::save(output_dir, &recording)?;

    eprintln!("parprof: analysing");
    let options = &recording.run.options;
    let analysis = run_report::analyse(&recording, output_dir, options)?;
    run_report::write(&analysis, output_dir, options)?;
    Ok(exit_code)
}

#[cfg(test)]
mod counter_flag_tests {
    use super::*;

    #[test]
    fn periods_need_a_unit_and_accept_fractions() {
        assert_eq!(parse_duration_ns("500us"), Ok(500_000));
        assert_eq!(parse_duration_ns("500µs"), Ok(500_000));
        assert_eq!(parse_duration_ns("2ms"), Ok(2_000_000));
        assert_eq!(parse_duration_ns("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_duration_ns("1s"), Ok(1_000_000_000));
        assert_eq!(parse_duration_ns("250ns"), Ok(250));
        assert!(parse_duration_ns("2").unwrap_err().contains("no unit"));
        assert!(
            parse_duration_ns("2h")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(parse_duration_ns("0ms").is_err());
        assert!(parse_duration_ns("ms").is_err());
    }

    #[test]
    fn counter_lists_are_checked_when_parsed() {
        let args = parse([
            "cargo",
            "parprof",
            "--counters",
            "page-faults,task-clock",
            "--period",
            "2ms",
        ])
        .unwrap();
        assert_eq!(
            args.counters.map(|c| c.names()),
            Some(vec!["page-faults", "task-clock"])
        );
        assert_eq!(args.period, 2_000_000);
        let default = parse(["cargo", "parprof"]).unwrap();
        assert!(default.counters.is_none());
        assert_eq!(default.period, 1_000_000);
        assert_eq!(
            default.counter_interval,
            CounterOptions::default().read_interval_ns
        );
        assert!(
            parse_read_interval_ns("50us")
                .unwrap_err()
                .contains("below 100us")
        );
        assert!(parse_counters("none").unwrap().is_empty());
        let err = parse(["cargo", "parprof", "--counters", "instructons"]).unwrap_err();
        assert!(
            err.to_string().contains("did you mean `instructions`"),
            "{err}"
        );
    }
}

#[cfg(test)]
mod report_flag_tests {
    use super::*;

    fn report_args(flags: &[&str]) -> ReportArgs {
        let args = ["cargo", "parprof", "report", "run-folder"]
            .iter()
            .chain(flags);
        match parse_invocation(args) {
            Ok(Invocation::Report(args)) => args,
            other => panic!("not a report invocation: {other:?}"),
        }
    }

    fn recorded() -> RecordedOptions {
        RecordedOptions {
            thresholds: Thresholds {
                preempted: 0.25,
                active_overhead: 0.5,
                min_elapsed_ns: 7,
                ..Thresholds::default()
            },
            utilization_period_ns: 3_000_000,
            merge_threads: true,
        }
    }

    #[test]
    fn without_flags_a_run_is_reported_with_its_own_options() {
        let args = report_args(&[]);
        assert_eq!(args.run, PathBuf::from("run-folder"));
        assert_eq!(args.options(&recorded()), recorded());
    }

    #[test]
    fn flags_given_override_only_their_option() {
        let args = report_args(&[
            "--preempted-threshold",
            "0.9",
            "--min-region-elapsed",
            "2ms",
            "--period",
            "500us",
            "-o",
            "elsewhere",
        ]);
        let options = args.options(&recorded());
        assert_eq!(
            options.thresholds,
            Thresholds {
                preempted: 0.9,
                min_elapsed_ns: 2_000_000,
                ..recorded().thresholds
            }
        );
        assert_eq!(options.utilization_period_ns, 500_000);
        assert!(options.merge_threads);
        assert_eq!(args.output, Some(PathBuf::from("elsewhere")));
    }

    #[test]
    fn every_threshold_flag_overrides_its_threshold() {
        let flags = [
            "--active-overhead-threshold",
            "--inactive-overhead-threshold",
            "--tasks-per-worker-per-s-threshold",
            "--stolen-per-local-threshold",
            "--search-wait-per-worker-per-s-threshold",
            "--preempted-threshold",
        ];
        for flag in flags {
            let options = report_args(&[flag, "123"]).options(&recorded());
            let changed = [
                options.thresholds.active_overhead,
                options.thresholds.inactive_overhead,
                options.thresholds.tasks_per_worker_per_s,
                options.thresholds.stolen_per_local,
                options.thresholds.search_wait_per_worker_per_s,
                options.thresholds.preempted,
            ]
            .into_iter()
            .filter(|value| *value == 123.0)
            .count();
            assert_eq!(changed, 1, "{flag}");
        }
    }

    #[test]
    fn report_help_shows_no_defaults_of_the_main_command() {
        let err = parse_invocation(["cargo", "parprof", "report", "--help"]).unwrap_err();
        let help = err.to_string();
        assert!(help.contains("--preempted-threshold"), "{help}");
        assert!(!help.contains("[default:"), "{help}");
    }
}
