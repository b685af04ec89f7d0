//! The clock that times the rayon lifecycle between detail windows: the event clock's value at
//! the writer thread's last pass, instead of a clock read per job.
//!
//! A job's hooks read this value (one load of a line that changes every [`MARK_EVERY`]) and add
//! its differences to the state the thread was in, as they would the event clock's. A stretch
//! of a thread is credited the marks' spacing for every mark that fell inside it: the marks are
//! taken at times that do not depend on what the thread does, so the credit of a state is, on
//! average, the time spent in it — the lifecycle is sampled in time, once per mark and thread,
//! the way a sampling profiler samples stacks. What it costs per job is a load; its
//! uncertainty follows the number of marks (see [`LifecycleTotals::mark_spacing_ticks`]).
//!
//! What needs a length per stretch (task durations, gap lengths) comes from stretches timed
//! with the event clock, one in about [`TIMED_EVERY`] (see `lifecycle_totals`).
//!
//! [`LifecycleTotals::mark_spacing_ticks`]: crate::trace::LifecycleTotals::mark_spacing_ticks

use crate::clock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The marks' mean spacing while some thread counts its lifecycle. At the writer's own pace
/// (2 ms) a 55 ms region of 2 workers got 15 marks, too few where its gaps are too uneven for
/// the timed sample; at 250 µs the writer's passes cost a busy 2-core machine's workers a few
/// percent of their CPU time, which the analysis counts as preempted.
pub const MARK_EVERY: Duration = Duration::from_micros(250);
/// The writer's pace while no thread does: its own (draining the rings).
const IDLE_PACE: Duration = Duration::from_millis(2);
/// One hook in this many, on average, starts a stretch timed with the event clock. Each timed
/// stretch costs its two hooks the general path and a clock read: at one in 64 that was a fifth
/// of the counted path's cost in a join recursion (`cargo bench -p parprof-rt --bench
/// join_hook_cost`); at one in 256 a thread at the lowest rate that pauses its detail (51,200
/// hooks a second) still times 200 stretches a second, one at the rate of a join recursion
/// about 100,000.
pub const TIMED_EVERY: u32 = 256;

/// The event clock at the last mark; 0 before the first.
static MARK: AtomicU64 = AtomicU64::new(0);
/// Whether a thread has counted its lifecycle: the writer then marks at [`MARK_EVERY`].
static IN_USE: AtomicBool = AtomicBool::new(false);
/// A stretch at least this long in ticks (three mark spacings) lasted at least two: its length
/// from the marks is taken as the longest task's when no timed stretch is longer.
static LONG_TICKS: AtomicU64 = AtomicU64::new(u64::MAX);
/// [`MARK_EVERY`] in ticks of the event clock.
static SPACING_TICKS: AtomicU64 = AtomicU64::new(0);
/// What reading the event clock adds to a timed stretch: the smallest of back-to-back reads'
/// differences.
static READ_TICKS: AtomicU64 = AtomicU64::new(0);
/// What the hooks' general path, which the two ends of a timed stretch take, adds to it beyond
/// the counting path's cost that the analysis takes out of every stretch: of user code, of a
/// gap (see [`set_timed_path_extra`]).
static TIMED_PATH_EXTRA_TICKS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// Sets the spacing, the long-stretch threshold and the clock read's cost, in ticks of the
/// event clock.
pub(crate) fn configure(ticks_per_ns: f64) {
    let spacing = (MARK_EVERY.as_nanos() as f64 * ticks_per_ns).max(1.0) as u64;
    SPACING_TICKS.store(spacing, Ordering::Relaxed);
    LONG_TICKS.store(3 * spacing, Ordering::Relaxed);
    let read = (0..64)
        .map(|_| {
            let a = clock::now();
            clock::now().saturating_sub(a)
        })
        .min()
        .unwrap_or(0);
    READ_TICKS.store(read, Ordering::Relaxed);
}

