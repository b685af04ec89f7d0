//! cargo-parprof: build and run a cargo target under parprof, collect the kernel's records,
//! analyse them with the probes' trace, and write the reports.

pub mod analysis;
pub mod cli;
pub mod collect;
pub mod counters;
pub mod kernel;
pub mod launch;
pub mod perf;
pub mod report;
pub mod steal;
pub mod symbolize;
pub mod target;
