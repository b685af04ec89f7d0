//! The counters of a run in the analysis: their deltas attributed to every probe, every
//! parallel region and the tasks of every region (method 3 of the spec, over the whole trace
//! with bounded memory), and the counter tracks of the timeline.
//!
//! ## What competes for a slice's delta
//! The counters are program-wide (all threads, all CPUs:
//! [`super::attribution::process_series`]).
//! The work going on at a moment is what the program's threads are running, so the
//! competitors are threads: a thread is *busy* while it is inside at least one probe call or
//! task. Each time slice (a span with a constant set of busy threads, also cut at every read
//! of the counters) gives its delta to the busy threads, 1/n each or, when the kernel's switch
//! records tell, in proportion to each thread's on-CPU time in the slice; the part a thread
//! did not get is its error. Cutting at the reads changes no 1/n figure (the interpolated
//! deltas add up), but lets on-CPU weights follow who ran when within a long slice. Everything
//! open on a busy thread receives that thread's whole share: a probe call inside a task is
//! part of the task, not its competitor. A probe's figure is the sum over its calls, a task
//! group's the sum over the region's tasks; calls of one probe (tasks of one region) nested on
//! one thread count once, so recursion is not counted twice.
//!
//! Regions compete only with other regions (a region includes its tasks on every thread, and
//! has no thread of its own), always 1/n; runs of one region on several threads at once count
//! once.
//!
//! A span whose end is missing (open when the trace ended) ends at the next end of another
//! span after its start, or at the end of the run; one whose start is missing (its begin
//! event was lost) starts at the latest start of another span before its end.
//!
//! ## Bounded memory
//! Slices need the span boundaries of all threads in time order, but the trace gives each
//! thread's events in order with threads interleaved chunk by chunk. Spans (24 bytes: start,
//! end, thread or region, group) are kept in memory up to [`RUN_SPANS`]; beyond that they are
//! sorted in runs and spilled to a store the pipeline gives (a temporary file beside the trace), and the
//! sweep reads the runs back in one k-way merge. The sweep holds only the spans open at a moment, and each group's
//! figure is accumulated as the sweep passes its spans: a long trace costs disk, not memory.
//! Per busy thread the sweep keeps the running total of the shares it received, so a span's
//! figure is a difference of two totals and each slice costs O(busy threads × counters); the
//! on-CPU time of a thread in a slice comes from a cursor over its switched-out intervals.
//! On a synthetic trace of 50 million events (25 million spans, 8 threads) the attribution
//! roughly triples the analysis time, with a peak of about 60 MiB.

use super::attribution::{CounterPoint, Interpolator, ShareKind, process_series};
use super::event_consumer::EventConsumer;
use super::id_map::IdMap;
use super::note::{CounterNote, Note};
use super::offcpu::{OffCpu, OffCpuIndex};
use super::spill::{SpillSpace, SpillStore};
use crate::recording::counters::{
    CounterRecords, CounterSource, ReadCost, Scaling, UnavailableCounter,
};
use parprof_rt::trace::{DETAIL_FRAME, DETAIL_PAUSE, Event, EventKind, SiteRecord};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io;
use std::sync::Arc;

/// Spans kept in memory per competition set before a sorted run is spilled to disk
/// (24 MiB).
pub const RUN_SPANS: usize = 1 << 20;
/// Spans whose start is missing, kept to infer their start; more are left out and counted.
const MAX_MISSING_STARTS: usize = 1 << 16;
/// Spans read back from a spilled run at a time.
const READ_BATCH: usize = 4096;
/// Points of each counter track in the timeline: consecutive reads are merged beyond this.
const MAX_TRACK_POINTS: usize = 20_000;

/// What a figure is attributed to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemKind {
    /// All calls of a probe.
    Probe,
    /// All tasks of a parallel region.
    Tasks,
    /// All runs of a parallel region.
    Region,
}

impl ItemKind {
    /// The word shown for the item.
    pub fn label(self) -> &'static str {
        match self {
            ItemKind::Probe => "probe",
            ItemKind::Tasks => "tasks",
            ItemKind::Region => "region",
        }
    }
}

/// The counters part of the analysis.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CountersAnalysis {
    /// The counters collected, in the order asked for.
    pub collected: Vec<CollectedCounter>,
    /// Requested counters that were not collected, with the reason.
    pub unavailable: Vec<UnavailableCounter>,
    /// How probes and task groups shared slices with work on other threads: `on_cpu_weighted`
    /// with context-switch records, `equal` (1/n) without. Each figure says what it used.
    pub work_share: ShareKind,
    /// Regions always share 1/n.
    pub region_share: ShareKind,
    /// Probes, task groups and regions with their attributed counters.
    pub items: Vec<AttributedItem>,
    /// How often the collector read the counters.
    pub read_interval_ns: u64,
    pub read_cost: ReadCost,
    pub spans: SpanCounts,
    /// Per counter, its increase per ms over time, for the timeline (not in `report.json`).
    #[serde(skip)]
    pub tracks: Vec<CounterTrack>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CollectedCounter {
    pub name: String,
    pub source: CounterSource,
    /// The program's total count over the run.
    pub total: f64,
    /// Multiplexing: values were scaled up by `time_enabled / time_running` when `scaled`.
    pub scaling: Scaling,
}

/// A probe, a region's tasks or a region, with its attributed counters.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AttributedItem {
    pub kind: ItemKind,
    /// The probe's or the region's site.
    pub site: u32,
    pub name: String,
    /// Spans that received the figures: calls (tasks, runs) that were not nested in another
    /// of the same item on the same thread.
    pub spans: u64,
    /// In the order of [`CountersAnalysis::collected`].
    pub counters: Vec<ItemCounter>,
    /// For the tasks of a region whose per-job detail was sampled: the workers' user-code
    /// share of the region's worker time, by which its task group's figures were taken from
    /// the region's (see `sampled_tasks`). Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_region_uc_share: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ItemCounter {
    pub counter: String,
    pub value: f64,
    /// The part of the deltas of the item's slices that went to others, summed.
    pub error: f64,
    pub share: ShareKind,
}

/// What went through the sweep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SpanCounts {
    /// Probe calls and tasks.
    pub work: u64,
    /// Region runs.
    pub regions: u64,
    /// Spans written to the temporary file because they did not fit in memory.
    pub spilled: u64,
    /// Spans whose start (end) was missing and taken from another span.
    pub inferred_starts: u64,
    pub inferred_ends: u64,
    /// Spans with a missing start beyond the number kept to infer it.
    pub left_out: u64,
}

/// A counter's increase over time.
#[derive(Clone, Debug, PartialEq)]
pub struct CounterTrack {
    pub name: String,
    /// (start since the timeline origin in ns, increase per ms from there to the next point).
    pub points: Vec<(u64, f64)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct GroupKey {
    kind: ItemKind,
    site: u32,
}

/// A span on the trace's tick time line, as stored and spilled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SpanRecord {
    start: u64,
    /// [`UNKNOWN`] when the trace has no end for it.
    end: u64,
    /// The thread (probe calls and tasks) or the region (region runs) that competes.
    competitor: u32,
    group: u32,
}

