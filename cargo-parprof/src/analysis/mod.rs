//! The analyses: one in-memory result that every report is a view of.
//!
//! [`analyse`] reads the trace once, chunk by chunk, and hands each thread's events to the
//! per-event analyses ([`EventConsumer`]s) in one loop; memory grows with threads, probe sites
//! and call paths, not with the length of the run. Kernel records (context switches, samples)
//! are placed on the trace's tick time line first, since the active-time correction needs the
//! switched-out intervals while it streams.

mod active_time;
pub mod attributed_counters;
pub mod attribution;
pub mod bench_phases;
mod blocked_where;
pub mod call_site;
mod clock;
mod cpu_stacks;
pub mod diagnoses;
pub mod diagnosis;
mod distribution;
pub mod event_consumer;
mod hook_time;
mod id_map;
mod in_run_speed;
pub mod lifecycle;
pub mod model;
mod note;
pub mod offcpu;
mod outside_regions;
mod sampled_tasks;
pub mod sched_share;
pub mod slices;
mod spans;
pub mod spill;
mod threads;
pub mod utilization;

pub use cpu_stacks::{INLINED_SUFFIX, fold_recursion};
pub use model::*;
pub use note::*;

use crate::recording::counters::CounterRecords;
use crate::recording::kernel_records::Capabilities;
use crate::recording::kernel_records::KernelRecords;
use crate::recording::{DEFAULT_PERIOD_NS, ExitStatus, TargetInfo, Thresholds};
use active_time::{ActiveTime, ActiveTimeResult, PathFrame};
use attributed_counters::CountersAnalysis;
use attributed_counters::{AttributionContext, SpanCollector};
use event_consumer::EventConsumer;
use lifecycle::{Lifecycle, LifecycleBuilder, LifecycleTimeline};
use offcpu::OffCpuIndex;
use parprof_rt::trace::{
    Chunk, Completeness, End, Event, Header, HookCosts, LifecycleTotals, SiteRecord, ThreadRecord,
    TickConverter, TraceReader,
};
use serde::Serialize;
use spans::{LongestSpans, TickSpan, TickSpanKind};
use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{BufReader, Read};
use std::path::PathBuf;
use std::sync::Arc;
use threads::{ThreadActivity, ThreadSources};

/// Everything every report needs, from one pass over the trace and the kernel's records.
#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    /// The cargo target that ran (filled by the caller).
    pub target: TargetInfo,
    /// How the target exited (filled by the caller).
    pub exit: ExitStatus,
    /// Whether the build recorded rayon's lifecycle (filled by the caller; `None`: not known,
    /// e.g. a trace analysed on its own).
    pub rayon_hooks: Option<crate::recording::RayonHooks>,
    /// What a criterion benchmark measured (`None`: not a benchmark, or criterion not hooked).
    pub bench: Option<BenchMeasurement>,
    pub capabilities: Capabilities,
    pub trace: TraceSummary,
    /// `None` when the program wrote no trace: kernel times are then used as they are.
    pub clock: Option<ClockInfo>,
    /// Sorted by tid.
    pub threads: Vec<ThreadSummary>,
    /// Sorted by self active time, largest first.
    pub probes: Vec<ProbeSummary>,
    /// Every distinct stack of probes, sorted by path.
    pub call_paths: Vec<CallPathSummary>,
    /// Totals over the outermost probe calls: the whole probed time, each moment counted once.
    pub outermost_calls: ProbedTime,
    pub cpu_samples: CpuSamples,
    /// Where threads waited or were preempted (`None` without context-switch samples).
    pub offcpu_stacks: Option<OffCpuStacks>,
    pub timeline: Timeline,
    /// Parallel regions with their worker lifecycles and diagnoses, longest first.
    pub regions: Vec<lifecycle::RegionReport>,
    /// The counters collected (`--counters`) attributed to probes, task groups and regions;
    /// `None` when none were asked for.
    pub counters: Option<attributed_counters::CountersAnalysis>,
    /// Work executed vs. slots available over time (method 4); `None` without context-switch
    /// records.
    pub utilization: Option<utilization::Utilization>,
    /// Exact per-call counters from slices or `--detail full` (method 5); `None` when neither
    /// was asked for (filled by the caller, from the runtime's results file).
    pub slices: Option<slices::SlicesAnalysis>,
    /// Trace events the runtime could not store (its buffers were full).
    pub lost_events: u64,
    /// Kernel records lost because a perf ring buffer was full.
    pub lost_kernel_records: u64,
    /// Kernel records that could not be decoded and were skipped.
    pub malformed_kernel_records: u64,
    /// How the cpu samples' call chains were obtained.
    pub call_chains: crate::recording::kernel_records::UnwindCounts,
    /// CPU time the hypervisor gave to other guests during the run, all CPUs (`None`: not
    /// measurable here). Probe times may include up to that much: no switch shows it.
    pub steal_ns: Option<u64>,
    /// Times the runtime waited for its writer (removed from probe times like overhead).
    pub buffer_stalls: BufferStalls,
    pub anomalies: Anomalies,
    /// What could not be measured or may be off (the views word it).
    pub notes: Vec<Note>,
}

/// How a run is analysed, its trace opened included (`pipeline::trace_file::open` reads
/// `child_pid`, `progress_min_bytes` and `bench_phases`).
#[derive(Clone, Debug)]
pub struct AnalysisOptions {
    /// Pid of the profiled process: picks `trace-<pid>.ppt` in an output folder, and tells its
    /// main thread when no trace gives the pid.
    pub child_pid: Option<u32>,
    /// The most spans the timeline keeps (the longest ones).
    pub max_timeline_spans: usize,
    /// Traces at least this large get a progress bar on stderr as they are read (never drawn
    /// when stderr is not a terminal).
    pub progress_min_bytes: u64,
    /// Period of the utilization over time (method 4), in ns.
    pub utilization_period_ns: u64,
    /// Thresholds of the parallel-overhead diagnoses of regions.
    pub thresholds: Thresholds,
    /// Look for a criterion benchmark's phases and keep the probes' calls and the CPU samples
    /// to its measured batch (a criterion bench's run): a scan of the trace before its pass.
    pub bench_phases: bool,
}

