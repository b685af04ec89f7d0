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

use super::lifecycle::{RegionReport, StateNs, WorkerLifecycle};
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
            states.uc += w.state_ns.uc;
            states.lq += w.state_ns.lq;
            states.gs += w.state_ns.gs;
            states.w += w.state_ns.w;
        }
        region.state_ns = states;
        region.active_overhead_ns = region.state_ns.lq + region.state_ns.gs;
        region.hook_ns = removed;
    }
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
    use crate::analysis::lifecycle::{TaskCounts, Transitions};

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
}
