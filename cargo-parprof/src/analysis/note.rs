//! What could not be measured, or may be off, as data: each note carries its figures and the
//! views word it (`report/notes.rs`), once for every view.

use serde::Serialize;
use std::path::PathBuf;

/// One thing the report must say about how far its figures go, grouped by where it comes from.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "about", content = "note", rename_all = "snake_case")]
pub enum Note {
    Trace(TraceNote),
    /// A kind of record the kernel did not give.
    Missing(MissingNote),
    Loss(LossNote),
    /// What the probes, the timeline and the samples could not resolve.
    Resolution(ResolutionNote),
    /// Rayon's worker lifecycle.
    Lifecycle(LifecycleNote),
    /// The counters of `--counters` (method 3).
    Counters(CounterNote),
    /// How the run was started and ended.
    Run(RunNote),
}

/// Which trace was analysed, and how much of it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TraceNote {
    /// No trace in `folder`: the program recorded no probes.
    Absent { folder: PathBuf },
    /// `trace-<expected_pid>.ppt` was absent; the only trace there was analysed.
    OnlyOther {
        expected_pid: u32,
        analysed: PathBuf,
    },
    /// `folder` held several traces and not the run's; the largest was analysed.
    LargestOfSeveral {
        folder: PathBuf,
        traces: usize,
        expected_pid: Option<u32>,
        analysed: PathBuf,
    },
    /// The trace file is empty: the program stopped before recording anything.
    Empty { path: PathBuf },
    /// The trace named after the run's process was written by another one.
    OfAnotherProcess {
        path: PathBuf,
        written_by: u32,
        run_pid: u32,
    },
    /// The trace stops without its End chunk.
    Cut { after_byte: u64 },
    /// A chunk could not be read.
    Corrupt { error: String },
    /// criterion's iteration counts could not be scanned from the trace.
    BenchPhasesUnread { path: PathBuf, error: String },
}

/// A kind of record the run has not, with the kernel's (or the collector's) reason.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MissingNote {
    ContextSwitches {
        reason: Option<String>,
    },
    CpuSamples {
        reason: Option<String>,
    },
    /// Samples were taken, their stacks not copied: frame pointers only.
    StackCopies {
        reason: Option<String>,
    },
    /// Context switches without their stacks: no off-CPU flamegraph.
    SwitchStacks {
        reason: Option<String>,
    },
    HardwareCounters {
        reason: Option<String>,
    },
    /// No utilization over time: it needs context-switch records.
    Utilization {
        reason: Option<String>,
    },
}

/// Events, records or time lost.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LossNote {
    /// Trace events the runtime could not store, and on how many threads.
    TraceEvents {
        events: u64,
        threads: usize,
    },
    /// The program waited for the trace writer.
    BufferStalls {
        count: u64,
        total_ns: u64,
    },
    KernelRecords {
        records: u64,
    },
    /// CPU time the hypervisor gave to other guests, all CPUs.
    StealTime {
        steal_ns: u64,
    },
    MalformedKernelRecords {
        records: u64,
    },
    /// The run's records file was cut after this byte (`report --partial`).
    RecordsCut {
        after_byte: u64,
    },
}

/// What was left out or could only be resolved so far.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ResolutionNote {
    /// Probe events that did not nest.
    UnnestedProbeEvents {
        exit_without_entry: u64,
        entry_without_exit: u64,
        open_at_end: u64,
        time_went_backwards: u64,
    },
    /// Event kinds (as the trace names them) with no overhead calibration.
    Uncalibrated {
        kinds: Vec<String>,
    },
    /// The timeline kept the `max_spans` longest spans.
    TimelineSpansLeftOut {
        max_spans: usize,
        probe_spans: u64,
        switched_out_spans: u64,
    },
    /// The timeline kept the `kept` longest worker-state spans and region runs.
    LifecycleSpansLeftOut {
        kept: usize,
        left_out: u64,
    },
    UnsymbolisedSamples {
        samples: u64,
    },
    /// Utilization over time widened its period to stay under `max_periods`.
    UtilizationPeriodWidened {
        period_ns: u64,
        asked_ns: u64,
        max_periods: u64,
    },
}

/// What the rayon lifecycle could not tell apart, or sampled.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LifecycleNote {
    /// Without context-switch records, failed search rounds are estimated.
    SearchRoundsEstimated,
    /// Rayon's per-job detail was sampled: `counted` of `tasks` ran outside the detail windows.
    JobDetailSampled(JobDetailSampling),
    /// A region's searching workers yielded, hiding waits.
    HiddenWait {
        region: String,
        preempted_searching_ns: u64,
        worker_ns: f64,
    },
    /// Rayon workers ran the program's code while no region was open.
    OutsideRegions {
        busy_ns: u64,
        samples: u64,
        workers: usize,
    },
    /// The rayon-core hooks could not be built.
    HooksUnavailable { reason: String },
}

/// How rayon's per-job detail was sampled, and what the counted tasks rest on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobDetailSampling {
    pub counted: u64,
    pub tasks: u64,
    /// A worker writes at most `window_events` per-job events every `window_ns`.
    pub window_events: u32,
    pub window_ns: u64,
    /// The state clock's mark period.
    pub mark_every: std::time::Duration,
    /// One stretch in about this many is timed exactly.
    pub timed_every: u32,
    /// The region whose counted states rest on the fewest marks, if any was marked.
    pub fewest_marks: Option<RegionMarks>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegionMarks {
    pub region: String,
    pub marks: u64,
    /// A state's share of the region's worker time is known to about ± this (a fraction).
    pub share_uncertainty: f64,
}

/// What the counters' attribution could not measure or keep.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CounterNote {
    /// Counters that could not be opened, for one reason.
    NotMeasured {
        names: Vec<String>,
        reason: String,
    },
    /// The kernel multiplexed the counter: it ran `running_ns` of `enabled_ns`.
    Multiplexed {
        name: String,
        running_ns: u64,
        enabled_ns: u64,
    },
    SpillFailed {
        error: String,
    },
    ReadBackFailed {
        error: String,
    },
    /// Spans whose begin events were lost.
    SpansWithoutStart {
        spans: u64,
    },
}

/// How the run was started and ended, and what it left.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunNote {
    /// Exact per-call counters were asked for; their file cannot be opened.
    SliceResultsMissing { path: PathBuf, error: String },
    /// Their file could not be read.
    SliceResultsUnreadable { path: PathBuf, error: String },
    /// A divan bench, profiled as one program.
    DivanAsOneProgram,
    /// Ctrl-C.
    Interrupted,
}