impl Default for AnalysisOptions {
    fn default() -> Self {
        AnalysisOptions {
            child_pid: None,
            max_timeline_spans: 200_000,
            progress_min_bytes: 64 << 20,
            utilization_period_ns: DEFAULT_PERIOD_NS,
            thresholds: Thresholds::default(),
            bench_phases: false,
        }
    }
}

/// The bytes of a trace as the analysis reads them: buffered, from wherever the caller took
/// them (a file, with a progress bar as it is read).
pub type TraceBytes = BufReader<Box<dyn Read>>;

/// A trace opened for the analysis, its header read.
pub struct OpenTrace {
    pub path: PathBuf,
    pub reader: TraceReader<TraceBytes>,
    /// The End chunk found at the file's tail (`None` for a cut trace).
    pub end: Option<End>,
}

/// What the analysis is fed of the run's trace: the caller finds, opens and scans it, and
/// notes what it found on the way.
pub struct TraceInput {
    /// The trace file chosen, if any (the report names it even when it was not analysed).
    pub path: Option<PathBuf>,
    /// `None` without a usable trace: the kernel's records alone are analysed.
    pub opened: Option<OpenTrace>,
    /// A criterion benchmark's phases, scanned from the trace before its pass.
    pub bench_phases: bench_phases::BenchPhases,
    /// What finding, opening and scanning the trace noted: the first of the analysis's notes.
    pub notes: Vec<Note>,
    /// Where what does not fit in memory goes (the counters' spans of a long run).
    pub spill: Arc<dyn spill::SpillSpace>,
}

/// What the reading loop gathered besides what the consumers keep.
struct TraceContents {
    sites: HashMap<u32, SiteRecord>,
    threads: HashMap<u32, ThreadRecord>,
    lost_by_thread: HashMap<u32, u64>,
    /// The last snapshot of each (thread, region)'s lifecycle counted in the program.
    lifecycle_totals: HashMap<(u32, u32), LifecycleTotals>,
    /// What the rayon-core hooks cost, measured at start-up (absent from older traces).
    hook_costs: Option<HookCosts>,
    events: u64,
    completeness: TraceCompleteness,
}

impl TraceContents {
    fn absent() -> TraceContents {
        TraceContents {
            sites: HashMap::new(),
            threads: HashMap::new(),
            lost_by_thread: HashMap::new(),
            lifecycle_totals: HashMap::new(),
            hook_costs: None,
            events: 0,
            completeness: TraceCompleteness::Absent,
        }
    }
}

/// Analyses a run from its trace, as the caller opened it, and the kernel's records; without
/// a trace the analysis stands on the kernel's records alone. A trace that turns out cut or
/// corrupt is analysed up to that point. `target` and `exit` of the result are left for the
/// caller to fill.
pub fn analyse(trace: TraceInput, kernel: &KernelRecords, opts: &AnalysisOptions) -> Analysis {
    analyse_with_counters(trace, kernel, &CounterRecords::default(), opts)
}

/// [`analyse`], with the counters collected for `--counters` attributed to probes, tasks and
/// regions. The steps: place the kernel's records on the trace's time line, stream the trace
/// through the per-event analyses, then turn each result into the model's figures and notes.
pub fn analyse_with_counters(
    trace: TraceInput,
    kernel: &KernelRecords,
    counters: &CounterRecords,
    opts: &AnalysisOptions,
) -> Analysis {
    let mut notes = trace.notes;
    let mut source = TraceSource::of(trace.path, trace.opened, trace.spill);
    let sorted = kernel.with_switches_sorted();
    let span = RunSpan::of(&source, &sorted);
    let mut batch = MeasuredBatch::of(trace.bench_phases, &source, &sorted);
    // The switches and thread starts are the same with or without the batch's samples only.
    let off_cpu = Arc::new(source.off_cpu(&sorted, span));
    let streamed = batch.stream(&mut source, counters, &off_cpu, opts);
    let kernel = &*batch.kernel;
    let cx = Context {
        kernel,
        counters,
        opts,
        off_cpu: &off_cpu,
        source: &source,
        span,
    };
    let (mut counters_analysis, counter_notes) =
        cx.attribute_counters(streamed.counter_spans, &streamed.contents.sites);
    let threads = cx.threads(&streamed.activity, &streamed.contents);
    let (folded, offcpu_stacks) = cpu_stacks::fold_both(kernel, &threads, span.origin_ns);
    let regions = with_blocked_where(streamed.lifecycle.regions, offcpu_stacks.as_ref());
    let lost_events = source.lost_events(&streamed.contents);
    let views = cx.probe_views(
        streamed.active,
        streamed.lifecycle.timeline,
        &streamed.contents.sites,
    );
    notes.extend(cx.measurement_notes(
        &streamed.contents,
        &views,
        folded.unsymbolised,
        lost_events,
    ));
    notes.extend(lifecycle_notes(&regions, &opts.thresholds));
    notes.extend(cx.outside_regions_note(&streamed.lifecycle.workers, &streamed.lifecycle.runs));
    notes.extend(counter_notes);
    if let Some(counters) = counters_analysis.as_mut() {
        sampled_tasks::from_regions(&mut counters.items, &regions);
    }
    let utilization = cx.utilization(&mut notes);
    let mut probes = views.probes;
    let clock = source.clock_with_speed(views.in_run_speed, &mut probes);
    Analysis {
        target: TargetInfo::default(),
        exit: ExitStatus::default(),
        rayon_hooks: None,
        bench: batch.measurement(&source.converter, span.origin_ns),
        capabilities: kernel.capabilities.clone(),
        trace: source.summary(streamed.contents.completeness, streamed.contents.events),
        clock,
        threads,
        probes,
        call_paths: views.call_paths,
        outermost_calls: views.outermost_calls,
        cpu_samples: folded.samples,
        offcpu_stacks,
        timeline: views.timeline,
        regions,
        counters: counters_analysis,
        utilization,
        slices: None,
        lost_events,
        lost_kernel_records: kernel.lost_records,
        malformed_kernel_records: kernel.malformed_records,
        call_chains: kernel.call_chains,
        steal_ns: kernel.steal_ns,
        buffer_stalls: views.buffer_stalls,
        anomalies: views.anomalies,
        notes,
    }
}

