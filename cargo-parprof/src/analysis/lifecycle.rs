//! The worker-thread lifecycle of parallel regions (method 2 of the spec).
//!
//! Each rayon worker is, at every moment, in one of four states: UC (running a task of a
//! region), LQ (looking in its own deque), GS (searching other deques and the injector) or W
//! (idle). Each state's time is also split into running and switched out while runnable
//! ([`RegionReport::preempted_ns`]). The runtime records when tasks begin and end on each
//! worker (with their origin: inline, local, stolen, injected) and when a fork (`join`,
//! `scope`, a parallel iterator) returns to the code that waited in it (`TaskResume`); the
//! kernel records when a thread is switched out. The states are rebuilt from both:
//!
//! - **UC** from a `TaskBegin` (or a region's begin on a worker, or a `TaskResume`) to the next
//!   `TaskEnd`; a task that begins while the worker is in UC (the first half of a join started
//!   by running code) is a UC→UC bypass.
//! - After a `TaskEnd` the worker is in the scheduler until its next event (a **gap**). A gap
//!   that ends with a `Local` or `Inline` task, or with a resume within 1 µs, is LQ throughout
//!   (LQ→UC). A gap that ends with a `Stolen` or `Injected` task, or with a longer resume (the
//!   fork waited for work stolen from it), or that lasts until the end of the run, is a search:
//!   LQ for as long as the region's median local pop takes, then GS (LQ→GS … GS→UC), except
//!   while the worker is switched out voluntarily, which is W (GS→W at the switch-out, W→GS at
//!   the switch-in). A preemption does not change the state: the worker is still searching.
//! - A worker's time before its first event is a search with no LQ part (it was idle).
//! - With the rayon-core hooks (`cargo parprof` builds them into the program), each failed
//!   search round and each sleep is in the trace: from a search's first failed round on, the
//!   worker is idle, so its time off the CPU — asleep, or yielding to other programs in
//!   rayon's spin rounds — is W, its time on the CPU GS; GS→GS counts the rounds and GS→W the
//!   idle episodes (see [`state::HookedSearch`]). The rest of this list is how it is done without.
//! - GS→GS, the failed search rounds, are counted from switch records where they exist: each
//!   switch-out of a searching worker while runnable is a `yield_now` of rayon's idle loop (or
//!   a preemption) that ended a round, and each sleep follows rayon's 33 failed rounds, so a
//!   search counts max(yields, 33 × sleeps). Without switch records they are estimated as
//!   GS time ÷ 1 µs (one sweep of the deques plus one `sched_yield`); the report says which.
//!
//! A region's time is the union of its instances' windows (begin to end, on the threads that
//! entered it). UC time and gaps short enough to be folded go to the region of the task they
//! belong to and to the regions enclosing it; longer gaps are kept and cut at finish along
//! every region's windows, so that a worker idle across many short runs of a region counts as
//! waiting only while the region runs. The transitions of a search that follows a task count
//! for the task's region up to the worker's first sleep, even when the run ends first: the
//! search is what the region's work left the worker to do.
//!
//! Memory grows with threads, regions and at most [`MAX_STORED_GAPS`] gaps per thread, never
//! with the number of tasks: when a thread's kept gaps reach the limit, the shorter half is
//! folded into per-region sums, which need neither windows nor switch records (their W time
//! is taken as GS). The timeline's worker states come from the longest UC intervals and gaps,
//! a bounded number of them (see [`state_spans`]).

mod program_totals;
mod state;
mod state_spans;

use super::call_site::{self, CallSite, RegionKind};
use super::diagnosis::Diagnosis;
use super::event_consumer::EventConsumer;
use super::id_map::IdMap;
use super::model::{SchedShare, worker_name};
use super::offcpu::{OffCpu, OffCpuIndex};
use parprof_rt::trace::{
    Event, EventKind, LifecycleTotals, NO_WORKER, SiteKind, SiteRecord, TaskOrigin, ThreadRecord,
};
use serde::Serialize;
use state::{Acc, Close, Frame, Gap, GapEnd, RegionAcc, Sum, ThreadState, chain, merge};
use state_spans::{KeptStretch, Longest, Split, Stretch};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

pub use state::{IteratorItems, MAX_STORED_GAPS, StateNs, TaskCounts, Transitions};
pub use state_spans::{LifecycleTimeline, TickRegionRun, TickStateSpan};

/// Failed search rounds rayon's idle loop makes before a worker sleeps: 32 rounds that yield,
/// then one "sleepy" round (rayon-core 1.x, `sleep/mod.rs`, `ROUNDS_UNTIL_SLEEPING`).
const ROUNDS_BEFORE_SLEEP: u64 = 33;
/// A gap closed by a resume is a search when longer than this: popping the other half of a
/// join from one's own deque takes tens of nanoseconds.
const SEARCH_MIN_NS: f64 = 1_000.0;
/// Assumed length of one failed search round, to estimate rounds without switch records.
const ROUND_NS: f64 = 1_000.0;

/// Tasks' own times, in ns: begin to end less the tasks nested in them (a join's halves, work
/// taken while waiting in it), so that a recursion's root is not its longest task. `min` and
/// `median` are of the pieces of work (tasks that ran no nested task: the split tasks of a
/// recursion do little of their own), `max` of every task; 0 when there were no tasks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TaskNs {
    pub min: u64,
    pub median: u64,
    pub max: u64,
}

/// How the GS→GS transitions were obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchRounds {
    /// From context-switch records (yields and sleeps of searching workers).
    Counted,
    /// No switch records: GS time ÷ 1 µs per round; W could not be told from GS either.
    Estimated,
}

/// How idle time (W) was told from search (GS).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitSource {
    /// rayon-core hooks: a searching worker is idle from its first failed round (yielding or
    /// asleep) until it finds work; rounds and sleeps are counted exactly.
    Hooks,
    /// Context-switch records only: a searching worker is idle while switched out voluntarily
    /// (asleep); a yield under load looks like a preemption and counts as search.
    Switches,
}

/// One worker's lifecycle within one region.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkerLifecycle {
    pub tid: u32,
    pub rayon_index: u16,
    pub pool: u32,
    pub name: String,
    pub tasks: TaskCounts,
    pub state_ns: StateNs,
    pub transitions: Transitions,
    /// See [`RegionReport::preempted_ns`].
    pub preempted_ns: StateNs,
    /// See [`RegionReport::blocked_ns`].
    pub blocked_ns: StateNs,
}

/// The lifecycle of one parallel region (all its runs), with its diagnoses.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegionReport {
    pub site: u32,
    pub name: String,
    /// An implicit region: a call site that entered a pool from outside with no named region
    /// current (rayon-core hooks), named after the calling function.
    pub implicit: bool,
    /// Where an implicit region entered its pool (`None` for a named region, or an implicit
    /// one of a trace that did not record it).
    pub call_site: Option<CallSite>,
    /// How the region's work entered the pool (`None` when the trace does not say).
    pub kind: Option<RegionKind>,
    /// Runs of the region (begin/end pairs).
    pub instances: u64,
    /// Wall-clock time during which at least one run was in progress.
    pub elapsed_ns: u64,
    /// Workers of the pool(s) that ran the region's tasks, idle ones included.
    pub workers: usize,
    /// Tasks of the region, on every thread (a task can run outside the pool when rayon does
    /// not split an iterator at all).
    pub tasks: TaskCounts,
    /// Of `tasks`, those that ran while their worker's per-job events were paused (a worker
    /// writes at most 512 every 10 ms): counted in the program, with their state times and
    /// durations, but not drawn in the timeline.
    pub tasks_counted_in_program: u64,
    /// The items of the region's own parallel iterators (`None`: none counted, or rayon was
    /// built without parprof's hooks).
    pub iterator_items: Option<IteratorItems>,
    /// The marks of the program's state clock that its counted state times rest on (0 when
    /// every stretch was timed), and the uncertainty that leaves on a state's share of the
    /// workers' time (the largest, that of a share of one half; one standard deviation).
    pub state_marks: u64,
    pub state_share_uncertainty: f64,
    pub task_ns: TaskNs,
    /// Summed over the workers.
    pub state_ns: StateNs,
    pub transitions: Transitions,
    /// The part of UC in which the workers ran the scheduler's code on the tasks' behalf,
    /// from the CPU samples (see [`super::sched_share`]; filled after the lifecycle).
    pub sched: SchedShare,
    /// The rayon-core hooks' own time taken out of each state (see [`super::hook_time`]),
    /// summed over the workers: the plain program does not spend it.
    pub hook_ns: StateNs,
    /// LQ + GS + sched.
    pub active_overhead_ns: u64,
    /// W while the region runs.
    pub inactive_overhead_ns: u64,
    /// The part of each state's time during which the worker was switched out while runnable
    /// (preempted by another thread, or yielding in rayon's idle loop), summed over the
    /// workers: the rest of `state_ns` is running (or, in W, asleep). Without rayon-core hooks,
    /// idle workers that yield on a busy machine show here under GS rather than in W.
    pub preempted_ns: StateNs,
    /// The part of each state's time during which the worker was switched out because it
    /// blocked (a lock, a channel, I/O, a sleep; in W: asleep waiting for work), summed over
    /// the workers. UC's part is the blocked time in the region's runs beyond W's; LQ and GS
    /// are 0 (rayon's search does not block).
    pub blocked_ns: StateNs,
    /// Of `W`, the time workers were idle while another worker of the region, holding work
    /// (outside its gaps), was switched out while runnable: they had no work because the work
    /// waited for a CPU, not because the region ran out of it (at most each worker's own `W`),
    /// summed over the workers.
    pub idle_while_others_preempted_ns: u64,
    /// CPU time the profiler's trace writer ran while the region ran: on a machine with no
    /// spare CPU it preempts workers, which `oversubscription` does not blame on the program.
    pub profiler_cpu_ns: u64,
    /// How W was told from GS: from the hooks' search rounds and sleeps (`hooks`), or from
    /// the switch records only (`switches`).
    pub wait_source: WaitSource,
    pub gs_gs_source: SearchRounds,
    pub per_worker: Vec<WorkerLifecycle>,
    pub diagnoses: Vec<Diagnosis>,
}

