//! Recording a run without building anything: what `cargo parprof` does after its build, and
//! all that `cargo-parprof record` does on a machine with no cargo and no rustc.
//!
//! [`executable`] checks the program and reads the mark of its build ([`hook_marker`]);
//! [`session`] runs it under the profiler ([`launch`]: fork, exec, perf events) and saves the run
//! folder; [`collect`] reads the kernel's ring buffers ([`perf`]) and keeps the long lists off
//! memory ([`kept_lists`], [`spill`]), unwinds ([`unwind`]) and symbolises ([`symbolize`]) the
//! samples; [`counters`] reads the counters for `--counters`;
//! [`cpu_quota`] and [`steal`] read what the machine lent the program; [`bench_harness`] runs
//! criterion benches one by one; [`output_dir`] readies a folder given with `-o`.

pub mod bench_harness;
pub mod collect;
pub mod counters;
pub mod cpu_quota;
pub mod executable;
pub mod hook_marker;
pub mod kept_lists;
pub mod launch;
pub mod output_dir;
pub mod perf;
pub mod session;
pub mod spill;
pub mod steal;
pub mod symbolize;
pub mod unwind;
