//! `report.json`: the stable, versioned machine-readable report (see `docs/report-schema.md`).
//!
//! A view of [`Analysis`] without the bulky parts that have files of their own (timeline spans
//! in `timeline.json`, sample stacks in `cpu.folded`): only their counts are given here.

use crate::analysis::attributed_counters::CountersAnalysis;
use crate::analysis::call_site::{CallSite, RegionKind};
use crate::analysis::diagnosis::Diagnosis;
use crate::analysis::lifecycle::{
    IteratorItems, RegionReport, SearchRounds, StateNs, TaskNs, Transitions, WaitSource,
    WorkerLifecycle,
};
use crate::analysis::utilization::Utilization;
use crate::analysis::{
    Analysis, Anomalies, BenchMeasurement, BufferStalls, CallPathSummary, ClockInfo, ProbeSummary,
    ProbedTime, SchedShare, ThreadSummary, TraceSummary,
};
use crate::recording::kernel_records::{Capabilities, UnwindCounts};
use crate::recording::{ExitStatus, RayonHooks, TargetInfo};
use serde::Serialize;
use std::io::Write;

/// The schema identifier; bump the number on any change that is not a pure addition.
pub const SCHEMA: &str = "parprof-report/1";

#[derive(Serialize)]
struct Report<'a> {
    schema: &'static str,
    target: &'a TargetInfo,
    exit: &'a ExitStatus,
    capabilities: &'a Capabilities,
    rayon_hooks: &'a Option<RayonHooks>,
    /// A criterion benchmark's iterations, as criterion counted them (criterion hooks).
    #[serde(skip_serializing_if = "Option::is_none")]
    bench: &'a Option<BenchMeasurement>,
    trace: &'a TraceSummary,
    clock: &'a Option<ClockInfo>,
    threads: &'a [ThreadSummary],
    probes: &'a [ProbeSummary],
    outermost_calls: &'a ProbedTime,
    call_paths: &'a [CallPathSummary],
    regions: Vec<Region<'a>>,
    cpu_samples: CpuSampleCounts,
    offcpu: Option<OffCpuCounts>,
    timeline: TimelineCounts,
    counters: &'a Option<CountersAnalysis>,
    utilization: &'a Option<Utilization>,
    /// Method 5 (`--slices`, `--detail full`); absent when neither was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    slices: &'a Option<crate::analysis::slices::SlicesAnalysis>,
    lost_events: u64,
    lost_kernel_records: u64,
    malformed_kernel_records: u64,
    call_chains: UnwindCounts,
    steal_ns: Option<u64>,
    buffer_stalls: &'a BufferStalls,
    anomalies: &'a Anomalies,
    notes: Vec<String>,
}

/// A parallel region, with its task counts flat (`tasks`, `tasks_local`, …).
#[derive(Serialize)]
struct Region<'a> {
    name: &'a str,
    /// Named by `parallel_region!` (false) or a call site entering the pool (true).
    implicit: bool,
    call_site: Option<&'a CallSite>,
    kind: Option<RegionKind>,
    site: u32,
    instances: u64,
    elapsed_ns: u64,
    workers: usize,
    tasks: u64,
    tasks_local: u64,
    tasks_stolen: u64,
    tasks_injected: u64,
    tasks_inline: u64,
    /// Of `tasks`, those counted in the program while their worker's per-job events were
    /// paused: in every figure, not in the timeline.
    tasks_counted_in_program: u64,
    /// The items of the region's own indexed parallel iterators (null: none counted, or
    /// rayon built without parprof's hooks).
    iterator_items: Option<&'a IteratorItems>,
    /// The marks of the program's state clock behind the counted state times (0: every
    /// stretch timed), and the ± (one standard deviation) they leave on a state's share of
    /// the workers' time, at most.
    state_marks: u64,
    state_share_uncertainty: f64,
    task_ns: &'a TaskNs,
    state_ns: &'a StateNs,
    transitions: &'a Transitions,
    /// The scheduler's part of UC, from the CPU samples taken in it (`share_of_uc` null: too
    /// few samples to tell).
    sched: &'a SchedShare,
    /// The rayon-core hooks' own time taken out of each state.
    hook_ns: &'a StateNs,
    /// LQ + GS + sched.
    active_overhead_ns: u64,
    inactive_overhead_ns: u64,
    preempted_ns: &'a StateNs,
    blocked_ns: &'a StateNs,
    idle_while_others_preempted_ns: u64,
    profiler_cpu_ns: u64,
    wait_source: WaitSource,
    gs_gs_source: SearchRounds,
    diagnoses: &'a [Diagnosis],
    per_worker: &'a [WorkerLifecycle],
}

