//! What the rayon-core hooks cost the worker that runs them, measured at start-up, so that the
//! analysis takes it out of the states it fell in (cargo-parprof's `analysis::hook_time`), as
//! method 1 takes the probes' overhead out of probed intervals.
//!
//! A hook splits the worker's time where it reads the clock (the marks' clock, or the event
//! clock for a timed stretch), near its start: what it runs after — its counting, its writes,
//! nearly all of it — falls in the state it enters. A task's begin enters its user code (UC),
//! its end the gap after it (whose first part is LQ), a fork's return the user code it
//! resumes. Tasks with empty bodies run back to back on this thread through the counting path
//! the workers' hooks take (begin, end: a local task, its region current meanwhile), with and
//! without a return after each; the fastest of a few loops (a preemption only makes a loop
//! slower) gives a task's pair of hooks, half of it in UC and half in the gap, and a return.
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
const ROUNDS: usize = 3;

/// Measures the hooks' costs on the calling thread (recording on, the writer not started: no
/// mark moves, so no detail window opens), and leaves nothing of it in the trace.
pub(crate) fn measure(ticks_per_ns: f64) -> HookCosts {
    let spin_ns = hook_spin::configure(ticks_per_ns);
    let (mut plain, mut with_return) = (u64::MAX, u64::MAX);
    for _ in 0..ROUNDS {
        plain = plain.min(tasks(false));
        with_return = with_return.min(tasks(true));
    }
    lifecycle_totals::forget(REGION);
    state_clock::forget_marks();
    with_current_ring(|r| r.discard());
    let pair = plain as f64 / f64::from(TASKS);
    HookCosts {
        task_in_uc_ticks: pair / 2.0,
        task_in_gap_ticks: pair / 2.0,
        resume_in_uc_ticks: with_return.saturating_sub(plain) as f64 / f64::from(TASKS),
        tasks_timed: TASKS * ROUNDS as u32,
        spin_ns,
    }
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
