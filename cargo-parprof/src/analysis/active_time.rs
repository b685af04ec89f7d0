//! Method 1 of the spec, streamed: the active time of every probe call.
//!
//! `active = elapsed − Σ overhead intervals − Σ switched-out intervals` within `[entry, exit]`,
//! overlaps counted once. Every event occupies the overhead interval `[ts, ts + cost]` (cost
//! from the runtime's calibration table) on its thread's time line. Per thread we keep the end
//! of the union of the overhead intervals seen so far; when the next event arrives the part of
//! that union up to the event is final, lies inside whatever probe call is innermost at that
//! moment, and is credited to that call minus the part of it spent switched out. A call's
//! overhead is handed to its caller when it returns, so every enclosing call counts it once,
//! and the section's own Exit is never counted for the section itself: its interval starts at
//! the Exit, after the call has been closed. Switched-out time of a call is one O(log n)
//! query of the [`OffCpuIndex`] when the call returns.
//!
//! Work per event is O(1) amortised (plus that query per call); memory grows with threads,
//! stack depth, probe sites and distinct call paths, never with the number of events. All
//! sums are in ticks; the caller converts them to nanoseconds once.

use super::distribution::DurationDistribution;
use super::event_consumer::EventConsumer;
use super::id_map::IdMap;
use super::in_run_speed::{SpeedFollower, SpeedTotals};
use super::model::Anomalies;
use super::offcpu::{OffCpu, OffCpuCursor, OffCpuIndex, SwitchedOut};
use super::spans::{LongestSpans, TickSpan, TickSpanKind};
use parprof_rt::trace::{
    BUFFER_WRITER_WOKEN, Calibration, DETAIL_FRAME, DETAIL_RESUME, Event, EventKind,
    REFERENCE_TIMED_PAIRS, REFERENCE_WOKE_WRITER,
};
use std::collections::{BTreeSet, HashMap};

/// What calls add up to, in ticks: the same figures per probe site and per call path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CallTotals {
    pub calls: u64,
    pub elapsed: u64,
    pub active: u64,
    pub self_active: u64,
    pub overhead: u64,
    pub switched_out: SwitchedOut,
}

impl CallTotals {
    pub(crate) fn add(&mut self, other: &CallTotals) {
        self.calls += other.calls;
        self.elapsed += other.elapsed;
        self.active += other.active;
        self.self_active += other.self_active;
        self.overhead += other.overhead;
        self.switched_out.add(other.switched_out);
    }

    /// What `calls` more calls like these add: the times scaled by `calls ÷ self.calls`.
    fn extrapolated(&self, calls: u64) -> CallTotals {
        let factor = calls as f64 / self.calls.max(1) as f64;
        let scale = |ticks: u64| (ticks as f64 * factor).round() as u64;
        CallTotals {
            calls,
            elapsed: scale(self.elapsed),
            active: scale(self.active),
            self_active: scale(self.self_active),
            overhead: scale(self.overhead),
            switched_out: SwitchedOut {
                preempted: scale(self.switched_out.preempted),
                voluntary: scale(self.switched_out.voluntary),
            },
        }
    }
}

/// Totals of one probe site, in ticks.
#[derive(Debug, Default)]
pub(crate) struct ProbeTotals {
    pub totals: CallTotals,
    pub active_per_call: DurationDistribution,
    /// Calls that sampling did not record (a hot site): counted in `totals.calls`, their
    /// times estimated from the recorded calls.
    pub unrecorded_calls: u64,
    /// The recorded calls with no call of the same site open around them.
    recorded_outermost: CallTotals,
    /// The variance of the active time estimated for unrecorded calls, in ticks².
    pub sampling_variance: f64,
}

/// Recorded calls taken as a sample, and the spread of their active times.
#[derive(Clone, Copy, Debug, Default)]
struct SampledCalls {
    totals: CallTotals,
    /// Σ active², in ticks².
    active_squares: f64,
}

impl SampledCalls {
    fn add(&mut self, call: &CallTotals) {
        self.totals.add(call);
        self.active_squares += (call.active as f64).powi(2);
    }

    fn merge(&mut self, other: &SampledCalls) {
        self.totals.add(&other.totals);
        self.active_squares += other.active_squares;
    }

    /// The variance of the active time of `count` calls estimated from these: `count² × s² / n`
    /// (the sample's variance `s²` over its `n` calls); `None` from fewer than two calls.
    fn estimate_variance(&self, count: u64) -> Option<f64> {
        let n = self.totals.calls as f64;
        if self.totals.calls < 2 {
            return None;
        }
        let sum = self.totals.active as f64;
        let variance = ((self.active_squares - sum * sum / n) / (n - 1.0)).max(0.0);
        Some((count as f64).powi(2) * variance / n)
    }
}

/// A frame of the call-path tree. Besides probe calls, a path holds the parallel region its
/// calls ran in and the rayon task of that region that ran them, so that the calls made in
/// tasks — on whichever worker ran them — sit under their region, and calls of a task run
/// inline under the probe whose `join` ran it. Recursion of tasks is folded: a task run
/// inside a task of the same region with no probe call between them is the same frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PathFrame {
    Probe(u32),
    /// A parallel region (its site).
    Region(u32),
    /// A task of the region (its site).
    Task(u32),
}

/// Path frames are stored as one `u32`: probe sites as they are, regions and tasks with one
/// of the two top bits set (sites are numbered from 1 by the runtime, far below them).
const REGION_FRAME: u32 = 1 << 31;
const TASK_FRAME: u32 = 1 << 30;

impl PathFrame {
    fn key(self) -> u32 {
        match self {
            PathFrame::Probe(site) => site & !(REGION_FRAME | TASK_FRAME),
            PathFrame::Region(site) => site | REGION_FRAME,
            PathFrame::Task(site) => (site & !REGION_FRAME) | TASK_FRAME,
        }
    }

    pub(crate) fn of_key(key: u32) -> PathFrame {
        if key & REGION_FRAME != 0 {
            PathFrame::Region(key & !REGION_FRAME)
        } else if key & TASK_FRAME != 0 {
            PathFrame::Task(key & !TASK_FRAME)
        } else {
            PathFrame::Probe(key)
        }
    }
}

/// One node of the call-path tree: a frame reached through its parent's path.
#[derive(Debug)]
pub(crate) struct CallPathNode {
    /// `None` for the root, which stands for "no probe open".
    pub parent: Option<u32>,
    /// The frame's key ([`PathFrame::of_key`]).
    pub site: u32,
    /// A probe call is open on this path (this node's or an ancestor's).
    in_probe: bool,
    /// The child last looked up (key, node): a thread mostly calls the same site again from
    /// where it is, so most lookups are answered without hashing.
    last_child: Option<(u32, u32)>,
    pub totals: CallTotals,
    /// The outermost calls on this path recorded while their site was sampled on their
    /// thread: the sample that unrecorded outermost calls are estimated from. The calls
    /// recorded while it was not are the sparse, long ones (a recursion's first activations,
    /// the first calls of a round after a pause), which would make the estimate too long.
    sampled_outermost: SampledCalls,
}

impl CallPathNode {
    fn new(parent: Option<u32>, site: u32, in_probe: bool) -> Self {
        CallPathNode {
            parent,
            site,
            in_probe,
            last_child: None,
            totals: CallTotals::default(),
            sampled_outermost: SampledCalls::default(),
        }
    }
}

impl std::ops::Deref for ProbeTotals {
    type Target = CallTotals;
    fn deref(&self) -> &CallTotals {
        &self.totals
    }
}

impl std::ops::Deref for CallPathNode {
    type Target = CallTotals;
    fn deref(&self) -> &CallTotals {
        &self.totals
    }
}

