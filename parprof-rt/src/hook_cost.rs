//! What the rayon-core hooks cost the worker that runs them, measured at start-up, so that the
//! analysis takes it out of the states it fell in (cargo-parprof's `analysis::hook_time`), as
//! method 1 takes the probes' overhead out of probed intervals.
//!
//! A hook splits the worker's time where it reads the clock (the marks' clock, or the event
//! clock for a timed stretch), near its start: what it runs after — its counting, its writes,
//! the measurement build's spin, nearly all of it — falls in the state it enters. A task's
//! begin enters its user code (UC), its end the gap after it (whose first part is LQ), a fork's
//! return the user code it resumes. Tasks with empty bodies run back to back on this thread
//! through the counting path the workers' hooks take (begin, end: a local task, its region
//! current meanwhile), with and without a return after each; the fastest of a few loops (a
//! preemption only makes a loop slower) gives a task's pair of hooks and a return. The pair is
//! split between UC and the gap as the begin's and the end's times, each timed between
//! serialised clock reads (a plain read overlaps the few nanoseconds of a hook: timed so, a
//! hook measured nothing), the typical time of many (the mean of the shortest nine tenths) less
//! that of the same reads without hooks.
//!
//! The same loops say what a stretch timed with the event clock reads beyond that (see
//! `state_clock::set_timed_path_extra`): the hooks at its two ends take the general path, and an
//! empty stretch timed so reads its whole cost; on the 2-core VM 26 ticks of user code and 35
//! of gap (10 and 13.5 ns) where the counting path puts 10 in each.
//!
//! The measurement build's dearer hooks (`hook_spin`) are measured here like any others.

use crate::clock;
use crate::hook_spin;
use crate::lifecycle_totals;
use crate::recorder::with_current_ring;
use crate::state_clock;
use crate::thread_context;
use crate::trace::{EventKind, HookCosts, TaskOrigin};

/// The region the measured tasks belong to: never a site of the program.
const REGION: u32 = u32::MAX - 1;
/// Tasks per loop: a few hundred microseconds.
const TASKS: u32 = 8_192;
/// Loops with and without a fork's return each; the fastest of each is kept.
const ROUNDS: usize = 5;

/// Measures the hooks' costs on the calling thread (recording on, the writer not started: no
/// mark moves, so no detail window opens), and leaves nothing of it in the trace.
pub(crate) fn measure(ticks_per_ns: f64) -> HookCosts {
    let spin_ns = hook_spin::configure(ticks_per_ns);
    let (mut plain, mut with_return) = (u64::MAX, u64::MAX);
    // What a timed stretch of user code, and of a gap, read in each plain loop: its empty
    // stretches' mean; the smallest of the loops (an interrupt only lengthens one).
    let mut timed_reads = [f64::INFINITY; 2];
    for _ in 0..ROUNDS {
        let before = lifecycle_totals::timed_stretches(REGION);
        plain = plain.min(tasks(false));
        let after = lifecycle_totals::timed_stretches(REGION);
        for (least, (a, b)) in timed_reads.iter_mut().zip(after.iter().zip(&before)) {
            if a.count > b.count {
                *least = least.min((a.sum - b.sum) / (a.count - b.count) as f64);
            }
        }
        with_return = with_return.min(tasks(true));
    }
    let (reads, hooks) = (each_hook(false), each_hook(true));
    lifecycle_totals::forget(REGION);
    state_clock::forget_marks();
    with_current_ring(|r| r.discard());
    let pair = plain as f64 / f64::from(TASKS);
    let begin_part = begin_part(hooks.0 - reads.0, hooks.1 - reads.1);
    let (in_uc, in_gap) = (pair * begin_part, pair * (1.0 - begin_part));
    // Beyond what the analysis takes out of every stretch (the counting path's part in it).
    let extra = |timed: f64, counted: f64| {
        if timed.is_finite() {
            (timed - counted).max(0.0).round() as u64
        } else {
            0
        }
    };
    state_clock::set_timed_path_extra(extra(timed_reads[0], in_uc), extra(timed_reads[1], in_gap));
    HookCosts {
        task_in_uc_ticks: in_uc,
        task_in_gap_ticks: in_gap,
        resume_in_uc_ticks: with_return.saturating_sub(plain) as f64 / f64::from(TASKS),
        tasks_timed: TASKS * ROUNDS as u32,
        spin_ns,
    }
}

