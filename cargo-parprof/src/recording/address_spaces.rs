//! What symbolising a run's samples needs besides their call chains: the process of each
//! sample and the kernel's side-band records that describe the address spaces over time. Saved
//! in `records.ppr` with the samples, so that a run whose symbols were never written (the
//! profiler killed while symbolising) can be symbolised later by `cargo parprof report`, as
//! long as the mapped files are still there.

use std::path::PathBuf;

/// An executable mapping reported by `PERF_RECORD_MMAP2` (or `MMAP`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub time_ns: u64,
    pub pid: u32,
    pub start: u64,
    pub len: u64,
    /// File offset of `start`.
    pub pgoff: u64,
    /// A path, or a kernel label such as `[vdso]` or `//anon`.
    pub path: PathBuf,
}

/// A `PERF_RECORD_FORK`: `pid == ppid` for a new thread, otherwise a new process that starts
/// with a copy of its parent's address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForkEvent {
    pub time_ns: u64,
    pub pid: u32,
    pub ppid: u32,
    pub tid: u32,
    pub ptid: u32,
}

/// An exec (a `PERF_RECORD_COMM` with the exec flag): the address space of `pid` starts over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecEvent {
    pub time_ns: u64,
    pub pid: u32,
}

/// The kernel's side-band records that describe address spaces over time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SideBand {
    pub maps: Vec<Mapping>,
    pub forks: Vec<ForkEvent>,
    pub execs: Vec<ExecEvent>,
}

/// The process of each sample and the address spaces over time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SampleAddresses {
    /// Process of each of the kernel records' `samples`, same order.
    pub sample_pids: Vec<u32>,
    /// Process of each of the kernel records' `switch_samples`, same order.
    pub switch_sample_pids: Vec<u32>,
    pub side_band: SideBand,
}

/// A sample as symbolising needs it: when, in which process, and its call chain by its id
/// (into the chains symbolised with it, as `records.ppr` stores them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleAt {
    pub time_ns: u64,
    pub pid: u32,
    pub chain: u32,
}