/// Every distinct stack of probe sites seen, as a tree.
#[derive(Debug)]
pub(crate) struct CallPaths {
    nodes: Vec<CallPathNode>,
    children: IdMap<(u32, u32), u32>,
}

const ROOT_PATH: u32 = 0;

impl CallPaths {
    fn new() -> Self {
        CallPaths {
            nodes: vec![CallPathNode::new(None, u32::MAX, false)],
            children: IdMap::default(),
        }
    }

    fn child(&mut self, parent: u32, frame: PathFrame) -> u32 {
        let key = frame.key();
        if let Some((last_key, child)) = self.nodes[parent as usize].last_child
            && last_key == key
        {
            return child;
        }
        let nodes = &mut self.nodes;
        let child = *self.children.entry((parent, key)).or_insert_with(|| {
            let in_probe = matches!(frame, PathFrame::Probe(_)) || nodes[parent as usize].in_probe;
            nodes.push(CallPathNode::new(Some(parent), key, in_probe));
            (nodes.len() - 1) as u32
        });
        self.nodes[parent as usize].last_child = Some((key, child));
        child
    }

    /// The innermost probe frame on `path`, itself or an ancestor, with its site: the probe
    /// call that code run on `path` runs in.
    fn innermost_probe(&self, path: u32) -> Option<(u32, u32)> {
        let mut at = path;
        while at != ROOT_PATH {
            let node = &self.nodes[at as usize];
            if let PathFrame::Probe(site) = PathFrame::of_key(node.site) {
                return Some((at, site));
            }
            at = node.parent?;
        }
        None
    }

    /// Each probe site's outermost calls recorded while it was sampled, over all its paths.
    fn sampled_outermost_by_site(&self) -> IdMap<u32, SampledCalls> {
        let mut by_site = IdMap::<u32, SampledCalls>::default();
        for node in &self.nodes {
            if let PathFrame::Probe(site) = PathFrame::of_key(node.site)
                && node.sampled_outermost.totals.calls > 0
            {
                by_site
                    .entry(site)
                    .or_default()
                    .merge(&node.sampled_outermost);
            }
        }
        by_site
    }

    /// The outermost calls' nodes: probe calls with no probe call open around them on their
    /// thread.
    fn roots(&self) -> impl Iterator<Item = &CallPathNode> {
        self.nodes.iter().filter(|n| {
            matches!(PathFrame::of_key(n.site), PathFrame::Probe(_))
                && n.parent.is_some_and(|p| !self.nodes[p as usize].in_probe)
        })
    }

    /// Moves the figures of `from`'s subtree into the same paths under `onto` (created where
    /// missing); `from`'s subtree is left with none.
    fn graft(&mut self, from: u32, onto: u32) {
        let moved = std::mem::take(&mut self.nodes[from as usize].totals);
        self.nodes[onto as usize].totals.add(&moved);
        let children: Vec<(u32, u32)> = self
            .children
            .iter()
            .filter(|((parent, _), _)| *parent == from)
            .map(|((_, key), &child)| (*key, child))
            .collect();
        for (key, child) in children {
            let target = self.child(onto, PathFrame::of_key(key));
            self.graft(child, target);
        }
    }

    /// Every path (not the root), with its sites root first.
    pub(crate) fn paths(&self) -> impl Iterator<Item = (Vec<u32>, &CallPathNode)> {
        self.nodes.iter().enumerate().skip(1).map(|(id, node)| {
            let mut sites = Vec::new();
            let mut at = Some(id as u32);
            while let Some(i) = at
                && i != ROOT_PATH
            {
                let n = &self.nodes[i as usize];
                sites.push(n.site);
                at = n.parent;
            }
            sites.reverse();
            (sites, node)
        })
    }
}

/// A probe call that has not returned yet.
#[derive(Debug)]
struct OpenCall {
    site: u32,
    entry: u64,
    /// Recorded while its site was sampled on the thread (see `CallPathNode::sampled_outermost`).
    sampled: bool,
    path: u32,
    /// Overhead (its on-CPU part) inside this call so far, nested calls' included.
    overhead: u64,
    /// Active time of the calls nested directly in this one.
    nested_active: u64,
}

/// A region or task frame open on a thread.
#[derive(Debug)]
struct OpenContext {
    frame: PathFrame,
    path: u32,
    /// Probe calls open when it began: calls opened later are inside it.
    open_calls: usize,
    /// Tasks folded into this frame (recursion), still running.
    depth: u32,
    /// A region frame begun for a task that started on a thread outside the region (a
    /// worker): it ends with that task.
    for_task: bool,
}

#[derive(Debug)]
struct ThreadState<'a> {
    open: Vec<OpenCall>,
    contexts: Vec<OpenContext>,
    /// Time of the thread's previous event: overhead before it has been credited.
    last_ts: u64,
    /// End of the union of the overhead intervals started so far.
    overhead_until: u64,
    off_cpu: &'a [OffCpu],
    /// First switched-out interval that may still overlap what comes next.
    off_cpu_cursor: usize,
    /// Switched-out time of the calls as they return.
    calls_off_cpu: OffCpuCursor<'a>,
    /// Unrecorded-call counts were written: the time until the next other event is overhead.
    writing_unrecorded: bool,
    /// Calibrated overhead not yet placed on the time line, below one tick, in sub-ticks.
    overhead_carry: u64,
    /// The factor this thread's calibrated costs are scaled by now.
    speed: SpeedFollower,
}

/// Calibrated costs are kept in 1/256 ticks: an untimed call costs about a dozen ticks, and a
/// cost rounded to whole ticks would be off the same way for each of millions of calls.
const SUB_TICKS_PER_TICK: u64 = 256;

impl ThreadState<'_> {
    /// The whole ticks of `sub_ticks` of calibrated overhead and of what earlier costs left
    /// below a tick, keeping the new remainder: over many events the ticks placed on the time
    /// line add up to the calibrated costs.
    fn whole_ticks(&mut self, sub_ticks: u64) -> u64 {
        let total = self.overhead_carry + sub_ticks;
        self.overhead_carry = total % SUB_TICKS_PER_TICK;
        total / SUB_TICKS_PER_TICK
    }

    /// The path new frames go under: the innermost open probe call or context.
    fn innermost_path(&self) -> u32 {
        let call = self.open.last().map(|c| c.path);
        match self.contexts.last() {
            Some(context) if context.open_calls >= self.open.len() => context.path,
            _ => call.unwrap_or(ROOT_PATH),
        }
    }

    /// The innermost context if no probe call was opened inside it since.
    fn innermost_context(&mut self) -> Option<&mut OpenContext> {
        let open_calls = self.open.len();
        self.contexts
            .last_mut()
            .filter(|c| c.open_calls >= open_calls)
    }

    /// Ends `frame` (one level of a folded task); a frame that is not open is ignored (its
    /// begin was lost or cut off).
    fn end_context(&mut self, frame: PathFrame) {
        let Some(at) = self.contexts.iter().rposition(|c| c.frame == frame) else {
            return;
        };
        let context = &mut self.contexts[at];
        context.depth = context.depth.saturating_sub(1);
        if context.depth == 0 {
            self.contexts.truncate(at);
        }
    }

    /// Switched-out time within `[a, b]`; `a` never decreases between calls, so the cursor
    /// makes this O(1) amortised.
    fn switched_out_within(&mut self, a: u64, b: u64) -> u64 {
        while self
            .off_cpu
            .get(self.off_cpu_cursor)
            .is_some_and(|i| i.end <= a)
        {
            self.off_cpu_cursor += 1;
        }
        self.off_cpu[self.off_cpu_cursor..]
            .iter()
            .take_while(|i| i.start < b)
            .map(|i| i.end.min(b).saturating_sub(i.start.max(a)))
            .sum()
    }
}

