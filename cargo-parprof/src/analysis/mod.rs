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
mod trace_pass;
mod trace_source;
pub mod utilization;

pub use cpu_stacks::{INLINED_SUFFIX, fold_recursion};
pub use model::*;
pub use note::*;

use crate::recording::counters::CounterRecords;
use crate::recording::kernel_records::Capabilities;
use crate::recording::kernel_records::KernelRecords;
use crate::recording::{DEFAULT_PERIOD_NS, ExitStatus, TargetInfo, Thresholds};
use active_time::{ActiveTimeResult, PathFrame};
use attributed_counters::CountersAnalysis;
use attributed_counters::{AttributionContext, SpanCollector};
use lifecycle::{Lifecycle, LifecycleTimeline};
use offcpu::OffCpuIndex;
use parprof_rt::trace::{SiteRecord, TickConverter};
use serde::Serialize;
use spans::{LongestSpans, TickSpan, TickSpanKind};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use threads::{ThreadActivity, ThreadSources};
use trace_pass::{Streamed, TraceContents, lifecycle_span_cap, stream_trace};
pub use trace_source::{OpenTrace, TraceBytes, TraceInput};
use trace_source::{RunSpan, TraceSource};

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

/// Analyses a run from its trace, as the caller opened it, and the kernel's records; without
/// a trace the analysis stands on the kernel's records alone. A trace that turns out cut or
/// corrupt is analysed up to that point. `target` and `exit` of the result are left for the
/// caller to fill.
pub fn analyse(trace: TraceInput, kernel: &KernelRecords, opts: &AnalysisOptions) -> Analysis {
    analyse_with_counters(trace, kernel, &CounterRecords::default(), opts)
}

/// [`analyse`], with the counters collected for `--counters` attributed to probes, tasks and
/// regions: [`pass_over_trace`], then [`TracePass::finish`] with the same records.
pub fn analyse_with_counters(
    trace: TraceInput,
    kernel: &KernelRecords,
    counters: &CounterRecords,
    opts: &AnalysisOptions,
) -> Analysis {
    pass_over_trace(trace, kernel, counters, opts).finish(kernel, counters, opts)
}

/// The analysis's first step, which needs no stacks of the samples (they may be symbolised
/// meanwhile): the kernel's records placed on the trace's time line, the trace streamed
/// through the per-event analyses, and what their results give without the stacks.
pub struct TracePass {
    notes: Vec<Note>,
    source: TraceSource,
    span: RunSpan,
    off_cpu: Arc<OffCpuIndex>,
    phases: bench_phases::BenchPhases,
    calls: Option<bench_phases::CallWindow>,
    figures: StacklessFigures,
}

/// The figures of a run that its samples' stacks do not change.
struct StacklessFigures {
    contents: TraceContents,
    /// Without the scheduler's share of the tasks' code and the diagnoses, which need stacks.
    regions: Vec<lifecycle::RegionReport>,
    region_runs: HashMap<u32, Vec<(u64, u64)>>,
    workers: Vec<u32>,
    runs: Vec<(u64, u64)>,
    counters: (Option<CountersAnalysis>, Vec<Note>),
    threads: Vec<ThreadSummary>,
    views: ProbeViews,
    utilization: (Option<utilization::Utilization>, Vec<Note>),
}

/// The first step of [`analyse_with_counters`]: `kernel`'s samples need not have their stacks,
/// only their times.
pub fn pass_over_trace(
    trace: TraceInput,
    kernel: &KernelRecords,
    counters: &CounterRecords,
    opts: &AnalysisOptions,
) -> TracePass {
    let mut source = TraceSource::of(trace.path, trace.opened, trace.spill);
    let sorted = kernel.with_switches_sorted();
    let span = RunSpan::of(&source, &sorted);
    let mut batch = MeasuredBatch::of(trace.bench_phases, &source, &sorted);
    // The switches and thread starts are the same with or without the batch's samples only.
    let off_cpu = Arc::new(source.off_cpu(&sorted, span));
    let streamed = batch.stream(&mut source, counters, &off_cpu, opts);
    let figures = Context {
        kernel: &batch.kernel,
        counters,
        opts,
        off_cpu: &off_cpu,
        source: &source,
        span,
    }
    .stackless_figures(streamed);
    TracePass {
        notes: trace.notes,
        source,
        span,
        off_cpu,
        phases: batch.phases,
        calls: batch.calls,
        figures,
    }
}

