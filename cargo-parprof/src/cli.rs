//! The `cargo parprof` command line: parse, then build → run and collect → analyse → report.

use crate::analysis::diagnoses::Thresholds;
use crate::analysis::{self, AnalysisOptions, ExitStatus, TargetInfo};
use crate::collect::CollectOptions;
use crate::counters::{CounterOptions, CounterSet};
use crate::launch;
use crate::report;
use crate::target::{self, BuildOptions, TargetKind, TargetRequest};
use anyhow::{Context, Result};
use clap::{Args, Parser};
use std::ffi::OsString;
use std::path::PathBuf;

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
    /// Arguments for the profiled program
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<OsString>,
    // Last, so that its help heading does not take in the arguments above.
    #[command(flatten)]
    pub thresholds: ThresholdArgs,
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
}

impl ThresholdArgs {
    fn thresholds(&self) -> Thresholds {
        Thresholds {
            active_overhead: self.active_overhead_threshold,
            inactive_overhead: self.inactive_overhead_threshold,
            tasks_per_worker_per_s: self.tasks_per_worker_per_s_threshold,
            stolen_per_local: self.stolen_per_local_threshold,
            search_wait_per_worker_per_s: self.search_wait_per_worker_per_s_threshold,
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

impl ParprofArgs {
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
        None => target_dir.join("parprof").join(format!(
            "{}-{}",
            target.name,
            chrono::Local::now().format("%Y%m%d-%H%M%S")
        )),
    };
    eprintln!(
        "parprof: building {} `{}` for profiling",
        target.kind, target.name
    );
    let exe = target::build(
        &target,
        &args.build_options(),
        &target_dir.join("parprof").join("build"),
    )?;
    std::fs::create_dir_all(&output_dir)
        .with_context(|| format!("cannot create the output folder {}", output_dir.display()))?;

    let mut program_args = args.args.clone();
    if target.kind == TargetKind::Bench {
        // What `cargo bench` passes: criterion and divan run their measurements only then.
        program_args.push("--bench".into());
    }
    // `cargo run` keeps the caller's directory; `cargo bench`/`cargo test` run in the package root.
    let working_dir = matches!(target.kind, TargetKind::Bench | TargetKind::Test)
        .then_some(target.package_root.as_path());
    let counters = args
        .counters
        .clone()
        .unwrap_or_else(CounterSet::default_set);
    let collect_opts = CollectOptions {
        frequency_hz: args.frequency,
        counters: (!counters.is_empty()).then(|| CounterOptions {
            counters,
            read_interval_ns: args.counter_interval,
            ..CounterOptions::default()
        }),
        ..CollectOptions::default()
    };
    eprintln!("parprof: running {}", exe.display());
    let outcome = launch::run_and_collect(
        &exe,
        &program_args,
        &[(
            OsString::from("PARPROF_OUT"),
            output_dir.clone().into_os_string(),
        )],
        working_dir,
        &collect_opts,
    )?;
    eprintln!("parprof: the target {}", outcome.exit);

    eprintln!("parprof: analysing");
    let analysis_opts = AnalysisOptions {
        child_pid: Some(outcome.child_pid),
        thresholds: args.thresholds.thresholds(),
        utilization_period_ns: args.period,
        ..AnalysisOptions::default()
    };
    let mut analysis = analysis::analyse_with_counters(
        &output_dir,
        &outcome.kernel,
        &outcome.counters,
        &analysis_opts,
    )?;
    analysis.target = TargetInfo {
        name: target.name.clone(),
        kind: target.kind.to_string(),
        args: program_args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
    };
    analysis.exit = ExitStatus {
        code: outcome.exit.code,
        signal: outcome.exit.signal,
    };
    if outcome.interrupted {
        analysis
            .notes
            .push("The run was interrupted (Ctrl-C): the figures cover the part that ran.".into());
    }
    report::write_all(&analysis, &output_dir)?;
    println!("{}", report::terminal::summary(&analysis));
    println!("parprof: report written to {}", output_dir.display());
    Ok(RunSummary {
        output_dir,
        target_exit_code: outcome.exit.shell_code(),
    })
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