/// What the active-time analysis found, in ticks.
#[derive(Debug)]
pub(crate) struct ActiveTimeResult {
    pub probes: IdMap<u32, ProbeTotals>,
    /// The calls with no probe call open around them on their thread, summed.
    pub outermost: CallTotals,
    pub call_paths: CallPaths,
    pub spans: LongestSpans,
    pub anomalies: Anomalies,
    /// Event kinds seen that the calibration table has no cost for (counted as free).
    pub uncalibrated: BTreeSet<EventKind>,
    pub buffer_stalls: BufferStallTicks,
    pub speed: SpeedTotals,
}

/// Accumulators shared by all threads.
#[derive(Debug)]
struct Totals<'a> {
    off_cpu: &'a OffCpuIndex,
    /// Overhead cost by `EventKind` value (any `u8`, so indexing cannot fail), in sub-ticks.
    cost: [Option<u64>; 256],
    /// The in-place cost of an untimed call that the start-up calibration measured the way the
    /// run's speed references do, in ticks.
    start_up_reference: Option<f64>,
    speed: SpeedTotals,
    probes: IdMap<u32, ProbeTotals>,
    call_paths: CallPaths,
    spans: LongestSpans,
    anomalies: Anomalies,
    uncalibrated: BTreeSet<EventKind>,
    buffer_stalls: BufferStallTicks,
    /// (region site, path of its frame) → how often the region was entered there.
    region_begins: IdMap<(u32, u32), u64>,
    /// (path of the innermost frame, site) → calls of the site that sampling did not record,
    /// with no call of the same site open around them.
    unrecorded_outermost: IdMap<(u32, u32), u64>,
}

/// Waits of the runtime for room in its buffers, in ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BufferStallTicks {
    pub count: u64,
    pub ticks: u64,
}

/// The streaming consumer: feed it every event, then [`ActiveTime::finish`].
#[derive(Debug)]
pub(crate) struct ActiveTime<'a> {
    threads: IdMap<u32, ThreadState<'a>>,
    totals: Totals<'a>,
}

impl<'a> ActiveTime<'a> {
    pub(crate) fn new(
        off_cpu: &'a OffCpuIndex,
        calibration: &[Calibration],
        max_spans: usize,
    ) -> Self {
        let mut cost = [None; 256];
        let mut start_up_reference = None;
        for row in calibration {
            if row.kind == EventKind::SpeedReference {
                // Not a cost: a reference's own time is measured (see `step`).
                start_up_reference = Some(row.cost_ticks);
                continue;
            }
            cost[row.kind as usize] =
                Some((row.cost_ticks * SUB_TICKS_PER_TICK as f64).round() as u64);
        }
        ActiveTime {
            threads: IdMap::default(),
            totals: Totals {
                off_cpu,
                cost,
                start_up_reference,
                speed: SpeedTotals::default(),
                probes: IdMap::default(),
                call_paths: CallPaths::new(),
                spans: LongestSpans::new(max_spans),
                anomalies: Anomalies::default(),
                uncalibrated: BTreeSet::new(),
                buffer_stalls: BufferStallTicks::default(),
                region_begins: IdMap::default(),
                unrecorded_outermost: IdMap::default(),
            },
        }
    }

    /// Calls still open are counted as anomalies and left out of the figures.
    pub(crate) fn finish(self) -> ActiveTimeResult {
        let mut totals = self.totals;
        totals.extrapolate_unrecorded();
        // Before grafting: a worker's calls are outermost on their thread.
        let mut outermost = CallTotals::default();
        for root in totals.call_paths.roots() {
            outermost.add(root);
        }
        totals.graft_worker_regions();
        totals.anomalies.open_at_end += self
            .threads
            .values()
            .map(|t| t.open.len() as u64)
            .sum::<u64>();
        ActiveTimeResult {
            probes: totals.probes,
            outermost,
            call_paths: totals.call_paths,
            spans: totals.spans,
            anomalies: totals.anomalies,
            uncalibrated: totals.uncalibrated,
            buffer_stalls: totals.buffer_stalls,
            speed: totals.speed,
        }
    }
}

impl EventConsumer for ActiveTime<'_> {
    fn on_event(&mut self, tid: u32, event: &Event) {
        self.on_events(tid, std::slice::from_ref(event));
    }

    fn on_events(&mut self, tid: u32, events: &[Event]) {
        let off_cpu = self.totals.off_cpu;
        let thread = self.threads.entry(tid).or_insert_with(|| ThreadState {
            open: Vec::new(),
            contexts: Vec::new(),
            last_ts: 0,
            overhead_until: 0,
            off_cpu: off_cpu.intervals(tid),
            off_cpu_cursor: 0,
            calls_off_cpu: off_cpu.cursor(tid),
            writing_unrecorded: false,
            overhead_carry: 0,
            speed: SpeedFollower::default(),
        });
        for event in events {
            self.totals.step(tid, thread, event);
        }
    }
}

