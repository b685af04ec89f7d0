//! The rayon-core hooks' own time taken out of every state, as method 1 takes the probes'
//! overhead out of the probed intervals: a hook costs the worker that runs it, and that time
//! falls in the state the hook's clock read leaves or enters. Without this, about 15 ns per
//! join of the profiler's own work counted as LQ, and a cheaper hook moved a region under the
//! too-fine gate.
//!
//! The runtime measures at start-up, through the real counting path (see
//! `parprof_rt::hook_cost`), what one task's pair of hooks adds to the user code its begin
//! enters (UC) and to the gap its end enters (the search starts with LQ), and what a fork's
//! return adds to the user code it resumes. Each worker's states lose those costs times its counts: tasks
//! (local, stolen, injected, inline) and returns (the gaps ended in user code beyond the
//! tasks' begins). What is taken out is kept per region ([`RegionReport::hook_ns`]): the
//! plain program's region is that much shorter (spread over its workers).
//!
//! In place the hooks cost more than in the start-up loop (cold caches, the job's tag made at
//! every job's creation, the region's context): the CPU samples measure their time where it
//! ran, as the profiler's share of the samples of the region's workers during its runs. With
//! enough samples ([`MIN_SAMPLES_TO_FIT`]) the time taken out is scaled to that measure, each
//! state keeping its part of it ([`fit_to_samples`]).

use super::lifecycle::{RegionReport, StateNs, WorkerLifecycle};

/// Samples of a region's workers from which their profiler's share says the hooks' time.
pub const MIN_SAMPLES_TO_FIT: u64 = 100;
use parprof_rt::trace::HookCosts;

/// Takes the hooks' time out of each region's and each worker's states.
pub fn remove(regions: &mut [RegionReport], costs: &HookCosts, ns_per_tick: f64) {
    for region in regions.iter_mut() {
        let mut removed = StateNs::default();
        let mut states = StateNs::default();
        for w in &mut region.per_worker {
            let before = w.state_ns;
            let hooks = worker_hook_ns(w, costs, ns_per_tick);
            take_out(&mut w.state_ns, &w.preempted_ns, &w.blocked_ns, &hooks);
            removed.uc += before.uc - w.state_ns.uc;
            removed.lq += before.lq - w.state_ns.lq;
            states.add(&w.state_ns);
        }
        region.state_ns = states;
        region.active_overhead_ns = region.state_ns.lq + region.state_ns.gs;
        region.hook_ns = removed;
    }
}

/// Scales the hooks' time taken out of a region's states to what its CPU samples measured:
/// `profiler` of its `samples` hit the profiler's code, while the workers ran for the states'
/// time on the CPU (with the hooks' time). Fewer samples, or none in the profiler's code, or no
/// hook time taken out: left as calibrated.
pub fn fit_to_samples(region: &mut RegionReport, profiler: u64, samples: u64) {
    let taken = region.hook_ns.uc + region.hook_ns.lq;
    if samples < MIN_SAMPLES_TO_FIT || profiler == 0 || taken == 0 {
        return;
    }
    let on_cpu = on_cpu_ns(&region.state_ns, &region.preempted_ns, &region.blocked_ns) + taken;
    let factor = on_cpu as f64 * profiler as f64 / samples as f64 / taken as f64;
    let scaled = |ns: u64| (ns as f64 * factor).round() as u64;
    let target = StateNs {
        uc: scaled(region.hook_ns.uc),
        lq: scaled(region.hook_ns.lq),
        gs: 0,
        w: 0,
    };
    // Each worker by its part of the state's time.
    let (uc_total, lq_total) = (region.state_ns.uc.max(1), region.state_ns.lq.max(1));
    let mut states = StateNs::default();
    let mut removed = StateNs::default();
    for w in &mut region.per_worker {
        let before = w.state_ns;
        // Put back what was taken, then take the fitted part.
        let part = |target: u64, taken: u64, mine: u64, total: u64| {
            let share = mine as f64 / total as f64;
            (
                (taken as f64 * share).round() as u64,
                (target as f64 * share).round() as u64,
            )
        };
        let (uc_back, uc_take) = part(target.uc, region.hook_ns.uc, before.uc, uc_total);
        let (lq_back, lq_take) = part(target.lq, region.hook_ns.lq, before.lq, lq_total);
        w.state_ns.uc += uc_back;
        w.state_ns.lq += lq_back;
        let fitted = StateNs {
            uc: uc_take,
            lq: lq_take,
            gs: 0,
            w: 0,
        };
        take_out(&mut w.state_ns, &w.preempted_ns, &w.blocked_ns, &fitted);
        removed.uc += before.uc + uc_back - w.state_ns.uc;
        removed.lq += before.lq + lq_back - w.state_ns.lq;
        states.add(&w.state_ns);
    }
    region.state_ns = states;
    region.hook_ns = removed;
    region.active_overhead_ns = region.state_ns.lq + region.state_ns.gs;
}

/// The time the workers ran on the CPU in these states: switched out and asleep left out.
fn on_cpu_ns(states: &StateNs, preempted: &StateNs, blocked: &StateNs) -> u64 {
    states.uc.saturating_sub(preempted.uc + blocked.uc)
        + states.lq.saturating_sub(preempted.lq)
        + states.gs.saturating_sub(preempted.gs)
        + states.w.saturating_sub(preempted.w + blocked.w)
}

