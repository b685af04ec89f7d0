//! The plain figures of the analyses, shared by the methods and gathered in [`super::Analysis`].
//!
//! Durations are nanoseconds (converted from clock ticks once, at the end of the analysis);
//! times on the timeline are nanoseconds since [`Timeline::origin_monotonic_ns`].

use serde::Serialize;

/// How reports name an unnamed rayon worker (rayon's threads have no name unless the pool's
/// builder gives them one; the kernel calls them all after the program).
pub fn worker_name(rayon_index: u16, pool: u32) -> String {
    format!("rayon worker {rayon_index} (pool {pool})")
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceSummary {
    /// The trace file analysed, if any (as displayed: not necessarily valid UTF-8 on disk).
    pub file: Option<String>,
    /// Process id recorded in the trace header.
    pub pid: Option<u32>,
    /// Program path recorded in the trace header.
    pub program: Option<String>,
    pub completeness: TraceCompleteness,
    /// Events read (all kinds, all threads).
    pub events: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum TraceCompleteness {
    /// The trace ends with its End chunk.
    Complete,
    /// The writer was stopped before the End chunk; everything before `after_byte` was used.
    Cut { after_byte: u64, tail_bytes: u64 },
    /// A chunk could not be read; everything before it was used.
    Corrupt { error: String },
    /// The program wrote no trace.
    Absent,
}

/// How trace ticks were placed on the kernel's `CLOCK_MONOTONIC` time line, and how well.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClockInfo {
    /// `tsc` or `monotonic`.
    pub source: &'static str,
    /// Rate measured by the runtime at start-up.
    pub ticks_per_ns_startup: f64,
    /// Rate over the whole run, from the start and end sync points (`None` for a cut trace).
    pub ticks_per_ns_run: Option<f64>,
    /// `whole_run` or `startup_calibration`: the rate used for conversions.
    pub rate_used: &'static str,
    /// Uncertainty of the start sync point.
    pub start_sync_uncertainty_ns: f64,
    /// Uncertainty of the end sync point (`None` for a cut trace).
    pub end_sync_uncertainty_ns: Option<f64>,
    /// Relative difference of the whole-run rate from the start-up rate, in parts per million.
    pub drift_ppm: Option<f64>,
    /// How far the end sync point lies from where the start-up rate puts it: the error the
    /// start-up calibration alone would have made at the end of the run.
    pub drift_over_run_ns: Option<f64>,
    /// Bound on the misplacement of a trace event against kernel records: the larger sync
    /// uncertainty, when the whole-run rate is used; the start uncertainty (drift unknown)
    /// otherwise.
    pub alignment_error_ns: f64,
    /// Cost of two back-to-back clock reads.
    pub bare_read_pair_ns: f64,
    /// The overhead calibration table used for the correction.
    pub calibration: Vec<CalibrationRow>,
    /// The share by which the overhead removed from probes is uncertain: the calibrated costs'
    /// spreads weighted by what each kind removed in this run (`None`: nothing removed).
    pub overhead_spread: Option<f64>,
    /// How the probes' in-place cost measured during the run compared with the start-up
    /// calibration, and what following it did to the overhead removed (`None`: the run took no
    /// reference — no hot site, or sampling off).
    pub in_run_speed: Option<InRunSpeed>,
}

/// The runtime's in-run references of a probe's in-place cost (method 1 follows the machine's
/// speed with them).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InRunSpeed {
    /// References taken, on all threads.
    pub references: u64,
    /// The overhead removed over what the start-up calibration alone would have removed.
    pub overhead_scale: f64,
    /// The lowest and highest factor a thread's calibrated costs were scaled by.
    pub lowest_factor: f64,
    pub highest_factor: f64,
    /// How much the references themselves varied: their interquartile range over their median.
    pub spread: f64,
    /// References left out because their thread was switched out while it took them.
    pub switched: u64,
    /// References left out because their own events woke the trace writer.
    pub woke_writer: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CalibrationRow {
    /// Event kind (`Enter`, `Exit`, ...).
    pub kind: String,
    pub cost_ticks: u32,
    pub cost_ns: f64,
    /// How much the in-place measurement of the cost varied at start-up: interquartile range
    /// over the median.
    pub cost_spread: f64,
    /// Rounds of that measurement: fewer on a steady machine.
    pub rounds: u16,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ThreadSummary {
    pub tid: u32,
    pub name: Option<String>,
    /// What the thread is, as flamegraphs name their roots: `main`, `rayon worker 3 (pool 1)`,
    /// else its name (`thread <tid>` when it has none). The profiler's writer thread is
    /// `parprof-writer`.
    pub role: String,
    pub rayon_index: Option<u16>,
    /// Rayon pool identity (0 for the global pool) when the thread is a rayon worker.
    pub rayon_pool: Option<u32>,
    /// First and last moment the thread was seen (trace event or kernel record), since the
    /// timeline origin.
    pub first_seen_ns: u64,
    pub last_seen_ns: u64,
    /// Time between first and last sighting minus switched-out time; `None` (like the other
    /// switch figures) without context-switch records.
    pub on_cpu_ns: Option<u64>,
    pub off_cpu_preempted_ns: Option<u64>,
    pub off_cpu_voluntary_ns: Option<u64>,
    pub switches_voluntary: Option<u64>,
    pub switches_preempted: Option<u64>,
    /// Trace events recorded and lost on this thread.
    pub events: u64,
    pub lost_events: u64,
    pub cpu_samples: u64,
}

/// How a median was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MedianMethod {
    /// Every call's duration was kept (few calls).
    Exact,
    /// A log-linear histogram: within 0.4 % of the exact value.
    Histogram,
}

/// Totals of one probe site over all its calls on all threads.
///
/// A probe that calls itself (recursion) counts each outermost activation once in
/// `elapsed_ns`, `active_ns` and `overhead_ns`; `self_active_ns` adds every level's own time
/// and `calls` every call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProbeSummary {
    pub site: u32,
    pub name: String,
    pub file: String,
    pub line: u32,
    pub calls: u64,
    /// Of `calls`, those the runtime only counted: the site was hot on their thread (calls
    /// less than 2 µs apart on average) and one call in 64 was recorded. The times below add
    /// them as copies of the recorded ones; the per-call figures are of recorded calls.
    pub unrecorded_calls: u64,
    pub elapsed_ns: u64,
    pub active_ns: u64,
    /// Active time minus the active time of nested probes.
    pub self_active_ns: u64,
    /// Probe overhead removed from the elapsed time.
    pub overhead_ns: u64,
    /// How far `overhead_ns` may be off: it times the clock's `overhead_spread`.
    pub overhead_uncertainty_ns: u64,
    /// How far `active_ns` may be off for sampling alone: two standard errors of the part
    /// estimated for unrecorded outermost calls (the sample's spread over its size; as long as
    /// that part where fewer than two calls were a sample). 0 when nothing was estimated.
    pub sampling_uncertainty_ns: u64,
    /// Switched-out time removed from the elapsed time, in total and by cause.
    pub switched_out_ns: u64,
    pub switched_out_preempted_ns: u64,
    pub switched_out_voluntary_ns: u64,
    /// Active time of one call.
    pub min_active_ns: u64,
    pub median_active_ns: u64,
    pub max_active_ns: u64,
    pub median_method: MedianMethod,
}