impl TracePass {
    /// The rest of the analysis, with the records the pass had, their samples' stacks now
    /// there: the stacks' figures (the scheduler's share of the tasks' code, the flamegraphs)
    /// and the diagnoses that use them, and the notes.
    pub fn finish(
        self,
        kernel: &KernelRecords,
        counters: &CounterRecords,
        opts: &AnalysisOptions,
    ) -> Analysis {
        let (source, span, off_cpu) = (self.source, self.span, self.off_cpu);
        let (mut notes, f) = (self.notes, self.figures);
        let sorted = kernel.with_switches_sorted();
        let batch = MeasuredBatch::with_calls(self.phases, self.calls, &source, &sorted);
        let kernel = &*batch.kernel;
        let cx = Context {
            kernel,
            counters,
            opts,
            off_cpu: &off_cpu,
            source: &source,
            span,
        };
        let mut regions = f.regions;
        cx.measure_and_diagnose(&mut regions, &f.region_runs);
        let (folded, offcpu_stacks) = cpu_stacks::fold_both(kernel, &f.threads, span.origin_ns);
        let regions = with_blocked_where(regions, offcpu_stacks.as_ref());
        let lost_events = f.contents.lost_events(source.end_chunk());
        notes.extend(cx.measurement_notes(&f.contents, &f.views, folded.unsymbolised, lost_events));
        notes.extend(cx.region_notes(&regions, &f.workers, &f.runs));
        let ((mut counters_analysis, counter_notes), (utilization, utilization_notes)) =
            (f.counters, f.utilization);
        notes.extend(counter_notes);
        if let Some(counters) = counters_analysis.as_mut() {
            sampled_tasks::from_regions(&mut counters.items, &regions);
        }
        notes.extend(utilization_notes);
        let views = f.views;
        let mut probes = views.probes;
        let clock = source.clock_with_speed(views.in_run_speed, &mut probes);
        Analysis {
            target: TargetInfo::default(),
            exit: ExitStatus::default(),
            rayon_hooks: None,
            bench: batch.measurement(&source.converter, span.origin_ns),
            capabilities: kernel.capabilities.clone(),
            trace: source.summary(f.contents.completeness, f.contents.events),
            clock,
            threads: f.threads,
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
        let calls =
            (phases.measured).map(|batch| bench_phases::CallWindow::new(batch.begin, batch.end));
        Self::with_calls(phases, calls, source, kernel)
    }

    /// The batch of `phases` with the window of its probes' calls, `calls`, as a pass over the
    /// trace left it.
    fn with_calls(
        phases: bench_phases::BenchPhases,
        calls: Option<bench_phases::CallWindow>,
        source: &TraceSource,
        kernel: &'a KernelRecords,
    ) -> MeasuredBatch<'a> {
        let Some(batch) = phases.measured else {
            return MeasuredBatch {
                phases,
                kernel: Cow::Borrowed(kernel),
                samples_dropped: 0,
                calls,
            };
        };
        let ns = |ticks| source.converter.to_ns(ticks);
        let (kept, samples_dropped) = kernel.with_samples_between(ns(batch.begin), ns(batch.end));
        MeasuredBatch {
            phases,
            kernel: Cow::Owned(kept),
            samples_dropped,
            calls,
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
        stream_trace(
            source,
            &self.kernel,
            counters,
            off_cpu,
            opts.max_timeline_spans,
            calls,
        )
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
    /// What the pass's results give without the samples' stacks.
    fn stackless_figures(&self, streamed: Streamed) -> StacklessFigures {
        let Lifecycle {
            regions,
            region_runs,
            timeline,
            workers,
            runs,
        } = streamed.lifecycle;
        let sites = &streamed.contents.sites;
        let mut utilization_notes = Vec::new();
        StacklessFigures {
            counters: self.attribute_counters(streamed.counter_spans, sites),
            threads: self.threads(&streamed.activity, &streamed.contents),
            views: self.probe_views(streamed.active, timeline, sites),
            utilization: (self.utilization(&mut utilization_notes), utilization_notes),
            contents: streamed.contents,
            regions,
            region_runs,
            workers,
            runs,
        }
    }

    /// Each region's scheduler share, from the CPU samples' stacks (where there are stacks),
    /// then the regions' diagnoses, which use it.
    fn measure_and_diagnose(
        &self,
        regions: &mut [lifecycle::RegionReport],
        region_runs: &HashMap<u32, Vec<(u64, u64)>>,
    ) {
        let kernel = self.kernel;
        if kernel.samples_have_stacks() {
            sched_share::measure(
                regions,
                region_runs,
                (kernel.cpu_samples()).filter_map(|(sample, stack)| Some((sample, stack?))),
                &kernel.stacks,
                |ns| self.source.ticks(ns),
            );
        }
        diagnoses::diagnose_regions(
            regions,
            &self.opts.thresholds,
            Some(kernel.capabilities.cpus.usable()),
        );
    }

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
    /// What the regions' figures leave out or may have wrong, and the rayon work done outside
    /// every region.
    fn region_notes(
        &self,
        regions: &[lifecycle::RegionReport],
        workers: &[u32],
        runs: &[(u64, u64)],
    ) -> Vec<Note> {
        let mut notes = lifecycle_notes(regions, &self.opts.thresholds);
        notes.extend(self.outside_regions_note(workers, runs));
        notes
    }

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
