//! Switched-out intervals of every thread, on the trace's tick time line.
//!
//! Built from the kernel's switch records: each switch-out is paired with the next switch-in
//! of the same thread. A thread created during the run is runnable from its creation to its
//! first switch-in: a new pool's workers that wait for a CPU are preempted, not absent. Queries answer "how long was thread T switched out within [a, b]"
//! in O(log n) through prefix sums (one per block of intervals, so that the sums cost a
//! fraction of the intervals' memory, which follows the run's switches).

use crate::recording::kernel_records::{SwitchKind, SwitchRecord, ThreadStart};
use std::borrow::Borrow;
use std::collections::HashMap;

/// One interval during which a thread was not on a CPU. Packed (17 bytes, not 24): a long
/// run has one per switch-out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, packed)]
pub struct OffCpu {
    pub start: u64,
    pub end: u64,
    /// Preempted while runnable (true) or blocked voluntarily (false).
    pub preempted: bool,
}

/// Switched-out time within a window, split by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchedOut {
    pub preempted: u64,
    pub voluntary: u64,
}

impl SwitchedOut {
    pub fn total(&self) -> u64 {
        self.preempted + self.voluntary
    }

    pub fn add(&mut self, other: SwitchedOut) {
        self.preempted += other.preempted;
        self.voluntary += other.voluntary;
    }

    /// The counter of the interval's cause.
    fn of_cause(&mut self, interval: &OffCpu) -> &mut u64 {
        if interval.preempted {
            &mut self.preempted
        } else {
            &mut self.voluntary
        }
    }
}

/// Intervals per prefix sum: a sum then costs 1 byte an interval, and a query reads at most
/// this many intervals more at each end.
const PREFIX_BLOCK: usize = 16;

#[derive(Default, Debug)]
struct ThreadIntervals {
    intervals: Vec<OffCpu>,
    /// prefix[k] = total length of intervals[..k * PREFIX_BLOCK], per cause.
    prefix: Vec<SwitchedOut>,
}

/// Off-CPU intervals of every thread, sorted and non-overlapping per thread.
#[derive(Default, Debug)]
pub struct OffCpuIndex {
    threads: HashMap<u32, ThreadIntervals>,
}

impl OffCpuIndex {
    /// `to_ticks` maps kernel ns onto the trace's tick time line. Switch records must be
    /// sorted by time. A switch-out without a later switch-in lasts until `end_of_run`.
    pub fn from_switches(
        switches: impl IntoIterator<Item = impl Borrow<SwitchRecord>>,
        thread_starts: &[ThreadStart],
        to_ticks: impl Fn(u64) -> u64,
        end_of_run: u64,
    ) -> Self {
        // A new thread waits for a CPU as a preempted one does; its first switch-out, if the
        // switch-in was lost, replaces the wait.
        let mut open: HashMap<u32, (u64, bool)> = thread_starts
            .iter()
            .map(|s| (s.tid, (to_ticks(s.time_ns), true)))
            .collect();
        let mut per_thread: HashMap<u32, Vec<OffCpu>> = HashMap::new();
        for s in switches {
            let s: &SwitchRecord = s.borrow();
            let t = to_ticks(s.time_ns);
            match s.kind {
                SwitchKind::OutPreempted | SwitchKind::OutVoluntary => {
                    open.insert(s.tid, (t, s.kind == SwitchKind::OutPreempted));
                }
                SwitchKind::In => {
                    if let Some((start, preempted)) = open.remove(&{ s.tid })
                        && t > start
                    {
                        per_thread.entry(s.tid).or_default().push(OffCpu {
                            start,
                            end: t,
                            preempted,
                        });
                    }
                }
            }
        }
        for (tid, (start, preempted)) in open {
            if end_of_run > start {
                per_thread.entry(tid).or_default().push(OffCpu {
                    start,
                    end: end_of_run,
                    preempted,
                });
            }
        }
        let threads = per_thread
            .into_iter()
            .map(|(tid, v)| (tid, ThreadIntervals::new(v)))
            .collect();
        OffCpuIndex { threads }
    }

    /// Switched-out time of `tid` within `[a, b]`.
    pub fn within(&self, tid: u32, a: u64, b: u64) -> SwitchedOut {
        self.threads
            .get(&tid)
            .map_or_else(SwitchedOut::default, |t| t.within(a, b))
    }

    /// A cursor over the intervals of `tid`, for windows whose ends rarely go backwards.
    pub fn cursor(&self, tid: u32) -> OffCpuCursor<'_> {
        OffCpuCursor {
            thread: self.threads.get(&tid).unwrap_or(&NO_INTERVALS),
            end: 0,
        }
    }

    /// The intervals of `tid` that overlap `[a, b]`, in time order.
    pub fn overlapping(&self, tid: u32, a: u64, b: u64) -> &[OffCpu] {
        self.threads.get(&tid).map_or(&[], |t| t.overlapping(a, b))
    }

    /// Every interval of `tid`, in time order.
    pub fn intervals(&self, tid: u32) -> &[OffCpu] {
        self.threads.get(&tid).map_or(&[], |t| &t.intervals)
    }

    pub fn threads(&self) -> impl Iterator<Item = u32> + '_ {
        self.threads.keys().copied()
    }
}