impl Totals<'_> {
    fn step(&mut self, tid: u32, thread: &mut ThreadState<'_>, event: &Event) {
        let mut ts = event.ts;
        if ts < thread.last_ts {
            self.anomalies.time_went_backwards += 1;
            ts = thread.last_ts;
        }
        let kind = event.kind();
        if thread.writing_unrecorded && kind != EventKind::Unrecorded {
            thread.writing_unrecorded = false;
            thread.overhead_until = thread.overhead_until.max(ts);
        }
        // The overhead union up to this event lies inside the innermost open call.
        let credited_until = thread.overhead_until.min(ts);
        if credited_until > thread.last_ts {
            let start = thread.last_ts;
            let on_cpu =
                (credited_until - start) - thread.switched_out_within(start, credited_until);
            if let Some(innermost) = thread.open.last_mut() {
                innermost.overhead += on_cpu;
            }
        }
        thread.last_ts = ts;

        match kind {
            EventKind::Enter => {
                let parent_path = thread.innermost_path();
                let path = self
                    .call_paths
                    .child(parent_path, PathFrame::Probe(event.id));
                thread.open.push(OpenCall {
                    site: event.id,
                    entry: ts,
                    sampled: !event.entered_unsampled(),
                    path,
                    overhead: 0,
                    nested_active: 0,
                });
            }
            EventKind::Exit => self.close(tid, thread, event.id, ts),
            EventKind::RegionBegin => {
                self.begin_context(thread, PathFrame::Region(event.id), false)
            }
            EventKind::RegionEnd => thread.end_context(PathFrame::Region(event.id)),
            EventKind::TaskBegin => self.begin_task(thread, event.id),
            EventKind::TaskEnd => {
                thread.end_context(PathFrame::Task(event.id));
                if thread
                    .contexts
                    .last()
                    .is_some_and(|c| c.for_task && c.frame == PathFrame::Region(event.id))
                {
                    thread.end_context(PathFrame::Region(event.id));
                }
            }
            EventKind::Unrecorded => self.unrecorded(thread, event),
            EventKind::Detail => self.on_detail(thread, event),
            EventKind::TaskResume
            | EventKind::BufferStall
            | EventKind::SliceCheckpoint
            | EventKind::SearchRound
            | EventKind::SleepBegin
            | EventKind::SleepEnd => {}
            EventKind::SpeedReference => self.on_reference(thread, event, ts),
        }

        let cost = self.overhead_of(thread, event, kind);
        thread.overhead_until = thread.overhead_until.max(ts.saturating_add(cost));
    }

    /// The thread measured a probe's in-place cost from `ts` (see [`super::in_run_speed`]):
    /// followed, unless the thread was switched out meanwhile (the round measured the switch)
    /// or the round woke the writer (it holds the wake, which the program's events measure
    /// apart).
    fn on_reference(&mut self, thread: &mut ThreadState<'_>, event: &Event, ts: u64) {
        let took = u64::from(event.id);
        if thread.switched_out_within(ts, ts.saturating_add(took)) > 0 {
            self.speed.switched += 1;
            return;
        }
        if event.flags & REFERENCE_WOKE_WRITER != 0 {
            self.speed.woke_writer += 1;
            return;
        }
        let per_call = f64::from(event.aux) / 16.0;
        let timed_pairs = event.flags & REFERENCE_TIMED_PAIRS != 0;
        if let Some(reading) =
            thread
                .speed
                .on_reference(per_call, self.start_up_reference, timed_pairs)
        {
            self.speed.on_reference(reading, thread.speed.factor());
        }
    }

    /// The ticks of overhead that `event` starts on its thread's time line.
    fn overhead_of(&mut self, thread: &mut ThreadState<'_>, event: &Event, kind: EventKind) -> u64 {
        match kind {
            // The runtime woke the writer for `id` ticks: removed like overhead, no stall.
            EventKind::BufferStall if event.flags & BUFFER_WRITER_WOKEN != 0 => event.id as u64,
            // The runtime waited `id` ticks for room in its buffer: removed like overhead.
            EventKind::BufferStall => {
                self.buffer_stalls.count += 1;
                self.buffer_stalls.ticks += event.id as u64;
                event.id as u64
            }
            // The thread checked whether to fork a slice, or measured the probes' in-place
            // cost, for `id` ticks: removed like overhead.
            EventKind::SliceCheckpoint | EventKind::SpeedReference => event.id as u64,
            // Credited to the call the unrecorded calls ran in, when they are counted.
            EventKind::Unrecorded => 0,
            _ => match self.cost[kind as usize] {
                Some(sub_ticks) => {
                    thread.whole_ticks(self.speed.scale(sub_ticks, thread.speed.factor()))
                }
                None => {
                    self.uncalibrated.insert(kind);
                    0
                }
            },
        }
    }

    /// `aux` calls of site `id` ran unrecorded (sampling) inside the innermost open call:
    /// counted, their calibrated cost removed from that call. Nested in a call of the same
    /// site, recorded or not, their time is inside that call already (measured, or estimated
    /// with it); otherwise it is estimated at the end from the site's recorded outermost calls.
    fn unrecorded(&mut self, thread: &mut ThreadState<'_>, event: &Event) {
        let (site, count) = (event.id, u64::from(event.aux));
        let probe = self.probes.entry(site).or_default();
        probe.totals.calls += count;
        probe.unrecorded_calls += count;
        let cost = match self.cost[EventKind::Unrecorded as usize] {
            Some(cost) => cost,
            None => {
                self.uncalibrated.insert(EventKind::Unrecorded);
                0
            }
        };
        let ticks = thread.whole_ticks(self.speed.scale(cost * count, thread.speed.factor()));
        if let Some(innermost) = thread.open.last_mut() {
            innermost.overhead += ticks;
        }
        thread.writing_unrecorded = true;
        if !event.unrecorded_nested() && !thread.open.iter().any(|c| c.site == site) {
            *self
                .unrecorded_outermost
                .entry((thread.innermost_path(), site))
                .or_default() += count;
        }
    }

    /// Adds the unrecorded outermost calls, each like the average recorded call on the same
    /// path (a function costs what its caller asks of it; the site's average where the path
    /// has no recorded call), to the site and to their path, and moves their active time out
    /// of the self time of the probe call they ran in (through a rayon task or region frame:
    /// a `join` in the probed function runs its closures inside it).
    fn extrapolate_unrecorded(&mut self) {
        let unrecorded = std::mem::take(&mut self.unrecorded_outermost);
        if unrecorded.is_empty() {
            return;
        }
        let sampled_by_site = self.call_paths.sampled_outermost_by_site();
        for ((parent, site), count) in unrecorded {
            let path = self.call_paths.child(parent, PathFrame::Probe(site));
            let (basis, sample) = self.extrapolation_basis(path, site, sampled_by_site.get(&site));
            let estimate = basis.extrapolated(count);
            if let Some(probe) = self.probes.get_mut(&site) {
                // The calls are counted already.
                probe.totals.add(&CallTotals {
                    calls: 0,
                    ..estimate
                });
                // Not estimated from a sample of two calls or more: as uncertain as it is long.
                probe.sampling_variance += sample
                    .and_then(|s| s.estimate_variance(count))
                    .unwrap_or((estimate.active as f64).powi(2));
            }
            self.call_paths.nodes[path as usize].totals.add(&estimate);
            if let Some((caller_path, caller_site)) = self.call_paths.innermost_probe(parent) {
                let moved = estimate.active;
                let caller_node = &mut self.call_paths.nodes[caller_path as usize].totals;
                caller_node.self_active = caller_node.self_active.saturating_sub(moved);
                if let Some(caller) = self.probes.get_mut(&caller_site) {
                    caller.totals.self_active = caller.totals.self_active.saturating_sub(moved);
                }
            }
        }
    }

    /// The recorded outermost calls that unrecorded ones on `path` are estimated from, and
    /// whether they are a sample: those taken while the site was sampled, on the path, else
    /// anywhere; else (a site sampled too briefly to record one) every recorded call on the
    /// path, else anywhere. None at all (a cut trace): the calls are counted, with no time.
    fn extrapolation_basis(
        &self,
        path: u32,
        site: u32,
        sampled_anywhere: Option<&SampledCalls>,
    ) -> (CallTotals, Option<SampledCalls>) {
        let probe = self.probes.get(&site);
        let sampled = [
            Some(self.call_paths.nodes[path as usize].sampled_outermost),
            sampled_anywhere.copied(),
        ];
        if let Some(sample) = sampled.into_iter().flatten().find(|s| s.totals.calls > 0) {
            return (sample.totals, Some(sample));
        }
        let recorded = [
            Some(self.call_paths.nodes[path as usize].totals),
            probe.map(|p| p.recorded_outermost),
        ];
        let basis = recorded.into_iter().flatten().find(|b| b.calls > 0);
        (basis.unwrap_or_default(), None)
    }

    /// Workers start a region's tasks with no probe call open: their calls were put under the
    /// region at the root. They belong where the region was entered — under the probe calls
    /// open on the thread that entered it — so they are moved there: under the path where the
    /// region was entered most often (the trace does not say which entry spawned a task).
    fn graft_worker_regions(&mut self) {
        let mut best: HashMap<u32, (u64, u32)> = HashMap::new();
        for (&(site, path), &count) in &self.region_begins {
            let entry = best.entry(site).or_insert((count, path));
            if (count, std::cmp::Reverse(path)) > (entry.0, std::cmp::Reverse(entry.1)) {
                *entry = (count, path);
            }
        }
        for (site, (_, onto)) in best {
            let key = PathFrame::Region(site).key();
            if let Some(&from) = self.call_paths.children.get(&(ROOT_PATH, key))
                && from != onto
            {
                self.call_paths.graft(from, onto);
            }
        }
    }

    fn begin_context(&mut self, thread: &mut ThreadState<'_>, frame: PathFrame, for_task: bool) {
        let innermost = thread.innermost_path();
        // A spawned job's run of its region begins inside its own task of that region: the
        // same place in the call paths, not an entry into the region from a caller.
        let own_run = matches!(
            (frame, thread.contexts.last().map(|c| c.frame)),
            (PathFrame::Region(r), Some(PathFrame::Task(t))) if r == t && !for_task
        ) && thread.innermost_context().is_some();
        let path = if own_run {
            innermost
        } else {
            self.call_paths.child(innermost, frame)
        };
        if let (PathFrame::Region(site), false, false) = (frame, for_task, own_run) {
            *self.region_begins.entry((site, path)).or_default() += 1;
        }
        thread.contexts.push(OpenContext {
            frame,
            path,
            open_calls: thread.open.len(),
            depth: 1,
            for_task,
        });
    }

    /// A worker's per-job events resume (see the runtime's `lifecycle_totals`): the tasks open
    /// then are the frame events that follow, so the task frames kept from before the pause
    /// (whose ends were not written) go. Calls made while paused stayed under the frames of
    /// the pause.
    fn on_detail(&mut self, thread: &mut ThreadState<'_>, event: &Event) {
        match event.flags {
            DETAIL_RESUME => thread
                .contexts
                .retain(|c| !c.for_task && !matches!(c.frame, PathFrame::Task(_))),
            DETAIL_FRAME if event.aux & 1 == 1 => self.begin_task(thread, event.id),
            _ => {}
        }
    }

    /// A task of `region` starts: under its region (begun here for a worker that is not in
    /// it yet), folded into the task it runs inside when no probe call lies between them.
    fn begin_task(&mut self, thread: &mut ThreadState<'_>, region: u32) {
        if let Some(task) = thread
            .innermost_context()
            .filter(|c| c.frame == PathFrame::Task(region))
        {
            task.depth += 1;
            return;
        }
        let in_region = thread
            .contexts
            .iter()
            .any(|c| matches!(c.frame, PathFrame::Region(r) | PathFrame::Task(r) if r == region));
        if !in_region {
            self.begin_context(thread, PathFrame::Region(region), true);
        }
        self.begin_context(thread, PathFrame::Task(region), false);
    }

    fn close(&mut self, tid: u32, thread: &mut ThreadState<'_>, site: u32, exit: u64) {
        let Some(position) = thread.open.iter().rposition(|c| c.site == site) else {
            self.anomalies.exit_without_entry += 1;
            return;
        };
        // Calls opened after the one this Exit closes lost their own Exit. Their time is
        // unknown, but what was measured inside them still lies inside their caller.
        while thread.open.len() > position + 1 {
            if let Some(unclosed) = thread.open.pop() {
                self.anomalies.entry_without_exit += 1;
                if let Some(caller) = thread.open.last_mut() {
                    caller.overhead += unclosed.overhead;
                    caller.nested_active += unclosed.nested_active;
                }
            }
        }
        let Some(call) = thread.open.pop() else {
            return;
        };

        let elapsed = exit - call.entry;
        let switched_out = thread.calls_off_cpu.within(call.entry, exit);
        // The overhead credited excludes switched-out time, and both lie within the call, so
        // this cannot go below zero; saturate all the same rather than trust it blindly.
        let active = elapsed.saturating_sub(call.overhead + switched_out.total());
        let self_active = active.saturating_sub(call.nested_active);

        let figures = CallTotals {
            calls: 1,
            elapsed,
            active,
            self_active,
            overhead: call.overhead,
            switched_out,
        };
        let probe = self.probes.entry(site).or_default();
        // A recursive call lies inside an outer call of the same site, whose inclusive times
        // hold it already: the site counts each outermost activation once (its self time and
        // calls at every level).
        let recursive = thread.open.iter().any(|c| c.site == site);
        probe.totals.add(&if recursive {
            CallTotals {
                calls: 1,
                self_active,
                ..CallTotals::default()
            }
        } else {
            figures
        });
        if !recursive {
            probe.recorded_outermost.add(&figures);
            if call.sampled {
                self.call_paths.nodes[call.path as usize]
                    .sampled_outermost
                    .add(&figures);
            }
        }
        probe.active_per_call.record(active);
        self.call_paths.nodes[call.path as usize]
            .totals
            .add(&figures);

        if let Some(caller) = thread.open.last_mut() {
            caller.overhead += call.overhead;
            caller.nested_active += active;
        }
        self.spans.offer(TickSpan {
            tid,
            start: call.entry,
            end: exit,
            kind: TickSpanKind::Probe {
                site,
                active_ticks: active,
            },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::kernel_records::{SwitchKind, SwitchRecord};

    const F: u32 = 1;
    const G: u32 = 2;
    const H: u32 = 3;

    /// Thread 1's switched-out intervals from its switches, kernel ns taken as ticks.
    fn off_cpu(switches: &[(u64, SwitchKind)]) -> OffCpuIndex {
        let records: Vec<SwitchRecord> = switches
            .iter()
            .map(|&(time_ns, kind)| SwitchRecord {
                time_ns,
                tid: 1,
                cpu: 0,
                kind,
            })
            .collect();
        OffCpuIndex::from_switches(&records, &[], |t| t, 2000)
    }

    fn calibration(enter: f64, exit: f64) -> Vec<Calibration> {
        vec![
            Calibration {
                kind: EventKind::Enter,
                cost_ticks: enter,
                spread: 0.0,
                rounds: 21,
            },
            Calibration {
                kind: EventKind::Exit,
                cost_ticks: exit,
                spread: 0.0,
                rounds: 21,
            },
        ]
    }

    /// [`calibration`] with the start-up reference of the in-run ones: 8 ticks a call.
    fn calibration_with_reference(enter: f64, exit: f64) -> Vec<Calibration> {
        let mut cal = calibration(enter, exit);
        cal.push(Calibration {
            kind: EventKind::SpeedReference,
            cost_ticks: 8.0,
            spread: 0.0,
            rounds: 21,
        });
        cal
    }

    /// Entries and exits free, an untimed call `untimed` ticks.
    fn calibration_with_untimed(untimed: f64) -> Vec<Calibration> {
        let mut cal = calibration(0.0, 0.0);
        cal.push(Calibration {
            kind: EventKind::Unrecorded,
            cost_ticks: untimed,
            spread: 0.0,
            rounds: 21,
        });
        cal
    }

    fn run(
        off_cpu: &OffCpuIndex,
        calibration: &[Calibration],
        events: &[Event],
    ) -> ActiveTimeResult {
        let mut analysis = ActiveTime::new(off_cpu, calibration, 100);
        // Split the events into two chunks, as a trace would.
        let (a, b) = events.split_at(events.len() / 2);
        analysis.on_events(1, a);
        analysis.on_events(1, b);
        analysis.finish()
    }

    /// [`run`] for a thread that never left its CPU.
    fn run_on_cpu(calibration: &[Calibration], events: &[Event]) -> ActiveTimeResult {
        run(&OffCpuIndex::default(), calibration, events)
    }

    #[test]
    fn worked_example_of_the_spec_is_266() {
        let off_cpu = off_cpu(&[
            (1000, SwitchKind::OutPreempted),
            (1190, SwitchKind::In),
            (1225, SwitchKind::OutVoluntary),
            (1411, SwitchKind::In),
        ]);
        let result = run(
            &off_cpu,
            &calibration(3.0, 2.0),
            &[
                Event::new(900, EventKind::Enter, F),
                Event::new(1200, EventKind::Enter, G),
                Event::new(1500, EventKind::Exit, G),
                Event::new(1550, EventKind::Exit, F),
            ],
        );
        let f = &result.probes[&F];
        assert_eq!((f.calls, f.elapsed, f.active), (1, 650, 266));
        assert_eq!(f.overhead, 8);
        assert_eq!(
            f.switched_out,
            SwitchedOut {
                preempted: 190,
                voluntary: 186
            }
        );
        let g = &result.probes[&G];
        assert_eq!((g.elapsed, g.active, g.overhead), (300, 300 - 3 - 186, 3));
        assert_eq!(f.self_active, 266 - g.active);
        assert_eq!(result.anomalies, Anomalies::default());
    }

    #[test]
    fn nested_calls_give_self_time_and_call_paths() {
        // F(0..1000) calls G(100..300) and G(400..700); G calls H(500..600).
        let result = run_on_cpu(
            &calibration(0.0, 0.0),
            &[
                Event::new(0, EventKind::Enter, F),
                Event::new(100, EventKind::Enter, G),
                Event::new(300, EventKind::Exit, G),
                Event::new(400, EventKind::Enter, G),
                Event::new(500, EventKind::Enter, H),
                Event::new(600, EventKind::Exit, H),
                Event::new(700, EventKind::Exit, G),
                Event::new(1000, EventKind::Exit, F),
            ],
        );
        assert_eq!(result.probes[&F].self_active, 1000 - 200 - 300);
        assert_eq!(
            (
                result.probes[&G].calls,
                result.probes[&G].active,
                result.probes[&G].self_active
            ),
            (2, 500, 400)
        );
        assert_eq!(result.probes[&H].self_active, 100);
        let paths: Vec<(Vec<u32>, u64, u64)> = result
            .call_paths
            .paths()
            .map(|(sites, n)| (sites, n.calls, n.self_active))
            .collect();
        assert_eq!(
            paths,
            [
                (vec![F], 1, 500),
                (vec![F, G], 2, 400),
                (vec![F, G, H], 1, 100)
            ]
        );
    }

    #[test]
    fn calls_in_tasks_sit_under_their_region_and_task_on_every_thread() {
        const R: u32 = 10;
        let off_cpu = OffCpuIndex::default();
        let mut analysis = ActiveTime::new(&off_cpu, &calibration(0.0, 0.0), 100);
        // Thread 1 enters region R, calls F, whose join runs a task inline that calls G.
        analysis.on_events(
            1,
            &[
                Event::new(0, EventKind::RegionBegin, R),
                Event::new(10, EventKind::Enter, F),
                Event::new(20, EventKind::TaskBegin, R),
                Event::new(30, EventKind::Enter, G),
                Event::new(40, EventKind::Exit, G),
                Event::new(50, EventKind::TaskEnd, R),
                Event::new(60, EventKind::Exit, F),
                Event::new(70, EventKind::RegionEnd, R),
            ],
        );
        // Thread 2, a worker, steals a task of R whose recursive join runs another task of R
        // inside it (folded into the same frame), which calls G; then it leaves the region.
        analysis.on_events(
            2,
            &[
                Event::new(15, EventKind::TaskBegin, R),
                Event::new(16, EventKind::TaskBegin, R),
                Event::new(20, EventKind::Enter, G),
                Event::new(45, EventKind::Exit, G),
                Event::new(46, EventKind::TaskEnd, R),
                Event::new(47, EventKind::TaskEnd, R),
                Event::new(50, EventKind::Enter, H),
                Event::new(55, EventKind::Exit, H),
            ],
        );
        let result = analysis.finish();
        let name = |key: u32| match PathFrame::of_key(key) {
            PathFrame::Probe(site) => format!("p{site}"),
            PathFrame::Region(site) => format!("r{site}"),
            PathFrame::Task(site) => format!("t{site}"),
        };
        let mut paths: Vec<(String, u64)> = result
            .call_paths
            .paths()
            .filter(|(_, n)| n.calls > 0)
            .map(|(keys, n)| {
                let names: Vec<String> = keys.into_iter().map(name).collect();
                (names.join(";"), n.self_active)
            })
            .collect();
        paths.sort();
        assert_eq!(
            paths,
            [
                ("p3".to_owned(), 5),
                ("r10;p1".to_owned(), 40),
                ("r10;p1;t10;p2".to_owned(), 10),
                ("r10;t10;p2".to_owned(), 25),
            ]
        );
        // Outermost calls: F on thread 1, G and H on thread 2; not G inside F.
        assert_eq!(result.outermost.calls, 3);
        assert_eq!(result.outermost.active, 50 + 25 + 5);
    }

    #[test]
    fn a_workers_calls_are_moved_under_the_call_that_entered_their_region() {
        const R: u32 = 10;
        let off_cpu = OffCpuIndex::default();
        let mut analysis = ActiveTime::new(&off_cpu, &calibration(0.0, 0.0), 100);
        // The worker's events come first, as they may in a trace.
        analysis.on_events(
            2,
            &[
                Event::new(15, EventKind::TaskBegin, R),
                Event::new(20, EventKind::Enter, G),
                Event::new(45, EventKind::Exit, G),
                Event::new(47, EventKind::TaskEnd, R),
            ],
        );
        analysis.on_events(
            1,
            &[
                Event::new(10, EventKind::Enter, F),
                Event::new(12, EventKind::RegionBegin, R),
                Event::new(70, EventKind::RegionEnd, R),
                Event::new(80, EventKind::Exit, F),
            ],
        );
        let result = analysis.finish();
        let paths: Vec<(Vec<PathFrame>, u64)> = result
            .call_paths
            .paths()
            .filter(|(_, n)| n.calls > 0)
            .map(|(keys, n)| (keys.into_iter().map(PathFrame::of_key).collect(), n.calls))
            .collect();
        assert_eq!(
            paths,
            [
                (vec![PathFrame::Probe(F)], 1),
                (
                    vec![
                        PathFrame::Probe(F),
                        PathFrame::Region(R),
                        PathFrame::Task(R),
                        PathFrame::Probe(G)
                    ],
                    1
                ),
            ]
        );
        // Still outermost on its own thread.
        assert_eq!(result.outermost.calls, 2);
    }

    /// Calls of G that sampling left untimed: counted, their cost (5 ticks each) removed from
    /// the call they ran in, and added like the timed calls on the same path.
    #[test]
    fn unrecorded_calls_are_counted_and_extrapolated_from_their_own_path() {
        use EventKind::{Enter, Exit};
        let cal = calibration_with_untimed(5.0);
        let events = [
            // F calls G once for 100 ticks.
            Event::new(0, Enter, F),
            Event::new(10, Enter, G),
            Event::new(110, Exit, G),
            Event::new(120, Exit, F),
            // H calls G for 10 ticks, then 3 untimed calls of G: written at 200, the next
            // event at 204 (writing them took 4 ticks).
            Event::new(150, Enter, H),
            Event::new(160, Enter, G),
            Event::new(170, Exit, G),
            Event::unrecorded(200, G, 3, false),
            Event::new(204, Exit, H),
        ];
        let r = run_on_cpu(&cal, &events);
        let g = &r.probes[&G].totals;
        assert_eq!(r.probes[&G].unrecorded_calls, 3);
        assert_eq!(g.calls, 5);
        // 100 + 10 timed, 3 × 10 estimated from the call under H (not 3 × 55, the site's mean).
        assert_eq!(g.active, 140);
        let h = &r.probes[&H].totals;
        // H: 54 elapsed, less 15 (3 untimed calls) and 4 (writing them): 35 active, of which
        // 10 timed and 30 estimated in G; its self time cannot go below 0.
        assert_eq!((h.elapsed, h.active), (54, 35));
        assert_eq!(h.self_active, 0);
    }

    /// A sampled recursion entered twice under H: its first activation timed (with one nested
    /// call), its second not, with 5 calls nested in it, counted apart. The untimed activation
    /// is estimated once, like the timed one; its nested calls only counted.
    #[test]
    fn calls_nested_in_an_unrecorded_activation_are_counted_not_extrapolated() {
        use EventKind::{Enter, Exit};
        let cal = calibration_with_untimed(5.0);
        let events = [
            Event::new(0, Enter, H),
            Event::new(10, Enter, G),
            Event::new(20, Enter, G),
            Event::new(30, Exit, G),
            Event::new(110, Exit, G),
            // Written at 296: writing them took the 4 ticks to the next event.
            Event::unrecorded(296, G, 1, false),
            Event::unrecorded(296, G, 5, true),
            Event::new(300, Exit, H),
        ];
        let r = run_on_cpu(&cal, &events);
        let g = &r.probes[&G];
        assert_eq!((g.totals.calls, g.unrecorded_calls), (2 + 6, 6));
        // The timed activation (100) and one estimated like it; not 6 more of them.
        assert_eq!(g.totals.active, 200);
        let h = &r.probes[&H].totals;
        // 300 elapsed, less 6 × 5 for the untimed calls and 4 for writing them.
        assert_eq!((h.elapsed, h.active, h.self_active), (300, 266, 66));
    }

    /// A site's first call, recorded before it was sampled, is long (a recursion's first
    /// activation, the first call after a pause); the unrecorded calls are estimated from the
    /// call recorded while it was sampled alone.
    #[test]
    fn unrecorded_calls_are_estimated_from_calls_recorded_while_sampled() {
        use EventKind::{Enter, Exit};
        let cal = calibration_with_untimed(0.0);
        let unsampled = |ts| Event {
            flags: parprof_rt::trace::ENTER_NOT_SAMPLED,
            ..Event::new(ts, Enter, G)
        };
        let events = [
            Event::new(0, Enter, H),
            unsampled(0),
            Event::new(1000, Exit, G),
            Event::new(1000, Enter, G),
            Event::new(1010, Exit, G),
            Event::unrecorded(1010, G, 3, false),
            Event::new(1010, Exit, H),
        ];
        let r = run_on_cpu(&cal, &events);
        // 1000 + 10 recorded, and 3 × 10: not 3 × 505, the mean of both.
        assert_eq!(r.probes[&G].totals.active, 1000 + 10 + 3 * 10);
    }

    /// The estimate's variance: `count² × s² / n` from a sample of two calls or more, its
    /// square (as uncertain as it is long) from one.
    #[test]
    fn the_estimate_of_unrecorded_calls_carries_the_samples_variance() {
        use EventKind::{Enter, Exit};
        let events = [
            Event::new(0, Enter, H),
            Event::new(0, Enter, G),
            Event::new(10, Exit, G),
            Event::new(10, Enter, G),
            Event::new(40, Exit, G),
            Event::unrecorded(40, G, 4, false),
            Event::new(40, Enter, F),
            Event::new(50, Exit, F),
            Event::unrecorded(50, F, 3, false),
            Event::new(50, Exit, H),
        ];
        let r = run_on_cpu(&calibration_with_untimed(0.0), &events);
        // G: 10 and 30 ticks, s² = 200; 4 calls estimated at 80 ticks, variance 16 × 200 / 2.
        assert_eq!(r.probes[&G].totals.active, 40 + 80);
        assert_eq!(r.probes[&G].sampling_variance, 1600.0);
        // F: one call of 10 ticks; 3 estimated at 30, uncertain by as much.
        assert_eq!(r.probes[&F].sampling_variance, 900.0);
    }

    /// Untimed calls of G in a rayon task that H's `join` runs inline: their estimated time
    /// leaves H's self time, through the task and region frames.
    #[test]
    fn unrecorded_calls_in_a_task_leave_the_self_time_of_the_probe_around_it() {
        use EventKind::{Enter, Exit, RegionBegin, RegionEnd, TaskBegin, TaskEnd};
        const R: u32 = 10;
        let cal = calibration_with_untimed(0.0);
        let events = [
            Event::new(0, Enter, H),
            Event::new(0, RegionBegin, R),
            Event::new(0, TaskBegin, R),
            Event::new(10, Enter, G),
            Event::new(20, Exit, G),
            // Writing them took the 4 ticks to the next event.
            Event::unrecorded(96, G, 3, false),
            Event::new(100, TaskEnd, R),
            Event::new(100, RegionEnd, R),
            Event::new(100, Exit, H),
        ];
        let r = run_on_cpu(&cal, &events);
        assert_eq!(r.probes[&G].totals.active, 10 + 3 * 10);
        let h = &r.probes[&H].totals;
        assert_eq!((h.active, h.self_active), (96, 96 - 40));
    }

    /// A thread's speed references scale the calibrated costs that follow them, and their own
    /// time is removed like overhead.
    #[test]
    fn speed_references_scale_the_costs_that_follow_them() {
        use EventKind::{Enter, Exit, Unrecorded};
        // Calibration's reference read 8 ticks a call.
        let mut cal = calibration_with_reference(0.0, 0.0);
        cal.push(Calibration {
            kind: Unrecorded,
            cost_ticks: 10.0,
            spread: 0.0,
            rounds: 21,
        });
        // A reference that read 4 ticks a call (in 1/16 ticks), taking 30 ticks.
        let half_speed = |ts| Event::speed_reference(ts, 30, 4 * 16, 0);
        let events = [
            Event::new(0, Enter, F),
            // 10 calls at the calibrated cost: 100 ticks; writing them took 10.
            Event::unrecorded(190, G, 10, false),
            half_speed(200),
            half_speed(300),
            // The factor is 0.5 from here on: the mean of the two references so far.
            Event::unrecorded(990, G, 10, false),
            Event::new(1000, Exit, F),
        ];
        let r = run_on_cpu(&cal, &events);
        let f = &r.probes[&F].totals;
        // 1000 elapsed, less 100 + 10 and 50 + 10 for the untimed calls and their writing,
        // and 2 × 30 for the references.
        assert_eq!((f.elapsed, f.overhead, f.active), (1000, 230, 770));
        let speed = r.speed.summary().expect("references");
        assert_eq!(speed.references, 2);
        assert!((speed.overhead_scale - 150.0 / 200.0).abs() < 1e-12);
        assert_eq!((speed.lowest_factor, speed.highest_factor), (0.5, 0.5));
    }

    /// A reference during which its thread was switched out measured the switch: it is left
    /// out, and its time (on the CPU) is removed all the same.
    #[test]
    fn a_reference_taken_while_switched_out_is_not_followed() {
        use EventKind::{Enter, Exit};
        let cal = calibration_with_reference(10.0, 10.0);
        // Switched out 410..450, inside the second reference (400..430 on the CPU: 70 ticks).
        let off_cpu = off_cpu(&[(410, SwitchKind::OutPreempted), (450, SwitchKind::In)]);
        let events = [
            Event::new(0, Enter, F),
            // Read 16 ticks a call: the factor is 2 from here on.
            Event::speed_reference(100, 30, 16 * 16, 0),
            // Read 1000 ticks a call, for the switch: left out.
            Event::speed_reference(400, 70, 1000 * 16, 0),
            Event::new(600, Enter, G),
            Event::new(700, Exit, G),
            Event::new(1000, Exit, F),
        ];
        let r = run(&off_cpu, &cal, &events);
        // F: its entry 10, the references 30 + 30 on the CPU, G's pair 2 × 20.
        let f = &r.probes[&F].totals;
        assert_eq!((f.overhead, f.switched_out.total()), (110, 40));
        let speed = r.speed.summary().expect("references");
        assert_eq!((speed.references, speed.switched), (1, 1));
        assert_eq!((speed.lowest_factor, speed.highest_factor), (2.0, 2.0));
    }

    /// A reference whose own events woke the writer holds the wake: it is left out, and its
    /// time is removed all the same.
    #[test]
    fn a_reference_that_woke_the_writer_is_not_followed() {
        use EventKind::{Enter, Exit};
        let cal = calibration_with_reference(10.0, 10.0);
        let events = [
            Event::new(0, Enter, F),
            // Timed pairs read 16 ticks a call: the factor is 2 from here on.
            Event::speed_reference(100, 30, 16 * 16, REFERENCE_TIMED_PAIRS),
            // Read 40 ticks a call with a wake in it: left out.
            Event::speed_reference(
                400,
                30,
                40 * 16,
                REFERENCE_TIMED_PAIRS | REFERENCE_WOKE_WRITER,
            ),
            Event::new(600, Enter, G),
            Event::new(700, Exit, G),
            Event::new(1000, Exit, F),
        ];
        let r = run(&off_cpu(&[]), &cal, &events);
        // F: its entry 10, the references 30 + 30, G's pair 2 × 20.
        assert_eq!(r.probes[&F].totals.overhead, 110);
        let speed = r.speed.summary().expect("references");
        assert_eq!((speed.references, speed.woke_writer), (1, 1));
        assert_eq!((speed.lowest_factor, speed.highest_factor), (2.0, 2.0));
    }

    #[test]
    fn a_recursive_site_counts_each_outermost_activation_once() {
        // F(0..1000) calls itself at 100..600, which calls itself at 200..300; then G(700..800).
        let result = run_on_cpu(
            &calibration(0.0, 0.0),
            &[
                Event::new(0, EventKind::Enter, F),
                Event::new(100, EventKind::Enter, F),
                Event::new(200, EventKind::Enter, F),
                Event::new(300, EventKind::Exit, F),
                Event::new(600, EventKind::Exit, F),
                Event::new(700, EventKind::Enter, G),
                Event::new(800, EventKind::Exit, G),
                Event::new(1000, EventKind::Exit, F),
            ],
        );
        let f = &result.probes[&F];
        // Inclusive: the outermost call only, never more than the time it lasted.
        assert_eq!((f.calls, f.elapsed, f.active), (3, 1000, 1000));
        // Self: each level's own time, 100 + 400 + 400, plus nothing counted twice.
        assert_eq!(f.self_active, 1000 - 100);
        assert_eq!(result.probes[&G].self_active, 100);
    }

    #[test]
    fn overhead_overlapping_a_switched_out_interval_is_counted_once() {
        // F's entry costs 10 ticks (0..10); the thread is switched out 5..50.
        let off_cpu = off_cpu(&[(5, SwitchKind::OutPreempted), (50, SwitchKind::In)]);
        let result = run(
            &off_cpu,
            &calibration(10.0, 10.0),
            &[
                Event::new(0, EventKind::Enter, F),
                Event::new(1000, EventKind::Exit, F),
            ],
        );
        let f = &result.probes[&F];
        assert_eq!((f.overhead, f.switched_out.total(), f.active), (5, 45, 950));
    }

    #[test]
    fn overlapping_overhead_intervals_are_counted_once_and_clipped_to_the_call() {
        // Enter costs 30: F's entry interval 0..30 overlaps G's 10..40; G returns at 20, so only
        // 10..20 of the union lies in G. F's exit at 100 does not count for F.
        let result = run_on_cpu(
            &calibration(30.0, 5.0),
            &[
                Event::new(0, EventKind::Enter, F),
                Event::new(10, EventKind::Enter, G),
                Event::new(20, EventKind::Exit, G),
                Event::new(100, EventKind::Exit, F),
            ],
        );
        assert_eq!(result.probes[&G].overhead, 10);
        // Union of 0..30, 10..40 and G's exit 20..25 is 0..40.
        assert_eq!(result.probes[&F].overhead, 40);
        assert_eq!(result.probes[&F].active, 60);
    }

    #[test]
    fn other_event_kinds_cost_their_calibrated_overhead() {
        let mut calibration = calibration(0.0, 0.0);
        calibration.push(Calibration {
            kind: EventKind::TaskBegin,
            cost_ticks: 7.0,
            spread: 0.0,
            rounds: 21,
        });
        let result = run_on_cpu(
            &calibration,
            &[
                Event::new(0, EventKind::Enter, F),
                Event::new(50, EventKind::TaskBegin, 9),
                Event::new(60, EventKind::TaskEnd, 9),
                Event::new(100, EventKind::Exit, F),
            ],
        );
        assert_eq!(result.probes[&F].overhead, 7);
        assert_eq!(result.uncalibrated, BTreeSet::from([EventKind::TaskEnd]));
    }

    #[test]
    fn buffer_stalls_are_removed_for_their_measured_duration() {
        let result = run_on_cpu(
            &calibration(2.0, 2.0),
            &[
                Event::new(0, EventKind::Enter, F),
                Event::new(10, EventKind::Enter, G),
                Event::new(11, EventKind::BufferStall, 40),
                Event::new(100, EventKind::Exit, G),
                Event::new(200, EventKind::Exit, F),
            ],
        );
        // G: its entry 10..12 and the stall 11..51 make 10..51.
        assert_eq!(result.probes[&G].overhead, 41);
        // F: its entry 0..2, then 10..51, then G's exit 100..102.
        assert_eq!(result.probes[&F].overhead, 45);
        assert_eq!(
            result.buffer_stalls,
            BufferStallTicks {
                count: 1,
                ticks: 40
            }
        );
        assert!(result.uncalibrated.is_empty());
    }

    #[test]
    fn a_writer_woken_is_removed_for_its_measured_duration_and_is_no_stall() {
        let result = run_on_cpu(
            &calibration(2.0, 2.0),
            &[
                Event::new(0, EventKind::Enter, F),
                Event::new(10, EventKind::Enter, G),
                Event::writer_woken(11, 30),
                Event::new(100, EventKind::Exit, G),
                Event::new(200, EventKind::Exit, F),
            ],
        );
        // G: its entry 10..12 and the wake 11..41 make 10..41; F: 0..2, 10..41, 100..102.
        assert_eq!(result.probes[&G].overhead, 31);
        assert_eq!(result.probes[&F].overhead, 35);
        assert_eq!(result.buffer_stalls, BufferStallTicks::default());
        assert!(result.uncalibrated.is_empty());
    }

    #[test]
    fn cut_trace_leaves_open_calls_out_as_anomalies() {
        let result = run_on_cpu(
            &calibration(1.0, 1.0),
            &[
                Event::new(0, EventKind::Enter, F),
                Event::new(10, EventKind::Enter, G),
                Event::new(20, EventKind::Exit, G),
                Event::new(30, EventKind::Enter, H),
            ],
        );
        assert_eq!(result.anomalies.open_at_end, 2);
        assert_eq!(result.probes[&G].calls, 1);
        assert!(!result.probes.contains_key(&F) && !result.probes.contains_key(&H));
    }

    #[test]
    fn mismatched_exits_are_counted_not_trusted() {
        let result = run_on_cpu(
            &calibration(0.0, 0.0),
            &[
                Event::new(0, EventKind::Exit, H), // its Enter was lost
                Event::new(10, EventKind::Enter, F),
                Event::new(20, EventKind::Enter, G), // its Exit was lost
                Event::new(30, EventKind::Enter, H),
                Event::new(40, EventKind::Exit, H),
                Event::new(100, EventKind::Exit, F),
                Event::new(90, EventKind::Enter, G), // time goes backwards: taken as 100
                Event::new(150, EventKind::Exit, G),
            ],
        );
        assert_eq!(
            result.anomalies,
            Anomalies {
                exit_without_entry: 1,
                entry_without_exit: 1,
                open_at_end: 0,
                time_went_backwards: 1
            }
        );
        let f = &result.probes[&F];
        // H's active time, measured inside the unclosed G, still is not F's self time.
        assert_eq!((f.calls, f.active, f.self_active), (1, 90, 80));
        assert_eq!((result.probes[&G].calls, result.probes[&G].active), (1, 50));
    }
}