/// The length of a stretch of user code (`in_user_code`) or of a gap timed from `from` to `to`,
/// less what reading the clock and the hooks' general path added to it.
#[inline]
pub(crate) fn timed_length(from: u64, to: u64, in_user_code: bool) -> u64 {
    let extra = &TIMED_PATH_EXTRA_TICKS[usize::from(!in_user_code)];
    to.saturating_sub(from)
        .saturating_sub(READ_TICKS.load(Ordering::Relaxed))
        .saturating_sub(extra.load(Ordering::Relaxed))
}

/// Sets what a timed stretch of user code and one of a gap read beyond the hooks' counting
/// path, in ticks (see `hook_cost`). A timed stretch starts and ends at hooks that take the
/// general path, which runs after the clock read that starts it and before the one that ends
/// it; the stretches timed stand for all of them, whose hooks nearly all take the counting
/// path, whose cost the analysis takes out. Without this a job-heavy region's gaps read about
/// 10 ns longer timed than by the marks (2-core VM, a quicksort of 533 k tasks: LQ 8.6–9.0 ms
/// from its timed gaps alone, 2.5–4.9 ms from the marks alone), and the two estimates, combined
/// only where they agree within three standard deviations, were combined in some runs and not
/// in others. (The LQ share still varies from run to run with what the marks catch.)
pub(crate) fn set_timed_path_extra(user_code_ticks: u64, gap_ticks: u64) {
    TIMED_PATH_EXTRA_TICKS[0].store(user_code_ticks, Ordering::Relaxed);
    TIMED_PATH_EXTRA_TICKS[1].store(gap_ticks, Ordering::Relaxed);
}

/// The marks' intended spacing in ticks (the writer may be late for some).
pub(crate) fn mark_spacing_ticks() -> u64 {
    SPACING_TICKS.load(Ordering::Relaxed)
}

/// The clock at the last mark.
#[inline(always)]
pub(crate) fn now() -> u64 {
    MARK.load(Ordering::Relaxed)
}

/// A thread starts counting: marks come at [`MARK_EVERY`] from the writer's next pass. True
/// the first time, when the writer should be woken to take up the pace at once.
pub(crate) fn use_marks() -> bool {
    !IN_USE.load(Ordering::Relaxed) && !IN_USE.swap(true, Ordering::Relaxed)
}

/// No thread counts its lifecycle (after a measurement that did): the writer keeps its own pace.
pub(crate) fn forget_marks() {
    IN_USE.store(false, Ordering::Relaxed);
}

/// Takes a mark (the writer, at each pass) and returns how long the writer may sleep: half to
/// one and a half [`MARK_EVERY`], drawn anew each time, so that the marks do not fall in step
/// with a program's own period (a loop of 12 µs steps, marked every 250 µs exactly, is seen at
/// six phases only).
pub(crate) fn mark() -> Duration {
    let now = clock::now();
    MARK.store(now, Ordering::Relaxed);
    if !IN_USE.load(Ordering::Relaxed) {
        return IDLE_PACE;
    }
    let mut draw = (now as u32) | 1;
    let step = next_countdown(&mut draw);
    // `next_countdown` draws around its mean of `TIMED_EVERY`: the same spread, scaled.
    MARK_EVERY * step / TIMED_EVERY
}

/// Whether a stretch of `ticks` by the marks is long enough to stand as a task's length.
#[inline]
pub(crate) fn is_long(ticks: u64) -> bool {
    ticks >= LONG_TICKS.load(Ordering::Relaxed)
}

