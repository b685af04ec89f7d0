//! What the kernel told us about the profiled process, on `CLOCK_MONOTONIC` nanoseconds
//! (the collector sets `use_clockid`, the runtime records sync points against the same clock).

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Whether a capability could be used, and if not, why (shown to the user as is).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capability {
    pub available: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Capability {
    pub fn yes() -> Self {
        Capability {
            available: true,
            reason: None,
        }
    }
    pub fn no(reason: impl Into<String>) -> Self {
        Capability {
            available: false,
            reason: Some(reason.into()),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Capabilities {
    pub context_switches: Capability,
    pub cpu_samples: Capability,
    /// A user call chain at each switch-out (the off-CPU flamegraph).
    pub switch_stacks: Capability,
    /// A copy of the user stack with each cpu-clock sample, unwound with the files' DWARF
    /// call-frame information (call chains through code without frame pointers).
    pub stack_copies: Capability,
    pub hardware_counters: Capability,
    /// The CPUs the program could use (affinity and cgroup quota).
    pub cpus: CpuQuota,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum SwitchKind {
    /// The thread was switched in.
    In,
    /// The thread was switched out while runnable (preempted).
    OutPreempted,
    /// The thread was switched out because it blocked (sleep, lock, I/O, futex wait).
    OutVoluntary,
}

/// One `PERF_RECORD_SWITCH` of a thread of the profiled process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchRecord {
    pub time_ns: u64,
    pub tid: u32,
    pub cpu: u32,
    pub kind: SwitchKind,
}

/// A thread the profiled process created (a `PERF_RECORD_FORK` within the process): runnable
/// from `time_ns` on, though it has no CPU until its first switch-in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadStart {
    pub time_ns: u64,
    pub tid: u32,
}

/// How the call chains of the cpu-clock samples were obtained (see [`crate::record::unwind`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnwindCounts {
    /// Unwound to the thread's root within the stack copy.
    pub to_the_root: u64,
    /// Unwound to the end of the copy, then continued along the frame-pointer chain.
    pub joined_to_frame_pointers: u64,
    /// Unwound to the end of the copy; the frame-pointer chain had nothing further.
    pub cut_at_the_copy: u64,
    /// The frame-pointer chain alone: no copy, an unknown address space, or a chain the
    /// unwinder could not follow as far.
    pub frame_pointers_only: u64,
}

impl UnwindCounts {
    pub fn total(&self) -> u64 {
        self.to_the_root
            + self.joined_to_frame_pointers
            + self.cut_at_the_copy
            + self.frame_pointers_only
    }
}

/// A user call chain: instruction pointers, leaf first. Samples share the few distinct
/// chains a program has (see [`Interner`]), so a run's memory follows the code it ran, not
/// its length.
pub type CallChain = Arc<[u64]>;

/// One cpu-clock sample with its user call chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuSample {
    pub time_ns: u64,
    pub tid: u32,
    pub cpu: u32,
    pub callchain: CallChain,
}

/// A symbolised frame. `inlined` frames were inlined into the next frame toward the root.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    /// Shared by every frame of the function (see [`Interner`]).
    pub function: Arc<str>,
    pub inlined: bool,
}

/// A symbolised stack, root first; shared by the samples that have it.
pub type Stack = Arc<[Frame]>;

/// Values stored once however often they recur: call chains, stacks and function names,
/// which a long run repeats millions of times.
pub struct Interner<T: ?Sized> {
    values: HashSet<Arc<T>>,
}

impl<T: ?Sized> Default for Interner<T> {
    fn default() -> Self {
        Interner {
            values: HashSet::new(),
        }
    }
}

impl<T: ?Sized + Hash + Eq> Interner<T> {
    /// The shared copy of `value`, made on its first appearance.
    pub fn intern<V: AsRef<T> + Into<Arc<T>>>(&mut self, value: V) -> Arc<T> {
        if let Some(shared) = self.values.get(value.as_ref()) {
            return Arc::clone(shared);
        }
        let shared: Arc<T> = value.into();
        self.values.insert(Arc::clone(&shared));
        shared
    }
}

