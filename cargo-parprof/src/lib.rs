//! cargo-parprof: build and run a cargo target under parprof, collect the kernel's records,
//! analyse them with the probes' trace, and write the reports.

pub mod analysis;
pub mod bench_harness;
pub mod cli;
pub mod collect;
pub mod console;
pub mod counters;
pub mod cpu_quota;
pub mod diff;
pub mod hook_marker;
pub mod kernel;
pub mod launch;
pub mod perf;
pub mod rayon_hooks;
pub mod record;
pub mod recording;
pub mod report;
pub mod run_history;
pub mod run_report;
pub mod steal;
pub mod symbolize;
pub mod target;
pub mod units;
pub mod unwind;
