//! What the lifecycle builder keeps while it reads a trace: per thread, its open frames, the
//! current interval (user code or a gap), the gaps kept for the cut along region windows and
//! those folded, and what it counted in each region ([`Acc`]); per region, its runs and tasks
//! ([`RegionAcc`]); the figures counted ([`StateNs`], [`Transitions`], [`TaskCounts`]); and
//! [`merge`], which the builder and the timeline's spans both use on time windows. A leaf of
//! `lifecycle/`: the builder, the program's own counts and the spans all read and write it.

use crate::analysis::distribution::DurationDistribution;
use crate::analysis::id_map::IdMap;
use parprof_rt::trace::TaskOrigin;
use serde::Serialize;

/// Gaps kept per thread for the cut along region windows at finish.
pub const MAX_STORED_GAPS: usize = 1 << 16;
/// Open tasks tracked per thread; deeper nesting (or task begins whose ends were lost) is
/// counted but not tracked, so that a corrupt trace cannot grow memory.
pub(super) const MAX_DEPTH: usize = 1 << 12;
/// Enclosing regions followed from a region.
pub(super) const MAX_NESTING: usize = 16;

/// Time per state, in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StateNs {
    #[serde(rename = "UC")]
    pub uc: u64,
    #[serde(rename = "LQ")]
    pub lq: u64,
    #[serde(rename = "GS")]
    pub gs: u64,
    #[serde(rename = "W")]
    pub w: u64,
}

/// Counts of the eight transitions of the lifecycle model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Transitions {
    /// A task finished.
    #[serde(rename = "UC->LQ")]
    pub uc_lq: u64,
    /// Found a task (or the fork's continuation) in the own deque.
    #[serde(rename = "LQ->UC")]
    pub lq_uc: u64,
    /// Scheduler bypass: the next task ran inline.
    #[serde(rename = "UC->UC")]
    pub uc_uc: u64,
    /// The own deque was empty.
    #[serde(rename = "LQ->GS")]
    pub lq_gs: u64,
    /// Stole (or was handed) a task.
    #[serde(rename = "GS->UC")]
    pub gs_uc: u64,
    /// A search round found nothing.
    #[serde(rename = "GS->GS")]
    pub gs_gs: u64,
    /// Gave up and slept.
    #[serde(rename = "GS->W")]
    pub gs_w: u64,
    /// Woken up.
    #[serde(rename = "W->GS")]
    pub w_gs: u64,
}

impl StateNs {
    pub fn add(&mut self, o: &StateNs) {
        self.uc += o.uc;
        self.lq += o.lq;
        self.gs += o.gs;
        self.w += o.w;
    }
}

impl Transitions {
    pub(super) fn add(&mut self, o: &Transitions) {
        self.uc_lq += o.uc_lq;
        self.lq_uc += o.lq_uc;
        self.uc_uc += o.uc_uc;
        self.lq_gs += o.lq_gs;
        self.gs_uc += o.gs_uc;
        self.gs_gs += o.gs_gs;
        self.gs_w += o.gs_w;
        self.w_gs += o.w_gs;
    }
}

/// A region's indexed parallel iterators (rayon's hook) and their items, summed over its runs:
/// its own (bridged where its work entered the pool), and those nested in its tasks (a row's
/// cells summed by an inner `par_iter`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IteratorItems {
    pub iterators: u64,
    pub items: u64,
    pub nested_iterators: u64,
    pub nested_items: u64,
}

/// Tasks by origin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TaskCounts {
    pub local: u64,
    pub stolen: u64,
    pub injected: u64,
    pub inline: u64,
}

impl TaskCounts {
    pub fn total(&self) -> u64 {
        self.local + self.stolen + self.injected + self.inline
    }

    pub(super) fn count(&mut self, origin: TaskOrigin) {
        self.add(origin, 1);
    }