/// Totals of a set of calls that do not overlap, showing the overall effect of the correction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProbedTime {
    pub calls: u64,
    pub elapsed_ns: u64,
    pub active_ns: u64,
    pub overhead_ns: u64,
    pub switched_out_preempted_ns: u64,
    pub switched_out_voluntary_ns: u64,
}

/// One stack of probe names, root first, over all threads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CallPathSummary {
    pub path: Vec<String>,
    pub calls: u64,
    pub active_ns: u64,
    pub self_active_ns: u64,
}

/// cpu-clock samples folded by stack.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CpuSamples {
    pub period_ns: u64,
    pub total: u64,
    /// Samples taken in the profiler's own code (probe entry and exit, clock reads, the trace
    /// writer thread): the probe overhead, left out of `stacks`.
    pub profiler: u64,
    /// Sorted by stack.
    pub stacks: Vec<SampledStack>,
    /// Every sample kept in `stacks`, in time order: for views that place samples in time
    /// (the interactive profile).
    #[serde(skip)]
    pub timed: Vec<TimedSample>,
}

/// One cpu-clock sample on the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedSample {
    /// Since [`Timeline::origin_monotonic_ns`].
    pub time_ns: u64,
    pub tid: u32,
    /// Index in [`CpuSamples::stacks`].
    pub stack: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SampledStack {
    /// Role of the sampled thread ([`ThreadSummary::role`]).
    pub thread: String,
    /// Frames root first, recursion folded (see [`super::cpu_stacks`]); inlined frames end in `_[i]`, unsymbolised ones are addresses.
    pub frames: Vec<String>,
    /// Samples (cpu flamegraph) or switched-out ns (off-CPU flamegraph).
    pub weight: u64,
}

/// Where threads were switched out, weighted by how long: the stack at each switch-out (a
/// context-switch sample) with the time until the thread was switched in again.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OffCpuStacks {
    /// Switched-out time of the program's threads that ended with a switch-in.
    pub total_ns: u64,
    /// Of it, the profiler's own waits (its writer thread, probes waiting for buffer room),
    /// left out of `stacks`.
    pub profiler_ns: u64,
    /// Of it, switch-outs whose sample was lost: under `[stack not recorded]`.
    pub unmatched_ns: u64,
    /// Sorted by stack; the leaf frame is `[blocked]` or `[preempted]`.
    pub stacks: Vec<SampledStack>,
}