/// Everything collected from the kernel for one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelRecords {
    pub capabilities: Capabilities,
    /// Sorted by time.
    pub switches: Vec<SwitchRecord>,
    /// Threads created during the run, sorted by time.
    pub thread_starts: Vec<ThreadStart>,
    /// Sorted by time.
    pub samples: Vec<CpuSample>,
    /// Symbolised stacks of `samples`, in the same order (empty when not symbolised).
    pub sample_stacks: Vec<Stack>,
    /// One sample per switch-out of a thread, with the user call chain where it stopped;
    /// sorted by time.
    pub switch_samples: Vec<CpuSample>,
    /// Symbolised stacks of `switch_samples`, as `sample_stacks`.
    pub switch_sample_stacks: Vec<Stack>,
    /// How the samples' call chains were obtained.
    pub call_chains: UnwindCounts,
    /// Sampling period of cpu-clock samples, in ns.
    pub sample_period_ns: u64,
    /// Records the kernel dropped because a ring buffer was full (`PERF_RECORD_LOST`).
    pub lost_records: u64,
    /// Records that could not be decoded (truncated or inconsistent) and were skipped.
    pub malformed_records: u64,
    /// Thread names the kernel reported (`PERF_RECORD_COMM`), by tid.
    pub thread_names: Vec<(u32, String)>,
    /// Steal time of the whole machine during the run (see [`crate::record::steal`]), in ns; `None`
    /// where it cannot be read.
    pub steal_ns: Option<u64>,
}

impl KernelRecords {
    /// These records without those of the threads `tids` (e.g. the processes of slices, which
    /// the collector follows like any child of the program).
    pub fn without_threads(&self, tids: &std::collections::HashSet<u32>) -> KernelRecords {
        let keep = |tid: u32| !tids.contains(&tid);
        let mut out = self.clone();
        out.switches.retain(|s| keep(s.tid));
        out.thread_starts.retain(|t| keep(t.tid));
        out.thread_names.retain(|(tid, _)| keep(*tid));
        retain_with_stacks(&mut out.samples, &mut out.sample_stacks, |s| keep(s.tid));
        retain_with_stacks(
            &mut out.switch_samples,
            &mut out.switch_sample_stacks,
            |s| keep(s.tid),
        );
        out
    }
}

impl KernelRecords {
    /// These records with the cpu samples taken from `begin_ns` to `end_ns` only (e.g. a
    /// benchmark's measured batch), and how many samples were dropped.
    pub fn with_samples_between(&self, begin_ns: u64, end_ns: u64) -> (KernelRecords, u64) {
        let mut out = self.clone();
        let before = out.samples.len();
        retain_with_stacks(&mut out.samples, &mut out.sample_stacks, |s| {
            (begin_ns..=end_ns).contains(&s.time_ns)
        });
        let dropped = (before - out.samples.len()) as u64;
        (out, dropped)
    }
}

/// Keeps the samples that `keep` keeps, and their symbolised stacks when there are any
/// (`stacks` is empty or parallel to `samples`).
fn retain_with_stacks(
    samples: &mut Vec<CpuSample>,
    stacks: &mut Vec<Stack>,
    keep: impl Fn(&CpuSample) -> bool,
) {
    let kept: Vec<bool> = samples.iter().map(&keep).collect();
    if stacks.len() == samples.len() {
        let mut i = 0;
        stacks.retain(|_| {
            i += 1;
            kept[i - 1]
        });
    }
    samples.retain(keep);
}

/// The CPUs a program started from this process may use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuQuota {
    /// CPUs online on the machine.
    pub online: usize,
    /// CPUs in this process's affinity mask (inherited by the program).
    pub affinity: usize,
    /// The cgroup's CPU bandwidth (`cpu.max` quota ÷ period), when limited.
    pub cgroup_limit: Option<f64>,
}

impl CpuQuota {
    /// Threads the program can run at once.
    pub fn usable(&self) -> f64 {
        let affinity = self.affinity.max(1) as f64;
        self.cgroup_limit
            .map_or(affinity, |limit| limit.min(affinity))
    }
}