impl RegionReport {
    /// The time the workers had while the region ran: workers × elapsed.
    pub fn worker_ns(&self) -> f64 {
        self.workers as f64 * self.elapsed_ns as f64
    }
}

/// Streams a trace's events and rebuilds the lifecycle of every parallel region.
///
/// Feed it every event ([`Self::on_event`], or through [`EventConsumer`]: each thread's events
/// in time order, threads interleaved in any way), every site record ([`Self::on_site`]) and
/// thread record ([`Self::on_thread`], the last one of a thread wins) — records may come at
/// any time before the end, they are only read by [`Self::finish`] — then call `finish` with
/// the switched-out intervals on the same tick time line.
#[derive(Debug)]
pub struct LifecycleBuilder {
    threads: IdMap<u32, ThreadState>,
    /// The longest UC intervals and gaps of every thread, for the timeline.
    stretches: Longest<KeptStretch>,
    records: HashMap<u32, ThreadRecord>,
    /// Region sites by id.
    sites: HashMap<u32, SiteRecord>,
    regions: IdMap<u32, RegionAcc>,
    /// Region → the region whose code entered it (first seen).
    parents: IdMap<u32, u32>,
    first_ts: u64,
    last_ts: u64,
    /// The trace has search and sleep events of rayon-core hooks.
    hooked: bool,
    /// The runtime's trace-writer threads: the profiler's own CPU use.
    profiler_threads: Vec<u32>,
    /// The program's own counts, by (thread, region): the last snapshot of each.
    program_totals: HashMap<(u32, u32), LifecycleTotals>,
    /// Each worker's gaps, merged, once classified: where it held no work.
    gap_spans: IdMap<u32, Vec<(u64, u64)>>,
    /// The threads' switched-out intervals, when known while the events stream: taken out of
    /// the tasks' own times for the longest task.
    switched_out: Option<Arc<OffCpuIndex>>,
}

impl EventConsumer for LifecycleBuilder {
    fn on_event(&mut self, tid: u32, event: &Event) {
        LifecycleBuilder::on_event(self, tid, event);
    }
}

/// The lifecycle of every region, and its picture for the timeline.
#[derive(Clone, Debug, PartialEq)]
pub struct Lifecycle {
    /// Longest first.
    pub regions: Vec<RegionReport>,
    /// Each region's runs in ticks, sorted and disjoint, by site.
    pub region_runs: HashMap<u32, Vec<(u64, u64)>>,
    pub timeline: LifecycleTimeline,
    /// The rayon workers' threads.
    pub workers: Vec<u32>,
    /// The union of every region's runs, on the trace's tick time line: sorted, disjoint.
    pub runs: Vec<(u64, u64)>,
}

impl LifecycleBuilder {
    /// A builder whose timeline keeps at most `max_timeline_spans` worker-state spans (the
    /// longest) and as many region runs.
    pub fn new(max_timeline_spans: usize) -> Self {
        LifecycleBuilder {
            threads: IdMap::default(),
            stretches: Longest::new(max_timeline_spans),
            records: HashMap::new(),
            sites: HashMap::new(),
            regions: IdMap::default(),
            parents: IdMap::default(),
            first_ts: u64::MAX,
            last_ts: 0,
            hooked: false,
            profiler_threads: Vec::new(),
            program_totals: HashMap::new(),
            gap_spans: IdMap::default(),
            switched_out: None,
        }
    }

    /// The switched-out intervals on the trace's time line, for the tasks' own times.
    pub fn with_switched_out(mut self, offcpu: Arc<OffCpuIndex>) -> Self {
        self.switched_out = Some(offcpu);
        self
    }

    /// A site record: region sites give their region its name.
    pub fn on_site(&mut self, site: &SiteRecord) {
        if site.kind.is_region() {
            self.sites.insert(site.id, site.clone());
        }
    }

    /// A thread record: which threads are rayon workers, of which pool.
    pub fn on_thread(&mut self, record: &ThreadRecord) {
        self.records.insert(record.tid, record.clone());
    }

    /// A snapshot of one thread's counts in one region: cumulative, the last one wins.
    pub fn on_totals(&mut self, totals: LifecycleTotals) {
        self.hooked = true;
        self.program_totals
            .insert((totals.tid, totals.region), totals);
    }

    /// A detail event: see [`program_totals::on_detail`].
    fn on_detail(&mut self, tid: u32, event: &Event) {
        self.first_ts = self.first_ts.min(event.ts);
        self.last_ts = self.last_ts.max(event.ts);
        program_totals::on_detail(self.threads.entry(tid).or_default(), event);
    }

    /// A region's begin or end on a paused thread: see [`program_totals::on_paused_region`].
    fn on_paused_region(&mut self, tid: u32, event: &Event, kind: EventKind) {
        self.first_ts = self.first_ts.min(event.ts);
        self.last_ts = self.last_ts.max(event.ts);
        let t = self.threads.entry(tid).or_default();
        program_totals::on_paused_region(t, &mut self.regions, event, kind);
    }

    /// Small enough to be inlined in the loop over a chunk: most events are probe entries and
    /// exits, which leave the lifecycle as it is.
    #[inline]
    pub fn on_event(&mut self, tid: u32, event: &Event) {
        let Some(kind) = EventKind::from_u8(event.kind) else {
            return;
        };
        let close = match kind {
            // Probes and the recorder's own waits happen inside whatever state the thread is in.
            EventKind::Enter
            | EventKind::Exit
            | EventKind::BufferStall
            | EventKind::Unrecorded
            | EventKind::SliceCheckpoint
            | EventKind::SpeedReference => {
                return;
            }
            EventKind::SearchRound | EventKind::SleepBegin | EventKind::SleepEnd => {
                self.on_search(tid, kind, event.ts);
                return;
            }
            EventKind::Detail => {
                self.on_detail(tid, event);
                return;
            }
            EventKind::TaskBegin => match TaskOrigin::from_u8(event.flags) {
                Some(origin) => Close::Begin(origin),
                None => return,
            },
            EventKind::TaskEnd => Close::TaskEnd,
            EventKind::TaskResume => Close::Resume,
            EventKind::RegionBegin | EventKind::RegionEnd => Close::Region,
        };
        if self.threads.get(&tid).is_some_and(|t| t.paused) {
            self.on_paused_region(tid, event, kind);
            return;
        }
        let ts = self.close_interval(tid, event, kind, close);
        self.open_interval(tid, ts, kind, event.id, close);
    }

    /// Ends the thread's current interval (user code or a gap) at `event`, which `close`
    /// classifies; returns the event's time on the thread's time line.
    fn close_interval(&mut self, tid: u32, event: &Event, kind: EventKind, close: Close) -> u64 {
        let region = event.id;
        self.first_ts = self.first_ts.min(event.ts);
        self.last_ts = self.last_ts.max(event.ts);
        let parents = &mut self.parents;
        let t = self.threads.entry(tid).or_default();
        // The time before a thread's first event is a gap added at finish, once the run's
        // start is known.
        let first = t.first.is_none();
        if first {
            t.first = Some((event.ts, close.gap_end(), std::mem::take(&mut t.search)));
            t.since = event.ts;
        }
        // A timestamp that goes backwards on a thread is taken as simultaneous.
        let ts = event.ts.max(t.since);
        // The stretch that a resume's first event ends was counted by the program.
        let first = first || std::mem::take(&mut t.fresh);
        if first {
            t.since = ts;
        }
        if kind == EventKind::RegionBegin
            && let Some(outer) = t.frames.last().map(|f| f.region)
            && !chain(parents, outer).any(|r| r == region)
        {
            parents.entry(region).or_insert(outer);
        }
        let parents = &*parents;
        if !first
            && t.in_uc
            && let Some(running) = t.frames.last().map(|f| f.region)
            && ts > t.since
        {
            self.stretches.offer(KeptStretch {
                tid,
                start: t.since,
                end: ts,
                stretch: Stretch::UserCode { region: running },
            });
        }
        let gap = if first {
            None
        } else {
            t.close(ts, close, region, parents)
        };
        if let Some(gap) = gap {
            if gap.end > gap.start {
                self.stretches.offer(KeptStretch {
                    tid,
                    start: gap.start,
                    end: gap.end,
                    stretch: Stretch::Gap(gap),
                });
            }
            if gap.kind == GapEnd::Local {
                self.regions
                    .entry(region)
                    .or_default()
                    .local_gaps
                    .record(gap.end - gap.start);
            }
            t.keep(gap, parents);
        }
        ts
    }

