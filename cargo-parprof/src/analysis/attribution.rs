//! Method 3 of the specification: attributing a counter's deltas to overlapping intervals
//! (tasks, probe calls, regions) when the counter cannot be read per interval.
//!
//! Input: one cumulative counter series on `CLOCK_MONOTONIC` ns (e.g. the program's page
//! faults summed over all CPUs, [`process_series`]) and a
//! set of intervals that compete for it. The intervals are cut into **time slices**, spans
//! during which the set of active intervals does not change. Each slice's delta is the
//! difference of the series at the slice's end and start, **linearly interpolated** between
//! the nearest samples where no sample falls on a boundary. An interval receives a share of
//! each slice it is active in, and with it an **error bound**: the part of the slice's delta
//! it did not receive, summed over its slices. When the true contribution of every active
//! interval lies between 0 and the slice's delta, `value + error` is an upper bound of the
//! truth, and with equal shares of two or more intervals `value - error <= 0` is a lower one.
//!
//! Which intervals compete is the caller's choice, one call per set: e.g. all tasks and probe
//! calls together (they are the work the program does), and the regions in a separate call
//! (a region overlaps its own tasks, so it would otherwise take a share from them). A group
//! (a probe site, a region's tasks, the user's selection) is the sum of its members'
//! values and errors, [`sum`].
//!
//! The sweep over the slices visits the series once in time order (the interpolation cursor
//! only moves forward), so a caller may feed a long series without random access.

use crate::recording::counters::CounterSeries;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// A cumulative counter reading.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CounterPoint {
    pub time_ns: u64,
    pub value: f64,
}

/// The program's total count of `series` over time (all CPUs), for attribution: one point
/// per reading time, each CPU taken at its latest reading.
pub fn process_series(series: &CounterSeries) -> Vec<CounterPoint> {
    let mut last: BTreeMap<u32, f64> = BTreeMap::new();
    let mut out: Vec<CounterPoint> = Vec::new();
    for s in series.samples() {
        last.insert(s.cpu, s.value);
        let value = last.values().sum();
        match out.last_mut() {
            Some(p) if p.time_ns == s.time_ns => p.value = value,
            _ => out.push(CounterPoint {
                time_ns: s.time_ns,
                value,
            }),
        }
    }
    out
}

/// An interval to attribute to. A missing boundary (e.g. a task whose end was not recorded
/// because the trace was cut) is taken from the nearest boundary of another interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub start_ns: Option<u64>,
    pub end_ns: Option<u64>,
    /// The thread it ran on; needed for on-CPU-weighted shares.
    pub tid: Option<u32>,
}

/// How a figure was shared between the intervals active at the same time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShareKind {
    /// 1/n of every slice with n active intervals.
    Equal,
    /// In proportion to the on-CPU time of each active interval's thread in the slice.
    OnCpuWeighted,
    /// On-CPU weighted where the on-CPU time of every active interval was known and not all
    /// zero, 1/n elsewhere (or a group of figures shared in different ways).
    Mixed,
}

impl ShareKind {
    /// The text shown next to a figure.
    pub fn describe(self) -> &'static str {
        match self {
            ShareKind::Equal => "1/n share of each time slice",
            ShareKind::OnCpuWeighted => "share weighted by on-CPU time in each time slice",
            ShareKind::Mixed => "on-CPU-weighted share where known, 1/n elsewhere",
        }
    }

    fn combine(a: Option<ShareKind>, b: ShareKind) -> ShareKind {
        match a {
            None => b,
            Some(a) if a == b => a,
            Some(_) => ShareKind::Mixed,
        }
    }
}

/// The counter delta attributed to one interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Attributed {
    pub value: f64,
    /// Sum over the interval's slices of the part of the slice's delta it did not receive.
    pub error: f64,
    pub share: ShareKind,
    /// The start was missing and taken from another interval (or the start of the series).
    pub start_inferred: bool,
    /// The end was missing and taken from another interval (or the end of the series).
    pub end_inferred: bool,
}

/// On-CPU time of a thread within `[start_ns, end_ns]`, e.g. from the kernel's switch records.
pub trait OnCpuTime {
    fn on_cpu_ns(&self, tid: u32, start_ns: u64, end_ns: u64) -> u64;
}

impl<F: Fn(u32, u64, u64) -> u64> OnCpuTime for F {
    fn on_cpu_ns(&self, tid: u32, start_ns: u64, end_ns: u64) -> u64 {
        self(tid, start_ns, end_ns)
    }
}

