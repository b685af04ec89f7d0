//! The timeline's picture of the lifecycle: each worker's states within the regions, and the
//! regions' runs.
//!
//! A thread's time line is cut into UC intervals and gaps as the events stream in; the longest
//! of them are kept, a bounded number, like the timeline's probe spans (short ones are
//! invisible until one zooms in, and there are two per task). At finish the kept gaps are
//! split into LQ, GS and W the way their time is counted, and clipped to the regions' runs.
//! Which threads are workers is known only at finish (thread records may come last), so the
//! stretches of other threads take places in the bound too, and are dropped then.

use super::state::{Gap, GapEnd, merge};
use crate::analysis::model::WorkerState;
use crate::analysis::offcpu::OffCpuIndex;
use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};

/// The `capacity` largest items offered (by their `Ord`), and how many were left out.
///
/// Kept unsorted, up to twice the capacity, then cut back to the capacity largest: a linear
/// selection every `capacity` offers costs a few comparisons an item, where a heap of the kept
/// ones cost a sift through it (a cache miss a level) for most offers of a long run, whose
/// later stretches keep outgrowing the kept ones. The order is total, so what is kept does not
/// depend on how.
#[derive(Debug)]
pub(super) struct Longest<T> {
    capacity: usize,
    kept: Vec<T>,
    left_out: u64,
}

impl<T: Ord> Longest<T> {
    pub(super) fn new(capacity: usize) -> Self {
        Longest {
            capacity,
            kept: Vec::new(),
            left_out: 0,
        }
    }

    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    pub(super) fn offer(&mut self, item: T) {
        self.kept.push(item);
        if self.kept.len() >= 2 * self.capacity.max(1) {
            self.cut_to_capacity();
        }
    }

    /// Leaves the `capacity` largest items kept.
    fn cut_to_capacity(&mut self) {
        let Some(excess) = self.kept.len().checked_sub(self.capacity) else {
            return;
        };
        if excess > 0 && self.capacity > 0 {
            self.kept
                .select_nth_unstable_by(self.capacity - 1, |a, b| b.cmp(a));
        }
        self.kept.truncate(self.capacity);
        self.left_out += excess as u64;
    }

    fn into_parts(mut self) -> (Vec<T>, u64) {
        self.cut_to_capacity();
        (self.kept, self.left_out)
    }
}

/// What a kept stretch of a thread's time line was.
#[derive(Clone, Copy, Debug)]
pub(super) enum Stretch {
    /// Running a task (or the body) of the region.
    UserCode { region: u32 },
    /// Outside user code: LQ, GS or W, decided at finish.
    Gap(Gap),
}

/// A stretch `[start, end]` of thread `tid`, in ticks.
#[derive(Clone, Copy, Debug)]
pub(super) struct KeptStretch {
    pub tid: u32,
    pub start: u64,
    pub end: u64,
    pub stretch: Stretch,
}

/// Longer first; the stretches of one thread are disjoint, so start and thread make the
/// order total and the kept set independent of the order of offers.
fn rank(tid: u32, start: u64, end: u64) -> (u64, Reverse<u64>, Reverse<u32>) {
    (end - start, Reverse(start), Reverse(tid))
}

impl KeptStretch {
    fn rank(&self) -> (u64, Reverse<u64>, Reverse<u32>) {
        rank(self.tid, self.start, self.end)
    }
}

impl PartialEq for KeptStretch {
    fn eq(&self, other: &Self) -> bool {
        self.rank() == other.rank()
    }
}

impl Eq for KeptStretch {}

impl PartialOrd for KeptStretch {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for KeptStretch {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.rank().cmp(&other.rank())
    }
}

/// A worker's state from `start` to `end` (ticks) within region `region`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickStateSpan {
    pub tid: u32,
    pub region: u32,
    pub state: WorkerState,
    pub start: u64,
    pub end: u64,
}

impl TickStateSpan {
    fn rank(&self) -> (u64, Reverse<u64>, Reverse<u32>) {
        rank(self.tid, self.start, self.end)
    }
}

impl PartialOrd for TickStateSpan {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TickStateSpan {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.rank()
            .cmp(&other.rank())
            .then(self.region.cmp(&other.region))
            .then(self.state.cmp(&other.state))
    }
}

/// A run of region `region` (ticks; overlapping runs merged).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TickRegionRun {
    pub region: u32,
    pub start: u64,
    pub end: u64,
}

/// The lifecycle's spans for the timeline, bounded in number; times in ticks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LifecycleTimeline {
    /// Sorted by thread, then start.
    pub worker_states: Vec<TickStateSpan>,
    /// Sorted by region, then start.
    pub region_runs: Vec<TickRegionRun>,
    /// Stretches, state spans and runs left out by the bound.
    pub left_out: u64,
}

/// What splitting the kept gaps needs to know.
pub(super) struct Split<'a> {
    pub workers: &'a HashSet<u32>,
    /// Each region's runs, merged and sorted.
    pub runs: &'a HashMap<u32, Vec<(u64, u64)>>,
    /// Each region's LQ part of a search that follows a task.
    pub lq_estimate: &'a HashMap<u32, u64>,
    /// A gap closed by a resume is a search when longer than this.
    pub search_min: u64,
    pub offcpu: &'a OffCpuIndex,
    pub capacity: usize,
    /// Searches and sleeps come from the rayon-core hooks.
    pub hooked: bool,
}