    /// Starts what follows the event that `close` classifies: a task, a region, user code or
    /// a gap.
    fn open_interval(&mut self, tid: u32, ts: u64, kind: EventKind, region: u32, close: Close) {
        let parents = &self.parents;
        let t = self.threads.entry(tid).or_default();
        match close {
            Close::Begin(origin) => {
                t.push(Frame {
                    region,
                    begin: ts,
                    task: true,
                    partial: false,
                    nested: 0,
                    nested_switched_out: 0,
                });
                let acc = t.acc(region);
                acc.tasks.count(origin);
                acc.ran_region_code = true;
                self.regions.entry(region).or_default().tasks.count(origin);
                t.in_uc = true;
            }
            Close::TaskEnd => {
                if let Some(frame) = t.pop(true, region) {
                    let took = ts - frame.begin;
                    let switched_out = self
                        .switched_out
                        .as_ref()
                        .map_or(0, |o| o.within(tid, frame.begin, ts).total());
                    if let Some(outer) = t.frames.iter_mut().rev().find(|f| f.task) {
                        outer.nested += took;
                        outer.nested_switched_out += switched_out;
                    }
                    if !frame.partial {
                        // The distribution is of the pieces of work (tasks that ran no nested
                        // task); the longest is over every task's own time, less its own
                        // switched-out time: a task preempted for milliseconds is not long.
                        let racc = self.regions.entry(frame.region).or_default();
                        let own = took.saturating_sub(frame.nested);
                        let own_switched_out =
                            switched_out.saturating_sub(frame.nested_switched_out);
                        racc.longest_own =
                            racc.longest_own.max(own.saturating_sub(own_switched_out));
                        if frame.nested == 0 {
                            racc.durations.record(own);
                        }
                    }
                    t.for_chain(parents, frame.region, |a| a.transitions.uc_lq += 1);
                }
                t.in_uc = false;
                t.gap_after_task = true;
            }
            Close::Resume => t.in_uc = true,
            Close::Region if kind == EventKind::RegionBegin => {
                t.open_regions.push((region, ts));
                t.push(Frame {
                    region,
                    begin: ts,
                    task: false,
                    partial: false,
                    nested: 0,
                    nested_switched_out: 0,
                });
                t.acc(region).ran_region_code = true;
                t.in_uc = true;
            }
            Close::Region => {
                if let Some(at) = t.open_regions.iter().rposition(|(r, _)| *r == region) {
                    let (_, begin) = t.open_regions.remove(at);
                    self.regions
                        .entry(region)
                        .or_default()
                        .windows
                        .push((begin, ts));
                }
                t.pop(false, region);
                // Back in the enclosing task or region's code, or in code we do not see.
                t.in_uc = !t.frames.is_empty();
                t.gap_after_task = false;
            }
        }
    }

    /// The threads of the profiler's runtime in the program (its trace writer), whose CPU time
    /// is the profiler's, not the program's.
    pub fn set_profiler_threads(&mut self, tids: impl IntoIterator<Item = u32>) {
        self.profiler_threads = tids.into_iter().collect();
    }

    /// A search round failed, or a worker fell asleep or woke (rayon-core hooks): noted for
    /// the gap in progress.
    fn on_search(&mut self, tid: u32, kind: EventKind, ts: u64) {
        self.hooked = true;
        self.first_ts = self.first_ts.min(ts);
        self.last_ts = self.last_ts.max(ts);
        let t = self.threads.entry(tid).or_default();
        if t.in_uc || t.paused {
            return;
        }
        let search = &mut t.search;
        match kind {
            EventKind::SearchRound => search.rounds += 1,
            EventKind::SleepBegin => search.sleeps += 1,
            _ => return,
        }
        search.idle_from.get_or_insert(ts);
    }

    /// The lifecycle of every region, longest first, and the spans of
    /// the timeline. `offcpu` holds the switched-out intervals on the trace's tick time line;
    /// `ns_per_tick` converts ticks.
    pub fn finish(mut self, offcpu: &OffCpuIndex, ns_per_tick: f64) -> Lifecycle {
        program_totals::merge_program_totals(
            std::mem::take(&mut self.program_totals),
            &mut self.threads,
            &mut self.regions,
            &self.parents,
            offcpu,
        );
        if self.first_ts > self.last_ts {
            return Lifecycle {
                regions: Vec::new(),
                region_runs: HashMap::new(),
                timeline: LifecycleTimeline::default(),
                workers: Vec::new(),
                runs: Vec::new(),
            };
        }
        self.close_open_runs();
        let cx = self.finishing(offcpu, ns_per_tick);
        for &tid in &cx.workers {
            self.classify_worker(tid, &cx);
        }
        let mut reports: Vec<RegionReport> = self
            .regions
            .iter()
            .map(|(&region, racc)| self.region_report(region, racc, &cx))
            .collect();
        reports.sort_by(|a, b| {
            b.elapsed_ns
                .cmp(&a.elapsed_ns)
                .then_with(|| a.name.cmp(&b.name))
        });
        let split = Split {
            workers: &cx.workers.iter().copied().collect::<HashSet<u32>>(),
            runs: &cx.windows,
            lq_estimate: &cx.lq_est,
            search_min: cx.shape.search_min,
            offcpu,
            capacity: self.stretches.capacity(),
            hooked: self.hooked,
        };
        let runs = merge(cx.windows.values().flatten().copied().collect());
        let timeline = split.timeline(self.stretches);
        Lifecycle {
            regions: reports,
            timeline,
            workers: cx.workers,
            runs,
            region_runs: cx.windows,
        }
    }

    /// Runs still open at the end of the trace last until then.
    fn close_open_runs(&mut self) {
        for t in self.threads.values_mut() {
            for (region, begin) in t.open_regions.drain(..) {
                self.regions
                    .entry(region)
                    .or_default()
                    .windows
                    .push((begin, self.last_ts));
            }
        }
    }

