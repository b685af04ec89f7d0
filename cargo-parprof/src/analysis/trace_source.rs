//! The run's trace as the analysis places everything on it: the trace's clock (its header
//! and End chunk), which converts the kernel's nanoseconds to the trace's ticks, and the span
//! of the run on both time lines.

use super::bench_phases::BenchPhases;
use super::clock;
use super::model::{ClockInfo, InRunSpeed, ProbeSummary, TraceCompleteness, TraceSummary};
use super::note::Note;
use super::offcpu::OffCpuIndex;
use super::spill;
use crate::recording::kernel_records::KernelRecords;
use parprof_rt::trace::{End, Header, TickConverter, TraceReader};
use std::io::{BufReader, Read};
use std::path::PathBuf;
use std::sync::Arc;

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
    pub bench_phases: BenchPhases,
    /// What finding, opening and scanning the trace noted: the first of the analysis's notes.
    pub notes: Vec<Note>,
    /// Where what does not fit in memory goes (the counters' spans of a long run).
    pub spill: Arc<dyn spill::SpillSpace>,
}

/// The run's trace, if any, and the clock that places kernel records on its tick time line.
pub(super) struct TraceSource {
    pub(super) path: Option<PathBuf>,
    pub(super) opened: Option<OpenTrace>,
    /// The trace's header; without a trace, kernel nanoseconds serve as ticks.
    pub(super) header: Header,
    /// The End chunk, when its clock sync point can be used.
    pub(super) end: Option<End>,
    pub(super) converter: TickConverter,
    /// Where the counters' span collector spills.
    pub(super) spill: Arc<dyn spill::SpillSpace>,
}

impl TraceSource {
    /// The trace as opened, with the clock its header and End chunk give.
    pub(super) fn of(
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

    pub(super) fn ticks(&self, ns: u64) -> u64 {
        self.converter.ns_to_ticks(ns)
    }

    /// A duration in ticks, in whole ns.
    pub(super) fn span_ns(&self, ticks: u64) -> u64 {
        self.converter.span_ns(ticks).round() as u64
    }

    pub(super) fn pid(&self) -> Option<u32> {
        self.opened.as_ref().map(|_| self.header.pid)
    }

    /// The trace's End chunk as read, if any (its clock may not be usable).
    pub(super) fn end_chunk(&self) -> Option<&End> {
        self.opened.as_ref()?.end.as_ref()
    }

    pub(super) fn summary(&self, completeness: TraceCompleteness, events: u64) -> TraceSummary {
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
    pub(super) fn clock_with_speed(
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
    pub(super) fn off_cpu(&self, kernel: &KernelRecords, span: RunSpan) -> OffCpuIndex {
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
pub(super) struct RunSpan {
    /// The end of the run in ticks: the trace's end or the last kernel record, the later.
    pub(super) end_ticks: u64,
    /// `CLOCK_MONOTONIC` ns of the timeline's time 0: the first thing recorded.
    pub(super) origin_ns: u64,
}

impl RunSpan {
    pub(super) fn of(source: &TraceSource, kernel: &KernelRecords) -> RunSpan {
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
