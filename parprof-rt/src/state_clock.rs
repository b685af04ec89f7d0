//! The clock that times the rayon lifecycle between detail windows: the event clock's value at
//! the writer thread's last pass, instead of a clock read per job.
//!
//! A job's hooks read this value (one load of a line that changes every [`MARK_EVERY`]) and add
//! its differences to the state the thread was in, as they would the event clock's. A stretch
//! of a thread is credited the marks' spacing for every mark that fell inside it: the marks are
//! taken at times that do not depend on what the thread does, so the credit of a state is, on
//! average, the time spent in it — the lifecycle is sampled in time, once per mark and thread,
//! the way a sampling profiler samples stacks. What it costs per job is a load; its
//! uncertainty follows the number of marks (see [`LifecycleTotals::clock_marks`]).
//!
//! What needs a length per stretch (task durations, gap lengths) comes from stretches timed
//! with the event clock, one in about [`TIMED_EVERY`] (see `lifecycle_totals`).
//!
//! [`LifecycleTotals::clock_marks`]: crate::trace::LifecycleTotals::clock_marks

use crate::clock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The spacing of the marks while some thread counts its lifecycle.
pub const MARK_EVERY: Duration = Duration::from_micros(250);
/// The writer's pace while no thread does: its own (draining the rings).
const IDLE_PACE: Duration = Duration::from_millis(2);
/// One hook in this many, on average, starts a stretch timed with the event clock.
pub const TIMED_EVERY: u32 = 64;

/// The event clock at the last mark; 0 before the first.
static MARK: AtomicU64 = AtomicU64::new(0);
/// Whether a thread has counted its lifecycle: the writer then marks at [`MARK_EVERY`].
static IN_USE: AtomicBool = AtomicBool::new(false);
/// A stretch at least this long in ticks (three mark spacings) lasted at least two: its length
/// from the marks is taken as the longest task's when no timed stretch is longer.
static LONG_TICKS: AtomicU64 = AtomicU64::new(u64::MAX);
/// [`MARK_EVERY`] in ticks of the event clock.
static SPACING_TICKS: AtomicU64 = AtomicU64::new(0);

/// Sets the spacing and the long-stretch threshold in ticks of the event clock.
pub(crate) fn configure(ticks_per_ns: f64) {
    let spacing = (MARK_EVERY.as_nanos() as f64 * ticks_per_ns).max(1.0) as u64;
    SPACING_TICKS.store(spacing, Ordering::Relaxed);
    LONG_TICKS.store(3 * spacing, Ordering::Relaxed);
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

/// A thread starts counting: marks come at [`MARK_EVERY`] from the writer's next pass.
pub(crate) fn use_marks() {
    if !IN_USE.load(Ordering::Relaxed) {
        IN_USE.store(true, Ordering::Relaxed);
    }
}

/// Takes a mark (the writer, at each pass) and returns how long the writer may sleep.
pub(crate) fn mark() -> Duration {
    MARK.store(clock::now(), Ordering::Relaxed);
    if IN_USE.load(Ordering::Relaxed) {
        MARK_EVERY
    } else {
        IDLE_PACE
    }
}

/// Whether a stretch of `ticks` by the marks is long enough to stand as a task's length.
#[inline]
pub(crate) fn is_long(ticks: u64) -> bool {
    ticks >= LONG_TICKS.load(Ordering::Relaxed)
}

/// The hooks until the next timed stretch: 32 to 95 (a mean of [`TIMED_EVERY`]), drawn from
/// the thread's own xorshift state so that the timed stretches do not follow the shape of the
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

    #[test]
    fn countdowns_average_the_timed_period() {
        let mut state = 0x9E37_79B9;
        let n = 100_000u64;
        let sum: u64 = (0..n).map(|_| u64::from(next_countdown(&mut state))).sum();
        let mean = sum as f64 / n as f64;
        assert!((mean - 63.5).abs() < 0.5, "{mean}");
    }
}
