//! One run of a program under the profiler, saved as a run folder: the program's trace (the
//! runtime writes it there) and the kernel's records with what only the command line knew.
//! Nothing here builds, nor analyses: `cargo parprof` and `cargo-parprof record` both call it.

use crate::record::collect::CollectOptions;
use crate::record::launch::{self, RunOutcome};
use crate::record::symbolize;
use crate::recording::{
    self, DetailRequest, ExitStatus, Harness, RayonHooks, RecordedOptions, Recording, RunMeta,
    TargetInfo,
};
use anyhow::{Context, Result};
use std::ffi::OsString;
use std::path::Path;

/// The program to run, and what is known of it before it runs.
#[derive(Clone, Debug)]
pub struct Program<'a> {
    pub exe: &'a Path,
    /// The run's name (the cargo target's, or the executable's file name).
    pub name: &'a str,
    /// `bin`, `example`, `bench`, `test`, or `executable` for one recorded as it is.
    pub kind: &'a str,
    pub harness: Harness,
    pub rayon_hooks: &'a RayonHooks,
    /// Where it runs (default: the current directory).
    pub working_dir: Option<&'a Path>,
}

/// How the run is recorded and the options it is analysed with.
#[derive(Clone, Debug)]
pub struct Settings {
    pub collect: CollectOptions,
    /// Variables for the program on top of the profiler's environment (detailed counters).
    pub env: Vec<(OsString, OsString)>,
    pub options: RecordedOptions,
    pub detail: DetailRequest,
}

/// Runs `program` with `args` once under the profiler, saves the run into `output_dir`, and
/// gives the recording to the analysis: `pass`, its pass over the trace, which needs no stacks
/// of the samples, then `then`, the rest; returns what `then` returned and the program's exit
/// code (128 + signal when killed).
///
/// The records are written once, as collected, with what symbolising them needs, so that a
/// failure to symbolise them (or the profiler killed meanwhile) loses nothing: `cargo parprof
/// report` symbolises such a run. Then the long lists are dropped from memory and walked from
/// the file, as `report` does: `pass` walks them while the samples are symbolised from the
/// file on other threads (for records up to [`OVERLAPPED_RECORDS_MAX`]; after it for larger
/// ones), then their symbols are appended to it, and `then` walks them with their stacks.
pub fn record_once<P, T>(
    program: &Program<'_>,
    settings: &Settings,
    args: &[OsString],
    output_dir: &Path,
    pass: impl FnOnce(&Recording) -> Result<P>,
    then: impl FnOnce(P, &Recording) -> Result<T>,
) -> Result<(T, i32)> {
    std::fs::create_dir_all(output_dir)
        .with_context(|| format!("cannot create the output folder {}", output_dir.display()))?;
    let mut env = vec![(
        OsString::from("PARPROF_OUT"),
        output_dir.as_os_str().to_owned(),
    )];
    env.extend(settings.env.iter().cloned());
    crate::console::note!("parprof: running {}", program.exe.display());
    // Symbolised below, once the records are safe.
    let collect = CollectOptions {
        symbolize: false,
        ..settings.collect.clone()
    };
    let started = std::time::SystemTime::now();
    let mut outcome =
        launch::run_keeping_lists(program.exe, args, &env, program.working_dir, &collect)?;
    crate::console::note!("parprof: the target {}", outcome.exit);
    let exit_code = outcome.exit.shell_code();
    let run = run_meta(program, settings, args, &outcome, started);
    let mut recording = Recording {
        run,
        kernel: outcome.kernel,
        counters: outcome.counters,
        addresses: outcome.unsymbolised.take().unwrap_or_default(),
    };
    let Some(lists) = outcome.lists else {
        anyhow::bail!("the collection kept no lists to save");
    };
    let records_len = recording::save_with_lists(output_dir, &recording, &lists)?;
    if !settings.collect.symbolize {
        // Analysed unsymbolised, from memory: the file's samples are walked with their stacks.
        let r = &mut recording;
        lists.hold(&mut r.kernel, &mut r.addresses, &mut r.counters);
        let passed = pass(&recording)?;
        return Ok((then(passed, &recording)?, exit_code));
    }
    drop(lists);
    recording::walk_lists_from_file(output_dir, &mut recording);
    return_freed_memory();
    if records_len > OVERLAPPED_RECORDS_MAX {
        symbolize::symbolize_saved(output_dir, records_len, &mut recording)?;
        return_freed_memory();
        let passed = pass(&recording)?;
        return Ok((then(passed, &recording)?, exit_code));
    }
    let (symbols, passed) = std::thread::scope(|scope| {
        let side_band = &recording.addresses.side_band;
        let symbols = scope.spawn(|| symbolize::symbolise_saved_samples(output_dir, side_band));
        let passed = pass(&recording);
        let symbols = symbols
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (symbols, passed)
    });
    symbols?.save(output_dir, records_len, &mut recording)?;
    return_freed_memory();
    Ok((then(passed?, &recording)?, exit_code))
}

/// The largest records (`records.ppr` before its symbols) whose samples are symbolised while
/// the analysis passes over the trace; larger ones, one after the other. Side by side, the
/// memory of both is held at once: `long_run` recorded for 60 s (34.7 MB of records) peaked at
/// 103 MB against 77 MB for 15 s (8.9 MB), where one after the other it stays near 81 MB, and
/// a memory that follows the run's length is what the collector and the analysis avoid. The
/// time it saves is after short runs (the 12 M-key quicksort, 1.3 MB: about 25 ms of a 0.95 s
/// command on 2 cores).
const OVERLAPPED_RECORDS_MAX: u64 = 4 << 20;

/// What the analysis cannot know of a run: the program, how it was built, how it ended, and
/// the options it is analysed with.
fn run_meta(
    program: &Program<'_>,
    settings: &Settings,
    args: &[OsString],
    outcome: &RunOutcome,
    started: std::time::SystemTime,
) -> RunMeta {
    RunMeta {
        target: TargetInfo {
            name: program.name.to_owned(),
            kind: program.kind.to_owned(),
            args: args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            started_unix_ms: (started.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as u64),
        },
        harness: program.harness,
        rayon_hooks: program.rayon_hooks.clone(),
        child_pid: outcome.child_pid,
        exit: ExitStatus {
            code: outcome.exit.code,
            signal: outcome.exit.signal,
        },
        interrupted: outcome.interrupted,
        options: settings.options.clone(),
        detail: settings.detail,
        ..RunMeta::default()
    }
}

/// Gives the pages of the small blocks freed so far back to the system. Symbolising allocates
/// and frees many small ones (names, frames, lookups) that glibc keeps inside its heap, where
/// they stayed resident beside the analysis's lists, which are mapped apart (see `main.rs`).
pub fn return_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: only releases pages of free chunks; the allocator stays consistent.
    unsafe {
        libc::malloc_trim(0);
    }
}