/// The switched-out index must have been built on the ns time line (identity mapping).
impl OnCpuTime for crate::analysis::offcpu::OffCpuIndex {
    fn on_cpu_ns(&self, tid: u32, start_ns: u64, end_ns: u64) -> u64 {
        end_ns
            .saturating_sub(start_ns)
            .saturating_sub(self.within(tid, start_ns, end_ns).total())
    }
}

/// How each slice's delta is shared.
#[derive(Clone, Copy)]
pub enum Share<'a> {
    Equal,
    /// Falls back to 1/n in slices where an active interval has no thread or all threads
    /// were switched out. Intervals active on the same thread at once (nested tasks) split
    /// that thread's on-CPU time equally.
    OnCpuWeighted(&'a dyn OnCpuTime),
}

/// The counter at `t`: linear interpolation between the nearest samples on either side;
/// before the first or after the last sample, that sample's value (nothing is known beyond
/// the series, so no change is made up). `series` must be sorted by time.
pub fn interpolate(series: &[CounterPoint], t: u64) -> f64 {
    let mut cursor = Interpolator::new(series);
    cursor.at(t)
}

/// Interpolates at non-decreasing times with a cursor that only moves forward, so a sweep
/// over a long series costs one pass.
pub struct Interpolator<'a> {
    series: &'a [CounterPoint],
    /// Index of the first sample with `time_ns >= t` for the last `t` asked.
    next: usize,
}

impl<'a> Interpolator<'a> {
    /// `series` must be sorted by time.
    pub fn new(series: &'a [CounterPoint]) -> Self {
        Interpolator { series, next: 0 }
    }

    /// The counter at `t`, as [`interpolate`] gives it; `t` must not decrease between calls.
    pub fn at(&mut self, t: u64) -> f64 {
        while self.next < self.series.len() && self.series[self.next].time_ns < t {
            self.next += 1;
        }
        match (
            self.next.checked_sub(1).and_then(|i| self.series.get(i)),
            self.series.get(self.next),
        ) {
            (_, Some(after)) if after.time_ns == t => after.value,
            (Some(before), Some(after)) => {
                let span = (after.time_ns - before.time_ns) as f64;
                let into = (t - before.time_ns) as f64;
                before.value + (after.value - before.value) * into / span
            }
            (Some(only), None) | (None, Some(only)) => only.value,
            (None, None) => 0.0,
        }
    }
}

/// Attributes the series' deltas to `spans`, one result per span in the same order.
pub fn attribute(series: &[CounterPoint], spans: &[Span], share: Share<'_>) -> Vec<Attributed> {
    let resolved = resolve_boundaries(series, spans);
    let mut out = unattributed(&resolved, share);
    // Which slices fell back to equal shares, per span, to name the share kind at the end.
    let mut fell_back = vec![false; spans.len()];
    let mut weighted = vec![false; spans.len()];

    let events = boundary_events(&resolved);

    let mut interp = Interpolator::new(series);
    let mut active: Vec<usize> = Vec::new();
    let mut weights: Vec<f64> = Vec::new();
    // Scratch space of `slice_weights`, reused by every slice.
    let mut per_thread: HashMap<u32, (u64, usize)> = HashMap::new();
    let mut slice_start = 0u64;
    let mut value_at_start = 0.0;
    let mut k = 0;
    while k < events.len() {
        let t = events[k].0;
        let value_at_t = interp.at(t);
        if !active.is_empty() && t > slice_start {
            // Counters only grow; a decrease is a reset or a wrap, not negative work.
            let delta = (value_at_t - value_at_start).max(0.0);
            let used_weights = match share {
                Share::Equal => false,
                Share::OnCpuWeighted(on_cpu) => slice_weights(
                    &active,
                    &resolved,
                    on_cpu,
                    (slice_start, t),
                    &mut per_thread,
                    &mut weights,
                ),
            };
            let n = active.len() as f64;
            for (j, &i) in active.iter().enumerate() {
                let part = if used_weights {
                    delta * weights[j]
                } else {
                    delta / n
                };
                out[i].value += part;
                out[i].error += delta - part;
                if used_weights {
                    weighted[i] = true;
                } else {
                    fell_back[i] = true;
                }
            }
        }
        k = cross_boundaries(&events, k, &mut active);
        slice_start = t;
        value_at_start = value_at_t;
    }

    if matches!(share, Share::OnCpuWeighted(_)) {
        name_weighted_shares(&mut out, &weighted, &fell_back);
    }
    out
}

