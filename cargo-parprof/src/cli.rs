//! The `cargo parprof` command line: parse, then build → run and collect → analyse → report.

use crate::analysis::{self, AnalysisOptions, ExitStatus, TargetInfo};
use crate::collect::CollectOptions;
use crate::launch;
use crate::report;
use crate::target::{self, BuildOptions, TargetKind, TargetRequest};
use anyhow::{Context, Result};
use clap::{Args, Parser};
use std::ffi::OsString;
use std::path::PathBuf;

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
    /// Profile the binary NAME
    #[arg(
        long,
        value_name = "NAME",
        group = "target",
        help_heading = "Target Selection"
    )]
    pub bin: Option<String>,
    /// Profile the example NAME
    #[arg(
        long,
        value_name = "NAME",
        group = "target",
        help_heading = "Target Selection"
    )]
    pub example: Option<String>,
    /// Profile the bench NAME (run with `--bench`, as `cargo bench` does)
    #[arg(
        long,
        value_name = "NAME",
        group = "target",
        help_heading = "Target Selection"
    )]
    pub bench: Option<String>,
    /// Profile the integration test NAME
    #[arg(
        long,
        value_name = "NAME",
        group = "target",
        help_heading = "Target Selection"
    )]
    pub test: Option<String>,
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
    /// Arguments for the profiled program
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<OsString>,
}

impl ParprofArgs {
    fn target_request(&self) -> TargetRequest {
        let kind_and_name = [
            (TargetKind::Bin, &self.bin),
            (TargetKind::Example, &self.example),
            (TargetKind::Bench, &self.bench),
            (TargetKind::Test, &self.test),
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
    let collect_opts = CollectOptions {
        frequency_hz: args.frequency,
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
        ..AnalysisOptions::default()
    };
    let mut analysis = analysis::analyse(&output_dir, &outcome.kernel, &analysis_opts)?;
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
    let target_exit_code = match (outcome.exit.code, outcome.exit.signal) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => 1,
    };
    Ok(RunSummary {
        output_dir,
        target_exit_code,
    })
}