    /// What the steps of [`Self::finish`] share, once the trace has been read.
    fn finishing<'a>(&self, offcpu: &'a OffCpuIndex, ns_per_tick: f64) -> Finishing<'a> {
        let windows = self
            .regions
            .iter()
            .map(|(&r, acc)| (r, merge(acc.windows.clone())))
            .collect();
        let counted = offcpu.threads().next().is_some();
        let ns_per_tick = if ns_per_tick.is_finite() && ns_per_tick > 0.0 {
            ns_per_tick
        } else {
            1.0
        };
        let lq_est = self
            .regions
            .iter()
            .map(|(&r, acc)| (r, acc.local_gaps.median().map_or(0, |(m, _)| m)))
            .collect();
        let shape = Shape {
            search_min: (SEARCH_MIN_NS / ns_per_tick) as u64,
            round_ticks: (ROUND_NS / ns_per_tick).max(1.0),
            counted,
            hooked: self.hooked,
        };
        let mut workers: Vec<u32> = self
            .records
            .values()
            .filter(|r| r.rayon_index != NO_WORKER)
            .map(|r| r.tid)
            .collect();
        workers.sort_unstable_by_key(|tid| {
            let r = &self.records[tid];
            (r.pool, r.rayon_index, r.tid)
        });
        Finishing {
            offcpu,
            ns_per_tick,
            windows,
            lq_est,
            shape,
            workers,
        }
    }

    /// Splits every gap of worker `tid` into states along the regions' runs, and adds the
    /// folded gaps and the preempted part of its UC time.
    fn classify_worker(&mut self, tid: u32, cx: &Finishing<'_>) {
        let gaps = self.worker_gaps(tid);
        self.gap_spans
            .insert(tid, merge(gaps.iter().map(|g| (g.start, g.end)).collect()));
        let t = self.threads.entry(tid).or_default();
        for gap in &gaps {
            let off = cx.offcpu.overlapping(tid, gap.start, gap.end);
            for (&region, wins) in &cx.windows {
                let est = cx.lq_est.get(&region).copied().unwrap_or(0);
                let first = wins.partition_point(|w| w.1 < gap.start);
                for &(w0, w1) in wins[first..].iter().take_while(|w| w.0 <= gap.end) {
                    let acc = t.accs.entry(region).or_default();
                    cx.shape.classify(gap, (w0, w1), est, off, acc);
                }
            }
        }
        let mut paused = std::mem::take(&mut t.paused_stretches);
        if t.paused {
            paused.push((t.paused_since, self.last_ts));
        }
        for (region, acc) in t.accs.iter_mut() {
            let folded = cx
                .shape
                .classify_folded(cx.lq_est.get(region).copied().unwrap_or(0), acc);
            let wins = cx.windows.get(region).map_or(&[][..], Vec::as_slice);
            let preempted_in_runs: u64 = wins
                .iter()
                .map(|&(a, b)| cx.offcpu.within(tid, a, b).preempted)
                .sum();
            let preempted_while_paused: u64 = intersections(wins, &paused)
                .map(|(a, b)| cx.offcpu.within(tid, a, b).preempted)
                .sum();
            share_counted_preemption(acc, &folded, preempted_while_paused);
            acc.preempted.uc = uc_preempted(acc, preempted_in_runs);
            let blocked_in_runs: u64 = cx.windows.get(region).map_or(0, |wins| {
                wins.iter()
                    .map(|&(a, b)| cx.offcpu.within(tid, a, b).voluntary)
                    .sum()
            });
            acc.blocked_uc = uc_blocked(acc, blocked_in_runs);
        }
    }

    /// The gaps kept for worker `tid`, with its leading gap (before its first event) and its
    /// trailing one (after its last task, to the end of the run), which were not offered to
    /// the timeline while streaming: they are, now.
    fn worker_gaps(&mut self, tid: u32) -> Vec<Gap> {
        let (run_start, run_end) = (self.first_ts, self.last_ts);
        let t = self.threads.entry(tid).or_default();
        let mut gaps = std::mem::take(&mut t.stored);
        let streamed = gaps.len();
        match t.first {
            Some((first, kind, search)) => {
                gaps.push(Gap {
                    start: run_start,
                    end: first,
                    after_task: false,
                    kind,
                    region: 0,
                    search,
                });
                // A paused thread's last stretch is the program's to count.
                if !t.in_uc && !t.paused {
                    let after_task = t.gap_after_task;
                    gaps.push(Gap {
                        start: t.since,
                        end: run_end,
                        after_task,
                        kind: GapEnd::Idle,
                        region: 0,
                        search: t.search,
                    });
                }
            }
            None => gaps.push(Gap {
                start: run_start,
                end: run_end,
                after_task: false,
                kind: GapEnd::Idle,
                region: 0,
                search: t.search,
            }),
        }
        for gap in gaps[streamed..].iter().filter(|g| g.end > g.start) {
            self.stretches.offer(KeptStretch {
                tid,
                start: gap.start,
                end: gap.end,
                stretch: Stretch::Gap(*gap),
            });
        }
        gaps
    }

    /// The report of one region, diagnosed.
    fn region_report(&self, region: u32, racc: &RegionAcc, cx: &Finishing<'_>) -> RegionReport {
        let ns = |ticks: u64| cx.ns(ticks);
        let per_worker = self.worker_lifecycles(region, cx);
        let mut state_ns = StateNs::default();
        let mut preempted_ns = StateNs::default();
        let mut blocked_ns = StateNs::default();
        let mut transitions = Transitions::default();
        for w in &per_worker {
            state_ns.add(&w.state_ns);
            preempted_ns.add(&w.preempted_ns);
            blocked_ns.add(&w.blocked_ns);
            transitions.add(&w.transitions);
        }
        let d = &racc.durations;
        let runs = &cx.windows[&region];
        let site = self.sites.get(&region);
        RegionReport {
            site: region,
            name: site.map_or_else(|| format!("region #{region}"), call_site::display_name),
            implicit: site.is_some_and(|s| s.kind == SiteKind::ImplicitRegion),
            call_site: site.and_then(call_site::call_site),
            kind: site.and_then(call_site::region_kind),
            instances: racc.windows.len() as u64,
            elapsed_ns: ns(runs.iter().map(|(a, b)| b - a).sum()),
            workers: per_worker.len(),
            tasks: racc.tasks,
            tasks_counted_in_program: racc.counted_in_program,
            iterator_items: (racc.iterator_items.iterators + racc.iterator_items.nested_iterators
                > 0)
            .then_some(racc.iterator_items),
            state_marks: racc.marks,
            state_share_uncertainty: share_uncertainty(racc, ns, &state_ns),
            task_ns: TaskNs {
                min: ns(d.min().unwrap_or(0)),
                median: ns(d.median().map_or(0, |(m, _)| m)),
                max: ns(racc.longest_own),
            },
            state_ns,
            transitions,
            sched: SchedShare::default(),
            hook_ns: StateNs::default(),
            active_overhead_ns: state_ns.lq + state_ns.gs,
            inactive_overhead_ns: state_ns.w,
            preempted_ns,
            blocked_ns,
            idle_while_others_preempted_ns: idle_while_others_preempted(
                &per_worker,
                runs,
                &self.gap_spans,
                cx,
            ),
            profiler_cpu_ns: ns(self.profiler_cpu_ticks(runs, cx.offcpu)),
            wait_source: if self.hooked {
                WaitSource::Hooks
            } else {
                WaitSource::Switches
            },
            gs_gs_source: if cx.shape.counted {
                SearchRounds::Counted
            } else {
                SearchRounds::Estimated
            },
            per_worker,
            // The analysis diagnoses the regions once their lifecycle is known.
            diagnoses: Vec::new(),
        }
    }

    /// The CPU time of the profiler's own threads during a region's runs.
    fn profiler_cpu_ticks(&self, runs: &[(u64, u64)], offcpu: &OffCpuIndex) -> u64 {
        self.profiler_threads
            .iter()
            .flat_map(|&tid| {
                runs.iter()
                    .map(move |&(a, b)| (b - a).saturating_sub(offcpu.within(tid, a, b).total()))
            })
            .sum()
    }

    /// The workers of the pools that worked for `region` (ran its tasks or its body), in the
    /// order of [`Finishing::workers`], with what each did in it.
    fn worker_lifecycles(&self, region: u32, cx: &Finishing<'_>) -> Vec<WorkerLifecycle> {
        let ns = |ticks: u64| cx.ns(ticks);
        let no_acc = Acc::default();
        let pools: BTreeSet<u32> = cx
            .workers
            .iter()
            .filter(|tid| {
                self.threads
                    .get(tid)
                    .and_then(|t| t.accs.get(&region))
                    .is_some_and(|a| a.ran_region_code)
            })
            .map(|tid| self.records[tid].pool)
            .collect();
        cx.workers
            .iter()
            .filter(|tid| pools.contains(&self.records[tid].pool))
            .map(|tid| {
                let record = &self.records[tid];
                let acc = self
                    .threads
                    .get(tid)
                    .and_then(|t| t.accs.get(&region))
                    .unwrap_or(&no_acc);
                WorkerLifecycle {
                    tid: *tid,
                    rayon_index: record.rayon_index,
                    pool: record.pool,
                    name: if record.name.is_empty() {
                        worker_name(record.rayon_index, record.pool)
                    } else {
                        record.name.clone()
                    },
                    tasks: acc.tasks,
                    state_ns: StateNs {
                        uc: ns(acc.uc),
                        lq: ns(acc.lq),
                        gs: ns(acc.gs),
                        w: ns(acc.w),
                    },
                    transitions: acc.transitions,
                    preempted_ns: StateNs {
                        uc: ns(acc.preempted.uc),
                        lq: ns(acc.preempted.lq),
                        gs: ns(acc.preempted.gs),
                        w: ns(acc.preempted.w),
                    },
                    blocked_ns: StateNs {
                        uc: ns(acc.blocked_uc),
                        lq: 0,
                        gs: 0,
                        w: ns(acc.w.saturating_sub(acc.preempted.w)),
                    },
                }
            })
            .collect()
    }
}

/// What the steps of [`LifecycleBuilder::finish`] share.
struct Finishing<'a> {
    offcpu: &'a OffCpuIndex,
    /// Finite and positive.
    ns_per_tick: f64,
    /// Each region's runs, merged and sorted.
    windows: HashMap<u32, Vec<(u64, u64)>>,
    /// Each region's LQ part of a search that follows a task: its median local pop.
    lq_est: HashMap<u32, u64>,
    shape: Shape,
    /// The rayon workers, by pool, then index.
    workers: Vec<u32>,
}

impl Finishing<'_> {
    fn ns(&self, ticks: u64) -> u64 {
        (ticks as f64 * self.ns_per_tick).round() as u64
    }
}

/// The UC part of a worker's blocked time in a region: what the switch records show blocked
/// inside the region's runs beyond W's time (asleep waiting for work), at most its UC time not
/// preempted.
fn uc_blocked(acc: &Acc, blocked_in_runs: u64) -> u64 {
    blocked_in_runs
        .saturating_sub(acc.w)
        .min(acc.uc.saturating_sub(acc.preempted.uc))
}

/// [`RegionReport::idle_while_others_preempted_ns`]: each worker's gaps inside the region's
/// runs while another worker of the region, outside its own gaps (holding work), was
/// switched out while runnable; at most the worker's own `W`.
fn idle_while_others_preempted(
    workers: &[WorkerLifecycle],
    runs: &[(u64, u64)],
    gap_spans: &IdMap<u32, Vec<(u64, u64)>>,
    cx: &Finishing<'_>,
) -> u64 {
    let no_gaps = Vec::new();
    let gaps = |tid: u32| gap_spans.get(&tid).unwrap_or(&no_gaps);
    // Per worker: switched out while runnable outside its gaps, inside the runs.
    let holding: Vec<Vec<(u64, u64)>> = workers
        .iter()
        .map(|w| {
            let preempted: Vec<(u64, u64)> = cx
                .offcpu
                .intervals(w.tid)
                .iter()
                .filter(|o| o.preempted)
                .map(|o| (o.start, o.end))
                .collect();
            let in_runs: Vec<(u64, u64)> = intersections(&preempted, runs).collect();
            difference(&in_runs, gaps(w.tid))
        })
        .collect();
    workers
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let others = merge(
                holding
                    .iter()
                    .enumerate()
                    .filter(|&(j, _)| j != i)
                    .flat_map(|(_, spans)| spans.iter().copied())
                    .collect(),
            );
            let ticks: u64 = intersections(gaps(w.tid), &others)
                .map(|(a, b)| b - a)
                .sum();
            cx.ns(ticks).min(w.state_ns.w)
        })
        .sum()
}

/// The parts of the sorted, disjoint intervals `a` outside those of `b`.
fn difference(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::with_capacity(a.len());
    let mut j = 0;
    for &(mut start, end) in a {
        while j < b.len() && b[j].1 <= start {
            j += 1;
        }
        let mut k = j;
        while k < b.len() && b[k].0 < end {
            if b[k].0 > start {
                out.push((start, b[k].0));
            }
            start = start.max(b[k].1);
            k += 1;
        }
        if start < end {
            out.push((start, end));
        }
    }
    out
}

/// The uncertainty the marks' clock leaves on a state's share of the region's worker time:
/// each mark samples the state of one worker, so a share p of the time the marks counted is
/// known to ±√(p(1−p)/marks), largest at p = ½, and the counted time is part of the whole.
fn share_uncertainty(racc: &RegionAcc, ns: impl Fn(u64) -> u64, state_ns: &StateNs) -> f64 {
    let total = state_ns.uc + state_ns.lq + state_ns.gs + state_ns.w;
    if racc.marks == 0 || total == 0 {
        return 0.0;
    }
    let counted_share = (ns(racc.marked_ticks) as f64 / total as f64).min(1.0);
    counted_share * 0.5 / (racc.marks as f64).sqrt()
}

/// Time switched out while runnable during the stretches the program counted (detail paused)
/// has no place in time: it is shared among the states counted there, user code and the
/// folded gaps' LQ, GS and W, in proportion to their time. The gaps' parts are added here;
/// the user-code part is what [`uc_preempted`] leaves.
fn share_counted_preemption(acc: &mut Acc, folded: &StateNs, preempted: u64) {
    let counted = acc.counted_uc + folded.lq + folded.gs + folded.w;
    if counted == 0 || preempted == 0 {
        return;
    }
    let share = |ticks: u64| (preempted as u128 * ticks as u128 / counted as u128) as u64;
    acc.preempted.lq += share(folded.lq).min(folded.lq);
    acc.preempted.gs += share(folded.gs).min(folded.gs);
    acc.preempted.w += share(folded.w).min(folded.w);
}