/// One result per resolved span, with nothing attributed yet and the share `share` asks for.
fn unattributed(resolved: &[Resolved], share: Share<'_>) -> Vec<Attributed> {
    resolved
        .iter()
        .map(|r| Attributed {
            value: 0.0,
            error: 0.0,
            share: match share {
                Share::Equal => ShareKind::Equal,
                Share::OnCpuWeighted(_) => ShareKind::OnCpuWeighted,
            },
            start_inferred: r.start_inferred,
            end_inferred: r.end_inferred,
        })
        .collect()
}

/// Applies the boundary events at the time of `events[k]` to the `active` spans (starts join,
/// ends leave); returns the index of the first event after that time.
fn cross_boundaries(events: &[(u64, bool, usize)], mut k: usize, active: &mut Vec<usize>) -> usize {
    let t = events[k].0;
    while k < events.len() && events[k].0 == t {
        let (_, is_start, i) = events[k];
        if is_start {
            active.push(i);
        } else if let Some(pos) = active.iter().position(|&a| a == i) {
            active.swap_remove(pos);
        }
        k += 1;
    }
    k
}

/// Names each span's share under on-CPU weighting: weighted in every slice, equal in every
/// slice (no weights could be had), or mixed.
fn name_weighted_shares(out: &mut [Attributed], weighted: &[bool], fell_back: &[bool]) {
    for ((a, &weighted), &fell_back) in out.iter_mut().zip(weighted).zip(fell_back) {
        a.share = match (weighted, fell_back) {
            (_, false) => ShareKind::OnCpuWeighted,
            (false, true) => ShareKind::Equal,
            (true, true) => ShareKind::Mixed,
        };
    }
}

/// The spans' starts and ends as `(time, is_start, span)`, in time order; ends sort before
/// starts at the same time, so intervals that touch do not share a slice.
fn boundary_events(resolved: &[Resolved]) -> Vec<(u64, bool, usize)> {
    let mut events: Vec<(u64, bool, usize)> = Vec::with_capacity(resolved.len() * 2);
    for (i, r) in resolved.iter().enumerate() {
        if r.end_ns > r.start_ns {
            events.push((r.start_ns, true, i));
            events.push((r.end_ns, false, i));
        }
    }
    events.sort_unstable_by_key(|&(t, is_start, i)| (t, is_start, i));
    events
}

/// Fills `weights` (fractions summing to 1, in the order of `active`) and returns true, or
/// returns false when the slice must be shared equally.
fn slice_weights(
    active: &[usize],
    spans: &[Resolved],
    on_cpu: &dyn OnCpuTime,
    (start, end): (u64, u64),
    per_thread: &mut HashMap<u32, (u64, usize)>,
    weights: &mut Vec<f64>,
) -> bool {
    per_thread.clear();
    for &i in active {
        let Some(tid) = spans[i].tid else {
            return false;
        };
        per_thread
            .entry(tid)
            .or_insert_with(|| (on_cpu.on_cpu_ns(tid, start, end), 0))
            .1 += 1;
    }
    weights.clear();
    let mut total = 0.0;
    for &i in active {
        let (time, sharing) = spans[i]
            .tid
            .and_then(|t| per_thread.get(&t))
            .copied()
            .unwrap_or((0, 1));
        let w = time as f64 / sharing as f64;
        total += w;
        weights.push(w);
    }
    if total <= 0.0 {
        return false;
    }
    for w in weights.iter_mut() {
        *w /= total;
    }
    true
}

struct Resolved {
    start_ns: u64,
    end_ns: u64,
    tid: Option<u32>,
    start_inferred: bool,
    end_inferred: bool,
}

/// Fills missing boundaries: a missing end is the earliest end of another interval at or
/// after this one's start, a missing start the latest start of another interval at or before
/// this one's end; without such a boundary, the end (start) of the series.
fn resolve_boundaries(series: &[CounterPoint], spans: &[Span]) -> Vec<Resolved> {
    let first = series.first().map_or(0, |p| p.time_ns);
    let last = series.last().map_or(0, |p| p.time_ns);
    let mut starts: Vec<u64> = spans.iter().filter_map(|s| s.start_ns).collect();
    let mut ends: Vec<u64> = spans.iter().filter_map(|s| s.end_ns).collect();
    starts.sort_unstable();
    ends.sort_unstable();
    let nearest_end_after = |t: u64| {
        let i = ends.partition_point(|&e| e < t);
        ends.get(i).copied().unwrap_or(last.max(t))
    };
    let nearest_start_before = |t: u64| {
        let i = starts.partition_point(|&s| s <= t);
        i.checked_sub(1).map_or(first.min(t), |i| starts[i])
    };
    spans
        .iter()
        .map(|s| {
            let (start_ns, end_ns) = match (s.start_ns, s.end_ns) {
                (Some(a), Some(b)) => (a, b),
                (Some(a), None) => (a, nearest_end_after(a)),
                (None, Some(b)) => (nearest_start_before(b), b),
                (None, None) => (first, last),
            };
            Resolved {
                start_ns,
                end_ns,
                tid: s.tid,
                start_inferred: s.start_ns.is_none(),
                end_inferred: s.end_ns.is_none(),
            }
        })
        .collect()
}

