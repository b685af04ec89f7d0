//! Profiling a program that is ready to run: record each run into its folder, analyse it and
//! write its reports there; what the main command (after its build) and `record` share.

use crate::pipeline;
use crate::record::session::{self, Program, Settings};
use crate::report::FrameView;
use crate::{console, diff};
use anyhow::Result;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Where a run's results went.
#[derive(Debug)]
pub struct RunSummary {
    pub output_dir: PathBuf,
    /// The profiled program's exit code, or 128 + signal.
    pub target_exit_code: i32,
}

/// Profiles the program `runs` times into `output_dir` (`run-i` sub-folders when more than
/// once, then saves and prints the spread); returns the largest exit code.
pub(super) fn profile_repeated(
    program: &Program<'_>,
    settings: &Settings,
    frames: FrameView,
    runs: usize,
    program_args: &[OsString],
    output_dir: &Path,
) -> Result<i32> {
    let runs = runs.max(1);
    let mut exit_code = 0;
    for i in 1..=runs {
        let dir = if runs == 1 {
            output_dir.to_path_buf()
        } else {
            crate::console::note!("parprof: run {i} of {runs}");
            output_dir.join(format!("run-{i}"))
        };
        exit_code = exit_code.max(profile_once(program, settings, frames, program_args, &dir)?);
    }
    if runs > 1 {
        console::summary(diff::spread::write_summary(output_dir)?);
        console::summary(format_args!(
            "parprof: {runs} runs written to {}",
            output_dir.display()
        ));
    }
    Ok(exit_code)
}

/// Records the program once into `output_dir`, analyses the run and writes its reports there;
/// returns the program's exit code.
pub(super) fn profile_once(
    program: &Program<'_>,
    settings: &Settings,
    frames: FrameView,
    program_args: &[OsString],
    output_dir: &Path,
) -> Result<i32> {
    let ((), exit_code) = session::record_once(
        program,
        settings,
        program_args,
        output_dir,
        |recording| {
            crate::console::note!("parprof: analysing");
            pipeline::pass_over_trace(recording, output_dir, &recording.run.options)
        },
        |passed, recording| {
            let analysis = pipeline::finish_analysis(passed, recording)?;
            pipeline::write(&analysis, output_dir, &recording.run.options, frames)
        },
    )?;
    Ok(exit_code)
}
