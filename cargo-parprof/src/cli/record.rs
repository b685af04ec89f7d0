//! `cargo-parprof record -- EXE [ARGS]`: run and record any executable into a run folder, and
//! write its reports, on a machine with no cargo and no rustc: nothing here builds, resolves a
//! cargo target or reads cargo's metadata.

use super::options::RecordingArgs;
use super::profile::{RunSummary, profile_repeated};
use crate::console;
use crate::record::executable::{self, Executable};
use crate::record::session::Program;
use crate::recording::Harness;
use crate::recording::RayonHooks;
use anyhow::{Context, Result};
use clap::Parser;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// `cargo-parprof record`: run and record an executable as it is (from `cargo parprof build`
/// for the rayon workers' lifecycle, or any other), and write the run folder with its reports.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "cargo-parprof record",
    version,
    after_help = "Example: `cargo-parprof record -o run -- ./mybench --bench`, then `cargo \
                  parprof report run` here or on any other machine. Needs no cargo and no rustc."
)]
pub struct RecordArgs {
    /// Output folder (default: a new folder under ./parprof/)
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// The executable to record, then its arguments
    #[arg(last = true, required = true, value_name = "EXE [ARGS]")]
    pub command: Vec<OsString>,
    #[command(flatten)]
    pub recording: RecordingArgs,
}

/// Records the executable `--repeat` times and writes the reports of each run.
pub fn record(args: &RecordArgs) -> Result<RunSummary> {
    // The program's output owns stdout from here on.
    console::summary_to_stderr();
    let (exe, program_args) = args
        .command
        .split_first()
        .context("no executable given: `cargo-parprof record -- EXE [ARGS]`")?;
    let exe = executable::inspect(Path::new(exe))?;
    say_what_is_recorded(&exe);
    let output_dir =
        super::run_history::output_folder(args.output.as_deref(), Path::new("parprof"), &exe.name)?;
    let program = Program {
        exe: &exe.path,
        name: &exe.name,
        kind: "executable",
        harness: Harness::Program,
        rayon_hooks: &exe.rayon_hooks,
        working_dir: None,
    };
    let settings = args.recording.settings();
    let runs = args.recording.repeat;
    let target_exit_code = profile_repeated(
        &program,
        &settings,
        args.recording.frames.view(),
        runs,
        program_args,
        &output_dir,
    )?;
    Ok(RunSummary {
        output_dir,
        target_exit_code,
    })
}

/// Whether the rayon lifecycle will be recorded, said once before the run.
fn say_what_is_recorded(exe: &Executable) {
    match &exe.rayon_hooks {
        RayonHooks::Hooked { version } => crate::console::note!(
            "parprof: {} was built by `cargo parprof build` (rayon-core {version} hooked): \
             recording the workers' lifecycle",
            exe.name
        ),
        RayonHooks::NoRayon => {}
        RayonHooks::Unavailable { reason } => crate::console::note!(
            "parprof: recording {} without rayon's worker lifecycle: {reason}",
            exe.name
        ),
    }
}
