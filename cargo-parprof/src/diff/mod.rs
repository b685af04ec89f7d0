//! `cargo parprof diff BASE HEAD`: what changed between two sets of runs, for a pull request.
//!
//! Each side is a run folder (with its `report.json`), a folder of run folders (several runs
//! of one commit), or a criterion bench's folder (`benchmarks.json`, one such folder per
//! benchmark). The comparison reads only those files and the `.folded` flamegraph files:
//!
//! 1. [`load_side`]: every run of a side, validated (a run folder, schema, one program);
//! 2. [`compare`]: per benchmark, per probe (its active time) and per region (its elapsed
//!    time), the median of each side's runs, the calls per run on each side, and a verdict by
//!    the noise rule of [`noise`] applied to all rows of the diff together; the diagnoses that
//!    appeared or disappeared. A program's figures are totals; a benchmark's are per call and
//!    per region run, since criterion's profile mode runs each benchmark for a fixed time (a
//!    slower routine runs fewer times, in the same total); a region whose call site only moved
//!    lines is compared with itself ([`moved_regions`]);
//! 3. [`frames`]: each box of the CPU flamegraph (all threads together) judged on its own
//!    samples by the rule that judged the rows, and the boxes that appeared or vanished;
//! 4. [`views`] and [`flame`]: `diff.md`, `diff.json`, the differential flamegraphs, the
//!    terminal headline — all made in memory, then written together, so that a failure leaves
//!    nothing half-done. [`spread`] is the summary of one side's `--repeat` runs.

pub mod compare;
pub mod flame;
pub mod frames;
mod moved_regions;
pub mod noise;
pub mod paired;
pub mod report_digest;
pub mod side;
pub mod spread;
pub mod stats;
pub mod views;

pub use compare::{
    CALLS_CHANGE, Comparison, DiagnosisChange, DiffOptions, Measure, Row, RowKind, compare, failing,
};
pub use side::{Benchmark, Run, Side, load_side};