/// The regions, with where their tasks blocked named from the off-CPU stacks, if recorded.
fn with_blocked_where(
    mut regions: Vec<lifecycle::RegionReport>,
    offcpu_stacks: Option<&OffCpuStacks>,
) -> Vec<lifecycle::RegionReport> {
    if let Some(stacks) = offcpu_stacks {
        blocked_where::name_where_tasks_blocked(&mut regions, stacks);
    }
    regions
}

/// A criterion benchmark's phases, and what keeps the profile to its measured batch: the CPU
/// samples taken in it, and the window of the probes' calls.
struct MeasuredBatch<'a> {
    phases: bench_phases::BenchPhases,
    /// The kernel's records, with the samples of the batch only when there is one.
    kernel: Cow<'a, KernelRecords>,
    samples_dropped: u64,
    calls: Option<bench_phases::CallWindow>,
}

impl<'a> MeasuredBatch<'a> {
    fn of(
        phases: bench_phases::BenchPhases,
        source: &TraceSource,
        kernel: &'a KernelRecords,
    ) -> MeasuredBatch<'a> {
        let Some(batch) = phases.measured else {
            return MeasuredBatch {
                phases,
                kernel: Cow::Borrowed(kernel),
                samples_dropped: 0,
                calls: None,
            };
        };
        let ns = |ticks| source.converter.to_ns(ticks);
        let (kept, samples_dropped) = kernel.with_samples_between(ns(batch.begin), ns(batch.end));
        MeasuredBatch {
            phases,
            kernel: Cow::Owned(kept),
            samples_dropped,
            calls: Some(bench_phases::CallWindow::new(batch.begin, batch.end)),
        }
    }

    /// [`stream_trace`] with the kernel's records and the probe calls kept to the batch.
    fn stream(
        &mut self,
        source: &mut TraceSource,
        counters: &CounterRecords,
        off_cpu: &Arc<OffCpuIndex>,
        opts: &AnalysisOptions,
    ) -> Streamed {
        let calls = self.calls.as_mut();
        stream_trace(source, &self.kernel, counters, off_cpu, opts, calls)
    }

    /// What the benchmark measured, for the reports (`None`: not a hooked benchmark).
    fn measurement(&self, converter: &TickConverter, origin_ns: u64) -> Option<BenchMeasurement> {
        if self.phases.is_empty() {
            return None;
        }
        let span = |p: &parprof_rt::trace::BenchPhase| {
            converter.span_ns(p.end.saturating_sub(p.begin)).round() as u64
        };
        let (warm_up, measured) = (self.phases.warm_up, self.phases.measured);
        let on_timeline = |ticks| converter.to_ns(ticks).saturating_sub(origin_ns);
        Some(BenchMeasurement {
            warm_up_iterations: warm_up.map(|p| p.iterations),
            warm_up_ns: warm_up.as_ref().map(span),
            measured_iterations: measured.map(|p| p.iterations),
            measured_ns: measured.as_ref().map(span),
            measured_begin_ns: measured.map(|p| on_timeline(p.begin)),
            measured_end_ns: measured.map(|p| on_timeline(p.end)),
            samples_dropped: self.samples_dropped,
            probe_calls_dropped: self.calls.as_ref().map_or(0, |c| c.dropped_calls),
            whole_run_views: if measured.is_some() {
                WHOLE_RUN_VIEWS.iter().map(|v| (*v).to_owned()).collect()
            } else {
                Vec::new()
            },
        })
    }
}

/// The views that a measured batch does not restrict: they are made of rayon's lifecycle and
/// the kernel's context switches, which are kept whole so that no task or wait is cut in two.
const WHOLE_RUN_VIEWS: &[&str] = &[
    "parallel regions and their diagnoses",
    "the timeline's worker states and region runs",
    "utilization",
    "threads",
    "off-CPU stacks",
];

/// The run's trace, if any, and the clock that places kernel records on its tick time line.
struct TraceSource {
    path: Option<PathBuf>,
    opened: Option<OpenTrace>,
    /// The trace's header; without a trace, kernel nanoseconds serve as ticks.
    header: Header,
    /// The End chunk, when its clock sync point can be used.
    end: Option<End>,
    converter: TickConverter,
    /// Where the counters' span collector spills.
    spill: Arc<dyn spill::SpillSpace>,
}

impl TraceSource {
    /// The trace as opened, with the clock its header and End chunk give.
    fn of(
        path: Option<PathBuf>,
        opened: Option<OpenTrace>,
        spill: Arc<dyn spill::SpillSpace>,
    ) -> TraceSource {
        let header = opened
            .as_ref()
            .map_or_else(Header::monotonic_without_calibration, |t| {
                t.reader.header().clone()
            });
        let end = opened
            .as_ref()
            .and_then(|t| clock::usable_end(&header, t.end.as_ref()))
            .copied();
        let converter = TickConverter::new(&header, end.as_ref().map(|e| &e.end));
        TraceSource {
            path,
            opened,
            header,
            end,
            converter,
            spill,
        }
    }