/// The total of a group of attributed figures: values and errors are summed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct GroupTotal {
    pub value: f64,
    pub error: f64,
    /// `None` for an empty group.
    pub share: Option<ShareKind>,
    pub members: usize,
}

pub fn sum<'a>(items: impl IntoIterator<Item = &'a Attributed>) -> GroupTotal {
    let mut total = GroupTotal {
        value: 0.0,
        error: 0.0,
        share: None,
        members: 0,
    };
    for a in items {
        total.value += a.value;
        total.error += a.error;
        total.share = Some(ShareKind::combine(total.share, a.share));
        total.members += 1;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_series_sums_each_cpus_latest_reading_per_reading_time() {
        let series = crate::recording::counters::tests::two_cpu_series();
        assert_eq!(
            process_series(&series),
            [p(1000, 3000.0), p(2000, 3700.0), p(3000, 3800.0)]
        );
    }

    fn p(time_ns: u64, value: f64) -> CounterPoint {
        CounterPoint { time_ns, value }
    }

    fn span(start: u64, end: u64) -> Span {
        Span {
            start_ns: Some(start),
            end_ns: Some(end),
            tid: None,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn interpolation_matches_the_specification_example() {
        let series = [p(100, 300.0), p(200, 360.0)];
        assert_eq!(interpolate(&series, 120), 312.0);
        assert_eq!(interpolate(&series, 100), 300.0);
        assert_eq!(interpolate(&series, 200), 360.0);
        // Outside the series nothing is made up.
        assert_eq!(interpolate(&series, 50), 300.0);
        assert_eq!(interpolate(&series, 250), 360.0);
        assert_eq!(interpolate(&[], 250), 0.0);
    }

    #[test]
    fn a_single_task_gets_the_interpolated_delta_without_error() {
        let series = [p(100, 300.0), p(200, 360.0)];
        let a = attribute(&series, &[span(120, 150)], Share::Equal);
        assert_eq!(a[0].value, 330.0 - 312.0);
        assert_eq!(a[0].error, 0.0);
        assert_eq!(a[0].share, ShareKind::Equal);
    }

    #[test]
    fn slices_shared_by_four_three_and_two_tasks() {
        // 120 per 100 ns; A and B run 0..300, C 0..200, D 0..100.
        let series = [p(0, 0.0), p(300, 360.0)];
        let spans = [span(0, 300), span(0, 300), span(0, 200), span(0, 100)];
        let a = attribute(&series, &spans, Share::Equal);
        // A: 120/4 + 120/3 + 120/2; the error is the rest of each slice.
        assert_eq!((a[0].value, a[0].error), (130.0, 90.0 + 80.0 + 60.0));
        assert_eq!((a[1].value, a[1].error), (130.0, 230.0));
        assert_eq!((a[2].value, a[2].error), (70.0, 170.0));
        assert_eq!((a[3].value, a[3].error), (30.0, 90.0));
        // Every unit of the delta went to exactly one task.
        assert_eq!(a.iter().map(|x| x.value).sum::<f64>(), 360.0);
    }

    #[test]
    fn the_error_bound_is_the_unattributed_part() {
        // With 3 active tasks a task gets 1/3 and the error is 2/3 of the slice.
        let series = [p(0, 0.0), p(100, 90.0)];
        let a = attribute(
            &series,
            &[span(0, 100), span(0, 100), span(0, 100)],
            Share::Equal,
        );
        for x in &a {
            assert!(close(x.value, 30.0) && close(x.error, 60.0), "{x:?}");
        }
        let g = sum(&a[..2]);
        assert!(close(g.value, 60.0) && close(g.error, 120.0));
        assert_eq!((g.share, g.members), (Some(ShareKind::Equal), 2));
    }

    #[test]
    fn touching_tasks_do_not_share_a_slice() {
        let series = [p(0, 0.0), p(200, 200.0)];
        let a = attribute(&series, &[span(0, 100), span(100, 200)], Share::Equal);
        assert_eq!((a[0].value, a[0].error), (100.0, 0.0));
        assert_eq!((a[1].value, a[1].error), (100.0, 0.0));
    }

    #[test]
    fn a_task_missing_its_end_takes_the_nearest_end_of_another_task() {
        let series = [p(0, 0.0), p(1000, 1000.0)];
        let spans = [
            span(0, 300),
            Span {
                start_ns: Some(100),
                end_ns: None,
                tid: None,
            },
            span(50, 600),
        ];
        let a = attribute(&series, &spans, Share::Equal);
        // The open task runs 100..300 (the first end after its start): slices 100..300 with
        // three tasks active.
        assert!(a[1].end_inferred && !a[1].start_inferred);
        assert!(close(a[1].value, 200.0 / 3.0), "{:?}", a[1]);
        assert!(close(a[1].error, 400.0 / 3.0));
        // A missing start takes the latest start before the end; with neither, the series.
        let spans = [
            span(200, 400),
            Span {
                start_ns: None,
                end_ns: Some(500),
                tid: None,
            },
        ];
        let a = attribute(&series, &spans, Share::Equal);
        assert!(a[1].start_inferred);
        assert_eq!(a[1].value, 100.0 + 100.0);
        let lone = Span {
            start_ns: None,
            end_ns: None,
            tid: None,
        };
        assert_eq!(attribute(&series, &[lone], Share::Equal)[0].value, 1000.0);
    }

    #[test]
    fn on_cpu_weighted_shares_follow_the_threads_on_cpu_time() {
        let series = [p(0, 0.0), p(100, 100.0)];
        // Thread 2 was switched out for 75 of the 100 ns.
        let on_cpu = |tid: u32, a: u64, b: u64| if tid == 2 { (b - a) / 4 } else { b - a };
        let spans = [
            Span {
                start_ns: Some(0),
                end_ns: Some(100),
                tid: Some(1),
            },
            Span {
                start_ns: Some(0),
                end_ns: Some(100),
                tid: Some(2),
            },
        ];
        let a = attribute(&series, &spans, Share::OnCpuWeighted(&on_cpu));
        assert_eq!((a[0].value, a[0].error), (80.0, 20.0));
        assert_eq!((a[1].value, a[1].error), (20.0, 80.0));
        assert_eq!(a[0].share, ShareKind::OnCpuWeighted);
        // Without a thread the slice falls back to 1/n, and says so.
        let spans = [spans[0], span(0, 100)];
        let a = attribute(&series, &spans, Share::OnCpuWeighted(&on_cpu));
        assert_eq!((a[0].value, a[0].share), (50.0, ShareKind::Equal));
        assert_eq!(
            sum(&[
                a[0],
                Attributed {
                    share: ShareKind::OnCpuWeighted,
                    ..a[1]
                }
            ])
            .share,
            Some(ShareKind::Mixed)
        );
    }

    /// A simulated run: each task faults pages at its own constant rate, the program-wide
    /// count is sampled every millisecond, and the tasks overlap in every way. The
    /// attributed value plus/minus its error must contain each task's true count.
    #[test]
    fn the_error_bound_contains_the_truth_on_a_synthetic_run() {
        const MS: u64 = 1_000_000;
        // (start, end, page faults per ms)
        let tasks: [(u64, u64, f64); 5] = [
            (0, 40 * MS, 50.0),
            (5 * MS + 300_000, 12 * MS + 700_000, 400.0),
            (10 * MS, 30 * MS, 7.0),
            (11 * MS + 100_000, 35 * MS + 900_000, 120.0),
            (33 * MS, 39 * MS + 500_000, 900.0),
        ];
        let truth = |(a, b, rate): (u64, u64, f64)| (b - a) as f64 / MS as f64 * rate;
        let count_at = |t: u64| -> f64 {
            tasks
                .iter()
                .map(|&(a, b, rate)| truth((a, t.clamp(a, b), rate)))
                .sum()
        };
        let series: Vec<CounterPoint> = (0..=41).map(|ms| p(ms * MS, count_at(ms * MS))).collect();
        let spans: Vec<Span> = tasks.iter().map(|&(a, b, _)| span(a, b)).collect();
        let attributed = attribute(&series, &spans, Share::Equal);
        for (task, a) in tasks.iter().zip(&attributed) {
            let t = truth(*task);
            assert!(
                a.value - a.error <= t + 1e-6 && t <= a.value + a.error + 1e-6,
                "truth {t} outside {} ± {}",
                a.value,
                a.error
            );
        }
        // Nothing is lost or counted twice.
        let total: f64 = attributed.iter().map(|a| a.value).sum();
        assert!(close(total, count_at(40 * MS)), "{total}");
    }
}