const UNKNOWN: u64 = u64::MAX;
const RECORD_BYTES: usize = 24;

impl SpanRecord {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.start.to_le_bytes());
        out.extend_from_slice(&self.end.to_le_bytes());
        out.extend_from_slice(&self.competitor.to_le_bytes());
        out.extend_from_slice(&self.group.to_le_bytes());
    }

    fn decode(b: &[u8]) -> Option<SpanRecord> {
        let u64_at = |i: usize| Some(u64::from_le_bytes(b.get(i..i + 8)?.try_into().ok()?));
        let u32_at = |i: usize| Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?));
        Some(SpanRecord {
            start: u64_at(0)?,
            end: u64_at(8)?,
            competitor: u32_at(16)?,
            group: u32_at(20)?,
        })
    }
}

/// Spans of one competition set: in memory up to a run's length, then spilled in sorted runs.
struct SpanStore {
    run_len: usize,
    space: Arc<dyn SpillSpace>,
    memory: Vec<SpanRecord>,
    store: Option<Box<dyn SpillStore>>,
    /// (offset, spans) of every spilled run.
    runs: Vec<(u64, u64)>,
    spilled: u64,
    /// Why spilling stopped working; the spans then stay in memory.
    spill_error: Option<String>,
    total: u64,
}

impl SpanStore {
    fn new(run_len: usize, space: Arc<dyn SpillSpace>) -> Self {
        SpanStore {
            run_len: run_len.max(1),
            space,
            memory: Vec::new(),
            store: None,
            runs: Vec::new(),
            spilled: 0,
            spill_error: None,
            total: 0,
        }
    }

    fn push(&mut self, span: SpanRecord) {
        self.memory.push(span);
        self.total += 1;
        if self.memory.len() >= self.run_len && self.spill_error.is_none() {
            self.spill();
        }
    }

    fn spill(&mut self) {
        if let Err(e) = self.try_spill() {
            self.spill_error = Some(e.to_string());
        }
    }

    fn try_spill(&mut self) -> io::Result<()> {
        let store = match &mut self.store {
            Some(store) => store,
            None => self.store.insert(self.space.new_store()?),
        };
        self.memory.sort_unstable_by_key(|s| s.start);
        let offset = self.spilled * RECORD_BYTES as u64;
        // A batch at a time: a run's bytes at once would double the spans' memory.
        let mut bytes = Vec::with_capacity(READ_BATCH * RECORD_BYTES);
        for batch in self.memory.chunks(READ_BATCH) {
            bytes.clear();
            for s in batch {
                s.encode(&mut bytes);
            }
            store.append(&bytes)?;
        }
        self.runs.push((offset, self.memory.len() as u64));
        self.spilled += self.memory.len() as u64;
        self.memory.clear();
        Ok(())
    }

    /// Sorts what is left in memory; call once, before [`SpanStore::sorted`].
    fn seal(&mut self) {
        self.memory.sort_unstable_by_key(|s| s.start);
    }

    /// Every span sorted by start, `extra` (sorted by start) merged in.
    fn sorted<'a>(&'a self, extra: &'a [SpanRecord]) -> SortedSpans<'a> {
        let mut sources: Vec<Source<'a>> = vec![
            Source::Memory(self.memory.iter()),
            Source::Memory(extra.iter()),
        ];
        if let Some(store) = &self.store {
            for &(offset, count) in &self.runs {
                sources.push(Source::Run(RunReader {
                    store: &**store,
                    offset,
                    remaining: count,
                    batch: Vec::new(),
                    next: 0,
                }));
            }
        }
        let mut heads = BinaryHeap::with_capacity(sources.len());
        let mut failed = None;
        for (i, source) in sources.iter_mut().enumerate() {
            match source.next() {
                Ok(Some(s)) => heads.push(Reverse((s.start, i, Head(s)))),
                Ok(None) => {}
                Err(e) => failed = Some(e.to_string()),
            }
        }
        SortedSpans {
            sources,
            heads,
            failed,
        }
    }
}

/// Orders heap entries by (start, source) only.
#[derive(Clone, Copy, Debug)]
struct Head(SpanRecord);

impl PartialEq for Head {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Head {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

struct RunReader<'a> {
    store: &'a dyn SpillStore,
    offset: u64,
    remaining: u64,
    batch: Vec<SpanRecord>,
    next: usize,
}

impl RunReader<'_> {
    fn next(&mut self) -> io::Result<Option<SpanRecord>> {
        if self.next == self.batch.len() {
            if self.remaining == 0 {
                return Ok(None);
            }
            let n = self.remaining.min(READ_BATCH as u64) as usize;
            let mut bytes = vec![0u8; n * RECORD_BYTES];
            self.store.read_at(&mut bytes, self.offset)?;
            self.offset += bytes.len() as u64;
            self.remaining -= n as u64;
            self.batch.clear();
            self.batch.extend(
                bytes
                    .chunks_exact(RECORD_BYTES)
                    .filter_map(SpanRecord::decode),
            );
            self.next = 0;
        }
        let span = self.batch.get(self.next).copied();
        self.next += 1;
        Ok(span)
    }
}

enum Source<'a> {
    Memory(std::slice::Iter<'a, SpanRecord>),
    Run(RunReader<'a>),
}

impl Source<'_> {
    fn next(&mut self) -> io::Result<Option<SpanRecord>> {
        match self {
            Source::Memory(it) => Ok(it.next().copied()),
            Source::Run(r) => r.next(),
        }
    }
}

/// A k-way merge of the sorted sources by start.
struct SortedSpans<'a> {
    sources: Vec<Source<'a>>,
    heads: BinaryHeap<Reverse<(u64, usize, Head)>>,
    /// A spilled run could not be read back: the spans after the failure are missing.
    failed: Option<String>,
}

impl Iterator for SortedSpans<'_> {
    type Item = SpanRecord;

    fn next(&mut self) -> Option<SpanRecord> {
        let Reverse((_, i, Head(span))) = self.heads.pop()?;
        match self.sources[i].next() {
            Ok(Some(s)) => self.heads.push(Reverse((s.start, i, Head(s)))),
            Ok(None) => {}
            Err(e) => self.failed = Some(e.to_string()),
        }
        Some(span)
    }
}

/// A probe call, task or region run open on a thread.
#[derive(Clone, Copy, Debug)]
struct Open {
    site: u32,
    is_task: bool,
    group: u32,
    start: u64,
}

#[derive(Default)]
struct ThreadFrames {
    /// Probe calls and tasks, innermost last.
    work: Vec<Open>,
    regions: Vec<Open>,
    last_ts: u64,
}

/// Which competition set a span belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Set {
    Work,
    Regions,
}

/// Collects the spans of probe calls, tasks and region runs while the trace is read (only
/// when counters were collected: otherwise it ignores every event).
pub struct SpanCollector {
    enabled: bool,
    groups: GroupMap,
    keys: Vec<GroupKey>,
    threads: IdMap<u32, ThreadFrames>,
    work: SpanStore,
    regions: SpanStore,
    missing_starts: Vec<(Set, SpanRecord)>,
    left_out: u64,
    first_ts: u64,
    last_ts: u64,
}