    pub(super) fn add(&mut self, origin: TaskOrigin, n: u64) {
        match origin {
            TaskOrigin::Local => self.local += n,
            TaskOrigin::Stolen => self.stolen += n,
            TaskOrigin::Injected => self.injected += n,
            TaskOrigin::Inline => self.inline += n,
        }
    }
}

/// How a gap (a stretch of a worker outside user code) ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum GapEnd {
    /// A task from the own deque (or run inline): the gap was LQ.
    Local,
    /// A stolen or injected task: the gap was a search.
    Steal,
    /// The fork the worker waited in returned: LQ if short, a search otherwise.
    Resume,
    /// No end transition: the run ended, or the worker went on with code we do not see.
    Idle,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Gap {
    pub(super) start: u64,
    pub(super) end: u64,
    /// Began with a task's end, so the worker first looked in its own deque.
    pub(super) after_task: bool,
    pub(super) kind: GapEnd,
    /// The region of the event that closed it (where a folded gap is counted).
    pub(super) region: u32,
    /// What the rayon-core hooks saw during the gap.
    pub(super) search: HookedSearch,
}

/// The search rounds and sleeps the rayon-core hooks recorded during one gap of a worker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct HookedSearch {
    /// The end of the first failed round: the worker has looked everywhere once and found
    /// nothing, so from then until the gap ends, time off the CPU is idle (W), whether it
    /// sleeps or yields in rayon's spin rounds: on a busy machine each yield can last a whole
    /// time slice of another program, and counting that as search would hide the idle time.
    /// Time on the CPU is still search (GS): the rounds themselves.
    pub(super) idle_from: Option<u64>,
    pub(super) rounds: u32,
    pub(super) sleeps: u32,
}

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Sum {
    pub(super) count: u64,
    pub(super) ticks: u64,
}

impl Sum {
    pub(super) fn add(&mut self, ticks: u64) {
        self.count += 1;
        self.ticks += ticks;
    }
}

/// Gaps folded without windows or switch records, classified at finish.
#[derive(Clone, Debug)]
pub(super) struct Folded {
    pub(super) local: Sum,
    pub(super) steal: Sum,
    /// By bit length of the gap, so that each bucket's mean says whether it was a search.
    pub(super) resume: [Sum; 65],
    /// Of the folded gaps: idle time after a first failed round (hooks), its rounds, and the
    /// idle episodes (gaps with a failed round).
    pub(super) idle_ticks: u64,
    pub(super) rounds: u64,
    pub(super) idle_episodes: u64,
}

impl Default for Folded {
    fn default() -> Self {
        Folded {
            local: Sum::default(),
            steal: Sum::default(),
            resume: [Sum::default(); 65],
            idle_ticks: 0,
            rounds: 0,
            idle_episodes: 0,
        }
    }
}

