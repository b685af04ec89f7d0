//! The rayon-core hooks' own time taken out of every state, as method 1 takes the probes'
//! overhead out of the probed intervals: a hook costs the worker that runs it, and that time
//! falls in the state the hook's clock read enters. Without this, about 15 ns per join of the
//! profiler's own work counted as LQ, and a cheaper hook moved a region under the too-fine
//! gate.
//!
//! The runtime measures at start-up, through the real counting path (see
//! `parprof_rt::hook_cost`), each hook on its own: what a task's begin adds to the user code it
//! enters (UC), what its end adds to the gap it enters (the search starts with LQ), and what a
//! fork's return adds to the user code it resumes. Each worker's states lose those costs times
//! its counts: tasks (local, stolen, injected, inline) and returns (the gaps ended in user code
//! beyond the tasks' begins); the ends' time comes out of LQ, and what LQ cannot hold out of GS
//! (a gap classified as a search: with every hook 40 ns dearer a quicksort's gaps held 12.8 ms
//! of GS and 19.1 ms of LQ for 26.2 ms of ends). What is taken out is kept per region
//! ([`RegionReport::hook_ns`]): the plain program's region is that much shorter (spread over
//! its workers).
//!
//! The CPU samples in the profiler's code are not used to size it. On the 2-core VM, a
//! quicksort of 533 k tasks with every hook 40 ns dearer (six runs alternated with plain ones)
//! grew its UC by 39.3 ms against 38.2 ms more of begins and returns measured at start-up,
//! while the profiler's share of its samples (76 %, 486 of 640) said 86 ms of hooks for 69 ms
//! measured: the tasks' own code, the same work, got 0.80 samples a millisecond of its UC
//! against 0.99 in the plain runs. Scaled to the samples (as it was with 100 samples or more,
//! which only the dearer runs had), the removal took 8–12 ms too much from UC.
//!
//! Not modelled: what a dearer end hook does in place to the gap after it beyond its own time
//! (LQ grew 4.2 ± 1.6 ms more than the ends' 25.6 ms there; on a quiet machine 20 ms more).

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
            removed.gs += before.gs - w.state_ns.gs;
            states.add(&w.state_ns);
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

/// `states` less `hooks`, never below their switched-out parts (the hooks ran on the CPU). The
/// ends' time falls in the gaps they enter: their LQ, and where the gaps were searches longer
/// than LQ holds, their GS.
fn take_out(states: &mut StateNs, preempted: &StateNs, blocked: &StateNs, hooks: &StateNs) {
    states.uc = less(states.uc, hooks.uc, preempted.uc + blocked.uc);
    let lq = states.lq;
    states.lq = less(lq, hooks.lq, preempted.lq);
    let left = hooks.lq - (lq - states.lq);
    states.gs = less(states.gs, left, preempted.gs);
}

/// `ns` less `hooks`, never below `floor` (nor above `ns`).
fn less(ns: u64, hooks: u64, floor: u64) -> u64 {
    ns.saturating_sub(hooks).max(floor.min(ns))
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

    #[test]
    fn what_lq_cannot_hold_of_the_ends_comes_out_of_gs() {
        // The ends' 6,000 ns (above) against 4,000 ns of LQ, 1,000 of it switched out: LQ keeps
        // 1,000 and GS, 10,000 ns of which 2,000 switched out, loses the 3,000 left: 7,000.
        let mut w = worker();
        w.state_ns.lq = 4_000;
        w.state_ns.gs = 10_000;
        w.preempted_ns.lq = 1_000;
        w.preempted_ns.gs = 2_000;
        let hooks = worker_hook_ns(&w, &COSTS, 0.5);
        let mut states = w.state_ns;
        take_out(&mut states, &w.preempted_ns, &w.blocked_ns, &hooks);
        assert_eq!((states.lq, states.gs), (1_000, 7_000));
        // GS at its switched-out part: nothing below it.
        w.state_ns.gs = 3_000;
        let mut states = w.state_ns;
        take_out(&mut states, &w.preempted_ns, &w.blocked_ns, &hooks);
        assert_eq!((states.lq, states.gs), (1_000, 2_000));
    }

    /// A worker that stole 500 tasks and ran no join: no return, 0.2 ms in UC, 20 µs in LQ and
    /// 50 µs in GS.
    fn thief() -> WorkerLifecycle {
        WorkerLifecycle {
            tid: 2,
            rayon_index: 1,
            tasks: TaskCounts {
                local: 0,
                stolen: 500,
                injected: 0,
                inline: 0,
            },
            state_ns: StateNs {
                uc: 200_000,
                lq: 20_000,
                gs: 50_000,
                w: 0,
            },
            transitions: Transitions {
                gs_uc: 500,
                ..Transitions::default()
            },
            ..worker()
        }
    }

    #[test]
    fn a_region_loses_what_each_of_its_workers_hooks_cost() {
        // The joins' worker loses 11,000 ns of UC and 6,000 of LQ (above); the thief, at 2 ticks
        // a ns, 500 begins × 10 ÷ 2 = 2,500 ns of UC and 500 ends × 6 ÷ 2 = 1,500 of LQ, its
        // GS untouched (a search's time after the LQ the end's cost fell in).
        let (w, t) = (worker(), thief());
        let base = crate::analysis::diagnoses::tests::region(w.tasks, 0, 0, w.transitions);
        let mut regions = vec![RegionReport {
            instances: 1,
            elapsed_ns: 1_200_000,
            workers: 2,
            task_ns: TaskNs::default(),
            state_ns: StateNs {
                uc: 1_200_000,
                lq: 120_000,
                gs: 50_000,
                w: 0,
            },
            active_overhead_ns: 170_000,
            inactive_overhead_ns: 0,
            wait_source: WaitSource::Hooks,
            per_worker: vec![w, t],
            ..base
        }];
        remove(&mut regions, &COSTS, 0.5);
        let r = &regions[0];
        assert_eq!(
            r.hook_ns,
            StateNs {
                uc: 13_500,
                lq: 7_500,
                gs: 0,
                w: 0
            }
        );
        assert_eq!(
            r.per_worker[1].state_ns,
            StateNs {
                uc: 197_500,
                lq: 18_500,
                gs: 50_000,
                w: 0
            }
        );
        assert_eq!(
            r.state_ns,
            StateNs {
                uc: 1_186_500,
                lq: 112_500,
                gs: 50_000,
                w: 0
            }
        );
        assert_eq!(r.active_overhead_ns, 162_500);
    }
}