static NO_INTERVALS: ThreadIntervals = ThreadIntervals {
    intervals: Vec::new(),
    prefix: Vec::new(),
};

/// [`OffCpuIndex::within`] for one thread's calls as they return: their ends come in time
/// order and most are short, so a cursor follows the ends and the first interval of a window
/// is looked for backwards from it, in O(1) amortised instead of a hash lookup and two binary
/// searches over the whole run.
#[derive(Debug)]
pub struct OffCpuCursor<'a> {
    thread: &'a ThreadIntervals,
    /// The first interval that starts at or after the previous window's end.
    end: usize,
}

impl OffCpuCursor<'_> {
    /// Switched-out time within `[a, b]`; the same as [`OffCpuIndex::within`] whatever the
    /// order of the windows, only faster when `b` does not decrease and `a` is close to `b`.
    pub fn within(&mut self, a: u64, b: u64) -> SwitchedOut {
        if b <= a {
            return SwitchedOut::default();
        }
        let intervals = &self.thread.intervals;
        while self.end < intervals.len() && intervals[self.end].start < b {
            self.end += 1;
        }
        while self.end > 0 && intervals[self.end - 1].start >= b {
            self.end -= 1;
        }
        // Intervals do not overlap, so their ends are sorted too: gallop back from the cursor
        // to an interval that ends by `a`, then search between the two.
        let mut step = 1;
        let mut from = self.end;
        while from > 0 && intervals[from - 1].end > a {
            from = self.end.saturating_sub(step);
            step *= 2;
        }
        let first = from + intervals[from..self.end].partition_point(|i| i.end <= a);
        self.thread.sum(first, self.end, a, b)
    }
}

impl ThreadIntervals {
    fn new(mut intervals: Vec<OffCpu>) -> Self {
        // Paired from sorted switches, they come sorted: a stable sort's scratch (half the
        // list) is spent only on the rare run whose records were not.
        if !intervals.is_sorted_by_key(|i| i.start) {
            intervals.sort_by_key(|i| i.start);
        }
        // Lost or reordered records could make intervals overlap; clip so time is counted
        // once. In place: a long run's lists are the index's largest part.
        let mut last_end = None;
        intervals.retain_mut(|i| {
            if let Some(end) = last_end {
                i.start = i.start.max(end);
            }
            let kept = i.end > i.start;
            if kept {
                last_end = Some(i.end);
            }
            kept
        });
        intervals.shrink_to_fit();
        let clipped = intervals;
        let mut prefix = Vec::with_capacity(clipped.len() / PREFIX_BLOCK + 1);
        let mut acc = SwitchedOut::default();
        prefix.push(acc);
        for block in clipped.chunks(PREFIX_BLOCK) {
            for i in block {
                *acc.of_cause(i) += i.end - i.start;
            }
            prefix.push(acc);
        }
        ThreadIntervals {
            intervals: clipped,
            prefix,
        }
    }

    /// The total length of the intervals before the `i`-th, per cause.
    fn before(&self, i: usize) -> SwitchedOut {
        let block = i / PREFIX_BLOCK;
        let mut total = self.prefix[block];
        for interval in &self.intervals[block * PREFIX_BLOCK..i] {
            *total.of_cause(interval) += interval.end - interval.start;
        }
        total
    }

    fn overlapping(&self, a: u64, b: u64) -> &[OffCpu] {
        let first = self.intervals.partition_point(|i| i.end <= a);
        let last = self.intervals.partition_point(|i| i.start < b);
        &self.intervals[first..last.max(first)]
    }

    fn within(&self, a: u64, b: u64) -> SwitchedOut {
        if b <= a {
            return SwitchedOut::default();
        }
        let first = self.intervals.partition_point(|i| i.end <= a);
        let last = self.intervals.partition_point(|i| i.start < b);
        self.sum(first, last, a, b)
    }