impl EventConsumer for SpanCollector {
    /// Without counters every event is ignored: the chunk is, at once.
    fn on_events(&mut self, tid: u32, events: &[Event]) {
        if self.enabled {
            for event in events {
                self.on_event(tid, event);
            }
        }
    }

    fn on_event(&mut self, tid: u32, event: &Event) {
        if !self.enabled {
            return;
        }
        let Some(kind) = EventKind::from_u8(event.kind) else {
            return;
        };
        let (item, set) = match kind {
            EventKind::Enter | EventKind::Exit => (ItemKind::Probe, Set::Work),
            EventKind::TaskBegin | EventKind::TaskEnd => (ItemKind::Tasks, Set::Work),
            EventKind::RegionBegin | EventKind::RegionEnd => (ItemKind::Region, Set::Regions),
            // Unrecorded calls have no interval: what they counted stays in their caller.
            EventKind::TaskResume
            | EventKind::BufferStall
            | EventKind::SearchRound
            | EventKind::SleepBegin
            | EventKind::SleepEnd
            | EventKind::Unrecorded
            | EventKind::SliceCheckpoint
            | EventKind::SpeedReference => return,
            // Tasks are attributed within a worker's detail windows: those open at a pause
            // end there; those open at a resume begin there.
            EventKind::Detail => match event.flags {
                DETAIL_PAUSE => return self.end_tasks_at_pause(tid, event.ts),
                DETAIL_FRAME if event.aux & 1 == 1 => (ItemKind::Tasks, Set::Work),
                _ => return,
            },
        };
        let site = event.id;
        let group = self.group(item, site);
        let ts = self.thread_time(tid, event.ts);
        if matches!(
            kind,
            EventKind::Enter | EventKind::TaskBegin | EventKind::RegionBegin | EventKind::Detail
        ) {
            let frames = self.threads.entry(tid).or_default();
            let stack = match set {
                Set::Work => &mut frames.work,
                Set::Regions => &mut frames.regions,
            };
            stack.push(Open {
                site,
                is_task: matches!(kind, EventKind::TaskBegin | EventKind::Detail),
                group,
                start: ts,
            });
        } else {
            self.close_span(tid, set, kind, site, group, ts);
        }
    }
}

impl SpanCollector {
    /// The time of an event on `tid` at `ts`, which widens the collector's span: a timestamp
    /// that goes backwards on a thread is taken as simultaneous.
    fn thread_time(&mut self, tid: u32, ts: u64) -> u64 {
        let frames = self.threads.entry(tid).or_default();
        let ts = ts.max(frames.last_ts);
        frames.last_ts = ts;
        self.first_ts = self.first_ts.min(ts);
        self.last_ts = self.last_ts.max(ts);
        ts
    }

    /// Ends at `ts` the span of `set` open on `tid` that an end event of `kind` for `site`
    /// closes; an end whose begin was not seen is kept apart (up to [`MAX_MISSING_STARTS`]).
    fn close_span(&mut self, tid: u32, set: Set, kind: EventKind, site: u32, group: u32, ts: u64) {
        let frames = self.threads.entry(tid).or_default();
        let (stack, store) = match set {
            Set::Work => (&mut frames.work, &mut self.work),
            Set::Regions => (&mut frames.regions, &mut self.regions),
        };
        let competitor = |o: &Open| match set {
            Set::Work => tid,
            Set::Regions => o.site,
        };
        let closed = match kind {
            EventKind::Exit => stack.iter().rposition(|o| !o.is_task && o.site == site),
            // "The task that began last on this thread ended."
            EventKind::TaskEnd => stack.iter().rposition(|o| o.is_task),
            _ => stack.iter().rposition(|o| o.site == site),
        };
        match closed {
            // Spans opened inside it whose own end was lost end with it.
            Some(i) => {
                for o in stack.drain(i..) {
                    store.push(SpanRecord {
                        start: o.start,
                        end: ts,
                        competitor: competitor(&o),
                        group: o.group,
                    });
                }
            }
            None if self.missing_starts.len() < MAX_MISSING_STARTS => {
                let span = SpanRecord {
                    start: UNKNOWN,
                    end: ts,
                    competitor: match set {
                        Set::Work => tid,
                        Set::Regions => site,
                    },
                    group,
                };
                self.missing_starts.push((set, span));
            }
            None => self.left_out += 1,
        }
    }

    /// Ends the tasks open on `tid` at a detail pause (the probe calls in them stay open:
    /// their exits are written).
    fn end_tasks_at_pause(&mut self, tid: u32, ts: u64) {
        let frames = self.threads.entry(tid).or_default();
        let ts = ts.max(frames.last_ts);
        let (tasks, calls) = std::mem::take(&mut frames.work)
            .into_iter()
            .partition(|o| o.is_task);
        frames.work = calls;
        for o in tasks {
            self.work.push(SpanRecord {
                start: o.start,
                end: ts,
                competitor: tid,
                group: o.group,
            });
        }
    }

    /// `enabled`: whether any counter was collected (spans are only kept for them).
    /// `space`: where spans that do not fit in memory go.
    pub fn new(enabled: bool, space: Arc<dyn SpillSpace>) -> Self {
        Self::with_run_len(enabled, RUN_SPANS, space)
    }

    fn with_run_len(enabled: bool, run_len: usize, space: Arc<dyn SpillSpace>) -> Self {
        SpanCollector {
            enabled,
            groups: GroupMap::default(),
            keys: Vec::new(),
            threads: IdMap::default(),
            work: SpanStore::new(run_len, Arc::clone(&space)),
            regions: SpanStore::new(run_len, space),
            missing_starts: Vec::new(),
            left_out: 0,
            first_ts: u64::MAX,
            last_ts: 0,
        }
    }

    fn group(&mut self, kind: ItemKind, site: u32) -> u32 {
        let key = GroupKey { kind, site };
        let next = self.keys.len() as u32;
        *self.groups.entry(key).or_insert_with(|| {
            self.keys.push(key);
            next
        })
    }
}

/// How busy threads share a slice.
#[derive(Clone, Copy)]
enum Weighting<'a> {
    Equal,
    /// By on-CPU time, from the threads' switched-out intervals on the tick time line.
    OnCpu(&'a OffCpuIndex),
}

#[derive(Clone, Debug, Default)]
struct GroupFigures {
    value: Vec<f64>,
    error: Vec<f64>,
    spans: u64,
    weighted: bool,
    equal: bool,
}

/// A group open on a competitor: the totals when it opened.
#[derive(Default)]
struct OpenGroup {
    group: u32,
    depth: u32,
    received: Vec<f64>,
    deltas: Vec<f64>,
    weighted_slices: u64,
    equal_slices: u64,
}

struct Competitor<'a> {
    /// Spans open on it.
    open: u32,
    /// Running totals of the shares received, per counter.
    received: Vec<f64>,
    weighted_slices: u64,
    equal_slices: u64,
    /// The groups open on it (a thread's stack of probes and tasks: a few).
    groups: Vec<OpenGroup>,
    /// Its switched-out intervals, and the first one that may still overlap a slice: the
    /// slices it is asked about only move forward.
    off_cpu: &'a [OffCpu],
    cursor: usize,
}