    fn ticks(&self, ns: u64) -> u64 {
        self.converter.ns_to_ticks(ns)
    }

    /// A duration in ticks, in whole ns.
    fn span_ns(&self, ticks: u64) -> u64 {
        self.converter.span_ns(ticks).round() as u64
    }

    fn pid(&self) -> Option<u32> {
        self.opened.as_ref().map(|_| self.header.pid)
    }

    /// Events the runtime lost: counted per thread, or in the End chunk, whichever says more.
    fn lost_events(&self, contents: &TraceContents) -> u64 {
        let in_end = self.opened.as_ref().and_then(|t| t.end);
        (contents.lost_by_thread.values().sum::<u64>()).max(in_end.map_or(0, |e| e.events_lost))
    }

    fn summary(&self, completeness: TraceCompleteness, events: u64) -> TraceSummary {
        TraceSummary {
            file: self.path.as_ref().map(|p| p.display().to_string()),
            pid: self.pid(),
            program: self.opened.as_ref().map(|_| self.header.program.clone()),
            completeness,
            events,
        }
    }

    /// The trace's clock with the speed measured during the run, by which the probes'
    /// overhead uncertainty is weighed.
    fn clock_with_speed(
        &self,
        in_run_speed: Option<InRunSpeed>,
        probes: &mut [ProbeSummary],
    ) -> Option<ClockInfo> {
        let mut clock = self
            .opened
            .as_ref()
            .map(|_| clock::clock_info(&self.header, self.end.as_ref(), &self.converter));
        if let Some(clock) = clock.as_mut() {
            clock.in_run_speed = in_run_speed;
            clock::weigh_overhead_uncertainty(clock, probes);
        }
        clock
    }

    /// Every thread's switched-out intervals, on the trace's tick time line up to the run's end.
    fn off_cpu(&self, kernel: &KernelRecords, span: RunSpan) -> OffCpuIndex {
        OffCpuIndex::from_switches(
            kernel.switch_records(),
            &kernel.thread_starts,
            |ns| self.ticks(ns),
            span.end_ticks,
        )
    }
}

/// The run on both time lines.
#[derive(Clone, Copy, Debug)]
struct RunSpan {
    /// The end of the run in ticks: the trace's end or the last kernel record, the later.
    end_ticks: u64,
    /// `CLOCK_MONOTONIC` ns of the timeline's time 0: the first thing recorded.
    origin_ns: u64,
}

impl RunSpan {
    fn of(source: &TraceSource, kernel: &KernelRecords) -> RunSpan {
        let first_and_last = |mut times: Box<dyn Iterator<Item = u64> + '_>| {
            let first = times.next();
            (first, times.last().or(first))
        };
        let (first_switch, last_switch) =
            first_and_last(Box::new(kernel.switch_records().map(|s| s.time_ns)));
        let (first_sample, last_sample) =
            first_and_last(Box::new(kernel.cpu_samples().map(|(s, _)| s.time_ns)));
        let last_kernel_ns = last_switch.max(last_sample);
        let end_ticks = source
            .end
            .map(|e| e.end.ticks)
            .max(last_kernel_ns.map(|ns| source.ticks(ns)))
            .unwrap_or(0);
        let origin_ns = [
            source
                .opened
                .as_ref()
                .map(|_| source.header.start.monotonic_ns),
            first_switch,
            first_sample,
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(0);
        RunSpan {
            end_ticks,
            origin_ns,
        }
    }
}

/// What the pass over the trace produced.
struct Streamed {
    active: ActiveTimeResult,
    activity: ThreadActivity,
    lifecycle: Lifecycle,
    counter_spans: SpanCollector,
    contents: TraceContents,
}

/// Feeds the trace to every per-event analysis, then finishes those that need nothing else.
fn stream_trace(
    source: &mut TraceSource,
    kernel: &KernelRecords,
    counters: &CounterRecords,
    off_cpu: &Arc<OffCpuIndex>,
    opts: &AnalysisOptions,
    calls: Option<&mut bench_phases::CallWindow>,
) -> Streamed {
    let mut active = ActiveTime::new(off_cpu, &source.header.calibration, opts.max_timeline_spans);
    let mut activity = ThreadActivity::default();
    let mut lifecycle = LifecycleBuilder::new(lifecycle_span_cap(opts.max_timeline_spans))
        .with_switched_out(Arc::clone(off_cpu));
    lifecycle.set_profiler_threads(
        kernel
            .thread_names
            .iter()
            .filter(|(_, name)| name == parprof_rt::trace::WRITER_THREAD_NAME)
            .map(|(tid, _)| *tid),
    );
    let mut counter_spans =
        SpanCollector::new(!counters.counters.is_empty(), Arc::clone(&source.spill));
    let contents = match source.opened.as_mut() {
        // The active time does about as much work as decoding and the others together.
        Some(trace) => read_chunks(
            trace,
            calls,
            &mut [&mut activity, &mut lifecycle, &mut counter_spans],
            &mut [&mut active],
        ),
        None => TraceContents::absent(),
    };
    for (tid, ns) in (kernel.switch_records().map(|s| (s.tid, s.time_ns)))
        .chain(kernel.cpu_samples().map(|(s, _)| (s.tid, s.time_ns)))
    {
        activity.saw(tid, source.ticks(ns));
    }
    for site in contents.sites.values() {
        lifecycle.on_site(site);
    }
    for thread in contents.threads.values() {
        lifecycle.on_thread(thread);
    }
    for totals in contents.lifecycle_totals.values() {
        lifecycle.on_totals(totals.clone());
    }
    let mut lifecycle = lifecycle.finish(off_cpu, source.converter.ns_per_tick());
    if let Some(costs) = &contents.hook_costs {
        hook_time::remove(
            &mut lifecycle.regions,
            costs,
            source.converter.ns_per_tick(),
        );
    }
    if kernel.samples_have_stacks() {
        sched_share::measure(
            &mut lifecycle.regions,
            &lifecycle.region_runs,
            (kernel.cpu_samples()).filter_map(|(sample, stack)| Some((sample, stack?))),
            &kernel.stacks,
            |ns| source.ticks(ns),
        );
    }
    diagnoses::diagnose_regions(
        &mut lifecycle.regions,
        &opts.thresholds,
        Some(kernel.capabilities.cpus.usable()),
    );
    Streamed {
        active: active.finish(),
        activity,
        lifecycle,
        counter_spans,
        contents,
    }
}