    /// Switched-out time within `[a, b]`, given the first interval that ends after `a` and
    /// the first that starts at or after `b`.
    fn sum(&self, first: usize, last: usize, a: u64, b: u64) -> SwitchedOut {
        let last = last.max(first);
        if first == last {
            return SwitchedOut::default();
        }
        let (to_last, to_first) = (self.before(last), self.before(first));
        let mut total = SwitchedOut {
            preempted: to_last.preempted - to_first.preempted,
            voluntary: to_last.voluntary - to_first.voluntary,
        };
        // The first and last intervals may stick out of the window: remove the outside parts.
        let head = &self.intervals[first];
        *total.of_cause(head) -= a.saturating_sub(head.start);
        let tail = &self.intervals[last - 1];
        *total.of_cause(tail) -= tail.end.saturating_sub(b);
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(time_ns: u64, kind: SwitchKind) -> SwitchRecord {
        SwitchRecord {
            time_ns,
            tid: 1,
            cpu: 0,
            kind,
        }
    }

    #[test]
    fn pairs_switch_out_with_next_switch_in_and_clips_to_window() {
        let switches = [
            rec(1000, SwitchKind::OutPreempted),
            rec(1190, SwitchKind::In),
            rec(1225, SwitchKind::OutVoluntary),
            rec(1411, SwitchKind::In),
        ];
        let idx = OffCpuIndex::from_switches(switches, &[], |t| t, 5000);
        assert_eq!(
            idx.within(1, 900, 1550),
            SwitchedOut {
                preempted: 190,
                voluntary: 186
            }
        );
        assert_eq!(
            idx.within(1, 1100, 1300),
            SwitchedOut {
                preempted: 90,
                voluntary: 75
            }
        );
        assert_eq!(idx.within(1, 1190, 1225), SwitchedOut::default());
        assert_eq!(idx.within(2, 0, 5000), SwitchedOut::default());
        assert_eq!(idx.overlapping(1, 1200, 1300).len(), 1);
    }

    #[test]
    fn a_switch_out_without_switch_in_lasts_to_the_end_of_the_run() {
        let idx = OffCpuIndex::from_switches([rec(100, SwitchKind::OutVoluntary)], &[], |t| t, 400);
        assert_eq!(idx.within(1, 0, 1000).voluntary, 300);
    }

    #[test]
    fn intervals_out_of_order_or_overlapping_are_sorted_and_clipped() {
        let iv = |start, end| OffCpu {
            start,
            end,
            preempted: false,
        };
        let t = ThreadIntervals::new(vec![iv(50, 80), iv(10, 30), iv(20, 60), iv(70, 75)]);
        // (20, 60) starts where (10, 30) ended; (70, 75) lies inside (50, 80), now (60, 80).
        assert_eq!(t.intervals, [iv(10, 30), iv(30, 60), iv(60, 80)]);
        assert_eq!(t.within(0, 100).voluntary, 70);
    }

    #[test]
    fn a_new_thread_is_preempted_until_its_first_switch_in() {
        let starts = [
            ThreadStart {
                time_ns: 40,
                tid: 1,
            },
            ThreadStart {
                time_ns: 50,
                tid: 2,
            },
        ];
        let switches = [rec(100, SwitchKind::In), rec(150, SwitchKind::OutVoluntary)];
        let idx = OffCpuIndex::from_switches(switches, &starts, |t| t, 400);
        // Thread 1 waited 40..100 for a CPU, then slept from 150 on.
        assert_eq!(
            idx.within(1, 0, 1000),
            SwitchedOut {
                preempted: 60,
                voluntary: 250
            }
        );
        // Thread 2 never got a CPU before the run ended.
        assert_eq!(idx.within(2, 0, 1000).preempted, 350);
    }

    #[test]
    fn the_cursor_answers_as_the_index_in_any_order_of_windows() {
        // Alternating 30 ticks off and 20 on, causes alternating, from 100 to 2600.
        let switches: Vec<SwitchRecord> = (0..50u64)
            .flat_map(|k| {
                let out = if k % 2 == 0 {
                    SwitchKind::OutPreempted
                } else {
                    SwitchKind::OutVoluntary
                };
                [rec(100 + 50 * k, out), rec(130 + 50 * k, SwitchKind::In)]
            })
            .collect();
        let idx = OffCpuIndex::from_switches(&switches, &[], |t| t, 5000);
        let mut cursor = idx.cursor(1);
        let mut absent = idx.cursor(2);
        // Nested calls returning in order, then ends that go back, then empty windows.
        let windows = (0..300u64).map(|k| (k * 9 % 700, 40 + k * 9)).chain([
            (0, 2700),
            (1500, 1510),
            (0, 90),
            (2000, 2000),
            (3000, 2000),
        ]);
        for (a, b) in windows {
            assert_eq!(cursor.within(a, b), idx.within(1, a, b), "[{a}, {b}]");
            assert_eq!(absent.within(a, b), SwitchedOut::default());
        }
    }

    #[test]
    fn sums_over_blocks_of_intervals_are_each_interval_s_overlap_summed() {
        // 50 intervals (three blocks and part of a fourth) of lengths 1 to 50, causes mixed.
        let mut at = 0;
        let switches: Vec<SwitchRecord> = (1..=50u64)
            .flat_map(|len| {
                let out = if len % 3 == 0 {
                    SwitchKind::OutPreempted
                } else {
                    SwitchKind::OutVoluntary
                };
                at += 7 + len;
                [rec(at, out), rec(at + len, SwitchKind::In)]
            })
            .collect();
        let idx = OffCpuIndex::from_switches(&switches, &[], |t| t, 0);
        let intervals = idx.intervals(1);
        assert_eq!(intervals.len(), 50);
        for (a, b) in (0..at + 60)
            .step_by(13)
            .flat_map(|a| [(a, a + 5), (a, a + 400)])
        {
            let mut expected = SwitchedOut::default();
            for i in intervals {
                let overlap = i.end.min(b).saturating_sub(i.start.max(a));
                *expected.of_cause(i) += overlap;
            }
            assert_eq!(idx.within(1, a, b), expected, "[{a}, {b}]");
        }
    }
}