/// The begin's part of a task's pair of hooks, from their `begin` and `end` times (ticks, one
/// below zero taken as none); half when neither took a tick.
fn begin_part(begin: f64, end: f64) -> f64 {
    let (begin, end) = (begin.max(0.0), end.max(0.0));
    if begin + end == 0.0 {
        return 0.5;
    }
    begin / (begin + end)
}

/// [`TASKS`] empty tasks as a worker's hooks run them, with a fork's return after each when
/// `resume`; their time in ticks.
#[inline(never)]
fn tasks(resume: bool) -> u64 {
    let start = clock::now();
    for _ in 0..TASKS {
        let previous = thread_context::set_region(REGION);
        lifecycle_totals::hook(EventKind::TaskBegin, REGION, 0, TaskOrigin::Local as u8);
        lifecycle_totals::hook(EventKind::TaskEnd, REGION, 0, 0);
        thread_context::set_region(previous);
        if resume {
            lifecycle_totals::hook(EventKind::TaskResume, REGION, 0, 0);
        }
    }
    clock::now().saturating_sub(start)
}

/// [`TASKS`] empty tasks (no hook at all unless `hooks`), a serialised clock read before the
/// begin, between the begin and the end, and after the end: the typical ticks from the first to
/// the second read, and from the second to the third (the region put back included, as in
/// place).
#[inline(never)]
fn each_hook(hooks: bool) -> (f64, f64) {
    let mut begins = Vec::with_capacity(TASKS as usize);
    let mut ends = Vec::with_capacity(TASKS as usize);
    for _ in 0..TASKS {
        let previous = thread_context::set_region(REGION);
        let before = serialised_now();
        if hooks {
            lifecycle_totals::hook(EventKind::TaskBegin, REGION, 0, TaskOrigin::Local as u8);
        }
        let begun = serialised_now();
        if hooks {
            lifecycle_totals::hook(EventKind::TaskEnd, REGION, 0, 0);
        }
        thread_context::set_region(previous);
        let ended = serialised_now();
        begins.push(begun.wrapping_sub(before));
        ends.push(ended.wrapping_sub(begun));
    }
    (typical(&mut begins), typical(&mut ends))
}

/// The mean of the shortest nine tenths of `ticks`: a preemption or an interrupt lengthens a
/// few of them only, and a median would be as coarse as the ticks (a hook of 4 ns moved no
/// median of the serialised reads).
fn typical(ticks: &mut [u64]) -> f64 {
    ticks.sort_unstable();
    let kept = &ticks[..(ticks.len() * 9).div_ceil(10)];
    kept.iter().sum::<u64>() as f64 / kept.len().max(1) as f64
}

/// The event clock, read after everything before it and before anything after it.
#[inline(always)]
fn serialised_now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: lfence has no preconditions on x86_64.
        unsafe { core::arch::x86_64::_mm_lfence() };
        let now = clock::now();
        // SAFETY: as above.
        unsafe { core::arch::x86_64::_mm_lfence() };
        now
    }
    #[cfg(not(target_arch = "x86_64"))]
    clock::now()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_tenth_is_left_out() {
        // Nine intervals of 10 and 20 ticks and a preempted one: the nine's mean.
        let mut ticks = [10, 20, 10, 20, 10, 20, 10, 20, 15, 90_000];
        assert_eq!(typical(&mut ticks), 15.0);
    }

    #[test]
    fn the_pair_is_split_as_its_hooks_were_timed() {
        // A begin of 30 ticks and an end of 10: three quarters of the pair in UC.
        assert_eq!(begin_part(30.0, 10.0), 0.75);
        assert_eq!(begin_part(-2.0, 10.0), 0.0);
        // Neither measured a tick: half and half.
        assert_eq!(begin_part(0.0, -1.0), 0.5);
    }
}