/// The run's records and what the steps after the trace's pass share.
struct Context<'a> {
    kernel: &'a KernelRecords,
    counters: &'a CounterRecords,
    opts: &'a AnalysisOptions,
    off_cpu: &'a OffCpuIndex,
    source: &'a TraceSource,
    span: RunSpan,
}

/// The probes' figures and the timeline, in ns.
struct ProbeViews {
    probes: Vec<ProbeSummary>,
    call_paths: Vec<CallPathSummary>,
    outermost_calls: ProbedTime,
    timeline: Timeline,
    buffer_stalls: BufferStalls,
    anomalies: Anomalies,
    uncalibrated: std::collections::BTreeSet<parprof_rt::trace::EventKind>,
    in_run_speed: Option<InRunSpeed>,
}

impl Context<'_> {
    fn threads(&self, activity: &ThreadActivity, contents: &TraceContents) -> Vec<ThreadSummary> {
        activity.summarise(&ThreadSources {
            kernel: self.kernel,
            trace_threads: &contents.threads,
            lost_events: &contents.lost_by_thread,
            off_cpu: self.off_cpu,
            switches_recorded: self.kernel.capabilities.context_switches.available,
            converter: &self.source.converter,
            origin_ns: self.span.origin_ns,
            pid: self.source.pid().or(self.opts.child_pid),
        })
    }

    fn probe_views(
        &self,
        active: ActiveTimeResult,
        lifecycle: LifecycleTimeline,
        sites: &HashMap<u32, SiteRecord>,
    ) -> ProbeViews {
        let ns = |ticks: u64| self.source.span_ns(ticks);
        ProbeViews {
            probes: probe_summaries(&active, sites, ns),
            call_paths: call_path_summaries(&active, sites, ns),
            outermost_calls: outermost_calls(&active, ns),
            buffer_stalls: BufferStalls {
                count: active.buffer_stalls.count,
                total_ns: ns(active.buffer_stalls.ticks),
            },
            timeline: timeline(
                active.spans,
                lifecycle,
                self.off_cpu,
                &self.source.converter,
                self.span.origin_ns,
            ),
            anomalies: active.anomalies,
            uncalibrated: active.uncalibrated,
            in_run_speed: active.speed.summary(),
        }
    }

    fn measurement_notes(
        &self,
        contents: &TraceContents,
        views: &ProbeViews,
        unsymbolised_samples: u64,
        lost_events: u64,
    ) -> Vec<Note> {
        measurement_notes(&MeasurementFacts {
            kernel: self.kernel,
            counters_unavailable: !self.counters.unavailable.is_empty(),
            completeness: &contents.completeness,
            has_trace: self.source.opened.is_some(),
            lost_events,
            lost_threads: contents.lost_by_thread.values().filter(|n| **n > 0).count(),
            active: &views.anomalies,
            uncalibrated: &views.uncalibrated,
            timeline: &views.timeline,
            unsymbolised_samples,
            buffer_stalls: (views.buffer_stalls.count, views.buffer_stalls.total_ns),
        })
    }

    /// Method 3: the counters attributed to probes, tasks and regions, and their notes.
    /// Called first after the trace's pass: the spans it kept (a run of them in memory) are
    /// freed before the off-CPU stacks index the switches.
    fn attribute_counters(
        &self,
        spans: SpanCollector,
        sites: &HashMap<u32, SiteRecord>,
    ) -> (Option<CountersAnalysis>, Vec<Note>) {
        let converter = &self.source.converter;
        let mut notes = Vec::new();
        let counters = spans.finish(
            &AttributionContext {
                counters: self.counters,
                sites,
                to_ns: &|ticks| converter.to_ns(ticks),
                to_ticks: &|ns| converter.ns_to_ticks(ns),
                off_cpu: self
                    .kernel
                    .capabilities
                    .context_switches
                    .available
                    .then_some(self.off_cpu),
                end_of_run: self.span.end_ticks,
                origin_ns: self.span.origin_ns,
            },
            &mut notes,
        );
        (counters, notes)
    }

    /// Method 4: parallelism over time.
    fn utilization(&self, notes: &mut Vec<Note>) -> Option<utilization::Utilization> {
        utilization::of_run(
            &utilization::RunRecords {
                switches: self.kernel,
                switch_records: &self.kernel.capabilities.context_switches,
                counters: self.counters,
                start_ns: self.span.origin_ns,
                end_ns: self.source.converter.to_ns(self.span.end_ticks),
                period_ns: self.opts.utilization_period_ns,
            },
            notes,
        )
    }
}

impl Context<'_> {
    /// The note on the program's code that rayon workers ran while no region was open, if any.
    fn outside_regions_note(&self, workers: &[u32], runs: &[(u64, u64)]) -> Option<Note> {
        let samples = (self.kernel.cpu_samples()).map(|(s, stack)| outside_regions::WorkerSample {
            tid: s.tid,
            tick: self.source.ticks(s.time_ns),
            stack: stack.map(|id| self.kernel.stacks.leaf_first(id)),
        });
        let found = outside_regions::program_time_outside_regions(
            samples,
            &workers.iter().copied().collect(),
            runs,
            self.kernel.sample_period_ns,
        )?;
        Some(Note::Lifecycle(LifecycleNote::OutsideRegions {
            busy_ns: found.busy_ns,
            samples: found.samples,
            workers: found.workers,
        }))
    }
}