/// One thread in one region, in ticks.
#[derive(Clone, Debug, Default)]
pub(super) struct Acc {
    pub(super) uc: u64,
    pub(super) lq: u64,
    pub(super) gs: u64,
    pub(super) w: u64,
    /// Parts of `lq`, `gs` and `w` switched out while runnable (see
    /// `RegionReport::preempted_ns`); the UC part is derived at finish.
    pub(super) preempted: StateNs,
    /// UC time switched out blocked, derived at finish (see `RegionReport::blocked_ns`).
    pub(super) blocked_uc: u64,
    /// Of `uc`, what the program counted while the thread's detail was paused.
    pub(super) counted_uc: u64,
    pub(super) transitions: Transitions,
    pub(super) tasks: TaskCounts,
    /// Ran a task of the region or its body: the thread's pool works for the region.
    pub(super) ran_region_code: bool,
    pub(super) folded: Folded,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Frame {
    pub(super) region: u32,
    pub(super) begin: u64,
    pub(super) task: bool,
    /// Open when a detail window began: its begin is not in the trace, and its duration is
    /// counted by the program.
    pub(super) partial: bool,
    /// Time of the tasks that ran nested in this one: a task's own time is its duration
    /// less theirs.
    pub(super) nested: u64,
    /// Of `nested`, the time this thread was switched out: what the task's own switched-out
    /// time is the rest of.
    pub(super) nested_switched_out: u64,
}

#[derive(Debug, Default)]
pub(super) struct ThreadState {
    pub(super) frames: Vec<Frame>,
    /// Frames beyond [`MAX_DEPTH`].
    pub(super) untracked_frames: u64,
    pub(super) in_uc: bool,
    /// Start of the current UC interval or gap.
    pub(super) since: u64,
    pub(super) first: Option<(u64, GapEnd, HookedSearch)>,
    /// What the hooks saw since the current gap began.
    pub(super) search: HookedSearch,
    pub(super) gap_after_task: bool,
    pub(super) accs: IdMap<u32, Acc>,
    pub(super) stored: Vec<Gap>,
    /// Gaps shorter than this are folded.
    pub(super) keep_min: u64,
    /// Regions entered on this thread and not yet left: (region, begin).
    pub(super) open_regions: Vec<(u32, u64)>,
    /// Between a detail pause and the next resume: the program counts this thread's
    /// lifecycle (see `program_totals`); only region runs are in the trace.
    pub(super) paused: bool,
    /// When the current pause began, and the stretches paused before it, in order: the
    /// switch records inside them fall in states the program counted without placing them.
    pub(super) paused_since: u64,
    pub(super) paused_stretches: Vec<(u64, u64)>,
    /// Just resumed: the stretch the next event ends was counted by the program.
    pub(super) fresh: bool,
}

/// What closes the current interval of a thread.
#[derive(Clone, Copy)]
pub(super) enum Close {
    Begin(TaskOrigin),
    Resume,
    /// A region's begin or end: ends UC normally; a gap it closes is not the scheduler's.
    Region,
    TaskEnd,
}

impl Close {
    /// How a gap that this closes ends; `Idle` when it is not the scheduler's.
    pub(super) fn gap_end(self) -> GapEnd {
        match self {
            Close::Begin(TaskOrigin::Local | TaskOrigin::Inline) => GapEnd::Local,
            Close::Begin(TaskOrigin::Stolen | TaskOrigin::Injected) => GapEnd::Steal,
            Close::Resume => GapEnd::Resume,
            Close::Region | Close::TaskEnd => GapEnd::Idle,
        }
    }
}

pub(super) fn chain(parents: &IdMap<u32, u32>, region: u32) -> impl Iterator<Item = u32> + '_ {
    std::iter::successors(Some(region), |r| parents.get(r).copied()).take(MAX_NESTING)
}

impl ThreadState {
    pub(super) fn acc(&mut self, region: u32) -> &mut Acc {
        self.accs.entry(region).or_default()
    }

    pub(super) fn for_chain(
        &mut self,
        parents: &IdMap<u32, u32>,
        region: u32,
        mut f: impl FnMut(&mut Acc),
    ) {
        for r in chain(parents, region) {
            f(self.acc(r));
        }
    }

    /// Ends the current UC interval or gap at `ts`; returns a closed gap, if any, for the
    /// caller to record.
    pub(super) fn close(
        &mut self,
        ts: u64,
        how: Close,
        region: u32,
        parents: &IdMap<u32, u32>,
    ) -> Option<Gap> {
        let since = std::mem::replace(&mut self.since, ts);
        let search = std::mem::take(&mut self.search);
        let len = ts.saturating_sub(since);
        if self.in_uc {
            if let Some(top) = self.frames.last().map(|f| f.region) {
                self.for_chain(parents, top, |a| a.uc += len);
            }
            if let Close::Begin(_) = how {
                self.for_chain(parents, region, |a| a.transitions.uc_uc += 1);
            }
            return None;
        }
        let kind = how.gap_end();
        if kind == GapEnd::Idle {
            return None;
        }
        Some(Gap {
            start: since,
            end: ts,
            after_task: self.gap_after_task,
            kind,
            region,
            search,
        })
    }