/// The spans of the timeline view, bounded in number: the longest are kept.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Timeline {
    /// `CLOCK_MONOTONIC` time of timeline time 0.
    pub origin_monotonic_ns: u64,
    /// The most spans kept.
    pub max_spans: usize,
    /// Sorted by thread, then start.
    pub spans: Vec<TimelineSpan>,
    pub left_out_probe_spans: u64,
    pub left_out_switched_out_spans: u64,
    /// The states of every rayon worker within parallel regions, sorted by thread, then start;
    /// bounded by `max_spans` like `spans` (the longest are kept).
    pub worker_states: Vec<WorkerStateSpan>,
    /// The runs of every parallel region, sorted by region, then start; bounded likewise.
    pub region_runs: Vec<RegionRun>,
    /// Worker-state spans and region runs left out by the bound.
    pub left_out_lifecycle_spans: u64,
}

/// The lifecycle state of a rayon worker (method 2 of the spec).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum WorkerState {
    /// Running a task of a region (user code).
    #[serde(rename = "UC")]
    UserCode,
    /// Looking for the next task in its own deque.
    #[serde(rename = "LQ")]
    LocalQueue,
    /// Looking in other workers' deques and the injector.
    #[serde(rename = "GS")]
    GlobalSearch,
    /// Asleep: no task found.
    #[serde(rename = "W")]
    Wait,
}

impl WorkerState {
    /// The model's abbreviation: `UC`, `LQ`, `GS` or `W`.
    pub fn abbreviation(self) -> &'static str {
        match self {
            WorkerState::UserCode => "UC",
            WorkerState::LocalQueue => "LQ",
            WorkerState::GlobalSearch => "GS",
            WorkerState::Wait => "W",
        }
    }
}

/// A stretch of time one worker spent in one state within parallel region `region` (a region
/// site, see `RegionReport::site`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkerStateSpan {
    pub tid: u32,
    pub region: u32,
    pub state: WorkerState,
    pub start_ns: u64,
    pub duration_ns: u64,
}

/// One run of a parallel region (its begin to its end; overlapping runs merged).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RegionRun {
    pub region: u32,
    pub start_ns: u64,
    pub duration_ns: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TimelineSpan {
    pub tid: u32,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub kind: SpanKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SpanKind {
    /// One call of the probe `site` (see [`ProbeSummary::site`]).
    Probe { site: u32, active_ns: u64 },
    /// Switched out while runnable.
    Preempted,
    /// Switched out because the thread blocked.
    Blocked,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BufferStalls {
    pub count: u64,
    pub total_ns: u64,
}

/// Events that did not fit the nesting of probes; the figures leave them out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Anomalies {
    /// An Exit with no open call of its probe on the thread (its Enter was lost).
    pub exit_without_entry: u64,
    /// A call closed over by the Exit of an enclosing probe (its own Exit was lost).
    pub entry_without_exit: u64,
    /// Calls still open when the trace ended (cut trace, or a thread that never returned).
    pub open_at_end: u64,
    /// Events whose time lies before the previous event of their thread.
    pub time_went_backwards: u64,
}

impl Anomalies {
    pub fn total(&self) -> u64 {
        self.exit_without_entry
            + self.entry_without_exit
            + self.open_at_end
            + self.time_went_backwards
    }
}

/// What a criterion benchmark's run measured, as criterion counted it (criterion hooks), and
/// what of the profile is kept to its measured batch.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchMeasurement {
    /// Iterations of the routine in criterion's warm-up (`None`: not recorded).
    pub warm_up_iterations: Option<u64>,
    pub warm_up_ns: Option<u64>,
    /// Iterations of the measured batch (`None`: no batch ran, the warm-up filled the time).
    pub measured_iterations: Option<u64>,
    pub measured_ns: Option<u64>,
    /// The measured batch on the timeline (ns from its time 0).
    pub measured_begin_ns: Option<u64>,
    pub measured_end_ns: Option<u64>,
    /// CPU samples taken outside the measured batch (the warm-up, start-up, exit), dropped.
    pub samples_dropped: u64,
    /// Probe calls begun outside the measured batch, dropped.
    pub probe_calls_dropped: u64,
    /// The views that still cover the whole run, warm-up included.
    pub whole_run_views: Vec<String>,
}

/// The scheduler's share of a region's user-code (UC) time: the part of UC in which the
/// workers ran rayon's own code on the tasks' behalf (creating and pushing jobs, splitting
/// producers, latches, the notify path, reduce plumbing), measured from the CPU samples taken
/// in UC by the code each sample hit (see `analysis::sched_share`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SchedShare {
    /// Samples of the region's workers in UC that hit the task's own code, and rayon's.
    pub own_samples: u64,
    pub sched_samples: u64,
    /// Samples in the profiler's own code (its hooks): the profiler's, never the program's,
    /// left out of the share.
    pub profiler_samples: u64,
    /// Every sample of the region's workers during its runs (the search's included).
    pub samples: u64,
    /// sched ÷ (sched + own); `None`: too few samples to tell.
    pub share_of_uc: Option<f64>,
    /// One standard deviation of `share_of_uc`, from the sample count.
    pub share_uncertainty: f64,
    /// `share_of_uc` × the workers' running UC time (0 when not known), and its uncertainty.
    pub sched_ns: u64,
    pub sched_uncertainty_ns: u64,
}