impl Competitor<'_> {
    fn on_cpu(&mut self, a: u64, b: u64) -> u64 {
        let off = self.off_cpu;
        while off.get(self.cursor).is_some_and(|i| i.end <= a) {
            self.cursor += 1;
        }
        let switched_out: u64 = off[self.cursor.min(off.len())..]
            .iter()
            .take_while(|i| i.start < b)
            .map(|i| i.end.min(b).saturating_sub(i.start.max(a)))
            .sum();
        b.saturating_sub(a).saturating_sub(switched_out)
    }
}

type GroupMap = IdMap<GroupKey, u32>;

struct Sweep<'a> {
    series: Vec<Interpolator<'a>>,
    /// Times of the counter reads, in ticks: slices are cut there too, so that on-CPU weights
    /// follow who ran when within a long slice (1/n shares do not change).
    reads: &'a [u64],
    next_read: usize,
    to_ns: &'a dyn Fn(u64) -> u64,
    weighting: Weighting<'a>,
    time: Option<u64>,
    last_value: Vec<f64>,
    /// Running totals of the program-wide deltas, per counter.
    deltas: Vec<f64>,
    slice_delta: Vec<f64>,
    index: IdMap<u32, usize>,
    competitors: Vec<Competitor<'a>>,
    /// Indices of the competitors with open spans.
    busy: Vec<usize>,
    weights: Vec<f64>,
    /// Closed groups, kept to reuse their vectors.
    spare: Vec<OpenGroup>,
    figures: Vec<GroupFigures>,
}

impl<'a> Sweep<'a> {
    fn new(
        series: &'a [Vec<CounterPoint>],
        reads: &'a [u64],
        to_ns: &'a dyn Fn(u64) -> u64,
        weighting: Weighting<'a>,
        groups: usize,
    ) -> Self {
        let n = series.len();
        Sweep {
            series: series.iter().map(|s| Interpolator::new(s)).collect(),
            reads,
            next_read: 0,
            to_ns,
            weighting,
            time: None,
            last_value: vec![0.0; n],
            deltas: vec![0.0; n],
            slice_delta: vec![0.0; n],
            index: IdMap::default(),
            competitors: Vec::new(),
            busy: Vec::new(),
            weights: Vec::new(),
            spare: Vec::new(),
            figures: vec![
                GroupFigures {
                    value: vec![0.0; n],
                    error: vec![0.0; n],
                    ..GroupFigures::default()
                };
                groups
            ],
        }
    }

    /// Ends the slice at `t`, cut at the counter reads before it, and shares the deltas among
    /// the busy competitors.
    fn advance(&mut self, t: u64) {
        if self.time.is_some() {
            while let Some(&read) = self.reads.get(self.next_read)
                && read < t
            {
                self.next_read += 1;
                self.advance_slice(read);
            }
        }
        self.advance_slice(t);
    }

    fn advance_slice(&mut self, t: u64) {
        let previous = match self.time {
            Some(p) if t <= p => return,
            Some(p) => p,
            None => {
                let t_ns = (self.to_ns)(t);
                for (v, s) in self.last_value.iter_mut().zip(&mut self.series) {
                    *v = s.at(t_ns);
                }
                self.time = Some(t);
                return;
            }
        };
        self.time = Some(t);
        let t_ns = (self.to_ns)(t);
        let mut any = false;
        for c in 0..self.series.len() {
            let v = self.series[c].at(t_ns);
            // Counters only grow; a decrease is a reset or a wrap, not negative work.
            let d = (v - self.last_value[c]).max(0.0);
            self.last_value[c] = v;
            self.deltas[c] += d;
            self.slice_delta[c] = d;
            any |= d > 0.0;
        }
        if !any || self.busy.is_empty() {
            return;
        }
        let n = self.busy.len();
        self.weights.clear();
        let weighted = match self.weighting {
            // One busy thread gets the whole slice whatever the weights.
            _ if n == 1 => {
                self.weights.push(1.0);
                matches!(self.weighting, Weighting::OnCpu(_))
            }
            Weighting::Equal => false,
            Weighting::OnCpu(_) => {
                let mut total = 0.0;
                for &i in &self.busy {
                    let w = self.competitors[i].on_cpu(previous, t) as f64;
                    total += w;
                    self.weights.push(w);
                }
                if total > 0.0 {
                    self.weights.iter_mut().for_each(|w| *w /= total);
                    true
                } else {
                    // Every busy thread was switched out all slice long: nothing tells.
                    false
                }
            }
        };
        if self.weights.len() != n {
            self.weights.clear();
            self.weights.resize(n, 1.0 / n as f64);
        }
        for (&i, &w) in self.busy.iter().zip(&self.weights) {
            let comp = &mut self.competitors[i];
            for (r, d) in comp.received.iter_mut().zip(&self.slice_delta) {
                *r += d * w;
            }
            if weighted {
                comp.weighted_slices += 1;
            } else {
                comp.equal_slices += 1;
            }
        }
    }

    fn open(&mut self, span: &SpanRecord) {
        let n = self.series.len();
        let i = match self.index.get(&span.competitor) {
            Some(&i) => i,
            None => {
                let off_cpu = match self.weighting {
                    Weighting::OnCpu(index) => index.intervals(span.competitor),
                    Weighting::Equal => &[],
                };
                self.competitors.push(Competitor {
                    open: 0,
                    received: vec![0.0; n],
                    weighted_slices: 0,
                    equal_slices: 0,
                    groups: Vec::new(),
                    off_cpu,
                    cursor: 0,
                });
                self.index
                    .insert(span.competitor, self.competitors.len() - 1);
                self.competitors.len() - 1
            }
        };
        let comp = &mut self.competitors[i];
        if comp.open == 0 {
            self.busy.push(i);
        }
        comp.open += 1;
        if let Some(open) = comp.groups.iter_mut().find(|g| g.group == span.group) {
            open.depth += 1;
            return;
        }
        let mut open = self.spare.pop().unwrap_or_default();
        open.group = span.group;
        open.depth = 1;
        open.received.clone_from(&comp.received);
        open.deltas.clone_from(&self.deltas);
        open.weighted_slices = comp.weighted_slices;
        open.equal_slices = comp.equal_slices;
        comp.groups.push(open);
    }

    fn close(&mut self, competitor: u32, group: u32) {
        let Some(&i) = self.index.get(&competitor) else {
            return;
        };
        let comp = &mut self.competitors[i];
        if let Some(at) = comp.groups.iter().position(|g| g.group == group) {
            let open = &mut comp.groups[at];
            open.depth -= 1;
            if open.depth == 0 {
                let open = comp.groups.swap_remove(at);
                if let Some(fig) = self.figures.get_mut(group as usize) {
                    for c in 0..self.series.len() {
                        let got = comp.received[c] - open.received[c];
                        fig.value[c] += got;
                        fig.error[c] += (self.deltas[c] - open.deltas[c] - got).max(0.0);
                    }
                    fig.spans += 1;
                    fig.weighted |= comp.weighted_slices > open.weighted_slices;
                    fig.equal |= comp.equal_slices > open.equal_slices;
                }
                self.spare.push(open);
            }
        }
        comp.open = comp.open.saturating_sub(1);
        if comp.open == 0
            && let Some(b) = self.busy.iter().position(|&b| b == i)
        {
            self.busy.swap_remove(b);
        }
    }
}

