//! Recording a run without building anything: what `cargo parprof` does after its build, and
//! all that `cargo-parprof record` does on a machine with no cargo and no rustc.
//!
//! [`executable`] checks the program and reads the mark of its build; [`session`] runs it
//! under the profiler and saves the run folder; [`output_dir`] readies a folder given with `-o`.

pub mod executable;
pub mod output_dir;
pub mod session;
