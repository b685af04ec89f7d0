//! The run folder's records: everything the analysis needs from a run besides the probes'
//! trace, saved as `records.ppr` next to it so that `cargo parprof report` can analyse the run
//! again without building or running anything ("record once, analyse many").
//!
//! A [`Recording`] is what the kernel told us ([`KernelRecords`]), the counters read for
//! `--counters` ([`CounterRecords`]) and what only the command line knew ([`RunMeta`]: the
//! target, how it ended, the options of the analysis). [`save`] writes it after collection,
//! [`load`] reads it back with validation; the encoding is in [`format`] and described in
//! `docs/run-folder.md`.

pub mod address_spaces;
pub mod counters;
pub mod format;
pub mod kernel_records;
pub mod run;
pub mod run_folder;
pub mod thresholds;

pub use format::{Completeness, Loaded, RecordsError};
pub use run::{
    DEFAULT_PERIOD_NS, DetailRequest, ExitStatus, Harness, RayonHooks, RecordedOptions, Recording,
    RunMeta, TargetInfo,
};
pub use run_folder::{
    RECORDS_FILE, RunFolderError, append_symbols, is_run_folder, load, save, save_with_lists,
    walk_lists_from_file,
};
pub use thresholds::Thresholds;
