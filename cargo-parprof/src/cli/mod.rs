//! The `cargo parprof` command line: parse, then build → run and collect → analyse → report.
//! `build` and `record` split that in two, for a program recorded where it was not built.

mod build;
mod limits;
mod options;
mod paired;
mod profile;
mod record;
mod run_history;

pub use build::{BuildCommand, build};
pub use options::{
    BuildArgs, Detail, DiffArgs, RecordingArgs, SliceArgs, TargetArgs, ThresholdArgs,
};
pub use profile::RunSummary;
pub use record::{RecordArgs, record};

use crate::build::target::TargetKind;
use crate::pipeline::{self, ReportRequest};
use crate::record::bench_harness::{self, BenchEntry, BenchIndex};
use crate::record::session::{Program, Settings};
use crate::recording::Harness;
use crate::recording::RecordedOptions;
use crate::{console, diff};
use anyhow::{Context, Result};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser};
use options::{FrameArgs, positive_seconds};
use profile::profile_repeated;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

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
    pub build: BuildArgs,
    /// Output folder (default: a new folder under target/parprof/)
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Run folders kept under `target/parprof/` (the newest; 0 keeps all). Folders given
    /// with `-o` are never removed
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub keep: usize,
    /// Seconds of each criterion benchmark's measured batch in its profile mode; criterion's
    /// warm-up (1 to 2 s, the same routine) runs before it. The report states both phases'
    /// iterations as criterion counts them; probes and CPU samples keep to the measured batch
    #[arg(long, value_name = "SECONDS", value_parser = positive_seconds, default_value_t = 2.0)]
    pub bench_time: f64,
    /// Arguments for the profiled program
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<OsString>,
    // Last, so that their help headings do not take in the arguments above.
    #[command(flatten)]
    pub recording: RecordingArgs,
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
    /// Build the profiling executable only.
    Build(BuildCommand),
    /// Record an executable as it is, without building anything.
    Record(Box<RecordArgs>),
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
    /// Period of the utilization over time, e.g. `500us`, `2ms`, at least 10us (default: the
    /// run's)
    #[arg(long, value_name = "DURATION", value_parser = limits::utilization_period)]
    pub period: Option<u64>,
    /// One root for all threads in the cpu flamegraph (default: as the run was reported)
    #[arg(long)]
    pub merge_threads: bool,
    #[command(flatten)]
    pub frames: FrameArgs,
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

/// Parses `cargo parprof [build|record|report|diff] ...`, or the same run as `cargo-parprof ...`.
pub fn parse_invocation<I, T>(args: I) -> Result<Invocation, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let mut args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    // `cargo-parprof record …` run directly (where no cargo is) reads as `cargo parprof record …`.
    if !args.is_empty() && args.get(1).is_none_or(|a| a != "parprof") {
        args.insert(1, "parprof".into());
    }
    if args.get(2).is_some_and(|a| a == "build") {
        return BuildCommand::try_parse_from(args.into_iter().skip(2)).map(Invocation::Build);
    }
    if args.get(2).is_some_and(|a| a == "record") {
        return RecordArgs::try_parse_from(args.into_iter().skip(2))
            .map(|a| Invocation::Record(Box::new(a)));
    }
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

/// Compares two sets of runs, or two commits run alternated (`--base`), and writes the
/// comparison's views; returns the exit code.
pub fn diff(args: &DiffArgs) -> Result<i32> {
    let (base, head, comparison) = if let Some(rev) = &args.base_rev {
        paired::diff_revisions(args, rev)?
    } else {
        let (Some(base), Some(head)) = (&args.base, &args.head) else {
            anyhow::bail!("give BASE and HEAD run folders, or `--base REV` and a target");
        };
        let base = diff::load_side(base).context("BASE")?;
        let head = diff::load_side(head).context("HEAD")?;
        let comparison = diff::compare(&base, &head)?;
        (base, head, comparison)
    };
    let frames = diff::frames::compare_frames(&base, &head, &comparison)?;
    write_comparison(&head, &comparison, &frames, args)
}

