//! The run folder's records: everything the analysis needs from a run besides the probes'
//! trace, saved as `records.ppr` next to it so that `cargo parprof report` can analyse the run
//! again without building or running anything ("record once, analyse many").
//!
//! A [`Recording`] is what the kernel told us ([`KernelRecords`]), the counters read for
//! `--counters` ([`CounterRecords`]) and what only the command line knew ([`RunMeta`]: the
//! target, how it ended, the options of the analysis). [`save`] writes it after collection,
//! [`load`] reads it back with validation; the encoding is in [`format`] and described in
//! `docs/run-folder.md`.

pub mod counters;
pub mod format;

use crate::analysis::diagnoses::Thresholds;
use crate::analysis::{ExitStatus, TargetInfo};
use crate::bench_harness::Harness;
use crate::kernel::KernelRecords;
use counters::CounterRecords;
pub use format::{Completeness, Loaded, RecordsError};
use serde::{Deserialize, Serialize};
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};

/// The records' file in a run folder.
pub const RECORDS_FILE: &str = "records.ppr";

/// Everything a run recorded for the analysis, besides the probes' trace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recording {
    pub run: RunMeta,
    pub kernel: KernelRecords,
    pub counters: CounterRecords,
}

/// What the analysis cannot learn from the kernel or the trace: the target, how it was built
/// and how it ended, and the options the run was analysed with (the defaults of `report`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// The version of cargo-parprof that recorded the run.
    pub recorded_by: String,
    pub target: TargetInfo,
    pub harness: Harness,
    pub rayon_hooks: RayonHooks,
    /// Pid of the profiled process: its trace is `trace-<pid>.ppt`.
    pub child_pid: u32,
    pub exit: ExitStatus,
    /// The run was interrupted with Ctrl-C.
    pub interrupted: bool,
    pub options: RecordedOptions,
    /// Exact per-call counters asked for (method 5): the runtime wrote their results beside
    /// the trace. Runs recorded before it existed have none.
    #[serde(default)]
    pub detail: DetailRequest,
}

/// What `--slices` or `--detail full` asked the runtime for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DetailRequest {
    #[default]
    Off,
    Slices,
    Full,
}

impl Default for RunMeta {
    fn default() -> Self {
        RunMeta {
            recorded_by: env!("CARGO_PKG_VERSION").to_owned(),
            target: TargetInfo::default(),
            harness: Harness::Program,
            rayon_hooks: RayonHooks::NoRayon,
            child_pid: 0,
            exit: ExitStatus::default(),
            interrupted: false,
            options: RecordedOptions::default(),
            detail: DetailRequest::Off,
        }
    }
}

/// Whether the build records rayon's lifecycle, and why not (the build prepares the hooks:
/// [`crate::rayon_hooks`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RayonHooks {
    /// Built with the hooks in this rayon-core version.
    Hooked { version: String },
    /// The program does not use rayon.
    NoRayon,
    /// Built without hooks; the reason is said in the report.
    Unavailable { reason: String },
}

/// The options of the analysis and the reports that the run was recorded with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedOptions {
    pub thresholds: Thresholds,
    /// Period of the utilization over time, in ns.
    pub utilization_period_ns: u64,
    /// One root for all threads in the flamegraphs.
    pub merge_threads: bool,
}

impl Default for RecordedOptions {
    fn default() -> Self {
        RecordedOptions {
            thresholds: Thresholds::default(),
            utilization_period_ns: crate::analysis::utilization::DEFAULT_PERIOD_NS,
            merge_threads: false,
        }
    }
}

/// Why a run folder's records could not be saved or loaded.
#[derive(Debug, thiserror::Error)]
pub enum RunFolderError {
    #[error(
        "{dir} holds no {RECORDS_FILE}: it is not the folder of one run of `cargo parprof` \
         (runs recorded before parprof saved its records cannot be analysed again)"
    )]
    NoRecords { dir: PathBuf },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: RecordsError,
    },
}

/// Writes `recording` into the run folder `dir` (as `records.ppr`). The file appears whole or
/// not at all: it is written aside and renamed.
pub fn save(dir: &Path, recording: &Recording) -> Result<PathBuf, RunFolderError> {
    let path = dir.join(RECORDS_FILE);
    let partial = dir.join(format!("{RECORDS_FILE}.partial"));
    let write = || -> std::io::Result<()> {
        let mut out = BufWriter::new(std::fs::File::create(&partial)?);
        format::write(recording, &mut out)?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&partial, &path)
    };
    write().map_err(|source| RunFolderError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// Whether `dir` holds a run's records.
pub fn is_run_folder(dir: &Path) -> bool {
    dir.join(RECORDS_FILE).is_file()
}

/// Reads the records of the run folder `dir`; a cut file is read up to its last complete
/// part (see [`Loaded::completeness`]).
pub fn load(dir: &Path) -> Result<Loaded, RunFolderError> {
    let path = dir.join(RECORDS_FILE);
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RunFolderError::NoRecords {
                dir: dir.to_owned(),
            });
        }
        Err(e) => {
            return Err(RunFolderError::Read {
                path,
                source: RecordsError::Io(e),
            });
        }
    };
    format::read(BufReader::with_capacity(1 << 20, file))
        .map_err(|source| RunFolderError::Read { path, source })
}