/// What the lifecycle could not tell apart, or what hid waits, in words for the user.
fn lifecycle_notes(regions: &[lifecycle::RegionReport], thresholds: &Thresholds) -> Vec<Note> {
    let mut notes = Vec::new();
    if regions
        .iter()
        .any(|r| r.gs_gs_source == lifecycle::SearchRounds::Estimated)
    {
        notes.push(Note::Lifecycle(LifecycleNote::SearchRoundsEstimated));
    }
    let counted: u64 = regions.iter().map(|r| r.tasks_counted_in_program).sum();
    if counted > 0 {
        let tasks: u64 = regions.iter().map(|r| r.tasks.total()).sum();
        notes.push(Note::Lifecycle(LifecycleNote::JobDetailSampled(
            JobDetailSampling {
                counted,
                tasks,
                window_events: parprof_rt::lifecycle_totals::WINDOW_EVENTS,
                window_ns: parprof_rt::lifecycle_totals::WINDOW_NS,
                mark_every: parprof_rt::state_clock::MARK_EVERY,
                timed_every: parprof_rt::state_clock::TIMED_EVERY,
                fewest_marks: fewest_marks(regions),
            },
        )));
    }
    notes.extend(
        regions
            .iter()
            .filter_map(|r| diagnoses::hidden_wait_note(r, thresholds)),
    );
    notes
}

/// The region whose counted states rest on the fewest marks (the widest uncertainty of a
/// state's share), if any was marked.
fn fewest_marks(regions: &[lifecycle::RegionReport]) -> Option<RegionMarks> {
    regions
        .iter()
        .filter(|r| r.state_marks > 0)
        .max_by(|a, b| {
            a.state_share_uncertainty
                .total_cmp(&b.state_share_uncertainty)
        })
        .map(|r| RegionMarks {
            region: r.name.clone(),
            marks: r.state_marks,
            share_uncertainty: r.state_share_uncertainty,
        })
}

/// Chunks decoded and not yet analysed by the second thread: a few, so that memory stays
/// bounded (a chunk holds at most a runtime ring, 2 MiB decoded) while a slower chunk on one
/// side does not stall the other.
const CHUNKS_IN_FLIGHT: usize = 4;

/// The one pass over the trace: every chunk of events goes to every consumer, in the order of
/// the file. It is decoded once and fed to the consumers of `here` on this thread, then to
/// those of `there` on a second one while this thread decodes the next: two cores on one
/// pass, and each consumer sees the same events in the same order as with one.
fn read_chunks(
    trace: &mut OpenTrace,
    mut calls: Option<&mut bench_phases::CallWindow>,
    here: &mut [&mut dyn EventConsumer],
    there: &mut [&mut (dyn EventConsumer + Send)],
) -> TraceContents {
    std::thread::scope(|scope| {
        let (to_there, chunks) =
            std::sync::mpsc::sync_channel::<(u32, Vec<Event>)>(CHUNKS_IN_FLIGHT);
        let second = scope.spawn(move || {
            for (tid, events) in chunks {
                for consumer in there.iter_mut() {
                    consumer.on_events(tid, &events);
                }
            }
        });
        let contents = read_events(trace, |tid, events| {
            let events = match calls.as_deref_mut() {
                Some(window) => window.keep(tid, events),
                None => events,
            };
            for consumer in here.iter_mut() {
                consumer.on_events(tid, &events);
            }
            // Fails only when the second thread panicked, which its join passes on.
            let _ = to_there.send((tid, events));
        });
        drop(to_there);
        if let Err(panic) = second.join() {
            std::panic::resume_unwind(panic);
        }
        contents
    })
}

/// Reads the trace to its end, or to what cuts it short, handing each chunk of events to
/// `on_events`.
fn read_events(trace: &mut OpenTrace, mut on_events: impl FnMut(u32, Vec<Event>)) -> TraceContents {
    let mut contents = TraceContents {
        completeness: TraceCompleteness::Complete,
        ..TraceContents::absent()
    };
    let failure = loop {
        match trace.reader.next_chunk() {
            Ok(Some(Chunk::Events { tid, events })) => {
                contents.events += events.len() as u64;
                on_events(tid, events);
            }
            Ok(Some(Chunk::Site(site))) => {
                contents.sites.insert(site.id, site);
            }
            // A later record of a thread knows more (e.g. its rayon index): the last one wins.
            Ok(Some(Chunk::Thread(thread))) => {
                contents.threads.insert(thread.tid, thread);
            }
            Ok(Some(Chunk::Lost { tid, count })) => {
                *contents.lost_by_thread.entry(tid).or_default() += count
            }
            Ok(Some(Chunk::LifecycleTotals(totals))) => {
                contents
                    .lifecycle_totals
                    .insert((totals.tid, totals.region), totals);
            }
            Ok(Some(Chunk::HookCosts(costs))) => contents.hook_costs = Some(costs),
            // Read before the pass (`bench_phases`).
            Ok(Some(Chunk::Header(_) | Chunk::End(_) | Chunk::BenchPhase(_))) => {}
            Ok(None) => break None,
            Err(error) => break Some(error),
        }
    };
    contents.completeness = match (failure, trace.reader.completeness()) {
        (Some(error), _) => TraceCompleteness::Corrupt {
            error: format!("{}: {error}", trace.path.display()),
        },
        (
            None,
            Some(Completeness::Cut {
                after_byte,
                tail_bytes,
            }),
        ) => TraceCompleteness::Cut {
            after_byte: *after_byte,
            tail_bytes: *tail_bytes,
        },
        (None, _) => TraceCompleteness::Complete,
    };
    contents
}