/// Writes the views of `comparison` (HEAD's side for the probes' flamegraph) into
/// `args.output`, says what failed the gate; returns the exit code.
fn write_comparison(
    head: &diff::Side,
    comparison: &diff::Comparison,
    frames: &diff::frames::Frames,
    args: &DiffArgs,
) -> Result<i32> {
    use diff::flame::{cpu_svg, differential_svg};
    use diff::frames::Shape;
    let mut files: Vec<(&str, Vec<u8>)> = Vec::new();
    if let Some(bytes) = differential_svg(head, comparison)? {
        files.push(("diff-active.svg", bytes));
    }
    for shape in [Shape::Head, Shape::Base] {
        if let Some(bytes) = cpu_svg(frames, comparison, shape)? {
            files.push((shape.file(), bytes));
        }
    }
    let figures: Vec<&str> = files.iter().map(|(name, _)| *name).collect();
    let md = diff::views::markdown(comparison, frames, &figures);
    files.push(("diff.md", md.into_bytes()));
    files.push((
        "diff.json",
        diff::views::json(comparison, frames)?.into_bytes(),
    ));
    // Everything was made; only now is anything written.
    std::fs::create_dir_all(&args.output)
        .with_context(|| format!("cannot create {}", args.output.display()))?;
    for (name, bytes) in &files {
        let path = args.output.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    }
    console::result(diff::views::terminal(comparison, frames).trim_end_matches('\n'));
    crate::console::note!("parprof: diff written to {}", args.output.display());
    let opts = diff::DiffOptions {
        fail_above_percent: args.fail_above,
    };
    let failing = diff::failing(comparison, &opts);
    for r in &failing {
        crate::console::note!(
            "parprof: `{}` got slower by {} (limit {}%)",
            diff::views::row_name(r),
            diff::views::signed_percent(r.change),
            args.fail_above.unwrap_or(0.0)
        );
    }
    Ok(if failing.is_empty() { 0 } else { 1 })
}

/// A Rust program's exit code after a panic.
const CRITERION_PANIC: i32 = 101;

/// Analyses saved runs again and writes their reports.
pub fn report(args: &ReportArgs) -> Result<()> {
    pipeline::report_saved(
        &ReportRequest {
            run: args.run.clone(),
            output: args.output.clone(),
            partial: args.partial,
            frames: args.frames.view(),
        },
        |recorded| args.options(recorded),
    )
}

/// Profiles a target end to end.
pub fn run(args: &ParprofArgs) -> Result<RunSummary> {
    // The program's output owns stdout from here on.
    console::summary_to_stderr();
    let _warmed = crate::record::perf::SwitchRecordsWarmed::start();
    let built = build::build_target(&args.build)?;
    let target = &built.target;
    let parprof_dir = built.target_dir.join("parprof");
    let output_dir =
        run_history::output_folder(args.output.as_deref(), &parprof_dir, &target.name)?;
    let kind = target.kind.to_string();
    // `cargo run` keeps the caller's directory; `cargo bench`/`cargo test` run in the package root.
    let working_dir = matches!(target.kind, TargetKind::Bench | TargetKind::Test)
        .then_some(target.package_root.as_path());
    let program = Program {
        exe: &built.exe,
        name: &target.name,
        kind: &kind,
        harness: target.harness,
        rayon_hooks: &built.rayon_hooks,
        working_dir,
    };
    let settings = args.recording.settings();
    let target_exit_code = if target.harness == Harness::Criterion {
        profile_benchmarks(args, &program, &settings, &output_dir)?
    } else {
        let mut program_args = args.args.clone();
        if target.kind == TargetKind::Bench {
            // What `cargo bench` passes: criterion and divan run their measurements only then.
            program_args.push("--bench".into());
        }
        let runs = args.recording.repeat;
        profile_repeated(
            &program,
            &settings,
            args.recording.frames.view(),
            runs,
            &program_args,
            &output_dir,
        )?
    };
    if args.output.is_none() {
        prune_runs(&parprof_dir, args.keep);
    }
    Ok(RunSummary {
        output_dir,
        target_exit_code,
    })
}

/// Removes the oldest default run folders beyond `keep`, saying so.
fn prune_runs(parprof_dir: &Path, keep: usize) {
    match run_history::prune(parprof_dir, keep) {
        Ok(removed) if !removed.is_empty() => crate::console::note!(
            "parprof: removed {} older run folder(s) of target/parprof (--keep {keep})",
            removed.len(),
        ),
        Ok(_) => {}
        Err(e) => {
            crate::console::note!("parprof: warning: could not remove older run folders: {e}")
        }
    }
}

/// Profiles each benchmark of a criterion bench into a folder of its own (`--repeat` times),
/// then writes the bench's index and its combined `report.md`; returns the largest exit code.
fn profile_benchmarks(
    args: &ParprofArgs,
    program: &Program<'_>,
    settings: &Settings,
    output_dir: &Path,
) -> Result<i32> {
    let package_root = program.working_dir.unwrap_or(Path::new("."));
    let ids = bench_harness::list_criterion(program.exe, &args.args, package_root)?;
    crate::console::note!(
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
        crate::console::note!("parprof: benchmark `{id}`");
        let profile_for = |seconds: f64| {
            profile_repeated(
                program,
                settings,
                args.recording.frames.view(),
                args.recording.repeat,
                &bench_harness::criterion_args(&id, seconds),
                &output_dir.join(&dir),
            )
        };
        let mut seconds = bench_harness::profile_time(args.bench_time);
        let mut code = profile_for(seconds)?;
        if code == CRITERION_PANIC && seconds > bench_harness::WARM_UP_ONLY_S {
            // The measured batch may have had 0 iterations (criterion panics then): measure
            // the warm-up only, which never reaches that batch.
            crate::console::note!("parprof: `{id}` panicked; profiling criterion's warm-up only");
            seconds = bench_harness::WARM_UP_ONLY_S;
            code = profile_for(seconds)?;
        }
        exit_code = exit_code.max(code);
        entries.push(BenchEntry {
            name: id,
            dir,
            profile_time_s: Some(seconds),
        });
    }
    let index = BenchIndex::new(program.name, entries);
    let report = pipeline::write_bench_summary(&index, output_dir)?;
    console::summary(format_args!(
        "parprof: {} benchmarks profiled; report written to {}",
        index.benchmarks.len(),
        report.display()
    ));
    Ok(exit_code)
}