    pub(super) fn push(&mut self, frame: Frame) {
        if self.frames.len() < MAX_DEPTH {
            self.frames.push(frame);
        } else {
            self.untracked_frames += 1;
        }
    }

    /// Removes the innermost open frame of the given kind.
    pub(super) fn pop(&mut self, task: bool, region: u32) -> Option<Frame> {
        if self.untracked_frames > 0 {
            self.untracked_frames -= 1;
            return None;
        }
        // Normally the top frame; after lost events, the innermost one that matches.
        let at = self
            .frames
            .iter()
            .rposition(|f| f.task == task && f.region == region)
            .or_else(|| self.frames.iter().rposition(|f| f.task == task))?;
        Some(self.frames.remove(at))
    }

    pub(super) fn keep(&mut self, gap: Gap, parents: &IdMap<u32, u32>) {
        if gap.end - gap.start < self.keep_min {
            self.fold(gap, parents);
            return;
        }
        if self.stored.len() >= MAX_STORED_GAPS {
            self.fold_shorter_half(parents);
            if gap.end - gap.start < self.keep_min {
                self.fold(gap, parents);
                return;
            }
        }
        self.stored.push(gap);
    }

    /// Raises the keeping threshold until at most half the limit is kept; folds the rest.
    pub(super) fn fold_shorter_half(&mut self, parents: &IdMap<u32, u32>) {
        while self.stored.len() > MAX_STORED_GAPS / 2 {
            self.keep_min = self.keep_min.saturating_mul(2).max(1);
            let keep_min = self.keep_min;
            let (kept, folded): (Vec<Gap>, Vec<Gap>) = self
                .stored
                .drain(..)
                .partition(|g| g.end - g.start >= keep_min);
            self.stored = kept;
            for gap in folded {
                self.fold(gap, parents);
            }
        }
    }

    pub(super) fn fold(&mut self, gap: Gap, parents: &IdMap<u32, u32>) {
        let len = gap.end - gap.start;
        // Without the switch records here, only a search that slept is taken as idle after
        // its first failed round.
        let idle = match gap.search.idle_from {
            Some(t) if gap.search.sleeps > 0 => gap.end.saturating_sub(t.max(gap.start)),
            _ => 0,
        };
        self.for_chain(parents, gap.region, |a| {
            match gap.kind {
                GapEnd::Local => a.folded.local.add(len),
                GapEnd::Steal => a.folded.steal.add(len),
                GapEnd::Resume => a.folded.resume[64 - len.leading_zeros() as usize].add(len),
                GapEnd::Idle => return,
            }
            a.folded.idle_ticks += idle;
            a.folded.rounds += u64::from(gap.search.rounds);
            a.folded.idle_episodes += u64::from(gap.search.idle_from.is_some());
        });
    }
}

#[derive(Debug, Default)]
pub(super) struct RegionAcc {
    /// Closed runs: (begin, end).
    pub(super) windows: Vec<(u64, u64)>,
    pub(super) tasks: TaskCounts,
    /// Own times of the tasks that ran no nested task.
    pub(super) durations: DurationDistribution,
    /// The longest own time of any task, in ticks: its time switched out and that of the
    /// tasks nested in it aside.
    pub(super) longest_own: u64,
    /// Gaps that ended with a local pop: their median is the LQ part of a search.
    pub(super) local_gaps: DurationDistribution,
    /// Tasks counted by the program while their worker's detail was paused.
    pub(super) counted_in_program: u64,
    /// The region's indexed iterators the program counted, and their items.
    pub(super) iterator_items: IteratorItems,
    /// The time the program counted by the marks' clock, and the marks that fell in it.
    pub(super) marked_ticks: u64,
    pub(super) marks: u64,
}

/// Sorted, disjoint windows.
pub(super) fn merge(mut windows: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    windows.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(windows.len());
    for (a, b) in windows {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    merged
}