/// The frame of a rayon task in a call path (`report.json`'s `call_paths`, `active.folded`).
pub const TASK_FRAME_NAME: &str = "[rayon task]";

fn site_name(sites: &HashMap<u32, SiteRecord>, site: u32) -> String {
    sites
        .get(&site)
        .map_or_else(|| format!("site #{site}"), call_site::display_name)
}

fn probe_summaries(
    active: &ActiveTimeResult,
    sites: &HashMap<u32, SiteRecord>,
    ns: impl Fn(u64) -> u64,
) -> Vec<ProbeSummary> {
    let mut probes: Vec<ProbeSummary> = active
        .probes
        .iter()
        .map(|(&site, totals)| {
            let record = sites.get(&site);
            let per_call = &totals.active_per_call;
            let (median, median_method) = per_call.median().unwrap_or((0, MedianMethod::Exact));
            ProbeSummary {
                site,
                name: site_name(sites, site),
                file: record.map(|r| r.file.clone()).unwrap_or_default(),
                line: record.map_or(0, |r| r.line),
                calls: totals.calls,
                unrecorded_calls: totals.unrecorded_calls,
                elapsed_ns: ns(totals.elapsed),
                active_ns: ns(totals.active),
                self_active_ns: ns(totals.self_active),
                overhead_ns: ns(totals.overhead),
                // Set once the calibration's spread is weighed for all probes.
                overhead_uncertainty_ns: 0,
                sampling_uncertainty_ns: ns((2.0 * totals.sampling_variance.sqrt()).round() as u64),
                switched_out_ns: ns(totals.switched_out.total()),
                switched_out_preempted_ns: ns(totals.switched_out.preempted),
                switched_out_voluntary_ns: ns(totals.switched_out.voluntary),
                min_active_ns: ns(per_call.min().unwrap_or(0)),
                median_active_ns: ns(median),
                max_active_ns: ns(per_call.max().unwrap_or(0)),
                median_method,
            }
        })
        .collect();
    probes.sort_by(|a, b| {
        b.self_active_ns
            .cmp(&a.self_active_ns)
            .then_with(|| a.name.cmp(&b.name))
            .then(a.site.cmp(&b.site))
    });
    probes
}

fn call_path_summaries(
    active: &ActiveTimeResult,
    sites: &HashMap<u32, SiteRecord>,
    ns: impl Fn(u64) -> u64,
) -> Vec<CallPathSummary> {
    let mut paths: Vec<CallPathSummary> = active
        .call_paths
        .paths()
        .filter(|(_, node)| node.calls > 0)
        .map(|(path, node)| CallPathSummary {
            path: path
                .into_iter()
                .map(|key| match PathFrame::of_key(key) {
                    PathFrame::Probe(site) | PathFrame::Region(site) => site_name(sites, site),
                    PathFrame::Task(_) => TASK_FRAME_NAME.to_owned(),
                })
                .collect(),
            calls: node.calls,
            active_ns: ns(node.active),
            self_active_ns: ns(node.self_active),
        })
        .collect();
    paths.sort_by(|a, b| {
        a.path
            .cmp(&b.path)
            .then(b.self_active_ns.cmp(&a.self_active_ns))
    });
    paths
}

fn outermost_calls(active: &ActiveTimeResult, ns: impl Fn(u64) -> u64) -> ProbedTime {
    let sum = &active.outermost;
    ProbedTime {
        calls: sum.calls,
        elapsed_ns: ns(sum.elapsed),
        active_ns: ns(sum.active),
        overhead_ns: ns(sum.overhead),
        switched_out_preempted_ns: ns(sum.switched_out.preempted),
        switched_out_voluntary_ns: ns(sum.switched_out.voluntary),
    }
}

/// The kept probe spans plus every switched-out interval of the program's threads, and the
/// lifecycle's worker states and region runs.
fn timeline(
    mut spans: LongestSpans,
    lifecycle: LifecycleTimeline,
    off_cpu: &OffCpuIndex,
    converter: &TickConverter,
    origin_ns: u64,
) -> Timeline {
    let mut tids: Vec<u32> = off_cpu.threads().collect();
    tids.sort_unstable();
    for tid in tids {
        for interval in off_cpu.intervals(tid) {
            let kind = if interval.preempted {
                TickSpanKind::Preempted
            } else {
                TickSpanKind::Blocked
            };
            spans.offer(TickSpan {
                tid,
                start: interval.start,
                end: interval.end,
                kind,
            });
        }
    }
    let ns = |ticks: u64| converter.span_ns(ticks).round() as u64;
    let since_origin = |ticks: u64| converter.to_ns(ticks).saturating_sub(origin_ns);
    let max_spans = spans.capacity();
    let kept = spans.into_sorted();
    Timeline {
        origin_monotonic_ns: origin_ns,
        max_spans,
        spans: kept
            .spans
            .into_iter()
            .map(|s| TimelineSpan {
                tid: s.tid,
                start_ns: since_origin(s.start),
                duration_ns: ns(s.end - s.start),
                kind: match s.kind {
                    TickSpanKind::Probe { site, active_ticks } => SpanKind::Probe {
                        site,
                        active_ns: ns(active_ticks),
                    },
                    TickSpanKind::Preempted => SpanKind::Preempted,
                    TickSpanKind::Blocked => SpanKind::Blocked,
                },
            })
            .collect(),
        left_out_probe_spans: kept.left_out_probe,
        left_out_switched_out_spans: kept.left_out_switched_out,
        worker_states: lifecycle
            .worker_states
            .into_iter()
            .map(|s| WorkerStateSpan {
                tid: s.tid,
                region: s.region,
                state: s.state,
                start_ns: since_origin(s.start),
                duration_ns: ns(s.end - s.start),
            })
            .collect(),
        region_runs: lifecycle
            .region_runs
            .into_iter()
            .map(|r| RegionRun {
                region: r.region,
                start_ns: since_origin(r.start),
                duration_ns: ns(r.end - r.start),
            })
            .collect(),
        left_out_lifecycle_spans: lifecycle.left_out,
    }
}