/// The time of the stretches of one state, from the two samples of it: the marks' credit
/// (`marked`: unbiased whatever the stretches' lengths, but only as fine as the marks, about
/// ±√(spacing × time)) and `count` × the mean of the `timed` stretches (fine with thousands
/// of short stretches, blind to a long one the sample missed). They are weighed by their
/// variances; when they disagree by more than three standard deviations the sample missed
/// something and the marks stand alone.
pub fn state_time(marked: u64, count: u64, timed: TimedSample, spacing: u64) -> u64 {
    let n = timed.count as f64;
    if spacing == 0 || timed.count < 2 {
        return marked;
    }
    let mean = timed.sum / n;
    let sample_variance = ((timed.squares - timed.sum * mean) / (n - 1.0)).max(0.0);
    let from_sample = count as f64 * mean;
    let sample_var = (count as f64).powi(2) * sample_variance / n;
    let from_marks = marked as f64;
    let spacing = spacing as f64;
    let marks_var = spacing * from_marks.max(spacing);
    if (from_marks - from_sample).abs() > 3.0 * (marks_var + sample_var).sqrt() {
        return marked;
    }
    if sample_var == 0.0 {
        return from_sample.round() as u64;
    }
    let (w_marks, w_sample) = (1.0 / marks_var, 1.0 / sample_var);
    ((from_marks * w_marks + from_sample * w_sample) / (w_marks + w_sample)).round() as u64
}

/// The stretches of one state timed with the event clock: how many, and the sum and the sum of
/// squares of their lengths in ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TimedSample {
    /// Stretches timed.
    pub count: u64,
    /// The sum of their lengths, in ticks.
    pub sum: f64,
    /// The sum of the squares of their lengths.
    pub squares: f64,
}

/// The hooks until the next timed stretch: half to one and a half [`TIMED_EVERY`] (its mean),
/// drawn from the thread's own xorshift state so that the timed stretches do not follow the shape of the
/// program's recursion.
#[inline]
pub(crate) fn next_countdown(state: &mut u32) -> u32 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    TIMED_EVERY / 2 + (x & (TIMED_EVERY - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPACING: u64 = 1000;

    fn sample(lengths: &[f64]) -> TimedSample {
        TimedSample {
            count: lengths.len() as u64,
            sum: lengths.iter().sum(),
            squares: lengths.iter().map(|l| l * l).sum(),
        }
    }

    #[test]
    fn many_short_stretches_are_timed_by_their_sample() {
        // 100,000 stretches of 9 to 11 ticks (1 M in all): the marks credited 1.05 M, within
        // their ±32 k; the sample's figure is the finer and weighs the more.
        let lengths = [9.0, 11.0, 10.0, 9.0, 11.0, 10.0, 10.0, 10.0].repeat(100);
        let timed = sample(&lengths);
        let t = state_time(1_050_000, 100_000, timed, SPACING);
        assert!((1_000_000..1_010_000).contains(&t), "{t}");
        // A state shorter than the marks' spacing in a short region: no mark fell in it, the
        // sample says how long it was.
        let t = state_time(0, 100, timed, 10 * SPACING);
        assert_eq!(t, 1_000);
    }

    #[test]
    fn a_long_stretch_the_sample_missed_leaves_the_marks_alone() {
        // 1,000 stretches of 10 ticks timed as such, and one of 10 M that no sample caught:
        // the marks credited 10.01 M.
        let timed = sample(&[10.0; 20]);
        assert_eq!(state_time(10_010_000, 1_001, timed, SPACING), 10_010_000);
        // Too small a sample, or no marks at all (every stretch timed): the marks' figure.
        assert_eq!(state_time(5_000, 100, sample(&[10.0]), SPACING), 5_000);
        assert_eq!(state_time(5_000, 100, timed, 0), 5_000);
    }

    #[test]
    fn countdowns_average_the_timed_period() {
        let mut state = 0x9E37_79B9;
        let n = 100_000u64;
        let sum: u64 = (0..n).map(|_| u64::from(next_countdown(&mut state))).sum();
        let mean = sum as f64 / n as f64;
        let expected = f64::from(TIMED_EVERY) - 0.5;
        assert!((mean - expected).abs() < 0.02 * expected, "{mean}");
    }
}