/// What the sweep of one competition set found besides the figures.
#[derive(Default)]
struct SweepStats {
    inferred_ends: u64,
}

/// Sweeps `spans` (sorted by start) in time order: ends before starts at the same time, so
/// spans that touch do not share a slice.
fn sweep(
    spans: impl Iterator<Item = SpanRecord>,
    sweep: &mut Sweep<'_>,
    end_of_run: u64,
) -> SweepStats {
    let mut stats = SweepStats::default();
    let mut spans = spans.peekable();
    let mut ends: BinaryHeap<Reverse<(u64, u32, u32)>> = BinaryHeap::new();
    let mut open_ended: Vec<(u32, u32)> = Vec::new();
    let mut now = 0;
    loop {
        let next_start = spans.peek().map(|s| s.start);
        let next_end = ends.peek().map(|Reverse((e, _, _))| *e);
        let t = match (next_start, next_end) {
            (None, None) => break,
            (Some(s), Some(e)) => s.min(e),
            (Some(s), None) => s,
            (None, Some(e)) => e,
        };
        now = t;
        sweep.advance(t);
        let mut ended = false;
        while let Some(&Reverse((e, competitor, group))) = ends.peek()
            && e == t
        {
            ends.pop();
            sweep.close(competitor, group);
            ended = true;
        }
        // A missing end is the nearest end of another span.
        if ended {
            for (competitor, group) in open_ended.drain(..) {
                sweep.close(competitor, group);
                stats.inferred_ends += 1;
            }
        }
        while let Some(span) = spans.next_if(|s| s.start == t) {
            sweep.open(&span);
            if span.end == UNKNOWN {
                open_ended.push((span.competitor, span.group));
            } else {
                ends.push(Reverse((
                    span.end.max(span.start),
                    span.competitor,
                    span.group,
                )));
            }
        }
    }
    if !open_ended.is_empty() {
        sweep.advance(end_of_run.max(now));
        for (competitor, group) in open_ended {
            sweep.close(competitor, group);
            stats.inferred_ends += 1;
        }
    }
    stats
}

/// Gives every span with a missing start the latest start of another span at or before its
/// end (the start of the run without one), sorted by start.
fn infer_starts(
    store: &SpanStore,
    mut missing: Vec<SpanRecord>,
    run_start: u64,
) -> (Vec<SpanRecord>, Option<String>) {
    if missing.is_empty() {
        return (missing, None);
    }
    missing.sort_unstable_by_key(|s| s.end);
    let mut starts = store.sorted(&[]);
    let mut pending = None;
    let mut latest = None;
    for m in &mut missing {
        loop {
            let next = pending.take().or_else(|| starts.next());
            match next {
                Some(s) if s.start <= m.end => latest = Some(s.start),
                Some(s) => {
                    pending = Some(s);
                    break;
                }
                None => break,
            }
        }
        m.start = latest.unwrap_or(run_start).min(m.end);
    }
    missing.sort_unstable_by_key(|s| s.start);
    (missing, starts.failed)
}

/// The counters that could not be measured, one line per reason (the hardware counters of a
/// machine without a PMU share theirs), and those the kernel multiplexed.
fn counter_notes(records: &CounterRecords, notes: &mut Vec<Note>) {
    let mut by_reason: Vec<(&str, Vec<&str>)> = Vec::new();
    for u in &records.unavailable {
        match by_reason.iter_mut().find(|(r, _)| *r == u.reason) {
            Some((_, names)) => names.push(&u.name),
            None => by_reason.push((&u.reason, vec![&u.name])),
        }
    }
    for (reason, names) in by_reason {
        notes.push(Note::Counters(CounterNote::NotMeasured {
            names: names.into_iter().map(str::to_owned).collect(),
            reason: reason.to_owned(),
        }));
    }
    for c in records.counters.iter().filter(|c| c.scaling.scaled) {
        notes.push(Note::Counters(CounterNote::Multiplexed {
            name: c.name.clone(),
            running_ns: c.scaling.time_running_ns,
            enabled_ns: c.scaling.time_enabled_ns,
        }));
    }
}

/// What the attribution needs from the rest of the analysis.
pub struct AttributionContext<'a> {
    pub counters: &'a CounterRecords,
    pub sites: &'a HashMap<u32, SiteRecord>,
    /// Trace ticks to `CLOCK_MONOTONIC` ns, and back.
    pub to_ns: &'a dyn Fn(u64) -> u64,
    pub to_ticks: &'a dyn Fn(u64) -> u64,
    /// The threads' switched-out intervals on the tick time line, when context-switch
    /// records exist: shares are then weighted by on-CPU time.
    pub off_cpu: Option<&'a OffCpuIndex>,
    /// The end of the run, in ticks: spans still open then end there at the latest.
    pub end_of_run: u64,
    /// `CLOCK_MONOTONIC` ns of the timeline's time 0.
    pub origin_ns: u64,
}

impl SpanCollector {
    /// Attributes the counters to the spans collected, and says in `notes` what the figures
    /// could not cover. `None` when no counter was asked for.
    pub fn finish(
        mut self,
        cx: &AttributionContext<'_>,
        notes: &mut Vec<Note>,
    ) -> Option<CountersAnalysis> {
        let records = cx.counters;
        if records.counters.is_empty() && records.unavailable.is_empty() {
            return None;
        }
        counter_notes(records, notes);
        self.close_open_spans();
        let series: Vec<Vec<CounterPoint>> = records.counters.iter().map(process_series).collect();
        let (figures, spans, work_share) = self.attribute_spans(cx, &series, notes);
        let items = self.items(&figures, records, cx.sites);
        Some(CountersAnalysis {
            collected: records
                .counters
                .iter()
                .map(|c| CollectedCounter {
                    name: c.name.clone(),
                    source: c.source,
                    total: c.total(),
                    scaling: c.scaling,
                })
                .collect(),
            unavailable: records.unavailable.clone(),
            work_share,
            region_share: ShareKind::Equal,
            items,
            read_interval_ns: records.read_interval_ns,
            read_cost: records.read_cost,
            spans,
            tracks: series
                .iter()
                .zip(&records.counters)
                .map(|(points, c)| CounterTrack {
                    name: c.name.clone(),
                    points: track(points, cx.origin_ns),
                })
                .collect(),
        })
    }

    /// Spans still open at the end of the trace join the stores with an unknown end, which the
    /// sweep infers.
    fn close_open_spans(&mut self) {
        let mut threads: Vec<(u32, ThreadFrames)> = self.threads.drain().collect();
        threads.sort_by_key(|(tid, _)| *tid);
        for (tid, frames) in threads {
            for o in frames.work {
                self.work.push(SpanRecord {
                    start: o.start,
                    end: UNKNOWN,
                    competitor: tid,
                    group: o.group,
                });
            }
            for o in frames.regions {
                self.regions.push(SpanRecord {
                    start: o.start,
                    end: UNKNOWN,
                    competitor: o.site,
                    group: o.group,
                });
            }
        }
        self.work.seal();
        self.regions.seal();
    }