struct MeasurementFacts<'a> {
    kernel: &'a KernelRecords,
    completeness: &'a TraceCompleteness,
    has_trace: bool,
    lost_events: u64,
    lost_threads: usize,
    active: &'a Anomalies,
    uncalibrated: &'a std::collections::BTreeSet<parprof_rt::trace::EventKind>,
    timeline: &'a Timeline,
    unsymbolised_samples: u64,
    /// Count and total ns.
    buffer_stalls: (u64, u64),
    /// Some counters asked for could not be opened: the counters' note names them with the
    /// reason, which for hardware counters is the capability's.
    counters_unavailable: bool,
}

/// What could not be measured, or may be off: the trace's state and the capabilities, then
/// what was lost, then what the probes and samples could not resolve.
fn measurement_notes(facts: &MeasurementFacts<'_>) -> Vec<Note> {
    let mut notes = Vec::new();
    let caps = &facts.kernel.capabilities;
    match facts.completeness {
        TraceCompleteness::Cut { after_byte, .. } => notes.push(Note::Trace(TraceNote::Cut {
            after_byte: *after_byte,
        })),
        TraceCompleteness::Corrupt { error } => notes.push(Note::Trace(TraceNote::Corrupt {
            error: error.clone(),
        })),
        TraceCompleteness::Complete | TraceCompleteness::Absent => {}
    }
    let reason = |c: &crate::recording::kernel_records::Capability| c.reason.clone();
    if !caps.context_switches.available {
        notes.push(Note::Missing(MissingNote::ContextSwitches {
            reason: reason(&caps.context_switches),
        }));
    }
    if !caps.cpu_samples.available {
        notes.push(Note::Missing(MissingNote::CpuSamples {
            reason: reason(&caps.cpu_samples),
        }));
    }
    if caps.cpu_samples.available && !caps.stack_copies.available {
        notes.push(Note::Missing(MissingNote::StackCopies {
            reason: reason(&caps.stack_copies),
        }));
    }
    if caps.context_switches.available && !caps.switch_stacks.available {
        notes.push(Note::Missing(MissingNote::SwitchStacks {
            reason: reason(&caps.switch_stacks),
        }));
    }
    if !caps.hardware_counters.available && !facts.counters_unavailable {
        notes.push(Note::Missing(MissingNote::HardwareCounters {
            reason: reason(&caps.hardware_counters),
        }));
    }
    notes.extend(loss_notes(facts));
    notes.extend(resolution_notes(facts));
    notes
}

/// Events, records and time lost to full buffers, steal time or bad records.
fn loss_notes(facts: &MeasurementFacts<'_>) -> Vec<Note> {
    let kernel = facts.kernel;
    let (stalls, stalled_ns) = facts.buffer_stalls;
    [
        (facts.lost_events > 0).then_some(LossNote::TraceEvents {
            events: facts.lost_events,
            threads: facts.lost_threads,
        }),
        (stalls > 0).then_some(LossNote::BufferStalls {
            count: stalls,
            total_ns: stalled_ns,
        }),
        (kernel.lost_records > 0).then_some(LossNote::KernelRecords {
            records: kernel.lost_records,
        }),
        (kernel.steal_ns.filter(|&s| s > 0)).map(|steal_ns| LossNote::StealTime { steal_ns }),
        (kernel.malformed_records > 0).then_some(LossNote::MalformedKernelRecords {
            records: kernel.malformed_records,
        }),
    ]
    .into_iter()
    .flatten()
    .map(Note::Loss)
    .collect()
}

/// The worker-state spans the timeline keeps: a quarter of its spans. They come from the
/// detail windows, a sample already; at 170 bytes each in timeline.json, 200,000 of them made
/// 34 MB of a 44 MB run folder (a 12 M-key quicksort recursing to single elements).
fn lifecycle_span_cap(max_timeline_spans: usize) -> usize {
    max_timeline_spans / 4
}

/// Probe events that did not nest or had no calibration, spans left out, unsymbolised samples.
fn resolution_notes(facts: &MeasurementFacts<'_>) -> Vec<Note> {
    let a = facts.active;
    let t = facts.timeline;
    let uncalibrated = facts.has_trace && !facts.uncalibrated.is_empty();
    [
        (a.total() > 0).then_some(ResolutionNote::UnnestedProbeEvents {
            exit_without_entry: a.exit_without_entry,
            entry_without_exit: a.entry_without_exit,
            open_at_end: a.open_at_end,
            time_went_backwards: a.time_went_backwards,
        }),
        uncalibrated.then(|| ResolutionNote::Uncalibrated {
            kinds: facts
                .uncalibrated
                .iter()
                .map(|k| format!("{k:?}"))
                .collect(),
        }),
        (t.left_out_probe_spans + t.left_out_switched_out_spans > 0).then_some(
            ResolutionNote::TimelineSpansLeftOut {
                max_spans: t.max_spans,
                probe_spans: t.left_out_probe_spans,
                switched_out_spans: t.left_out_switched_out_spans,
            },
        ),
        (t.left_out_lifecycle_spans > 0).then_some(ResolutionNote::LifecycleSpansLeftOut {
            kept: lifecycle_span_cap(t.max_spans),
            left_out: t.left_out_lifecycle_spans,
        }),
        (facts.unsymbolised_samples > 0).then_some(ResolutionNote::UnsymbolisedSamples {
            samples: facts.unsymbolised_samples,
        }),
    ]
    .into_iter()
    .flatten()
    .map(Note::Resolution)
    .collect()
}