/// The overlaps of two lists of sorted, disjoint intervals.
fn intersections<'a>(
    a: &'a [(u64, u64)],
    b: &'a [(u64, u64)],
) -> impl Iterator<Item = (u64, u64)> + 'a {
    let (mut i, mut j) = (0, 0);
    std::iter::from_fn(move || {
        while i < a.len() && j < b.len() {
            let (start, end) = (a[i].0.max(b[j].0), a[i].1.min(b[j].1));
            if a[i].1 <= b[j].1 {
                i += 1;
            } else {
                j += 1;
            }
            if start < end {
                return Some((start, end));
            }
        }
        None
    })
}

/// The UC part of a worker's preempted time in a region: what the switch records show inside
/// the region's runs, less the parts already found in its gaps (LQ, GS, W), at most its UC time.
fn uc_preempted(acc: &Acc, preempted_in_runs: u64) -> u64 {
    let in_gaps = acc.preempted.lq + acc.preempted.gs + acc.preempted.w;
    preempted_in_runs.saturating_sub(in_gaps).min(acc.uc)
}

/// Length of `[a, b] ∩ [c, d]`.
fn overlap(a: u64, b: u64, c: u64, d: u64) -> u64 {
    b.min(d).saturating_sub(a.max(c))
}

/// How gaps are split into states.
struct Shape {
    search_min: u64,
    round_ticks: f64,
    counted: bool,
    /// Searches and sleeps come from rayon-core hooks (see [`state::HookedSearch`]).
    hooked: bool,
}

/// Where the search part of a gap lies: the window it is counted in, where its LQ part ends,
/// and the search time inside the window.
#[derive(Clone, Copy)]
struct SearchPart {
    window: (u64, u64),
    lq_end: u64,
    within: (u64, u64),
}

/// Preempted time (switched out while runnable) within `[a, b]`.
fn preempted_within(off: &[OffCpu], a: u64, b: u64) -> u64 {
    off.iter()
        .filter(|o| o.preempted)
        .map(|o| overlap(o.start, o.end, a, b))
        .sum()
}

impl Shape {
    /// Adds the part of `gap` inside `window` to `acc`, with the transitions that happen there.
    fn classify(&self, gap: &Gap, window: (u64, u64), lq_est: u64, off: &[OffCpu], acc: &mut Acc) {
        let (a, b) = (gap.start, gap.end);
        let (c0, c1) = (a.max(window.0), b.min(window.1));
        if c0 > c1 {
            return;
        }
        let inside = |t: u64| c0 <= t && t <= c1;
        let search = match gap.kind {
            GapEnd::Local => false,
            GapEnd::Resume => b - a > self.search_min,
            GapEnd::Steal | GapEnd::Idle => true,
        };
        if !search {
            acc.lq += c1 - c0;
            acc.preempted.lq += preempted_within(off, c0, c1);
            if inside(b) {
                acc.transitions.lq_uc += 1;
            }
            return;
        }
        let lq_end = if gap.after_task {
            a + lq_est.min(b - a)
        } else {
            a
        };
        acc.lq += overlap(a, lq_end, c0, c1);
        acc.preempted.lq += preempted_within(off, c0, lq_end.min(c1));
        if gap.after_task && c0 <= lq_end && lq_end <= c1.max(lq_end.min(b)) && window.0 <= lq_end {
            acc.transitions.lq_gs += 1;
        }
        let part = SearchPart {
            window,
            lq_end,
            within: (lq_end.max(c0), c1),
        };
        if self.hooked {
            self.classify_hooked_search(gap, &part, off, acc);
        } else {
            self.classify_switched_search(gap, &part, off, acc);
        }
        if gap.kind != GapEnd::Idle && inside(b) {
            acc.transitions.gs_uc += 1;
        }
    }

    /// The search part of a gap, told apart by the hooks: idle from the first failed round
    /// on. Its rounds and sleeps count where the idle time began.
    fn classify_hooked_search(&self, gap: &Gap, part: &SearchPart, off: &[OffCpu], acc: &mut Acc) {
        let SearchPart {
            window,
            lq_end,
            within: (s0, s1),
        } = *part;
        let idle_from = gap
            .search
            .idle_from
            .map_or(gap.end, |t| t.clamp(lq_end, gap.end));
        // Idle: switched out after the first failed round, asleep or yielding to others.
        let w: u64 = off
            .iter()
            .map(|o| overlap(o.start, o.end, idle_from.max(s0), s1))
            .sum();
        acc.w += w;
        acc.gs += s1.saturating_sub(s0).saturating_sub(w);
        acc.preempted.gs += preempted_within(off, s0, idle_from.min(s1));
        acc.preempted.w += preempted_within(off, idle_from.max(s0), s1);
        // GS→W once per idle episode (the first failed round: the worker gives up, then
        // yields or sleeps until work appears), W→GS when it found work after one. Counting
        // episodes rather than sleeps keeps the rate the same on a busy machine, where rounds
        // are slow and a worker may never reach rayon's sleep.
        let began = gap.search.idle_from.map_or(lq_end, |_| idle_from);
        if window.0 <= began && began <= window.1 {
            let episode = u64::from(gap.search.idle_from.is_some());
            acc.transitions.gs_gs += u64::from(gap.search.rounds);
            acc.transitions.gs_w += episode;
            if gap.kind != GapEnd::Idle {
                acc.transitions.w_gs += episode;
            }
        }
    }

    /// The search part of a gap, told apart by the switch records only: idle while switched
    /// out voluntarily (asleep).
    fn classify_switched_search(
        &self,
        gap: &Gap,
        part: &SearchPart,
        off: &[OffCpu],
        acc: &mut Acc,
    ) {
        let SearchPart {
            window,
            lq_end,
            within: (s0, s1),
        } = *part;
        let (a, b) = (gap.start, gap.end);
        // Time counts where it falls. The transitions of a search that follows a task of this
        // region count for it up to the worker's first sleep, even past the end of the run:
        // workers woken for work that is already gone are this region's cost.
        let tail_end = if gap.after_task && window.0 <= a && a <= window.1 {
            off.iter()
                .find(|o| !o.preempted && o.start >= lq_end)
                .map_or(b, |o| o.start)
        } else {
            s1
        };
        let (r0, r1) = (s0, s1.max(tail_end));
        let (mut w, mut w_counted, mut sleeps, mut yields) = (0, 0, 0, 0);
        for o in off {
            if o.preempted {
                yields += u64::from(r0 <= o.start && o.start < r1);
                acc.preempted.gs += overlap(o.start, o.end, s0, s1);
                continue;
            }
            w += overlap(o.start, o.end, s0, s1);
            w_counted += overlap(o.start, o.end, r0, r1);
            if r0 <= o.start && o.start <= r1 {
                acc.transitions.gs_w += 1;
                sleeps += 1;
            }
            // Woken up. The event that closes a gap shows the thread on a CPU by then; a gap
            // that lasts to the end of the run has no such event.
            let wake = if gap.kind == GapEnd::Idle {
                o.end
            } else {
                o.end.min(b)
            };
            if o.start < r1 && r0 < wake && wake <= r1 {
                acc.transitions.w_gs += 1;
            }
        }
        acc.w += w;
        acc.gs += s1.saturating_sub(s0).saturating_sub(w);
        acc.transitions.gs_gs += if self.counted {
            yields.max(ROUNDS_BEFORE_SLEEP * sleeps)
        } else {
            (r1.saturating_sub(r0).saturating_sub(w_counted) as f64 / self.round_ticks) as u64
        };
    }