    /// Sweeps the work spans (weighted by on-CPU time where switch records exist) and the
    /// region runs over the counters' reads: each group's figures, the span counts, how work
    /// was shared. What went wrong is said in `notes`.
    fn attribute_spans(
        &self,
        cx: &AttributionContext<'_>,
        series: &[Vec<CounterPoint>],
        notes: &mut Vec<Note>,
    ) -> (Vec<GroupFigures>, SpanCounts, ShareKind) {
        let reads = read_times(series, cx.counters.read_interval_ns, cx.to_ticks);
        let run_start = if self.first_ts <= self.last_ts {
            self.first_ts
        } else {
            0
        };
        let end_of_run = cx.end_of_run.max(self.last_ts);
        let mut spans = SpanCounts {
            work: self.work.total,
            regions: self.regions.total,
            spilled: self.work.spilled + self.regions.spilled,
            left_out: self.left_out,
            ..SpanCounts::default()
        };
        let mut failures: Vec<String> = Vec::new();
        let mut figures: Vec<GroupFigures> = vec![GroupFigures::default(); self.keys.len()];
        let (work_weighting, work_share) = match cx.off_cpu {
            Some(index) => (Weighting::OnCpu(index), ShareKind::OnCpuWeighted),
            None => (Weighting::Equal, ShareKind::Equal),
        };
        for (set, weighting) in [
            (Set::Work, work_weighting),
            (Set::Regions, Weighting::Equal),
        ] {
            let missing: Vec<SpanRecord> = self
                .missing_starts
                .iter()
                .filter(|(s, _)| *s == set)
                .map(|(_, span)| *span)
                .collect();
            spans.inferred_starts += missing.len() as u64;
            let store = match set {
                Set::Work => &self.work,
                Set::Regions => &self.regions,
            };
            let (inferred, failed) = infer_starts(store, missing, run_start);
            failures.extend(failed);
            let mut state = Sweep::new(series, &reads, cx.to_ns, weighting, self.keys.len());
            let mut merged = store.sorted(&inferred);
            let stats = sweep(&mut merged, &mut state, end_of_run);
            failures.extend(merged.failed);
            spans.inferred_ends += stats.inferred_ends;
            for (fig, got) in figures.iter_mut().zip(state.figures) {
                if got.spans > 0 {
                    *fig = got;
                }
            }
        }
        self.span_notes(&spans, failures, notes);
        (figures, spans, work_share)
    }

    /// What the spans' storage and the missing starts left out of the figures.
    fn span_notes(&self, spans: &SpanCounts, failures: Vec<String>, notes: &mut Vec<Note>) {
        for e in [&self.work.spill_error, &self.regions.spill_error]
            .into_iter()
            .flatten()
        {
            notes.push(Note::Counters(CounterNote::SpillFailed {
                error: e.clone(),
            }));
        }
        for e in failures {
            notes.push(Note::Counters(CounterNote::ReadBackFailed { error: e }));
        }
        if spans.left_out > 0 {
            notes.push(Note::Counters(CounterNote::SpansWithoutStart {
                spans: spans.left_out,
            }));
        }
    }

    fn items(
        &self,
        figures: &[GroupFigures],
        records: &CounterRecords,
        sites: &HashMap<u32, SiteRecord>,
    ) -> Vec<AttributedItem> {
        let site_name = |site: u32| {
            sites
                .get(&site)
                .map_or_else(|| format!("site #{site}"), super::call_site::display_name)
        };
        let mut items: Vec<AttributedItem> = self
            .keys
            .iter()
            .zip(figures)
            .filter(|(_, f)| f.spans > 0)
            .map(|(key, f)| AttributedItem {
                kind: key.kind,
                site: key.site,
                name: match key.kind {
                    ItemKind::Tasks => format!("tasks of {}", site_name(key.site)),
                    _ => site_name(key.site),
                },
                spans: f.spans,
                from_region_uc_share: None,
                counters: records
                    .counters
                    .iter()
                    .enumerate()
                    .map(|(c, counter)| ItemCounter {
                        counter: counter.name.clone(),
                        value: f.value[c],
                        error: f.error[c],
                        share: match (f.weighted, f.equal) {
                            (true, true) => ShareKind::Mixed,
                            (true, false) => ShareKind::OnCpuWeighted,
                            (false, _) => ShareKind::Equal,
                        },
                    })
                    .collect(),
            })
            .collect();
        items.sort_by(|a, b| {
            a.kind
                .cmp(&b.kind)
                .then_with(|| a.name.cmp(&b.name))
                .then(a.site.cmp(&b.site))
        });
        items
    }
}

/// The times of the counter reads on the tick time line, sorted, at least half a read
/// interval apart (the counters derived from switch records have a point at every switch).
fn read_times(
    series: &[Vec<CounterPoint>],
    read_interval_ns: u64,
    to_ticks: &dyn Fn(u64) -> u64,
) -> Vec<u64> {
    let mut kept: Vec<u64> = Vec::new();
    let mut keep = |t: u64| {
        if kept
            .last()
            .is_none_or(|&last| t >= last.saturating_add(read_interval_ns / 2).max(last + 1))
        {
            kept.push(t);
        }
    };
    if series.iter().all(|s| s.is_sorted_by_key(|p| p.time_ns)) {
        // Merged as they come: a series derived from switch records has a point at every
        // switch, a long run's millions, of which only the few reads apart are kept.
        let mut next = vec![0; series.len()];
        while let Some((i, t)) = (series.iter().zip(&next).enumerate())
            .filter_map(|(i, (points, &n))| points.get(n).map(|p| (i, p.time_ns)))
            .min_by_key(|&(_, t)| t)
        {
            next[i] += 1;
            keep(t);
        }
    } else {
        let mut times: Vec<u64> = series.iter().flatten().map(|p| p.time_ns).collect();
        times.sort_unstable();
        times.into_iter().for_each(&mut keep);
    }
    kept.into_iter().map(to_ticks).collect()
}