impl<'a> Region<'a> {
    fn new(r: &'a RegionReport) -> Self {
        Region {
            name: &r.name,
            implicit: r.implicit,
            call_site: r.call_site.as_ref(),
            kind: r.kind,
            site: r.site,
            instances: r.instances,
            elapsed_ns: r.elapsed_ns,
            workers: r.workers,
            tasks: r.tasks.total(),
            tasks_local: r.tasks.local,
            tasks_stolen: r.tasks.stolen,
            tasks_injected: r.tasks.injected,
            tasks_inline: r.tasks.inline,
            tasks_counted_in_program: r.tasks_counted_in_program,
            iterator_items: r.iterator_items.as_ref(),
            state_marks: r.state_marks,
            state_share_uncertainty: r.state_share_uncertainty,
            task_ns: &r.task_ns,
            state_ns: &r.state_ns,
            transitions: &r.transitions,
            sched: &r.sched,
            hook_ns: &r.hook_ns,
            active_overhead_ns: r.active_overhead_ns,
            inactive_overhead_ns: r.inactive_overhead_ns,
            preempted_ns: &r.preempted_ns,
            blocked_ns: &r.blocked_ns,
            idle_while_others_preempted_ns: r.idle_while_others_preempted_ns,
            profiler_cpu_ns: r.profiler_cpu_ns,
            wait_source: r.wait_source,
            gs_gs_source: r.gs_gs_source,
            diagnoses: &r.diagnoses,
            per_worker: &r.per_worker,
        }
    }
}

#[derive(Serialize)]
struct CpuSampleCounts {
    period_ns: u64,
    total: u64,
    distinct_stacks: usize,
}

/// The off-CPU flamegraph's totals; its stacks are in `offcpu.folded`.
#[derive(Serialize)]
struct OffCpuCounts {
    total_ns: u64,
    profiler_ns: u64,
    unmatched_ns: u64,
    distinct_stacks: usize,
}

#[derive(Serialize)]
struct TimelineCounts {
    spans: usize,
    left_out_probe_spans: u64,
    left_out_switched_out_spans: u64,
    worker_state_spans: usize,
    region_runs: usize,
    left_out_lifecycle_spans: u64,
}

/// Writes `report.json` (pretty-printed, fields in a fixed order).
pub fn write(analysis: &Analysis, out: &mut dyn Write) -> anyhow::Result<()> {
    let report = Report {
        schema: SCHEMA,
        target: &analysis.target,
        exit: &analysis.exit,
        capabilities: &analysis.capabilities,
        rayon_hooks: &analysis.rayon_hooks,
        bench: &analysis.bench,
        trace: &analysis.trace,
        clock: &analysis.clock,
        threads: &analysis.threads,
        probes: &analysis.probes,
        outermost_calls: &analysis.outermost_calls,
        call_paths: &analysis.call_paths,
        regions: analysis.regions.iter().map(Region::new).collect(),
        cpu_samples: CpuSampleCounts {
            period_ns: analysis.cpu_samples.period_ns,
            total: analysis.cpu_samples.total,
            distinct_stacks: analysis.cpu_samples.stacks.len(),
        },
        offcpu: analysis.offcpu_stacks.as_ref().map(|o| OffCpuCounts {
            total_ns: o.total_ns,
            profiler_ns: o.profiler_ns,
            unmatched_ns: o.unmatched_ns,
            distinct_stacks: o.stacks.len(),
        }),
        timeline: TimelineCounts {
            spans: analysis.timeline.spans.len(),
            left_out_probe_spans: analysis.timeline.left_out_probe_spans,
            left_out_switched_out_spans: analysis.timeline.left_out_switched_out_spans,
            worker_state_spans: analysis.timeline.worker_states.len(),
            region_runs: analysis.timeline.region_runs.len(),
            left_out_lifecycle_spans: analysis.timeline.left_out_lifecycle_spans,
        },
        counters: &analysis.counters,
        utilization: &analysis.utilization,
        slices: &analysis.slices,
        lost_events: analysis.lost_events,
        lost_kernel_records: analysis.lost_kernel_records,
        steal_ns: analysis.steal_ns,
        malformed_kernel_records: analysis.malformed_kernel_records,
        call_chains: analysis.call_chains,
        buffer_stalls: &analysis.buffer_stalls,
        anomalies: &analysis.anomalies,
        notes: super::wording::notes(analysis),
    };
    serde_json::to_writer_pretty(&mut *out, &report)?;
    out.write_all(b"\n")?;
    Ok(())
}
