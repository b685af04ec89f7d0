//! cargo-parprof: build and run a cargo target under parprof, collect the kernel's records,
//! analyse them with the probes' trace, and write the reports. The modules, in the order a run
//! flows through them (docs/architecture.md): `build`, `record`, `recording` (the run folder),
//! `analysis`, `report` and `diff`, driven by `pipeline` and `cli`.

pub mod analysis;
pub mod build;
pub mod cli;
pub mod console;
pub mod diff;
pub mod pipeline;
pub mod record;
pub mod recording;
pub mod report;
pub mod units;