/// A counter's increase per ms between consecutive points, at most [`MAX_TRACK_POINTS`]
/// (neighbouring intervals merged), with times since `origin_ns`.
fn track(points: &[CounterPoint], origin_ns: u64) -> Vec<(u64, f64)> {
    let intervals = points.len().saturating_sub(1);
    if intervals == 0 {
        return Vec::new();
    }
    let step = intervals.div_ceil(MAX_TRACK_POINTS);
    let mut out = Vec::with_capacity(intervals / step + 2);
    let mut i = 0;
    while i < intervals {
        let (a, b) = (points[i], points[(i + step).min(intervals)]);
        let ns = b.time_ns.saturating_sub(a.time_ns);
        if ns > 0 {
            let per_ms = (b.value - a.value).max(0.0) / (ns as f64 / 1e6);
            out.push((a.time_ns.saturating_sub(origin_ns), per_ms));
        }
        i += step;
    }
    // The track drops back to 0 after the last read.
    if let Some(last) = points.last() {
        out.push((last.time_ns.saturating_sub(origin_ns), 0.0));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::spill::InMemory;
    use crate::recording::counters::CounterSeries;

    fn ev(ts: u64, kind: EventKind, id: u32) -> Event {
        Event {
            flags: 1,
            ..Event::new(ts, kind, id)
        }
    }

    #[test]
    fn read_times_are_the_reads_half_an_interval_apart_whatever_the_order_of_the_points() {
        let points = |times: &[u64]| -> Vec<CounterPoint> {
            (times.iter())
                .map(|&time_ns| CounterPoint {
                    time_ns,
                    value: 0.0,
                })
                .collect()
        };
        let twice = |ns| 2 * ns;
        // Sorted series are merged as they come; one out of order is sorted with the rest.
        let sorted = [points(&[0, 3, 10, 12]), points(&[1, 6, 11])];
        let unsorted = [points(&[0, 3, 10, 12]), points(&[6, 1, 11])];
        for series in [&sorted, &unsorted] {
            assert_eq!(read_times(series, 4, &twice), [0, 6, 12, 20, 24]);
        }
    }

    /// A counter rising by `per_tick` per tick from 0 at t = 0 to `end`, read every 10 ticks.
    fn linear(per_tick: f64, end: u64) -> CounterRecords {
        let cpu_samples = (0..=end / 10)
            .map(|i| crate::recording::counters::CounterSample {
                time_ns: i * 10,
                cpu: 0,
                value: per_tick * (i * 10) as f64,
            })
            .collect();
        CounterRecords {
            counters: vec![CounterSeries {
                name: "page-faults".into(),
                source: CounterSource::Software,
                cpu_samples,
                scaling: Scaling::default(),
                stored: None,
            }],
            ..CounterRecords::default()
        }
    }

    fn sites(names: &[(u32, &str)]) -> HashMap<u32, SiteRecord> {
        names
            .iter()
            .map(|&(id, name)| {
                (
                    id,
                    SiteRecord {
                        id,
                        kind: parprof_rt::trace::SiteKind::Probe,
                        name: name.into(),
                        file: String::new(),
                        line: 0,
                        caller: String::new(),
                        entry: None,
                    },
                )
            })
            .collect()
    }

    fn identity(t: u64) -> u64 {
        t
    }

    fn attribute(
        collector: SpanCollector,
        records: &CounterRecords,
        off_cpu: Option<&OffCpuIndex>,
        end_of_run: u64,
    ) -> (CountersAnalysis, Vec<Note>) {
        let names = sites(&[(1, "a"), (2, "b"), (3, "c"), (9, "region")]);
        let cx = AttributionContext {
            counters: records,
            sites: &names,
            to_ns: &identity,
            to_ticks: &identity,
            off_cpu,
            end_of_run,
            origin_ns: 0,
        };
        let mut notes = Vec::new();
        let analysis = collector.finish(&cx, &mut notes).expect("counters");
        (analysis, notes)
    }

    fn figure(a: &CountersAnalysis, kind: ItemKind, site: u32) -> (f64, f64, ShareKind, u64) {
        let item = a
            .items
            .iter()
            .find(|i| i.kind == kind && i.site == site)
            .unwrap_or_else(|| panic!("no {kind:?} {site} in {:#?}", a.items));
        let c = &item.counters[0];
        (c.value, c.error, c.share, item.spans)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    /// Busy threads share slices 1/n; nested calls on a thread take the thread's whole share;
    /// a probe nested in itself counts once; a task group sums its tasks.
    #[test]
    fn threads_share_slices_and_nested_spans_take_their_threads_share() {
        let mut c = SpanCollector::new(true, Arc::new(InMemory));
        // Thread 1: probe a 0..100 with probe b nested 20..40 and a recursive call of a 50..60.
        for e in [
            ev(0, EventKind::Enter, 1),
            ev(20, EventKind::Enter, 2),
            ev(40, EventKind::Exit, 2),
            ev(50, EventKind::Enter, 1),
            ev(60, EventKind::Exit, 1),
            ev(100, EventKind::Exit, 1),
        ] {
            c.on_event(1, &e);
        }
        // Thread 2: a task of region 9 from 50 to 150, with probe c inside 60..70.
        for e in [
            ev(50, EventKind::TaskBegin, 9),
            ev(60, EventKind::Enter, 3),
            ev(70, EventKind::Exit, 3),
            ev(150, EventKind::TaskEnd, 9),
        ] {
            c.on_event(2, &e);
        }
        // 1 per tick: 0..50 thread 1 alone (50), 50..100 both (50, half each), 100..150 thread 2.
        let records = linear(1.0, 200);
        let (a, notes) = attribute(c, &records, None, 200);
        assert!(notes.is_empty(), "{notes:?}");
        let (v, e, share, spans) = figure(&a, ItemKind::Probe, 1);
        assert!(close(v, 50.0 + 25.0) && close(e, 25.0), "{v} ± {e}");
        assert_eq!((share, spans), (ShareKind::Equal, 1));
        let (v, e, ..) = figure(&a, ItemKind::Probe, 2);
        assert!(close(v, 20.0) && close(e, 0.0), "{v} ± {e}");
        let (v, e, ..) = figure(&a, ItemKind::Probe, 3);
        assert!(close(v, 5.0) && close(e, 5.0), "{v} ± {e}");
        let (v, e, ..) = figure(&a, ItemKind::Tasks, 9);
        assert!(close(v, 25.0 + 50.0) && close(e, 25.0), "{v} ± {e}");
        assert_eq!(a.work_share, ShareKind::Equal);
        assert_eq!(a.spans.work, 5);
    }

    /// With switch records, busy threads share by on-CPU time: a thread switched out for the
    /// whole slice gets nothing.
    #[test]
    fn on_cpu_weights_follow_the_threads_on_cpu_time() {
        let mut c = SpanCollector::new(true, Arc::new(InMemory));
        c.on_event(1, &ev(0, EventKind::Enter, 1));
        c.on_event(1, &ev(100, EventKind::Exit, 1));
        c.on_event(2, &ev(0, EventKind::Enter, 2));
        c.on_event(2, &ev(100, EventKind::Exit, 2));
        // Thread 2 blocks at 50 and is not switched in again; thread 1 runs all along.
        let off_cpu = OffCpuIndex::from_switches(
            [crate::recording::kernel_records::SwitchRecord {
                time_ns: 50,
                tid: 2,
                cpu: 0,
                kind: crate::recording::kernel_records::SwitchKind::OutVoluntary,
            }],
            &[],
            |t| t,
            100,
        );
        let records = linear(1.0, 100);
        let (a, _) = attribute(c, &records, Some(&off_cpu), 100);
        // One set of active spans from 0 to 100, cut at the reads every 10 ticks: half of
        // each delta to each thread until 50, all of it to thread 1 after.
        let (v1, e1, share, _) = figure(&a, ItemKind::Probe, 1);
        let (v2, e2, ..) = figure(&a, ItemKind::Probe, 2);
        assert!(close(v1, 75.0) && close(e1, 25.0), "{v1} ± {e1}");
        assert!(close(v2, 25.0) && close(e2, 75.0), "{v2} ± {e2}");
        assert_eq!(share, ShareKind::OnCpuWeighted);
        assert_eq!(a.work_share, ShareKind::OnCpuWeighted);
    }

    /// A span open at the end of the trace ends with the next end of another span; one whose
    /// start was lost starts with the latest start of another span.
    #[test]
    fn missing_boundaries_come_from_other_spans() {
        let mut c = SpanCollector::new(true, Arc::new(InMemory));
        // Thread 1: a from 0, never closed (cut trace).
        c.on_event(1, &ev(0, EventKind::Enter, 1));
        // Thread 2: b 10..40; thread 3: c's exit at 80 without its entry; thread 4: b 30..60.
        c.on_event(2, &ev(10, EventKind::Enter, 2));
        c.on_event(2, &ev(40, EventKind::Exit, 2));
        c.on_event(3, &ev(80, EventKind::Exit, 3));
        c.on_event(4, &ev(30, EventKind::Enter, 2));
        c.on_event(4, &ev(60, EventKind::Exit, 2));
        let records = linear(1.0, 100);
        let (a, _) = attribute(c, &records, None, 100);
        // a: 0..40 (the first end after its start, b's at 40); c: 30..80 (latest start ≤ 80).
        // 0..10 a (10); 10..30 a, b (20); 30..40 a, b, b', c (10); 40..60 b', c (20); 60..80 c.
        let (va, ea, ..) = figure(&a, ItemKind::Probe, 1);
        assert!(
            close(va, 10.0 + 10.0 + 2.5) && close(ea, 10.0 + 7.5),
            "{va} ± {ea}"
        );
        let (vc, ec, ..) = figure(&a, ItemKind::Probe, 3);
        assert!(
            close(vc, 2.5 + 10.0 + 20.0) && close(ec, 7.5 + 10.0),
            "{vc} ± {ec}"
        );
        assert_eq!((a.spans.inferred_starts, a.spans.inferred_ends), (1, 1));
        // b: 10 + 2 × 2.5 + 10 over its two calls.
        let (vb, _, _, spans) = figure(&a, ItemKind::Probe, 2);
        assert!(close(vb, 10.0 + 5.0 + 10.0) && spans == 2, "{vb}");
    }

    /// Regions compete with regions only, and runs of a region on two threads count once.
    #[test]
    fn regions_share_with_other_regions_only() {
        let mut c = SpanCollector::new(true, Arc::new(InMemory));
        c.on_event(1, &ev(0, EventKind::RegionBegin, 9));
        c.on_event(1, &ev(10, EventKind::TaskBegin, 9));
        c.on_event(1, &ev(90, EventKind::TaskEnd, 9));
        c.on_event(1, &ev(100, EventKind::RegionEnd, 9));
        c.on_event(2, &ev(50, EventKind::RegionBegin, 9));
        c.on_event(2, &ev(150, EventKind::RegionEnd, 9));
        c.on_event(3, &ev(100, EventKind::RegionBegin, 8));
        c.on_event(3, &ev(200, EventKind::RegionEnd, 8));
        let records = linear(1.0, 200);
        let (a, _) = attribute(c, &records, None, 200);
        // Region 9 alone 0..100 (100), with region 8 100..150 (25 ± 25).
        let (v, e, share, spans) = figure(&a, ItemKind::Region, 9);
        assert!(close(v, 125.0) && close(e, 25.0), "{v} ± {e}");
        assert_eq!((share, spans), (ShareKind::Equal, 1));
        // The task has thread 1 to itself: 80.
        let (v, e, ..) = figure(&a, ItemKind::Tasks, 9);
        assert!(close(v, 80.0) && close(e, 0.0), "{v} ± {e}");
    }

    /// The same figures whether the spans stay in memory or are spilled in many runs.
    #[test]
    fn spilled_runs_give_the_same_figures() {
        let feed = |c: &mut SpanCollector| {
            for i in 0..500u64 {
                let tid = (i % 3) as u32 + 1;
                let start = i * 7 + tid as u64;
                c.on_event(tid, &ev(start, EventKind::Enter, (i % 2) as u32 + 1));
                c.on_event(tid, &ev(start + 5, EventKind::Exit, (i % 2) as u32 + 1));
            }
        };
        let mut in_memory = SpanCollector::new(true, Arc::new(InMemory));
        let mut spilled = SpanCollector::with_run_len(true, 16, Arc::new(InMemory));
        feed(&mut in_memory);
        feed(&mut spilled);
        let records = linear(3.0, 4000);
        let (a, _) = attribute(in_memory, &records, None, 4000);
        let (b, notes) = attribute(spilled, &records, None, 4000);
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(a.spans.spilled, 0);
        assert!(b.spans.spilled >= 480, "{:?}", b.spans);
        for (x, y) in a.items.iter().zip(&b.items) {
            assert_eq!(x.spans, y.spans);
            assert!(close(x.counters[0].value, y.counters[0].value));
            assert!(close(x.counters[0].error, y.counters[0].error));
        }
        // Every unit of the program-wide delta while a thread was busy went to exactly one
        // outermost span.
        let total: f64 = a.items.iter().map(|i| i.counters[0].value).sum();
        assert!(total > 0.0);
    }

    #[test]
    fn nothing_is_collected_without_counters() {
        let mut c = SpanCollector::new(false, Arc::new(InMemory));
        c.on_event(1, &ev(0, EventKind::Enter, 1));
        c.on_event(1, &ev(10, EventKind::Exit, 1));
        assert_eq!(c.work.total, 0);
        let names = sites(&[]);
        let empty = CounterRecords::default();
        let cx = AttributionContext {
            counters: &empty,
            sites: &names,
            to_ns: &identity,
            to_ticks: &identity,
            off_cpu: None,
            end_of_run: 10,
            origin_ns: 0,
        };
        assert!(c.finish(&cx, &mut Vec::new()).is_none());
    }

    #[test]
    fn on_cpu_time_is_read_with_a_cursor_over_the_switched_out_intervals() {
        let off = [
            OffCpu {
                start: 10,
                end: 20,
                preempted: true,
            },
            OffCpu {
                start: 30,
                end: 40,
                preempted: false,
            },
        ];
        let mut c = Competitor {
            open: 0,
            received: Vec::new(),
            weighted_slices: 0,
            equal_slices: 0,
            groups: Vec::new(),
            off_cpu: &off,
            cursor: 0,
        };
        assert_eq!(c.on_cpu(0, 15), 10);
        assert_eq!(c.on_cpu(15, 35), 10);
        assert_eq!(c.on_cpu(35, 50), 10);
        assert_eq!(c.on_cpu(50, 60), 10);
    }

    #[test]
    fn tracks_give_the_increase_per_ms() {
        let points = [
            CounterPoint {
                time_ns: 1_000_000,
                value: 0.0,
            },
            CounterPoint {
                time_ns: 3_000_000,
                value: 50.0,
            },
        ];
        assert_eq!(track(&points, 1_000_000), [(0, 25.0), (2_000_000, 0.0)]);
        assert!(track(&points[..1], 0).is_empty());
    }
}
