//! `report.json`: the stable, versioned machine-readable report (see `docs/report-schema.md`).
//!
//! A view of [`Analysis`] without the bulky parts that have files of their own (timeline spans
//! in `timeline.json`, sample stacks in `cpu.folded`): only their counts are given here.

use crate::analysis::{
    Analysis, Anomalies, BufferStalls, CallPathSummary, ClockInfo, ExitStatus, ProbeSummary,
    ProbedTime, TargetInfo, ThreadSummary, TraceSummary,
};
use crate::kernel::Capabilities;
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
    trace: &'a TraceSummary,
    clock: &'a Option<ClockInfo>,
    threads: &'a [ThreadSummary],
    probes: &'a [ProbeSummary],
    outermost_calls: &'a ProbedTime,
    call_paths: &'a [CallPathSummary],
    cpu_samples: CpuSampleCounts,
    timeline: TimelineCounts,
    lost_events: u64,
    lost_kernel_records: u64,
    malformed_kernel_records: u64,
    buffer_stalls: &'a BufferStalls,
    anomalies: &'a Anomalies,
    notes: &'a [String],
}

#[derive(Serialize)]
struct CpuSampleCounts {
    period_ns: u64,
    total: u64,
    distinct_stacks: usize,
}

#[derive(Serialize)]
struct TimelineCounts {
    spans: usize,
    left_out_probe_spans: u64,
    left_out_switched_out_spans: u64,
}

/// Writes `report.json` (pretty-printed, fields in a fixed order).
pub fn write(analysis: &Analysis, out: &mut dyn Write) -> anyhow::Result<()> {
    let report = Report {
        schema: SCHEMA,
        target: &analysis.target,
        exit: &analysis.exit,
        capabilities: &analysis.capabilities,
        trace: &analysis.trace,
        clock: &analysis.clock,
        threads: &analysis.threads,
        probes: &analysis.probes,
        outermost_calls: &analysis.outermost_calls,
        call_paths: &analysis.call_paths,
        cpu_samples: CpuSampleCounts {
            period_ns: analysis.cpu_samples.period_ns,
            total: analysis.cpu_samples.total,
            distinct_stacks: analysis.cpu_samples.stacks.len(),
        },
        timeline: TimelineCounts {
            spans: analysis.timeline.spans.len(),
            left_out_probe_spans: analysis.timeline.left_out_probe_spans,
            left_out_switched_out_spans: analysis.timeline.left_out_switched_out_spans,
        },
        lost_events: analysis.lost_events,
        lost_kernel_records: analysis.lost_kernel_records,
        malformed_kernel_records: analysis.malformed_kernel_records,
        buffer_stalls: &analysis.buffer_stalls,
        anomalies: &analysis.anomalies,
        notes: &analysis.notes,
    };
    serde_json::to_writer_pretty(&mut *out, &report)?;
    out.write_all(b"\n")?;
    Ok(())
}