#[cfg(test)]
mod counter_flag_tests {
    use super::limits::parse_duration_ns;
    use super::options::{parse_counters, parse_read_interval_ns};
    use super::*;
    use crate::record::counters::CounterOptions;

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
            args.recording.counters.map(|c| c.names()),
            Some(vec!["page-faults", "task-clock"])
        );
        assert_eq!(args.recording.period, 2_000_000);
        let default = parse(["cargo", "parprof"]).unwrap();
        assert!(default.recording.counters.is_none());
        assert_eq!(default.recording.period, 1_000_000);
        assert_eq!(
            default.recording.counter_interval,
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
    use crate::recording::Thresholds;

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

#[cfg(test)]
mod build_and_record_tests {
    use super::*;

    #[test]
    fn build_takes_the_target_selection_of_the_main_command() {
        let args = [
            "cargo",
            "parprof",
            "build",
            "--example",
            "quickstart",
            "-p",
            "suite",
            "--features",
            "a,b",
            "--profile",
            "bench",
            "--manifest-path",
            "x/Cargo.toml",
        ];
        let Ok(Invocation::Build(cmd)) = parse_invocation(args) else {
            panic!("not a build invocation");
        };
        assert_eq!(cmd.build.target.example.as_deref(), Some("quickstart"));
        assert_eq!(cmd.build.package.as_deref(), Some("suite"));
        assert_eq!(cmd.build.features, ["a,b"]);
        assert_eq!(cmd.build.profile.as_deref(), Some("bench"));
        assert!(parse_invocation(["cargo", "parprof", "build", "--repeat", "2"]).is_err());
    }

    #[test]
    fn record_is_reached_with_and_without_cargo() {
        for args in [
            &["cargo-parprof", "parprof", "record"][..],
            &["cargo-parprof", "record"][..],
        ] {
            let mut args = args.to_vec();
            args.extend([
                "-o",
                "run",
                "--repeat",
                "3",
                "--no-offcpu",
                "--",
                "./b",
                "--x",
            ]);
            let Ok(Invocation::Record(rec)) = parse_invocation(&args) else {
                panic!("not a record invocation: {args:?}");
            };
            assert_eq!(rec.output, Some(PathBuf::from("run")));
            assert_eq!(rec.command, ["./b", "--x"]);
            assert_eq!(rec.recording.repeat, 3);
            assert!(!rec.recording.settings().collect.switch_stacks);
        }
        let err = parse_invocation(["cargo-parprof", "record", "-o", "run"]).unwrap_err();
        assert!(err.to_string().contains("EXE"), "{err}");
        // The main command, run directly, is the main command.
        assert!(matches!(
            parse_invocation(["cargo-parprof", "--example", "x"]),
            Ok(Invocation::Run(_))
        ));
    }
}

#[cfg(test)]
mod diff_flag_tests {
    use super::*;

    fn diff_args(args: &[&str]) -> Result<DiffArgs, clap::Error> {
        let all = ["cargo", "parprof", "diff"].iter().chain(args);
        match parse_invocation(all)? {
            Invocation::Diff(args) => Ok(args),
            other => panic!("not a diff invocation: {other:?}"),
        }
    }

    #[test]
    fn diff_takes_two_folders_or_a_base_revision_and_a_target() {
        let folders = diff_args(&["a", "b", "--fail-above", "5"]).unwrap();
        assert_eq!(
            (folders.base, folders.head, folders.base_rev),
            (Some("a".into()), Some("b".into()), None)
        );
        let paired = diff_args(&[
            "--base", "main", "--bin", "app", "--budget", "30", "--", "--size", "9",
        ])
        .unwrap();
        assert_eq!(paired.base_rev.as_deref(), Some("main"));
        assert_eq!(paired.head_rev, None);
        assert_eq!(paired.build.target.bin.as_deref(), Some("app"));
        assert_eq!(paired.budget, 30.0);
        assert_eq!(paired.args, ["--size", "9"]);
        // Neither form, or both at once, is refused.
        assert!(diff_args(&["a"]).is_err());
        assert!(diff_args(&["a", "b", "--base", "main"]).is_err());
        assert!(diff_args(&["--head", "x", "a", "b"]).is_err());
    }
}