    /// Adds the folded gaps: no windows, no switch records (their sleeps count as GS).
    /// Returns the time it added to LQ, GS and W.
    fn classify_folded(&self, lq_est: u64, acc: &mut Acc) -> StateNs {
        let before = StateNs {
            uc: 0,
            lq: acc.lq,
            gs: acc.gs,
            w: acc.w,
        };
        let folded = std::mem::take(&mut acc.folded);
        let local_like = |acc: &mut Acc, s: Sum| {
            acc.lq += s.ticks;
            acc.transitions.lq_uc += s.count;
        };
        let search = |acc: &mut Acc, s: Sum| {
            let lq = s.ticks.min(s.count.saturating_mul(lq_est));
            let gs = s.ticks - lq;
            acc.lq += lq;
            acc.gs += gs;
            acc.transitions.lq_gs += s.count;
            acc.transitions.gs_uc += s.count;
            // Hooks and switch records count rounds; without either, estimate.
            if !self.counted && !self.hooked {
                acc.transitions.gs_gs += (gs as f64 / self.round_ticks) as u64;
            }
        };
        let gs_before = acc.gs;
        local_like(acc, folded.local);
        search(acc, folded.steal);
        for bucket in folded.resume.into_iter().filter(|s| s.count > 0) {
            if bucket.ticks / bucket.count > self.search_min {
                search(acc, bucket);
            } else {
                local_like(acc, bucket);
            }
        }
        // The hooks' idle time in folded searches is W, not GS.
        let idle = folded.idle_ticks.min(acc.gs - gs_before);
        acc.gs -= idle;
        acc.w += idle;
        acc.transitions.gs_gs += folded.rounds;
        acc.transitions.gs_w += folded.idle_episodes;
        acc.transitions.w_gs += folded.idle_episodes;
        StateNs {
            uc: 0,
            lq: acc.lq - before.lq,
            gs: acc.gs - before.gs,
            w: acc.w - before.w,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::state::MAX_DEPTH;
    use super::*;
    use crate::analysis::diagnoses;
    use crate::analysis::diagnosis::Code;
    use crate::analysis::model::WorkerState;
    use crate::recording::Thresholds;
    use crate::recording::kernel_records::{SwitchKind, SwitchRecord};
    use parprof_rt::trace::{DETAIL_PAUSE, GapSum};

    const R: u32 = 1;
    const MAIN: u32 = 100;

    fn ev(ts: u64, kind: EventKind, aux: u16, origin: TaskOrigin) -> Event {
        Event {
            ts,
            id: R,
            aux,
            kind: kind as u8,
            flags: origin as u8,
        }
    }
    fn begin(ts: u64, origin: TaskOrigin) -> Event {
        ev(ts, EventKind::TaskBegin, 0, origin)
    }
    fn end(ts: u64) -> Event {
        ev(ts, EventKind::TaskEnd, 0, TaskOrigin::Inline)
    }
    fn resume(ts: u64) -> Event {
        ev(ts, EventKind::TaskResume, 0, TaskOrigin::Inline)
    }
    fn region(ts: u64, kind: EventKind) -> Event {
        ev(ts, kind, 0, TaskOrigin::Inline)
    }

    /// A builder with `n` workers (tids 0..n, pool 0) and the non-worker main thread.
    fn builder(n: u16) -> LifecycleBuilder {
        let mut b = LifecycleBuilder::new(1_000);
        b.on_site(&SiteRecord {
            id: R,
            kind: parprof_rt::trace::SiteKind::Region,
            name: "r".into(),
            file: "f.rs".into(),
            line: 1,
            caller: String::new(),
            entry: None,
        });
        for i in 0..n {
            b.on_thread(&ThreadRecord {
                tid: u32::from(i),
                rayon_index: i,
                pool: 0,
                name: format!("w{i}"),
            });
        }
        b.on_thread(&ThreadRecord {
            tid: MAIN,
            rayon_index: NO_WORKER,
            pool: 0,
            name: "main".into(),
        });
        b
    }

    fn feed(b: &mut LifecycleBuilder, tid: u32, events: &[Event]) {
        for e in events {
            b.on_event(tid, e);
        }
    }

    /// Switch-out intervals as (tid, start, end, preempted).
    fn offcpu(intervals: &[(u32, u64, u64, bool)]) -> OffCpuIndex {
        let mut records = Vec::new();
        for &(tid, start, end, preempted) in intervals {
            let out = if preempted {
                SwitchKind::OutPreempted
            } else {
                SwitchKind::OutVoluntary
            };
            records.push(SwitchRecord {
                time_ns: start,
                tid,
                cpu: 0,
                kind: out,
            });
            records.push(SwitchRecord {
                time_ns: end,
                tid,
                cpu: 0,
                kind: SwitchKind::In,
            });
        }
        records.sort_by_key(|r| r.time_ns);
        OffCpuIndex::from_switches(&records, &[], |t| t, u64::MAX)
    }

    fn finish(b: LifecycleBuilder, off: &OffCpuIndex) -> RegionReport {
        let mut reports = b.finish(off, 1.0).regions;
        diagnoses::diagnose_regions(&mut reports, &Thresholds::default(), None);
        assert_eq!(reports.len(), 1);
        reports.remove(0)
    }

    fn codes(r: &RegionReport) -> Vec<Code> {
        r.diagnoses.iter().map(|d| d.code).collect()
    }

    fn total(s: &StateNs) -> u64 {
        s.uc + s.lq + s.gs + s.w
    }

    /// One run of 1,000 ticks on two workers: worker 0 runs an injected, a local and a stolen
    /// task, sleeping once while it searches; worker 1 never runs a task and sleeps most of
    /// the run.
    fn two_workers_one_run(max_timeline_spans: usize) -> (LifecycleBuilder, OffCpuIndex) {
        let mut b = builder(2);
        b.stretches = Longest::new(max_timeline_spans);
        feed(
            &mut b,
            MAIN,
            &[
                region(0, EventKind::RegionBegin),
                region(1000, EventKind::RegionEnd),
            ],
        );
        feed(
            &mut b,
            0,
            &[
                // Idle from the start of the run, then handed the injected task.
                ev(100, EventKind::TaskBegin, NO_WORKER, TaskOrigin::Injected),
                end(200),
                // A local pop after 10 ticks: the region's LQ estimate.
                begin(210, TaskOrigin::Local),
                end(300),
                // A search with a sleep (voluntary switch-out 320..380), then a steal.
                ev(400, EventKind::TaskBegin, 1, TaskOrigin::Stolen),
                end(500),
                // Then nothing until the run ends.
            ],
        );
        // Worker 1 never runs a task and sleeps most of the run.
        let off = offcpu(&[(0, 320, 380, false), (1, 50, 950, false)]);
        (b, off)
    }

    /// Spawned jobs of one region, each a run on the worker that runs it (its task, then the
    /// run inside it): worker 0 runs 0–400 and 500–600, worker 1 runs 200–700, overlapping.
    #[test]
    fn spawned_jobs_in_flight_at_once_are_runs_of_one_region() {
        let mut b = builder(2);
        let spawned = |from: u64, to: u64| {
            [
                ev(from, EventKind::TaskBegin, NO_WORKER, TaskOrigin::Injected),
                region(from, EventKind::RegionBegin),
                region(to, EventKind::RegionEnd),
                end(to),
            ]
        };
        let mut w0 = spawned(0, 400).to_vec();
        w0.extend(spawned(500, 600));
        feed(&mut b, 0, &w0);
        feed(&mut b, 1, &spawned(200, 700));
        let r = finish(b, &offcpu(&[(0, 400, 500, false)]));
        assert_eq!(r.instances, 3);
        // The union of the runs, 0–700, not their sum (800).
        assert_eq!(r.elapsed_ns, 700);
        assert_eq!(r.tasks.injected, 3);
        assert_eq!(r.state_ns.uc, 400 + 100 + 500);
        // Worker 0's gap between its runs is the region's idle time; worker 1's time before
        // its run too.
        assert_eq!(total(&r.state_ns), 2 * 700);
    }

    #[test]
    fn states_and_transitions_are_rebuilt_from_tasks_and_switches() {
        let (b, off) = two_workers_one_run(1_000);
        let r = finish(b, &off);

        assert_eq!((r.instances, r.elapsed_ns, r.workers), (1, 1000, 2));
        assert_eq!(
            r.tasks,
            TaskCounts {
                local: 1,
                stolen: 1,
                injected: 1,
                inline: 0
            }
        );
        assert_eq!(
            r.task_ns,
            TaskNs {
                min: 90,
                median: 100,
                max: 100
            }
        );
        let w0 = &r.per_worker[0];
        // UC 100+90+100; LQ: the local gap, and 10 at the start of the two searches;
        // GS: 100 before the first task, 30 of the 90-tick search, 490 at the end; W 60.
        assert_eq!(
            w0.state_ns,
            StateNs {
                uc: 290,
                lq: 30,
                gs: 620,
                w: 60
            }
        );
        assert_eq!(
            w0.transitions,
            Transitions {
                uc_lq: 3,
                lq_uc: 1,
                uc_uc: 0,
                lq_gs: 2,
                gs_uc: 2,
                gs_gs: 33,
                gs_w: 1,
                w_gs: 1
            }
        );
        let w1 = &r.per_worker[1];
        assert_eq!(
            w1.state_ns,
            StateNs {
                uc: 0,
                lq: 0,
                gs: 100,
                w: 900
            }
        );
        assert_eq!(
            w1.transitions,
            Transitions {
                gs_gs: 33,
                gs_w: 1,
                w_gs: 1,
                ..Transitions::default()
            }
        );
        assert_eq!(
            total(&r.state_ns),
            2 * r.elapsed_ns,
            "every worker tick is in one state"
        );
        assert_eq!(
            (r.active_overhead_ns, r.inactive_overhead_ns),
            (30 + 720, 960)
        );
        assert_eq!(r.gs_gs_source, SearchRounds::Counted);
    }

    #[test]
    fn with_hooks_a_search_is_idle_off_the_cpu_after_its_first_failed_round() {
        let mut b = builder(1);
        feed(
            &mut b,
            MAIN,
            &[
                region(0, EventKind::RegionBegin),
                region(1000, EventKind::RegionEnd),
            ],
        );
        let round = |ts| ev(ts, EventKind::SearchRound, 1, TaskOrigin::Inline);
        feed(
            &mut b,
            0,
            &[
                ev(100, EventKind::TaskBegin, NO_WORKER, TaskOrigin::Injected),
                end(200),
                // Two failed rounds (yielding 220..240 to another program), then a sleep.
                round(210),
                round(250),
                ev(300, EventKind::SleepBegin, 0, TaskOrigin::Inline),
                ev(700, EventKind::SleepEnd, 0, TaskOrigin::Inline),
                ev(800, EventKind::TaskBegin, 1, TaskOrigin::Stolen),
                end(900),
            ],
        );
        let off = offcpu(&[(0, 220, 240, true), (0, 300, 700, false)]);
        let Lifecycle {
            mut regions,
            timeline,
            ..
        } = b.finish(&off, 1.0);
        let waits: Vec<(u64, u64)> = timeline
            .worker_states
            .iter()
            .filter(|s| s.tid == 0 && s.state == WorkerState::Wait)
            .map(|s| (s.start, s.end))
            .collect();
        assert_eq!(
            waits,
            [(220, 240), (300, 700)],
            "the timeline shows what is counted"
        );
        let r = regions.remove(0);
        assert_eq!(r.wait_source, WaitSource::Hooks);
        let w0 = &r.per_worker[0];
        // Search 200..800: on the CPU until 210 and after the first round (GS 10 + 170);
        // off it after the first round: 20 yielding, 400 asleep (W 420). Before the first
        // task and after the last, searches without a failed round: GS 100 + 100.
        assert_eq!(
            w0.state_ns,
            StateNs {
                uc: 200,
                lq: 0,
                gs: 380,
                w: 420
            }
        );
        assert_eq!(
            w0.preempted_ns,
            StateNs {
                w: 20,
                ..StateNs::default()
            }
        );
        assert_eq!(
            w0.transitions,
            Transitions {
                uc_lq: 2,
                lq_uc: 0,
                uc_uc: 0,
                lq_gs: 2,
                gs_uc: 2,
                gs_gs: 2,
                gs_w: 1,
                w_gs: 1
            }
        );
        assert_eq!(w0.name, "w0");
    }

    /// A worker preempted while its detail is paused: the program counted its user code and
    /// gaps without placing them in time, so the preempted time is shared among them in
    /// proportion (not all put on user code).
    #[test]
    fn preemption_while_paused_is_shared_among_the_counted_states() {
        let mut b = builder(1);
        feed(&mut b, MAIN, &[region(0, EventKind::RegionBegin)]);
        let pause = Event {
            ts: 30,
            id: 0,
            aux: 0,
            kind: EventKind::Detail as u8,
            flags: DETAIL_PAUSE,
        };
        feed(&mut b, 0, &[begin(10, TaskOrigin::Stolen), end(20), pause]);
        b.on_totals(LifecycleTotals {
            tid: 0,
            region: R,
            user_code_ticks: 900,
            task_ends: 3,
            tasks: [0, 3, 0, 0],
            steal_gaps: GapSum {
                count: 3,
                ticks: 900,
            },
            ..LifecycleTotals::default()
        });
        feed(&mut b, MAIN, &[region(2_000, EventKind::RegionEnd)]);
        let r = finish(b, &offcpu(&[(0, 100, 700, true)]));
        let p = r.preempted_ns;
        assert_eq!(p.uc, 300, "{r:#?}");
        assert_eq!(p.lq + p.gs, 300, "{r:#?}");
        assert_eq!(p.w, 0);
    }

    /// The longest task is judged by its own time running: its time switched out and that of
    /// the tasks nested in it aside, whether the events show it or the program counted it.
    #[test]
    fn the_longest_task_leaves_out_its_switched_out_time() {
        let off = Arc::new(offcpu(&[
            (0, 20, 90, true),
            (0, 260, 340, true),
            (1, 500, 900, true),
        ]));
        let mut b = builder(2).with_switched_out(Arc::clone(&off));
        feed(&mut b, MAIN, &[region(0, EventKind::RegionBegin)]);
        feed(
            &mut b,
            0,
            &[
                // 100 ticks begin to end, 70 of them switched out: 30 of its own.
                begin(10, TaskOrigin::Injected),
                end(110),
                // A parent of 200 ticks with a nested task of 100, switched out for 80 inside
                // it: the parent's own time is 100, all of it running; the child's is 20.
                begin(200, TaskOrigin::Stolen),
                begin(250, TaskOrigin::Inline),
                end(350),
                end(400),
            ],
        );
        feed(&mut b, MAIN, &[region(2_000, EventKind::RegionEnd)]);
        // Worker 1's program counted a task of 450 ticks (ended at 950, nothing nested),
        // switched out for 400 of them: 50 of its own.
        b.on_totals(LifecycleTotals {
            tid: 1,
            region: R,
            task_ends: 1,
            tasks: [0, 1, 0, 0],
            max_task_ticks: 450,
            max_task_end: 950,
            max_task_span_ticks: 450,
            ..LifecycleTotals::default()
        });
        assert_eq!(finish(b, &off).task_ns.max, 100);
    }

    /// A worker asleep while the other, holding the work, waits for a CPU: its idle time is
    /// the CPUs' shortage, not the region's imbalance.
    #[test]
    fn sleep_while_another_worker_waits_for_a_cpu_is_counted_apart() {
        let mut b = builder(2);
        feed(&mut b, MAIN, &[region(0, EventKind::RegionBegin)]);
        // Worker 0 runs one long task; worker 1 runs a short one, then searches and sleeps.
        feed(&mut b, 0, &[begin(0, TaskOrigin::Injected), end(1_000)]);
        let mut sleep = ev(120, EventKind::SleepBegin, 0, TaskOrigin::Inline);
        sleep.id = 0;
        feed(&mut b, 1, &[begin(10, TaskOrigin::Stolen), end(100), sleep]);
        feed(&mut b, MAIN, &[region(1_000, EventKind::RegionEnd)]);
        // Worker 0 preempted 300..700; worker 1 asleep 120..1000.
        let r = finish(b, &offcpu(&[(0, 300, 700, true), (1, 120, 1_000, false)]));
        assert_eq!(r.idle_while_others_preempted_ns, 400, "{r:#?}");
    }

    #[test]
    fn the_timeline_shows_each_worker_in_the_states_that_are_counted() {
        let (b, off) = two_workers_one_run(1_000);
        let Lifecycle {
            regions, timeline, ..
        } = b.finish(&off, 1.0);
        assert_eq!(timeline.left_out, 0);
        assert_eq!(
            timeline.region_runs,
            [TickRegionRun {
                region: R,
                start: 0,
                end: 1000
            }]
        );
        for worker in &regions[0].per_worker {
            let mut shown = StateNs::default();
            let mut end_of_last = 0;
            for s in timeline
                .worker_states
                .iter()
                .filter(|s| s.tid == worker.tid)
            {
                assert_eq!(s.region, R);
                assert_eq!(s.start, end_of_last, "spans tile the run: {timeline:?}");
                end_of_last = s.end;
                let len = s.end - s.start;
                match s.state {
                    WorkerState::UserCode => shown.uc += len,
                    WorkerState::LocalQueue => shown.lq += len,
                    WorkerState::GlobalSearch => shown.gs += len,
                    WorkerState::Wait => shown.w += len,
                }
            }
            assert_eq!(end_of_last, 1000);
            assert_eq!(shown, worker.state_ns, "worker {}", worker.tid);
        }
        // Worker 0 sleeps within its search after the second task.
        let w0: Vec<(WorkerState, u64, u64)> = timeline
            .worker_states
            .iter()
            .filter(|s| s.tid == 0 && (300..400).contains(&s.start))
            .map(|s| (s.state, s.start, s.end))
            .collect();
        assert_eq!(
            w0,
            [
                (WorkerState::LocalQueue, 300, 310),
                (WorkerState::GlobalSearch, 310, 320),
                (WorkerState::Wait, 320, 380),
                (WorkerState::GlobalSearch, 380, 400),
            ]
        );
    }

    #[test]
    fn the_timeline_keeps_the_longest_spans_and_counts_the_others() {
        // Three places: the main thread's region body (which is not shown: the main thread is
        // no worker), worker 1's idle run and worker 0's trailing search are the longest
        // stretches; split, they give three spans of which the shortest two are as long.
        let (b, off) = two_workers_one_run(3);
        let timeline = b.finish(&off, 1.0).timeline;
        let kept: Vec<(u32, WorkerState, u64, u64)> = timeline
            .worker_states
            .iter()
            .map(|s| (s.tid, s.state, s.start, s.end))
            .collect();
        assert_eq!(
            kept,
            [
                (0, WorkerState::GlobalSearch, 510, 1000),
                (1, WorkerState::GlobalSearch, 0, 50),
                (1, WorkerState::Wait, 50, 950)
            ]
        );
        assert!(timeline.left_out > 0);
    }

    #[test]
    fn inline_tasks_bypass_the_scheduler_and_resumes_return_to_user_code() {
        let mut b = builder(1);
        feed(
            &mut b,
            0,
            &[
                // The region's body runs on the worker and joins: first half inline.
                region(0, EventKind::RegionBegin),
                begin(10, TaskOrigin::Inline),
                end(50),
                begin(52, TaskOrigin::Local),
                end(90),
                // The join returns at once: LQ.
                resume(95),
                // A second join whose other half was stolen: the body waits 5,000 ticks.
                begin(100, TaskOrigin::Inline),
                end(150),
                resume(5150),
                region(5200, EventKind::RegionEnd),
            ],
        );
        let r = finish(b, &OffCpuIndex::default());
        let w = &r.per_worker[0];
        // LQ: 2 + 5 (short gaps) + the LQ estimate (the local gap, 2) of the long wait.
        assert_eq!(
            w.state_ns,
            StateNs {
                uc: 10 + 40 + 38 + 5 + 50 + 50,
                lq: 9,
                gs: 4998,
                w: 0
            }
        );
        assert_eq!(
            w.transitions,
            Transitions {
                uc_lq: 3,
                lq_uc: 2,
                uc_uc: 2,
                lq_gs: 1,
                gs_uc: 1,
                // No switch records: 4,998 ticks of search at 1,000 per round.
                gs_gs: 4,
                gs_w: 0,
                w_gs: 0
            }
        );
        assert_eq!(r.gs_gs_source, SearchRounds::Estimated);
        assert_eq!(r.tasks.inline, 2);
    }

    #[test]
    fn idle_time_counts_only_while_the_region_runs() {
        let mut b = builder(1);
        // Two runs of 100 ticks, 10,000 ticks apart; the worker runs one task in each.
        feed(
            &mut b,
            MAIN,
            &[
                region(0, EventKind::RegionBegin),
                region(100, EventKind::RegionEnd),
                region(10_000, EventKind::RegionBegin),
                region(10_100, EventKind::RegionEnd),
            ],
        );
        feed(
            &mut b,
            0,
            &[
                ev(10, EventKind::TaskBegin, NO_WORKER, TaskOrigin::Injected),
                end(60),
                ev(
                    10_010,
                    EventKind::TaskBegin,
                    NO_WORKER,
                    TaskOrigin::Injected,
                ),
                end(10_060),
            ],
        );
        let off = offcpu(&[(0, 70, 10_005, false)]);
        let r = finish(b, &off);
        assert_eq!((r.instances, r.elapsed_ns), (2, 200));
        assert_eq!(total(&r.state_ns), 200);
        let w = &r.per_worker[0];
        assert_eq!(w.state_ns.uc, 100);
        // Asleep from 70 to the end of the first run and from the second run's start to 10,005.
        assert_eq!(w.state_ns.w, 30 + 5);
        assert_eq!((w.transitions.gs_w, w.transitions.w_gs), (1, 1));
    }

    #[test]
    fn nested_regions_count_their_tasks_in_the_enclosing_region_too() {
        let mut b = builder(1);
        let inner = |ts, kind| Event {
            ts,
            id: 2,
            aux: 0,
            kind: kind as u8,
            flags: TaskOrigin::Local as u8,
        };
        feed(
            &mut b,
            MAIN,
            &[
                region(0, EventKind::RegionBegin),
                region(100, EventKind::RegionEnd),
            ],
        );
        feed(
            &mut b,
            0,
            &[
                ev(0, EventKind::TaskBegin, NO_WORKER, TaskOrigin::Injected),
                inner(10, EventKind::RegionBegin),
                Event {
                    flags: TaskOrigin::Inline as u8,
                    ..inner(20, EventKind::TaskBegin)
                },
                inner(80, EventKind::TaskEnd),
                inner(85, EventKind::TaskResume),
                inner(90, EventKind::RegionEnd),
                end(100),
            ],
        );
        let reports = b.finish(&OffCpuIndex::default(), 1.0).regions;
        let outer = reports.iter().find(|r| r.site == R).unwrap();
        let nested = reports.iter().find(|r| r.site == 2).unwrap();
        assert_eq!((outer.tasks.total(), nested.tasks.total()), (1, 1));
        assert_eq!(
            outer.state_ns,
            StateNs {
                uc: 95,
                lq: 5,
                gs: 0,
                w: 0
            }
        );
        assert_eq!(nested.state_ns.uc, 10 + 60 + 5);
        assert_eq!(nested.elapsed_ns, 80);
    }

    #[test]
    fn memory_stays_bounded_and_totals_hold_when_gaps_are_folded() {
        let mut b = builder(1);
        let tasks = MAX_STORED_GAPS as u64 * 3;
        feed(
            &mut b,
            MAIN,
            &[
                region(0, EventKind::RegionBegin),
                region(tasks * 100 + 50, EventKind::RegionEnd),
            ],
        );
        for i in 0..tasks {
            // Gaps of varied length, every one a search.
            let t = i * 100;
            b.on_event(
                0,
                &ev(t + 10 + i % 40, EventKind::TaskBegin, 1, TaskOrigin::Stolen),
            );
            b.on_event(0, &end(t + 60));
        }
        assert!(b.threads[&0].stored.len() <= MAX_STORED_GAPS);
        assert!(b.threads[&0].keep_min > 0, "the shorter gaps were folded");
        let r = finish(b, &OffCpuIndex::default());
        assert_eq!(total(&r.state_ns), r.elapsed_ns);
        assert_eq!(r.transitions.gs_uc, tasks);
        assert_eq!(r.transitions.lq_gs, tasks);
    }

    #[test]
    fn corrupt_streams_do_not_panic() {
        let mut b = builder(1);
        feed(
            &mut b,
            0,
            &[
                end(10),
                resume(5),
                Event {
                    ts: 20,
                    id: R,
                    aux: 0,
                    kind: EventKind::TaskBegin as u8,
                    flags: 99,
                },
                Event {
                    ts: 30,
                    id: R,
                    aux: 0,
                    kind: 200,
                    flags: 0,
                },
                region(40, EventKind::RegionEnd),
                begin(50, TaskOrigin::Stolen),
            ],
        );
        for i in 0..(MAX_DEPTH as u64 + 10) {
            b.on_event(0, &begin(60 + i, TaskOrigin::Inline));
        }
        let reports = b.finish(&OffCpuIndex::default(), f64::NAN).regions;
        assert_eq!(reports.len(), 1);
    }

    /// `workers` workers and one run of `elapsed` ticks, each worker doing `tasks` tasks of
    /// `work` ticks separated by gaps of `gap` ticks closed by tasks of origin `origin`.
    fn uniform(
        workers: u16,
        tasks: u64,
        work: u64,
        gap: u64,
        origin: TaskOrigin,
    ) -> LifecycleBuilder {
        let mut b = builder(workers);
        let elapsed = tasks * (work + gap);
        feed(
            &mut b,
            MAIN,
            &[
                region(0, EventKind::RegionBegin),
                region(elapsed, EventKind::RegionEnd),
            ],
        );
        for w in 0..workers {
            for i in 0..tasks {
                let t = i * (work + gap);
                let aux = if origin == TaskOrigin::Stolen {
                    (w + 1) % workers
                } else {
                    w
                };
                b.on_event(
                    u32::from(w),
                    &ev(t + gap, EventKind::TaskBegin, aux, origin),
                );
                b.on_event(u32::from(w), &end(t + gap + work));
            }
        }
        b
    }

    #[test]
    fn a_well_tuned_stream_has_no_diagnosis() {
        // 2 workers, 10 µs tasks from their own deques, 50 ns between them.
        let r = finish(
            uniform(2, 1000, 10_000, 50, TaskOrigin::Local),
            &OffCpuIndex::default(),
        );
        assert!(r.diagnoses.is_empty(), "{:?}", r.diagnoses);
    }

    #[test]
    fn tiny_local_tasks_are_too_fine() {
        // 300 ns tasks with 200 ns of local pops: 2 million tasks/s per worker, 40 % LQ.
        let r = finish(
            uniform(2, 2000, 300, 200, TaskOrigin::Local),
            &OffCpuIndex::default(),
        );
        assert_eq!(codes(&r), vec![Code::TooFineGranularity]);
    }

    #[test]
    fn stealing_everything_is_excessive_stealing() {
        // 20 µs tasks, each stolen after a 10 µs search.
        let r = finish(
            uniform(4, 100, 20_000, 10_000, TaskOrigin::Stolen),
            &OffCpuIndex::default(),
        );
        assert_eq!(codes(&r), vec![Code::ExcessiveStealing]);
    }

    #[test]
    fn tiny_stolen_tasks_are_both_in_the_specified_order() {
        let r = finish(
            uniform(4, 2000, 300, 1_000, TaskOrigin::Stolen),
            &OffCpuIndex::default(),
        );
        assert_eq!(
            codes(&r),
            vec![Code::TooFineGranularity, Code::ExcessiveStealing]
        );
    }

    /// Runs of 100 µs repeated 50 times; worker 0 runs the only task of each run, the other
    /// three wake up at each run's start, search and go back to sleep.
    fn low_slack() -> (LifecycleBuilder, OffCpuIndex) {
        let mut b = builder(4);
        let mut off = Vec::new();
        for run in 0..50u64 {
            let t = run * 200_000;
            feed(
                &mut b,
                MAIN,
                &[
                    region(t, EventKind::RegionBegin),
                    region(t + 100_000, EventKind::RegionEnd),
                ],
            );
            feed(
                &mut b,
                0,
                &[
                    ev(
                        t + 1_000,
                        EventKind::TaskBegin,
                        NO_WORKER,
                        TaskOrigin::Injected,
                    ),
                    end(t + 99_000),
                ],
            );
        }
        // Workers 1..3 sleep except from 2 µs to 42 µs into each run.
        for w in 1..4 {
            let mut asleep_since = 0;
            for run in 0..50u64 {
                let t = run * 200_000;
                off.push((w, asleep_since, t + 2_000, false));
                asleep_since = t + 42_000;
            }
            off.push((w, asleep_since, 50 * 200_000, false));
        }
        (b, offcpu(&off))
    }

    #[test]
    fn workers_that_keep_waking_up_for_nothing_lack_parallel_slack() {
        let (b, off) = low_slack();
        let r = finish(b, &off);
        assert_eq!(
            codes(&r),
            vec![Code::InsufficientParallelSlack],
            "{:?}",
            r.transitions
        );
    }

    #[test]
    fn workers_idle_after_their_share_is_load_imbalance() {
        // One 10 ms run: worker 0 has a 9 ms task, workers 1..3 a 1 ms task, then they sleep.
        let mut b = builder(4);
        feed(
            &mut b,
            MAIN,
            &[
                region(0, EventKind::RegionBegin),
                region(10_000_000, EventKind::RegionEnd),
            ],
        );
        feed(
            &mut b,
            0,
            &[
                ev(100, EventKind::TaskBegin, NO_WORKER, TaskOrigin::Injected),
                end(9_900_000),
            ],
        );
        let mut off = Vec::new();
        for w in 1..4u16 {
            feed(
                &mut b,
                u32::from(w),
                &[
                    ev(200, EventKind::TaskBegin, 0, TaskOrigin::Stolen),
                    end(1_000_000),
                ],
            );
            off.push((u32::from(w), 1_050_000, 10_500_000, false));
        }
        let r = finish(b, &offcpu(&off));
        assert_eq!(codes(&r), vec![Code::LoadImbalance]);
        let d = &r.diagnoses[0];
        assert!(d.impact.speedup_if_fixed > 1.5, "{d:?}");
    }

    #[test]
    fn the_report_serialises_with_the_model_names() {
        let r = finish(
            uniform(2, 10, 100, 10, TaskOrigin::Local),
            &OffCpuIndex::default(),
        );
        let json = serde_json::to_value(&r).unwrap();
        for key in ["UC", "LQ", "GS", "W"] {
            assert!(json["state_ns"].get(key).is_some(), "{key}");
        }
        for key in [
            "UC->LQ", "LQ->UC", "UC->UC", "LQ->GS", "GS->UC", "GS->GS", "GS->W", "W->GS",
        ] {
            assert!(json["transitions"].get(key).is_some(), "{key}");
        }
        assert_eq!(json["gs_gs_source"], "estimated");
        assert_eq!(json["tasks"]["local"], 20);
    }
}