/// What one worker's hooks cost it in a region, by state, in ns.
pub fn worker_hook_ns(w: &WorkerLifecycle, costs: &HookCosts, ns_per_tick: f64) -> StateNs {
    let tasks = w.tasks.total() as f64;
    let t = &w.transitions;
    // Gaps ended in user code, less the tasks begun there: a fork's return.
    let resumes = (t.lq_uc + t.gs_uc)
        .saturating_sub(w.tasks.local + w.tasks.stolen + w.tasks.injected) as f64;
    let ns = |ticks: f64| (ticks * ns_per_tick).max(0.0).round() as u64;
    StateNs {
        uc: ns(tasks * costs.task_in_uc_ticks + resumes * costs.resume_in_uc_ticks),
        lq: ns(tasks * costs.task_in_gap_ticks),
        gs: 0,
        w: 0,
    }
}

/// `states` less `hooks`, never below their switched-out parts (the hooks ran on the CPU).
fn take_out(states: &mut StateNs, preempted: &StateNs, blocked: &StateNs, hooks: &StateNs) {
    let floor_uc = (preempted.uc + blocked.uc).min(states.uc);
    states.uc = states.uc.saturating_sub(hooks.uc).max(floor_uc);
    states.lq = states
        .lq
        .saturating_sub(hooks.lq)
        .max(preempted.lq.min(states.lq));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::lifecycle::{TaskCounts, TaskNs, Transitions, WaitSource};

    /// A worker of 1,000 joins: 1,000 inline and 1,000 local tasks, 1,500 gaps ended in user
    /// code (1,000 local begins and 500 returns), 1 ms in UC and 0.1 ms in LQ.
    fn worker() -> WorkerLifecycle {
        WorkerLifecycle {
            tid: 1,
            rayon_index: 0,
            pool: 0,
            name: "w".into(),
            tasks: TaskCounts {
                local: 1_000,
                stolen: 0,
                injected: 0,
                inline: 1_000,
            },
            state_ns: StateNs {
                uc: 1_000_000,
                lq: 100_000,
                gs: 0,
                w: 0,
            },
            transitions: Transitions {
                lq_uc: 1_500,
                ..Transitions::default()
            },
            preempted_ns: StateNs::default(),
            blocked_ns: StateNs::default(),
        }
    }

    const COSTS: HookCosts = HookCosts {
        task_in_uc_ticks: 10.0,
        task_in_gap_ticks: 6.0,
        resume_in_uc_ticks: 4.0,
        tasks_timed: 256,
        spin_ns: 0,
    };

    #[test]
    fn each_state_loses_its_hooks_time_by_the_counts() {
        // 2 ticks a ns. UC: (2,000 tasks × 10 + 500 returns × 4) ÷ 2 = 11,000 ns; LQ: 2,000
        // tasks × 6 ÷ 2 = 6,000 ns.
        let w = worker();
        let hooks = worker_hook_ns(&w, &COSTS, 0.5);
        assert_eq!(
            hooks,
            StateNs {
                uc: 11_000,
                lq: 6_000,
                gs: 0,
                w: 0
            }
        );
        let mut states = w.state_ns;
        take_out(&mut states, &w.preempted_ns, &w.blocked_ns, &hooks);
        assert_eq!((states.uc, states.lq), (989_000, 94_000));
    }

    #[test]
    fn time_switched_out_is_never_taken_out() {
        // The hooks ran on the CPU: UC keeps at least its 995 µs switched out or blocked.
        let mut w = worker();
        w.preempted_ns.uc = 990_000;
        w.blocked_ns.uc = 5_000;
        w.preempted_ns.lq = 98_000;
        let hooks = worker_hook_ns(&w, &COSTS, 0.5);
        let mut states = w.state_ns;
        take_out(&mut states, &w.preempted_ns, &w.blocked_ns, &hooks);
        assert_eq!((states.uc, states.lq), (995_000, 98_000));
    }

    /// A region of the one worker above, 10 µs of UC and 5 µs of LQ taken out already.
    fn region() -> RegionReport {
        let w = worker();
        let base = crate::analysis::diagnoses::tests::region(w.tasks, 0, 0, w.transitions);
        RegionReport {
            instances: 1,
            elapsed_ns: 1_200_000,
            workers: 1,
            task_ns: TaskNs::default(),
            state_ns: w.state_ns,
            hook_ns: StateNs {
                uc: 10_000,
                lq: 5_000,
                gs: 0,
                w: 0,
            },
            active_overhead_ns: 100_000,
            inactive_overhead_ns: 0,
            wait_source: WaitSource::Hooks,
            per_worker: vec![w],
            ..base
        }
    }

    #[test]
    fn the_hooks_time_is_fitted_to_the_samples_where_they_ran() {
        // 1.1 ms on the CPU after 15 µs taken out: 1.115 ms with the hooks. 20 of 1,000 samples
        // in the profiler's code: 22.3 µs, 1.4867× what was taken, each state keeping its part:
        // UC 14,867 ns, LQ 7,433 ns.
        let mut r = region();
        fit_to_samples(&mut r, 20, 1_000);
        assert_eq!(
            r.hook_ns,
            StateNs {
                uc: 14_867,
                lq: 7_433,
                gs: 0,
                w: 0
            }
        );
        assert_eq!((r.state_ns.uc, r.state_ns.lq), (995_133, 97_567));
        assert_eq!(r.per_worker[0].state_ns, r.state_ns);
        assert_eq!(r.active_overhead_ns, 97_567);
        // Too few samples, or none in the profiler's code: left as calibrated.
        let mut few = region();
        fit_to_samples(&mut few, 20, 99);
        fit_to_samples(&mut few, 0, 1_000);
        assert_eq!(few, region());
    }
}