impl Split<'_> {
    /// The states of the kept stretches of workers, gaps clipped to the runs of any region.
    pub(super) fn timeline(&self, stretches: Longest<KeptStretch>) -> LifecycleTimeline {
        let (stretches, mut left_out) = stretches.into_parts();
        let any_run = merge(self.runs.values().flatten().copied().collect());
        let mut states = Longest::new(self.capacity);
        for kept in stretches.iter().filter(|k| self.workers.contains(&k.tid)) {
            match kept.stretch {
                Stretch::UserCode { region } => states.offer(TickStateSpan {
                    tid: kept.tid,
                    region,
                    state: WorkerState::UserCode,
                    start: kept.start,
                    end: kept.end,
                }),
                Stretch::Gap(gap) => {
                    self.split_gap(kept.tid, &gap, &any_run, &mut |span| states.offer(span))
                }
            }
        }
        let (mut worker_states, states_left_out) = states.into_parts();
        worker_states.sort_unstable_by_key(|s| (s.tid, s.start));
        let mut runs = Longest::new(self.capacity);
        for (&region, windows) in self.runs {
            for &(start, end) in windows {
                runs.offer((end - start, Reverse(start), Reverse(region)));
            }
        }
        let (runs, runs_left_out) = runs.into_parts();
        let mut region_runs: Vec<TickRegionRun> = runs
            .into_iter()
            .map(|(len, Reverse(start), Reverse(region))| TickRegionRun {
                region,
                start,
                end: start + len,
            })
            .collect();
        region_runs.sort_unstable();
        left_out += states_left_out + runs_left_out;
        LifecycleTimeline {
            worker_states,
            region_runs,
            left_out,
        }
    }

    /// Cuts a gap into LQ, GS and W as [`super::Shape::classify`] counts its time: LQ
    /// throughout when the worker found its next task at home, otherwise LQ for the region's
    /// estimate (after a task), then GS except while idle (W). Each piece
    /// is clipped to the runs of any region and labelled with the innermost region running
    /// where it starts.
    fn split_gap(
        &self,
        tid: u32,
        gap: &Gap,
        any_run: &[(u64, u64)],
        out: &mut dyn FnMut(TickStateSpan),
    ) {
        let (a, b) = (gap.start, gap.end);
        let mut piece = |start: u64, end: u64, state: WorkerState| {
            let first = any_run.partition_point(|w| w.1 <= start);
            for &(w0, w1) in any_run[first..].iter().take_while(|w| w.0 < end) {
                let (s, e) = (start.max(w0), end.min(w1));
                if s < e
                    && let Some(region) = self.innermost_region_at(s)
                {
                    out(TickStateSpan {
                        tid,
                        region,
                        state,
                        start: s,
                        end: e,
                    });
                }
            }
        };
        let search = match gap.kind {
            GapEnd::Local => false,
            GapEnd::Resume => b - a > self.search_min,
            GapEnd::Steal | GapEnd::Idle => true,
        };
        if !search {
            piece(a, b, WorkerState::LocalQueue);
            return;
        }
        let lq_end = if gap.after_task {
            let region = self.innermost_region_at(a).unwrap_or(gap.region);
            a + self
                .lq_estimate
                .get(&region)
                .copied()
                .unwrap_or(0)
                .min(b - a)
        } else {
            a
        };
        piece(a, lq_end, WorkerState::LocalQueue);
        // With the hooks, idle after the first failed round whenever off the CPU; without,
        // only while switched out voluntarily (see `Shape::classify`).
        let idle_from = gap.search.idle_from.map(|t| t.clamp(lq_end, b));
        let mut searching_since = lq_end;
        for off in self.offcpu.overlapping(tid, lq_end, b) {
            let idle_start = match idle_from {
                Some(t) => off.start.max(t),
                None if self.hooked || off.preempted => continue,
                None => off.start,
            };
            let (s, e) = (idle_start.max(searching_since), off.end.min(b));
            if s >= e {
                continue;
            }
            piece(searching_since, s, WorkerState::GlobalSearch);
            piece(s, e, WorkerState::Wait);
            searching_since = e;
        }
        piece(searching_since, b, WorkerState::GlobalSearch);
    }

    /// The region whose run containing `t` began last (the innermost of nested regions);
    /// ties go to the lower site, so that the answer does not depend on hash order.
    fn innermost_region_at(&self, t: u64) -> Option<u32> {
        self.runs
            .iter()
            .filter_map(|(&region, windows)| {
                let at = windows.partition_point(|w| w.0 <= t).checked_sub(1)?;
                let (w0, w1) = windows[at];
                (t < w1).then_some((w0, Reverse(region)))
            })
            .max()
            .map(|(_, Reverse(region))| region)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn longest_keeps_the_largest_and_counts_the_rest(
            items in prop::collection::vec(0u32..1000, 0..300),
            capacity in 0usize..40,
        ) {
            let mut longest = Longest::new(capacity);
            for &item in &items {
                longest.offer(item);
            }
            let (mut kept, left_out) = longest.into_parts();
            kept.sort_unstable();
            let mut expected = items.clone();
            expected.sort_unstable();
            let cut = expected.len().saturating_sub(capacity);
            prop_assert_eq!(&kept[..], &expected[cut..]);
            prop_assert_eq!(left_out, cut as u64);
        }
    }
}
