//! The four parallel-overhead diagnoses of a region (method 2 of the spec).
//!
//! Active overhead (LQ + GS + sched: the search for tasks, and rayon's own code run inside the
//! tasks on their behalf, measured from the CPU samples; see `sched_share`) and inactive
//! overhead (W) are compared with their thresholds as
//! shares of the time the region's workers could run: worker time (workers × elapsed) less
//! the time they were switched out while runnable. That time is the CPUs' shortage (cause 5),
//! not the schedule's: a worker preempted while idle is not idle by the program's doing, and
//! a task rate taken over time without a CPU reads low. So preemption never hides a cause
//! (too-fine tasks beside CPU-bound programs) nor makes one up (imbalance from preemption),
//! and every rate below is per second of that time. Only above the active threshold are
//! causes 1 and 2 looked for, and only above the inactive threshold causes 3 and 4, each pair
//! in this order:
//!
//! 1. `too_fine_granularity`: local + stolen tasks per worker per second above
//!    [`Thresholds::tasks_per_worker_per_s`];
//! 2. `excessive_stealing`: stolen tasks ÷ local tasks above [`Thresholds::stolen_per_local`]
//!    — also looked for first in the inactive pair when a run makes many tasks (at least 8 per
//!    worker): a linear spawn's thieves wait for the one spawner rather than search when they
//!    have no CPU of their own (more workers than CPUs, a busy machine);
//! 3. `insufficient_parallel_slack`: GS→GS + GS→W transitions per worker per second above
//!    [`Thresholds::search_wait_per_worker_per_s`];
//! 4. `load_imbalance`: otherwise (inactive overhead high, searches and sleeps rare).
//!
//! A fifth looks at the machine rather than the work: `oversubscription`, when the workers
//! spent more than [`Thresholds::preempted`] of their time switched out while runnable in UC,
//! LQ or GS (ready to run, but no CPU for them): more workers than the CPUs the program may use
//! (affinity, cgroup quota), or CPUs taken by other programs. The latter is the machine's,
//! so it is said once per run (see [`machine_oversubscription_once`]).
//!
//! The impact of a diagnosis is a prediction of the plain program's gain: the overhead it
//! explains is a share of the time the workers could run (less the hooks' own time, taken out
//! of every state, see `hook_time`: the plain program does not spend it), and the region without
//! it would take that share less: speedup 1 ÷ (1 − share). On a quiet machine that is
//! elapsed ÷ (elapsed − overhead ÷ workers); beside other programs, which take a part of the
//! CPUs that grows with the region's work, it stays the share of the work. Waiting for a CPU and
//! blocking are time lost beside the schedule: that time ÷ workers, off the elapsed time.
//! `benches/predicted_gain.rs` checks the prediction on pairs of programs, bad and fixed.

use super::call_site::RegionKind;
use super::diagnosis::{Code, Diagnosis, Evidence, Impact, UNBOUNDED_ABOVE};
use super::lifecycle::{RegionReport, WaitSource, WorkerLifecycle};
use super::note::{LifecycleNote, Note};
use crate::recording::Thresholds;
use crate::units::{human_count, human_duration};

/// Figures of a region that the diagnoses share.
struct Figures {
    workers: f64,
    /// The region's length less the hooks' own time spread over the workers: the plain
    /// program's.
    elapsed_s: f64,
    worker_ns: f64,
    runs: f64,
    /// Tasks one run of the region makes.
    tasks_per_run: f64,
    /// Worker time less the time workers waited for a CPU: switched out while runnable (UC,
    /// LQ, GS, and W: an idle worker yielding beside busy CPUs), or idle while another worker
    /// held the work without a CPU. That time is the CPUs' shortage (`oversubscription`'s), so
    /// the other causes are judged, and every rate taken, over the rest.
    runnable_ns: f64,
    /// LQ + GS while not switched out runnable, plus sched (running, by its samples), and W less its time without a CPU (switched out
    /// runnable, or while another worker held the work without one): what the schedule itself
    /// lost.
    active_ns: f64,
    /// Of `active_ns`, rayon's code inside the tasks.
    sched_ns: f64,
    inactive_ns: f64,
    /// One standard error of `active_ns` and of `inactive_ns`: the states' marks and the CPU
    /// samples; `None` for the active overhead when too few samples told rayon's code in the
    /// tasks (then left out of it: the overhead is a lower bound).
    active_uncertainty_ns: Option<f64>,
    inactive_uncertainty_ns: f64,
}

impl Figures {
    /// The impact of a cause of the schedule (the four of method 2): its overhead's share of
    /// the time the workers could run. The region's time follows that time (what other
    /// programs take of the CPUs grows with it), so the plain region without the overhead
    /// takes 1 − share of its time: speedup 1 ÷ (1 − share), time lost elapsed × share.
    /// `uncertainty_ns`: one standard error of the overhead, `None` when it is a lower bound.
    fn impact(&self, overhead_ns: f64, uncertainty_ns: Option<f64>) -> Impact {
        let elapsed_ns = self.elapsed_s * 1e9;
        let share_of = |ns: f64| (ns / self.runnable_ns).clamp(0.0, 1.0);
        // Near all of the time the speedup runs away: no more than 1 ÷ UNBOUNDED_ABOVE is
        // promised.
        let speedup = |ns: f64| 1.0 / (1.0 - share_of(ns).min(1.0 - UNBOUNDED_ABOVE));
        let high = uncertainty_ns
            .map(|u| overhead_ns + u)
            .filter(|&ns| share_of(ns) < 1.0 - UNBOUNDED_ABOVE)
            .map(speedup);
        Impact {
            time_lost_ns: (elapsed_ns * share_of(overhead_ns)).round() as u64,
            // The sched part is estimated from samples: the sum may pass the whole.
            share_of_worker_time: (overhead_ns / self.worker_ns).min(1.0),
            speedup_if_fixed: speedup(overhead_ns),
            speedup_low: speedup(overhead_ns - uncertainty_ns.unwrap_or(0.0)),
            speedup_high: high,
        }
    }

    fn active_impact(&self) -> Impact {
        self.impact(self.active_ns, self.active_uncertainty_ns)
    }

    fn inactive_impact(&self) -> Impact {
        self.impact(self.inactive_ns, Some(self.inactive_uncertainty_ns))
    }

    /// The impact of what the workers lost beside the schedule (waiting for a CPU, blocked in
    /// tasks): that time ÷ workers, off the region's elapsed time.
    fn impact_of_lost_time(&self, lost_worker_ns: f64) -> Impact {
        let lost_ns = lost_worker_ns / self.workers;
        let elapsed_ns = self.elapsed_s * 1e9;
        let remaining = (elapsed_ns - lost_ns).max(elapsed_ns * UNBOUNDED_ABOVE);
        // Switches and blocking are counted from the kernel's records, not sampled.
        let speedup = elapsed_ns / remaining;
        Impact {
            time_lost_ns: lost_ns.round() as u64,
            share_of_worker_time: lost_worker_ns / self.worker_ns,
            speedup_if_fixed: speedup,
            speedup_low: speedup,
            speedup_high: Some(speedup),
        }
    }
}

/// A region whose inactive overhead stayed under its threshold only because idle workers
/// yielded to other programs instead of sleeping (their time off CPU counts as search): the
/// causes of inactive overhead could not be looked for, which the user is told.
pub fn hidden_wait_note(r: &RegionReport, t: &Thresholds) -> Option<Note> {
    let worker_ns = r.worker_ns();
    // With the hooks, a worker yielding in rayon's idle loop is counted as waiting already.
    if worker_ns <= 0.0 || r.wait_source == WaitSource::Hooks {
        return None;
    }
    let inactive = r.inactive_overhead_ns as f64 / worker_ns;
    let with_yields = (r.inactive_overhead_ns + r.preempted_ns.gs) as f64 / worker_ns;
    (inactive <= t.inactive_overhead && with_yields > t.inactive_overhead).then(|| {
        Note::Lifecycle(LifecycleNote::HiddenWait {
            region: r.name.clone(),
            preempted_searching_ns: r.preempted_ns.gs,
            worker_ns,
        })
    })
}

/// Diagnoses every region (longest first, as the lifecycle sorts them), then says a machine's
/// oversubscription once. `usable_cpus`: the CPUs the program could use.
pub fn diagnose_regions(regions: &mut [RegionReport], t: &Thresholds, usable_cpus: Option<f64>) {
    for region in regions.iter_mut() {
        region.diagnoses = diagnose(region, t, usable_cpus);
    }
    machine_oversubscription_once(regions, usable_cpus);
}

/// The diagnoses of a region, in the spec's order, then `oversubscription`; empty when the
/// region has no workers or no time. `usable_cpus`: the CPUs the program could use.
pub fn diagnose(r: &RegionReport, t: &Thresholds, usable_cpus: Option<f64>) -> Vec<Diagnosis> {
    if r.workers == 0 || r.elapsed_ns == 0 || r.elapsed_ns < t.min_elapsed_ns {
        return Vec::new();
    }
    let f = figures(r, usable_cpus);
    let mut out = Vec::new();
    let active_ns = f.active_ns;
    let active_share = active_ns / f.runnable_ns;
    if active_share > t.active_overhead {
        let opened = opened_by("active_overhead_share", active_share, t.active_overhead);
        let rate = (r.tasks.local + r.tasks.stolen) as f64 / (f.runnable_ns / 1e9);
        if rate > t.tasks_per_worker_per_s {
            out.push(too_fine(r, t, &f, rate, opened));
        }
        let ratio = r.tasks.stolen as f64 / r.tasks.local.max(1) as f64;
        if ratio > t.stolen_per_local {
            out.push(stealing(
                r,
                t,
                ratio,
                active_share,
                f.active_impact(),
                opened,
            ));
        }
    }
    let inactive_ns = f.inactive_ns;
    let inactive_share = inactive_ns / f.runnable_ns;
    if inactive_share > t.inactive_overhead {
        let opened = opened_by(
            "inactive_overhead_share",
            inactive_share,
            t.inactive_overhead,
        );
        let freq = (r.transitions.gs_gs + r.transitions.gs_w) as f64 / (f.runnable_ns / 1e9);
        let ratio = r.tasks.stolen as f64 / r.tasks.local.max(1) as f64;
        // A linear spawn whose thieves wait for the one spawner (they have no CPU of their
        // own to search on, or nothing to search for between its spawns): idle, not
        // searching. Many tasks per run tell it from a lack of tasks (slack).
        let linear_spawn = ratio > t.stolen_per_local
            && f.tasks_per_run >= (8 * r.workers) as f64
            && !out.iter().any(|d| d.code == Code::ExcessiveStealing);
        if linear_spawn {
            out.push(stealing(
                r,
                t,
                ratio,
                inactive_share,
                f.inactive_impact(),
                opened,
            ));
        } else if freq > t.search_wait_per_worker_per_s || few_tasks_per_run(r, &f) {
            out.push(slack(r, t, &f, freq, opened));
        } else {
            out.push(imbalance(r, t, &f, freq, inactive_share, opened));
        }
    }
    if let Some(d) = oversubscription(r, t, &f, usable_cpus) {
        out.push(d);
    }
    if let Some(d) = blocking(r, t, &f) {
        out.push(d);
    }
    fold_symptoms(&mut out, &f, r.workers);
    out
}

/// Folds each diagnosis that another one causes under it, so that the cause leads: stealing
/// in a region short of parallel slack whose runs make few tasks (not a linear spawn, which
/// makes many) is how idle workers take each task as it appears, not a cause of its own.
fn fold_symptoms(out: &mut Vec<Diagnosis>, f: &Figures, workers: usize) {
    let few_tasks = f.tasks_per_run < (8 * workers) as f64;
    let has = |out: &[Diagnosis], code| out.iter().any(|d: &Diagnosis| d.code == code);
    if !(few_tasks
        && has(out, Code::InsufficientParallelSlack)
        && has(out, Code::ExcessiveStealing))
    {
        return;
    }
    let Some(at) = out.iter().position(|d| d.code == Code::ExcessiveStealing) else {
        return;
    };
    let stealing = out.remove(at);
    if let Some(slack) = out
        .iter_mut()
        .find(|d| d.code == Code::InsufficientParallelSlack)
    {
        slack.evidence.summary.push_str(&format!(
            " Most tasks were stolen ({:.1} : 1): with so few tasks per run, idle workers take \
             each one as it appears — a symptom of the same cause (`excessive_stealing`, folded \
             here).",
            stealing.evidence.value
        ));
        slack.symptoms.push(stealing);
    }
}

fn figures(r: &RegionReport, usable_cpus: Option<f64>) -> Figures {
    // The plain program does not run the hooks: its workers' time, and its region's length,
    // are that much shorter.
    let hook_ns = (r.hook_ns.uc + r.hook_ns.lq + r.hook_ns.gs + r.hook_ns.w) as f64;
    let worker_ns = (r.worker_ns() - hook_ns).max(r.worker_ns() * 1e-3);
    let p = &r.preempted_ns;
    // Idle without a CPU: switched out while runnable (a worker yielding in rayon's idle loop
    // beside busy CPUs could not have run), or while another worker held work without a CPU —
    // the CPUs' shortage, not the schedule's. Idle otherwise (asleep, or yielding with a CPU to
    // run on) is idle. The two may overlap: the larger is taken out. A pool larger than its
    // CPUs switches its own idle workers out for its busy ones: that idle time stays the
    // program's (a linear spawn's thieves waiting for the spawner).
    let pool_too_large = usable_cpus.is_some_and(|cpus| r.workers as f64 > cpus);
    let idle_switched_out = if pool_too_large { 0 } else { p.w };
    let waited_for_others =
        (r.idle_while_others_preempted_ns.max(idle_switched_out)).min(r.inactive_overhead_ns);
    let without_cpu = (p.uc + p.lq + p.gs + waited_for_others) as f64;
    // The states' shares are estimated from the marks, each within the same error.
    let states_uncertainty_ns = r.state_share_uncertainty * worker_ns;
    let sched_uncertainty_ns = r
        .sched
        .share_of_uc
        .map(|_| r.sched.sched_uncertainty_ns as f64);
    Figures {
        workers: r.workers as f64,
        elapsed_s: worker_ns / r.workers as f64 / 1e9,
        worker_ns,
        runs: r.instances.max(1) as f64,
        tasks_per_run: r.tasks.total() as f64 / r.instances.max(1) as f64,
        // Never nothing, so that shares and rates stay finite.
        runnable_ns: (worker_ns - without_cpu).max(worker_ns * 1e-3),
        active_ns: r.active_overhead_ns.saturating_sub(p.lq + p.gs) as f64,
        sched_ns: r.sched.sched_ns as f64,
        inactive_ns: (r.inactive_overhead_ns - waited_for_others) as f64,
        active_uncertainty_ns: sched_uncertainty_ns.map(|s| s.hypot(states_uncertainty_ns)),
        inactive_uncertainty_ns: states_uncertainty_ns,
    }
}

/// Tasks that block while the region runs: the workers hold tasks they cannot run, and no
/// idle worker can take over their work.
fn blocking(r: &RegionReport, t: &Thresholds, f: &Figures) -> Option<Diagnosis> {
    let blocked_ns = r.blocked_ns.uc as f64;
    let share = blocked_ns / f.worker_ns;
    if share <= t.blocked {
        return None;
    }
    let summary = format!(
        "Tasks were blocked — waiting for a lock, a channel, I/O or a sleep — for {:.0}% of worker time \
         ({:.1} ms in user code while the region ran; threshold {:.0}%): a blocked task keeps its worker, \
         and the time does not show as idle.",
        share * 100.0,
        blocked_ns / 1e6,
        t.blocked * 100.0
    );
    Some(Diagnosis {
        code: Code::BlockingInTasks,
        symptoms: Vec::new(),
        evidence: Evidence {
            metric: "blocked_share",
            value: share,
            overhead: "blocked_share",
            overhead_share: share,
            overhead_threshold: t.blocked,
            summary,
        },
        threshold: t.blocked,
        impact: f.impact_of_lost_time(blocked_ns),
        advice:
            "Keep waits out of the tasks. A lock shared by the tasks serializes them: give each \
                 task its own accumulator and combine at the end (`fold` then `reduce`, or \
                 `collect`), shard the data, or use atomics. Blocking I/O and channel receives \
                 belong before or after the parallel loop, or on threads of their own; a `sleep` \
                 in a task holds a worker idle. The off-CPU flamegraph (`offcpu.svg`, frames \
                 under `[blocked]`) shows where the tasks waited."
                .to_owned(),
    })
}

/// Workers asleep while the region runs, yet rarely searching again: they ran out of work,
/// and the longest task against the median says how unequal the pieces were.
fn imbalance(
    r: &RegionReport,
    t: &Thresholds,
    f: &Figures,
    freq: f64,
    inactive_share: f64,
    opened: impl Fn(&'static str, f64, String) -> Evidence,
) -> Diagnosis {
    let longest = r.task_ns.max as f64 / r.task_ns.median.max(1) as f64;
    let summary = format!(
        "{:.0}% of the time workers could run is spent asleep while the region runs, yet workers rarely search again \
         ({} failed searches and sleeps per second each, under {}): they ran out of work and \
         stayed idle. The longest task ran {} of its own (its time switched out and the tasks nested in it aside), {longest:.0}× the median ({}).",
        inactive_share * 100.0,
        human_count(freq),
        human_count(t.search_wait_per_worker_per_s),
        human_duration(r.task_ns.max),
        human_duration(r.task_ns.median)
    );
    Diagnosis {
        code: Code::LoadImbalance,
        symptoms: Vec::new(),
        evidence: opened("search_wait_per_worker_per_s", freq, summary),
        threshold: t.search_wait_per_worker_per_s,
        impact: f.inactive_impact(),
        advice: format!(
            "The work is cut into too few, too unequal pieces: workers that finish early cannot help the \
             ones still running. Cut it finer where it is large: `.with_max_len(n)` on the parallel \
             iterator (n ≈ items ÷ {}), smaller `par_chunks`, a nested `join`/`par_iter` inside the largest \
             tasks (the longest ran {:.3} ms), or order the work largest first.",
            r.workers * 4,
            r.task_ns.max as f64 / 1e6
        ),
    }
}

fn stealing(
    r: &RegionReport,
    t: &Thresholds,
    ratio: f64,
    overhead_share: f64,
    impact: Impact,
    opened: impl Fn(&'static str, f64, String) -> Evidence,
) -> Diagnosis {
    let summary = format!(
        "{} tasks stolen for {} taken from the workers' own deques ({ratio:.1} : 1, threshold {}); \
         {:.0}% of the time workers could run is spent looking for or waiting for tasks.",
        human_count(r.tasks.stolen as f64),
        human_count(r.tasks.local as f64),
        t.stolen_per_local,
        overhead_share * 100.0
    );
    Diagnosis {
        code: Code::ExcessiveStealing,
        symptoms: Vec::new(),
        evidence: opened("stolen_per_local", ratio, summary),
        threshold: t.stolen_per_local,
        impact,
        advice: format!(
            "One thread creates most of the tasks and the others steal them one by one — typically a \
             loop of `spawn`s (or `par_bridge` over a sequential iterator). Split the work recursively so \
             that every worker creates tasks for itself: replace `for x in items {{ s.spawn(..) }}` by \
             `items.par_iter().for_each(..)` (or `par_chunks(n)` with n ≈ items ÷ {}), or spawn two \
             halves with `rayon::join` and recurse until a piece is small.",
            r.workers * 8
        ),
    }
}

/// A run makes fewer tasks than the region has workers, counted exactly (rayon-core hooks).
fn few_tasks_per_run(r: &RegionReport, f: &Figures) -> bool {
    r.wait_source == WaitSource::Hooks && f.tasks_per_run < r.workers as f64
}

fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map_or_else(String::new, |c| c.to_uppercase().chain(chars).collect())
}

/// `insufficient_parallel_slack`: the region's runs leave workers without work, seen in their
/// failed searches per second or, with exact task counts, in fewer tasks per run than workers.
fn slack(
    r: &RegionReport,
    t: &Thresholds,
    f: &Figures,
    freq: f64,
    opened: impl Fn(&'static str, f64, String) -> Evidence,
) -> Diagnosis {
    let inactive_ns = f.inactive_ns;
    let workers = r.workers;
    let per_run = tasks_per_run_in_words(f, workers);
    let few_tasks = f.tasks_per_run < workers as f64;
    let why = if few_tasks {
        "fewer tasks than there are workers"
    } else if r.kind == Some(RegionKind::Join) {
        "yet too few at a time while the recursion's top levels run"
    } else {
        "too few at a time to keep the workers busy: they finish in a burst, and idle workers are woken for work that is already gone"
    };
    let searches = format!(
        "workers fail to find work {} times per second each (GS->GS {} and GS->W {}, threshold {})",
        human_count(freq),
        human_count(r.transitions.gs_gs as f64),
        human_count(r.transitions.gs_w as f64),
        human_count(t.search_wait_per_worker_per_s),
    );
    let idle = inactive_ns / f.runnable_ns * 100.0;
    // On a busy machine search rounds are slow and the rate stays low; with exact task counts
    // a run that makes fewer tasks than workers decides it as well.
    let (metric, value, threshold, summary) = if freq > t.search_wait_per_worker_per_s {
        let summary = format!(
            "{searches}, while {idle:.0}% of the time workers could run is spent idle; {per_run}: {why}."
        );
        (
            "search_wait_per_worker_per_s",
            freq,
            t.search_wait_per_worker_per_s,
            summary,
        )
    } else {
        let summary = format!(
            "{per_run}: {why}; {idle:.0}% of the time workers could run is spent idle ({searches})."
        );
        (
            "tasks_per_run_per_worker",
            f.tasks_per_run / workers as f64,
            1.0,
            summary,
        )
    };
    let summary = capitalised(&summary);
    Diagnosis {
        code: Code::InsufficientParallelSlack,
        symptoms: Vec::new(),
        evidence: opened(metric, value, summary),
        threshold,
        impact: f.inactive_impact(),
        advice: slack_advice(r, f, few_tasks),
    }
}

/// What each run of the region makes for its workers, as the diagnosis says it: "each of its
/// N runs creates T tasks for W workers".
fn tasks_per_run_in_words(f: &Figures, workers: usize) -> String {
    // A mean: its tenths matter next to a handful of workers, not past a hundred tasks.
    let tasks = if f.tasks_per_run < 100.0 {
        format!("{:.1}", f.tasks_per_run)
    } else {
        human_count(f.tasks_per_run)
    };
    if f.runs > 1.0 {
        format!(
            "each of its {:.0} runs creates {tasks} tasks for {workers} workers",
            f.runs
        )
    } else {
        format!("it creates {tasks} tasks for {workers} workers")
    }
}

/// The advice for `insufficient_parallel_slack`: more pieces per run (at least four per
/// worker when a run has fewer tasks than workers), a parallel step at the top of a `join`
/// recursion that makes many tasks, or a pool no larger than a run's tasks.
fn slack_advice(r: &RegionReport, f: &Figures, few_tasks: bool) -> String {
    let workers = r.workers;
    let cut = if few_tasks {
        format!(
            "cut each run into at least {} pieces (`with_max_len`, smaller `par_chunks`, or split the work with `join` until pieces are small)",
            workers * 4
        )
    } else if r.kind == Some(RegionKind::Join) {
        join_top_levels_advice(r)
    } else {
        "give each run more independent pieces at once (a finer `with_max_len`/`par_chunks`), so that workers that wake find work"
            .to_owned()
    };
    let pool = (f.tasks_per_run.ceil() as usize).clamp(1, workers.max(1));
    let smaller_pool = if pool < workers {
        format!(
            "; or run it in a smaller pool (`ThreadPoolBuilder::new().num_threads({pool})`) so that the extra workers stop waking up"
        )
    } else {
        String::new()
    };
    format!("The region's runs leave workers without work. Per run: {cut}{smaller_pool}.")
}

/// The slack advice of a `join` recursion that makes many tasks and still leaves its workers
/// idle: the work each task does before it splits, or after its halves return, runs on one
/// worker at the top of the recursion, on two at the next level, while the others wait. The
/// busiest worker's time in tasks against the others' shows it where it is lopsided.
fn join_top_levels_advice(r: &RegionReport) -> String {
    let busy = |w: &WorkerLifecycle| w.state_ns.uc + w.state_ns.lq;
    let busiest = r.per_worker.iter().max_by_key(|w| busy(w));
    let others: Vec<u64> = r
        .per_worker
        .iter()
        .filter(|w| busiest.is_some_and(|b| b.tid != w.tid))
        .map(busy)
        .collect();
    let seen = match busiest {
        Some(b) if !others.is_empty() => {
            let others_mean = others.iter().sum::<u64>() / others.len() as u64;
            (busy(b) as f64 >= 1.3 * others_mean as f64).then(|| {
                format!(
                    " (here {} ran tasks for {} of the region's {}, each other worker for {} on \
                     average)",
                    b.name,
                    human_duration(busy(b)),
                    human_duration(r.elapsed_ns),
                    human_duration(others_mean)
                )
            })
        }
        _ => None,
    };
    format!(
        "the work a task does before it splits (a partition pass, a sequential prefix) or after \
         its halves return (a merge) runs on one worker at the top of the recursion, on two at \
         the next level, while the others wait{}: make that step parallel (a parallel partition \
         or merge), or split the input into independent pieces before recursing",
        seen.unwrap_or_default()
    )
}

/// `oversubscription`: the workers were ready to run but had no CPU for much of the region.
fn oversubscription(
    r: &RegionReport,
    t: &Thresholds,
    f: &Figures,
    usable_cpus: Option<f64>,
) -> Option<Diagnosis> {
    let p = &r.preempted_ns;
    // Without the hooks, a preempted search may be an idle worker yielding: left out.
    let searching = if r.wait_source == WaitSource::Hooks {
        p.gs
    } else {
        0
    };
    // What the profiler's own writer took is not the program's doing.
    let preempted_ns = (p.uc + p.lq + searching).saturating_sub(r.profiler_cpu_ns) as f64;
    let share = preempted_ns / f.worker_ns;
    if share <= t.preempted {
        return None;
    }
    // Workers that were not asleep, on average over the region.
    let awake = (f.worker_ns - (r.state_ns.w - p.w) as f64) / (f.elapsed_s * 1e9);
    let (cause, advice) = match usable_cpus {
        Some(cpus) if r.workers as f64 > cpus => (
            format!(
                "the pool has {} workers for {cpus:.1} usable CPUs (affinity and cgroup quota)",
                r.workers
            ),
            format!(
                "Size the pool to the CPUs the program may use: `ThreadPoolBuilder::new().num_threads({n})`, or `RAYON_NUM_THREADS={n}` for the global pool. rayon counts the CPUs it sees, not the container's quota; and a pool built inside another pool's task (a nested pool) adds its workers to the first one's — install it once, outside, or share one pool.",
                n = cpus.floor().max(1.0) as usize
            ),
        ),
        Some(cpus) => (
            format!(
                "{:.1} workers were awake on average for {cpus:.1} usable CPUs: other programs (or other threads of this one) took the CPUs",
                awake
            ),
            "Other work competed for the CPUs: profile on an otherwise idle machine, or leave CPUs to the other work with a smaller pool (`num_threads`, `RAYON_NUM_THREADS`)."
                .to_owned(),
        ),
        None => (
            "the CPUs the program may use are not known".to_owned(),
            "Match the pool size to the CPUs the program may use (`num_threads`, `RAYON_NUM_THREADS`) and run it on an otherwise idle machine."
                .to_owned(),
        ),
    };
    let summary = format!(
        "Workers were ready to run but switched out for {:.0}% of worker time ({:.1} ms in user code, {:.1} ms \
         finding tasks, less {:.1} ms the profiler's trace writer ran; threshold {:.0}%): {cause}.",
        share * 100.0,
        p.uc as f64 / 1e6,
        (p.lq + searching) as f64 / 1e6,
        r.profiler_cpu_ns as f64 / 1e6,
        t.preempted * 100.0
    );
    Some(Diagnosis {
        code: Code::Oversubscription,
        symptoms: Vec::new(),
        evidence: Evidence {
            metric: "preempted_share",
            value: share,
            overhead: "preempted_share",
            overhead_share: share,
            overhead_threshold: t.preempted,
            summary,
        },
        threshold: t.preempted,
        impact: f.impact_of_lost_time(preempted_ns),
        advice,
    })
}

/// Oversubscription that other programs caused (the pools fit the CPUs the program may use)
/// is the machine's, not a region's: it is said once, on the region that lost the most time to
/// it, with the share of every region it touched; the others keep their share in the regions'
/// table (`preempted`). A pool larger than those CPUs stays a cause of each region it runs.
fn machine_oversubscription_once(regions: &mut [RegionReport], usable_cpus: Option<f64>) {
    let by_machine = |r: &RegionReport| {
        usable_cpus.is_some_and(|cpus| r.workers as f64 <= cpus)
            && r.diagnoses.iter().any(|d| d.code == Code::Oversubscription)
    };
    let touched: Vec<usize> = (0..regions.len())
        .filter(|&i| by_machine(&regions[i]))
        .collect();
    let lost = |r: &RegionReport| {
        r.diagnoses
            .iter()
            .find(|d| d.code == Code::Oversubscription)
            .map_or(0, |d| d.impact.time_lost_ns)
    };
    let Some(&kept) = touched.iter().max_by_key(|&&i| lost(&regions[i])) else {
        return;
    };
    if touched.len() < 2 {
        return;
    }
    let others: Vec<String> = touched
        .iter()
        .filter(|&&i| i != kept)
        .map(|&i| {
            let r = &regions[i];
            let d = r
                .diagnoses
                .iter()
                .find(|d| d.code == Code::Oversubscription);
            format!(
                "`{}` ({:.0}%)",
                r.name,
                d.map_or(0.0, |d| d.evidence.value * 100.0)
            )
        })
        .collect();
    for &i in &touched {
        if i != kept {
            regions[i]
                .diagnoses
                .retain(|d| d.code != Code::Oversubscription);
        }
    }
    if let Some(d) = regions[kept]
        .diagnoses
        .iter_mut()
        .find(|d| d.code == Code::Oversubscription)
    {
        d.evidence.summary.push_str(&format!(
            " One cause for the whole run: the same happened in {} other region{} — {}.",
            others.len(),
            if others.len() == 1 { "" } else { "s" },
            others.join(", ")
        ));
    }
}

/// The evidence of a diagnosis in the pair of causes that `overhead` (at `share`, above
/// `threshold`) opened.
fn opened_by(
    overhead: &'static str,
    share: f64,
    threshold: f64,
) -> impl Fn(&'static str, f64, String) -> Evidence + Copy {
    move |metric, value, summary| Evidence {
        metric,
        value,
        overhead,
        overhead_share: share,
        overhead_threshold: threshold,
        summary,
    }
}

/// "12% ±2 in rayon's code inside the tasks (412 samples)", or why it is not known.
fn sched_in_words(r: &RegionReport, f: &Figures) -> String {
    let s = &r.sched;
    if s.share_of_uc.is_none() {
        return format!(
            "rayon's code inside the tasks not told ({} CPU samples in them, too few: \
             `--frequency 4999` takes more)",
            s.own_samples + s.sched_samples
        );
    }
    format!(
        "{:.0}% ±{:.0} in rayon's code inside the tasks ({} CPU samples in them)",
        f.sched_ns / f.runnable_ns * 100.0,
        s.sched_uncertainty_ns as f64 / f.runnable_ns * 100.0,
        s.own_samples + s.sched_samples
    )
}

fn too_fine(
    r: &RegionReport,
    t: &Thresholds,
    f: &Figures,
    rate: f64,
    opened: impl Fn(&'static str, f64, String) -> Evidence,
) -> Diagnosis {
    // Make tasks this many times larger, with a margin of two over the threshold.
    let factor = (2.0 * rate / t.tasks_per_worker_per_s).ceil();
    let target_ns = 2.0 * 1e9 / t.tasks_per_worker_per_s;
    let summary = format!(
        "{} tasks per second per worker (threshold {}); the median task lasts {} and {:.0}% of \
         the time workers could run is spent scheduling them: {:.0}% finding tasks, {}.",
        human_count(rate),
        human_count(t.tasks_per_worker_per_s),
        human_duration(r.task_ns.median),
        // Its parts are measured apart (marks, samples), each within its error: their sum
        // may pass all of the time, which it cannot be.
        (f.active_ns / f.runnable_ns * 100.0).min(100.0),
        (f.active_ns - f.sched_ns) / f.runnable_ns * 100.0,
        sched_in_words(r, f)
    );
    Diagnosis {
        code: Code::TooFineGranularity,
        symptoms: Vec::new(),
        evidence: opened("tasks_per_worker_per_s", rate, summary),
        threshold: t.tasks_per_worker_per_s,
        impact: f.active_impact(),
        advice: too_fine_advice(r, f, factor, target_ns),
    }
}

/// The too-fine advice for the region's kind, with the number filled in: how many of today's
/// pieces of work (the median task that ran no nested task) make one of `target_ns`.
fn too_fine_advice(r: &RegionReport, f: &Figures, factor: f64, target_ns: f64) -> String {
    let pieces = (target_ns / r.task_ns.median.max(1) as f64).ceil().max(2.0);
    let today = human_duration(r.task_ns.median);
    let target = format!("{:.1} µs", target_ns / 1e3);
    let why = "Tasks are too small to pay for their scheduling.";
    match r.kind {
        Some(RegionKind::Iterator) => iterator_advice(r, pieces, &today, &target, why),
        // A named region (or an `install`) whose work is a parallel iterator is one too.
        Some(RegionKind::Named | RegionKind::Install) | None
            if r.iterator_items.is_some_and(|i| i.iterators > 0) =>
        {
            iterator_advice(r, pieces, &today, &target, why)
        }
        Some(RegionKind::Join) => format!(
            "{why} The recursion splits down to pieces of {today}: stop splitting at a cut-off, \
             with plain recursive calls below a piece of about {pieces:.0}× today's smallest \
             (at least {target} of work; below about {pieces:.0} elements when it splits down \
             to single elements now)."
        ),
        Some(RegionKind::Scope | RegionKind::Spawn) => format!(
            "{why} Each spawned job runs {today}: spawn fewer, larger jobs of at least {target} \
             (about {pieces:.0} of today's each), or split the work recursively (`join`, or \
             `par_iter` with `.with_min_len(n)`) instead of spawning a job per item."
        ),
        _ => format!(
            "{why} Make each about {factor:.0}× larger (at least {target} of work): on the \
             parallel iterator add `.with_min_len(n)` with n ≈ {factor:.0} × items ÷ {:.0} \
             (the tasks one run makes now), or iterate `par_chunks(n)` and loop sequentially \
             inside each chunk; with recursive `join`, stop splitting below a piece that takes \
             {target}.",
            f.tasks_per_run
        ),
    }
}

/// The too-fine advice of an iterator region: `pieces` of today's pieces of work (`today`
/// each) make one of `target`. With rayon's hook the items are known: inner iterators nested in
/// the region's tasks, each less work than one piece should be, are made sequential; otherwise
/// `with_min_len` is given in items (a run's pieces: its joins' first halves, and one per
/// iterator). Without it, in today's pieces.
fn iterator_advice(r: &RegionReport, pieces: f64, today: &str, target: &str, why: &str) -> String {
    let items = r.iterator_items.unwrap_or_default();
    let runs = r.instances.max(1) as f64;
    if items.nested_iterators > 0 {
        let per_inner = items.nested_items as f64 / items.nested_iterators as f64;
        if per_inner <= pieces {
            return format!(
                "{why} Its tasks ran {} parallel iterators nested in its own, of about {} items \
                 each (a row's cells): each is less work than one task should be (at least \
                 {target}, about {pieces:.0} of today's pieces of {today}). Make the inner loop \
                 sequential (`iter()` in place of `par_iter()`): the outer iterator's tasks then \
                 hold whole rows.",
                human_count(items.nested_iterators as f64 / runs),
                few(per_inner),
            );
        }
    }
    if items.iterators == 0 {
        return format!(
            "{why} The median task runs {today}: give each at least {target} of work, about \
             {pieces:.0} of today's. Add `.with_min_len({pieces:.0})` to the parallel iterator \
             when each task holds one item now ({pieces:.0}× the items it holds otherwise), or \
             iterate `par_chunks({pieces:.0})` and loop sequentially inside each chunk. A \
             parallel iterator over a few items inside another one's tasks (a row's cells): make \
             the inner loop sequential (`iter()`)."
        );
    }
    let pieces_now = (r.tasks.inline + items.iterators) as f64;
    let per_piece = items.items as f64 / pieces_now;
    let min_len = (pieces * per_piece).ceil().max(2.0);
    format!(
        "{why} The median task runs {today} over about {} items ({} items in {} pieces a run): \
         give each at least {target} of work, about {min_len:.0} items. Add \
         `.with_min_len({min_len:.0})` to the parallel iterator, or iterate \
         `par_chunks({min_len:.0})` and loop sequentially inside each chunk.",
        few(per_piece),
        human_count(items.items as f64 / runs),
        human_count(pieces_now / runs),
    )
}

/// A count of items that may be fractional on average: one decimal under ten.
fn few(n: f64) -> String {
    if n < 10.0 {
        format!("{n:.1}")
    } else {
        format!("{n:.0}")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::analysis::SchedShare;
    use crate::analysis::lifecycle::IteratorItems;
    use crate::analysis::lifecycle::{SearchRounds, StateNs, TaskCounts, TaskNs, Transitions};

    /// A region of 4 workers for 1 s, with the given tasks, overheads and transitions.
    pub(crate) fn region(
        tasks: TaskCounts,
        lq_gs_ns: u64,
        w_ns: u64,
        transitions: Transitions,
    ) -> RegionReport {
        let worker_ns = 4_000_000_000;
        RegionReport {
            site: 1,
            name: "r".into(),
            implicit: false,
            call_site: None,
            kind: None,
            instances: 10,
            elapsed_ns: 1_000_000_000,
            workers: 4,
            tasks,
            tasks_counted_in_program: 0,
            iterator_items: None,
            state_marks: 0,
            state_share_uncertainty: 0.0,
            task_ns: TaskNs {
                min: 1_000,
                median: 10_000,
                max: 50_000_000,
            },
            state_ns: StateNs {
                uc: worker_ns - lq_gs_ns - w_ns,
                lq: lq_gs_ns / 2,
                gs: lq_gs_ns / 2,
                w: w_ns,
            },
            transitions,
            sched: Default::default(),
            hook_ns: StateNs::default(),
            active_overhead_ns: lq_gs_ns,
            inactive_overhead_ns: w_ns,
            preempted_ns: StateNs::default(),
            blocked_ns: StateNs::default(),
            idle_while_others_preempted_ns: 0,
            profiler_cpu_ns: 0,
            wait_source: WaitSource::Switches,
            gs_gs_source: SearchRounds::Counted,
            per_worker: Vec::new(),
            diagnoses: Vec::new(),
        }
    }

    /// 4 workers for 1 s: 4 s of worker time, 10% of it is 400 ms.
    #[test]
    fn idle_time_hidden_by_yields_is_told_not_diagnosed() {
        let t = Thresholds::default();
        let mut busy_machine = region(MANY, 0, 100_000_000, QUIET);
        busy_machine.preempted_ns.gs = 500_000_000;
        assert_eq!(
            hidden_wait_note(&busy_machine, &t),
            Some(Note::Lifecycle(LifecycleNote::HiddenWait {
                region: busy_machine.name.clone(),
                preempted_searching_ns: 500_000_000,
                worker_ns: 4e9,
            }))
        );
        assert!(codes(&busy_machine).is_empty());
        // Few yields, or a wait already over its threshold (diagnosed as usual): no note.
        busy_machine.preempted_ns.gs = 200_000_000;
        assert_eq!(hidden_wait_note(&busy_machine, &t), None);
        let mut waiting = region(MANY, 0, 500_000_000, QUIET);
        waiting.preempted_ns.gs = 500_000_000;
        assert_eq!(hidden_wait_note(&waiting, &t), None);
        // With the hooks, yields in rayon's idle loop are already counted as waiting.
        busy_machine.preempted_ns.gs = 500_000_000;
        busy_machine.wait_source = WaitSource::Hooks;
        assert_eq!(hidden_wait_note(&busy_machine, &t), None);
    }

    #[test]
    fn workers_without_a_cpu_are_oversubscription_with_a_pool_size() {
        let t = Thresholds::default();
        let mut r = region(FEW, 0, 0, QUIET);
        // 4 workers for 1 s; 600 ms of it switched out while runnable in user code: 15 %.
        r.preempted_ns.uc = 600_000_000;
        let d = diagnose(&r, &t, Some(2.0));
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].code, Code::Oversubscription);
        assert_eq!(d[0].evidence.value, 0.15);
        assert!(
            d[0].evidence
                .summary
                .contains("4 workers for 2.0 usable CPUs"),
            "{}",
            d[0].evidence.summary
        );
        assert!(d[0].advice.contains("num_threads(2)"), "{}", d[0].advice);
        assert!(
            d[0].advice.contains("RAYON_NUM_THREADS=2"),
            "{}",
            d[0].advice
        );
        // As many CPUs as workers: other programs took them.
        let other = diagnose(&r, &t, Some(4.0)).remove(0);
        assert!(
            other.evidence.summary.contains("other programs"),
            "{}",
            other.evidence.summary
        );
        // Under the threshold, and preempted idle time (W), are not oversubscription.
        r.preempted_ns.uc = 300_000_000;
        r.preempted_ns.w = 2_000_000_000;
        assert!(diagnose(&r, &t, Some(2.0)).is_empty());
    }

    #[test]
    fn a_region_shorter_than_the_minimum_is_not_diagnosed() {
        let r = RegionReport {
            elapsed_ns: 999_999,
            ..region(FEW, 0, 4_000_000_000, QUIET)
        };
        assert!(codes(&r).is_empty());
        let t = Thresholds {
            min_elapsed_ns: 0,
            ..Thresholds::default()
        };
        assert!(!diagnose(&r, &t, None).is_empty());
    }

    #[test]
    fn with_exact_task_counts_fewer_tasks_than_workers_per_run_is_slack() {
        // 10 runs of 2 tasks for 4 workers, idle most of the time, few failed searches per
        // second (a busy machine makes rounds slow).
        let two_per_run = TaskCounts {
            local: 10,
            stolen: 10,
            injected: 0,
            inline: 0,
        };
        let mut r = region(two_per_run, 0, ACTIVE, QUIET);
        assert_eq!(
            codes(&r),
            vec![Code::LoadImbalance],
            "rate alone: imbalance"
        );
        r.wait_source = WaitSource::Hooks;
        let d = diagnose(&r, &Thresholds::default(), None).remove(0);
        assert_eq!(d.code, Code::InsufficientParallelSlack);
        assert_eq!(
            (d.evidence.metric, d.evidence.value, d.threshold),
            ("tasks_per_run_per_worker", 0.5, 1.0)
        );
        assert!(
            d.evidence
                .summary
                .starts_with("Each of its 10 runs creates 2.0 tasks for 4 workers: fewer tasks"),
            "{}",
            d.evidence.summary
        );
        assert!(d.advice.contains("num_threads(2)"), "{}", d.advice);
    }

    /// The diagnoses of a busy region of 10 runs on 4 workers, its tasks run locally or
    /// stolen.
    fn busy_region_diagnoses(local: u64, stolen: u64) -> Vec<Diagnosis> {
        let tasks = TaskCounts {
            local,
            stolen,
            injected: 0,
            inline: 0,
        };
        let r = region(tasks, 0, 1_000_000_000, BUSY);
        diagnose(&r, &Thresholds::default(), Some(4.0))
    }

    #[test]
    fn a_large_count_of_tasks_per_run_reads_as_a_count() {
        let summary = busy_region_diagnoses(1_999_990, 10)
            .into_iter()
            .find(|d| d.code == Code::InsufficientParallelSlack)
            .expect("insufficient_parallel_slack")
            .evidence
            .summary;
        assert!(
            summary.contains("each of its 10 runs creates 200k tasks for 4 workers"),
            "{summary}"
        );
    }

    #[test]
    fn slack_advice_fits_a_region_run_many_times_with_enough_tasks() {
        // 10 runs of 27.1 tasks each for 4 workers: enough tasks per run, so the advice is
        // about each run and never says there are fewer tasks than workers.
        let d = busy_region_diagnoses(200, 71).remove(0);
        assert_eq!(d.code, Code::InsufficientParallelSlack);
        assert!(
            d.evidence
                .summary
                .contains("each of its 10 runs creates 27.1 tasks for 4 workers"),
            "{}",
            d.evidence.summary
        );
        assert!(
            !d.evidence.summary.contains("fewer tasks"),
            "{}",
            d.evidence.summary
        );
        assert!(
            d.advice
                .starts_with("The region's runs leave workers without work. Per run:"),
            "{}",
            d.advice
        );
        assert!(!d.advice.contains("instead of"), "{}", d.advice);
    }

    /// A join recursion of many tasks whose top levels hold the work on one worker: the slack
    /// advice names the step to make parallel, with the busiest worker's time against the
    /// others'.
    #[test]
    fn slack_advice_of_a_join_recursion_points_at_its_top_levels() {
        let tasks = TaskCounts {
            local: 200_000,
            stolen: 71,
            injected: 0,
            inline: 200_000,
        };
        let mut r = region(tasks, 0, 1_000_000_000, BUSY);
        r.instances = 1;
        r.kind = Some(RegionKind::Join);
        let worker = |tid: u32, busy_ms: u64| WorkerLifecycle {
            tid,
            rayon_index: tid as u16,
            pool: 0,
            name: format!("rayon worker {tid} (pool 0)"),
            tasks,
            state_ns: StateNs {
                uc: busy_ms * 1_000_000,
                lq: 0,
                gs: 0,
                w: (1000 - busy_ms) * 1_000_000,
            },
            transitions: Transitions::default(),
            preempted_ns: StateNs::default(),
            blocked_ns: StateNs::default(),
        };
        r.per_worker = vec![
            worker(0, 950),
            worker(1, 700),
            worker(2, 700),
            worker(3, 700),
        ];
        let d = diagnose(&r, &Thresholds::default(), Some(4.0)).remove(0);
        assert_eq!(d.code, Code::InsufficientParallelSlack);
        assert!(
            d.advice.contains("make that step parallel")
                && d.advice.contains(
                    "rayon worker 0 (pool 0) ran tasks for 950 ms of the region's 1.00 s, each \
                     other worker for 700 ms on average"
                ),
            "{}",
            d.advice
        );
        // Even work: the figures say nothing, and are left out.
        r.per_worker = vec![
            worker(0, 700),
            worker(1, 700),
            worker(2, 700),
            worker(3, 700),
        ];
        let d = diagnose(&r, &Thresholds::default(), Some(4.0)).remove(0);
        assert!(
            d.advice.contains("make that step parallel") && !d.advice.contains("on average"),
            "{}",
            d.advice
        );
    }

    fn codes(r: &RegionReport) -> Vec<Code> {
        diagnose(r, &Thresholds::default(), None)
            .into_iter()
            .map(|d| d.code)
            .collect()
    }

    const FEW: TaskCounts = TaskCounts {
        local: 1_000,
        stolen: 100,
        injected: 10,
        inline: 1_000,
    };
    /// 2 million local tasks per worker per second.
    const MANY: TaskCounts = TaskCounts {
        local: 7_999_990,
        stolen: 10,
        injected: 10,
        inline: 0,
    };
    const STOLEN: TaskCounts = TaskCounts {
        local: 100,
        stolen: 1_000,
        injected: 0,
        inline: 0,
    };
    const ACTIVE: u64 = 1_000_000_000; // 25 % of worker time
    const QUIET: Transitions = Transitions {
        gs_gs: 330,
        gs_w: 10,
        ..ZERO
    };
    const BUSY: Transitions = Transitions {
        gs_gs: 330_000,
        gs_w: 10_000,
        ..ZERO
    };
    const ZERO: Transitions = Transitions {
        uc_lq: 0,
        lq_uc: 0,
        uc_uc: 0,
        lq_gs: 0,
        gs_uc: 0,
        gs_gs: 0,
        gs_w: 0,
        w_gs: 0,
    };

    #[test]
    fn each_cause_fires_on_its_pattern() {
        assert_eq!(
            codes(&region(MANY, ACTIVE, 0, QUIET)),
            vec![Code::TooFineGranularity]
        );
        assert_eq!(
            codes(&region(STOLEN, ACTIVE, 0, QUIET)),
            vec![Code::ExcessiveStealing]
        );
        assert_eq!(
            codes(&region(FEW, 0, ACTIVE, BUSY)),
            vec![Code::InsufficientParallelSlack]
        );
        assert_eq!(
            codes(&region(FEW, 0, ACTIVE, QUIET)),
            vec![Code::LoadImbalance]
        );
    }

    /// Idle time spent switched out while runnable is the CPUs' shortage: a balanced region
    /// beside programs that take the CPUs is oversubscribed, not imbalanced or short of slack.
    #[test]
    fn idle_time_without_a_cpu_is_oversubscription_not_imbalance() {
        // 1 s of W (25% of worker time), 0.95 s of it while another worker held the work
        // switched out while runnable.
        let mut beside_hogs = region(FEW, 100_000_000, ACTIVE, QUIET);
        beside_hogs.preempted_ns = StateNs {
            uc: 600_000_000,
            w: 950_000_000,
            ..StateNs::default()
        };
        beside_hogs.idle_while_others_preempted_ns = 950_000_000;
        assert_eq!(codes(&beside_hogs), vec![Code::Oversubscription]);
        let mut searching = region(FEW, 100_000_000, ACTIVE, BUSY);
        searching.preempted_ns = beside_hogs.preempted_ns;
        searching.idle_while_others_preempted_ns = 950_000_000;
        assert_eq!(codes(&searching), vec![Code::Oversubscription]);
        // Idle yielding while no worker holds work, switched out runnable: it could not have
        // run, the shortage's too.
        beside_hogs.idle_while_others_preempted_ns = 0;
        assert_eq!(codes(&beside_hogs), vec![Code::Oversubscription]);
        // Unless the pool itself is larger than its CPUs (4 workers, 2 CPUs): its own busy
        // workers took the idle ones' CPUs, and the idle time is the program's.
        let own = diagnose(&beside_hogs, &Thresholds::default(), Some(2.0));
        assert_eq!(
            own.iter().map(|d| d.code).collect::<Vec<_>>(),
            vec![Code::LoadImbalance, Code::Oversubscription]
        );
        // Idle asleep (not switched out runnable) while no worker held work without a CPU is
        // the schedule's: imbalance, beside the oversubscription.
        beside_hogs.preempted_ns.w = 0;
        assert_eq!(
            codes(&beside_hogs),
            vec![Code::LoadImbalance, Code::Oversubscription]
        );
    }

    /// Task rates are per second the workers could run: too-fine tasks stay too fine when
    /// other programs take most of the CPUs.
    #[test]
    fn too_fine_tasks_are_found_beside_programs_that_take_the_cpus() {
        // 300,000 tasks per worker per second of worker time, under the threshold.
        let tasks = TaskCounts {
            local: 1_200_000,
            ..FEW
        };
        let quiet = region(tasks, ACTIVE, 0, QUIET);
        assert_eq!(codes(&quiet), vec![]);
        // Half the time switched out runnable: 600,000 per second of running.
        let mut beside_hogs = quiet.clone();
        beside_hogs.preempted_ns = StateNs {
            uc: 1_800_000_000,
            lq: 200_000_000,
            ..StateNs::default()
        };
        assert_eq!(
            codes(&beside_hogs),
            vec![Code::TooFineGranularity, Code::Oversubscription]
        );
    }

    /// Other programs taking the CPUs is said once, on the region that lost most to it; a
    /// pool larger than the CPUs stays each region's.
    #[test]
    fn oversubscription_by_other_programs_is_said_once_per_run() {
        let busy = |name: &str, uc_preempted: u64| {
            let mut r = region(FEW, 100_000_000, 0, QUIET);
            r.name = name.into();
            r.preempted_ns.uc = uc_preempted;
            r.diagnoses = diagnose(&r, &Thresholds::default(), Some(4.0));
            r
        };
        let mut regions = vec![
            busy("a", 800_000_000),
            busy("b", 1_600_000_000),
            busy("c", 0),
        ];
        machine_oversubscription_once(&mut regions, Some(4.0));
        let with: Vec<&str> = regions
            .iter()
            .filter(|r| r.diagnoses.iter().any(|d| d.code == Code::Oversubscription))
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(with, ["b"]);
        let summary = &regions[1].diagnoses[0].evidence.summary;
        assert!(
            summary.ends_with("1 other region — `a` (20%)."),
            "{summary}"
        );
        // Pools of 4 workers on 2 CPUs: each region's own cause.
        let mut regions = vec![busy("a", 800_000_000), busy("b", 1_600_000_000)];
        for r in &mut regions {
            r.diagnoses = diagnose(r, &Thresholds::default(), Some(2.0));
        }
        machine_oversubscription_once(&mut regions, Some(2.0));
        assert!(
            regions
                .iter()
                .all(|r| { r.diagnoses.iter().any(|d| d.code == Code::Oversubscription) })
        );
    }

    /// A join of two per run on a pool of 4: every task is stolen because the idle workers
    /// wait for each one; the cause (slack) leads, stealing is folded under it.
    #[test]
    fn stealing_in_runs_of_few_tasks_is_folded_under_slack() {
        let join_loop = TaskCounts {
            local: 1_000,
            stolen: 3_000,
            injected: 1_000,
            inline: 1_000,
        };
        let mut r = region(join_loop, ACTIVE, ACTIVE, BUSY);
        r.instances = 1_000;
        let d = diagnose(&r, &Thresholds::default(), None);
        assert_eq!(
            d.iter().map(|d| d.code).collect::<Vec<_>>(),
            vec![Code::InsufficientParallelSlack]
        );
        assert_eq!(d[0].symptoms.len(), 1);
        assert_eq!(d[0].symptoms[0].code, Code::ExcessiveStealing);
        assert!(
            d[0].evidence.summary.contains("(3.0 : 1)"),
            "{}",
            d[0].evidence.summary
        );
        // A spawn loop's many tasks per run: stealing is the cause there.
        r.instances = 1;
        assert!(codes(&r).contains(&Code::ExcessiveStealing));
    }

    #[test]
    fn nothing_fires_on_a_well_tuned_region() {
        assert!(codes(&region(FEW, 100_000_000, 100_000_000, QUIET)).is_empty());
    }

    #[test]
    fn causes_are_looked_for_only_above_their_overhead_threshold() {
        // Many tiny stolen tasks and busy searching, but little overhead of either kind.
        let tiny_stolen = TaskCounts {
            local: 1_000_000,
            stolen: 8_000_000,
            injected: 0,
            inline: 0,
        };
        assert!(codes(&region(tiny_stolen, 100_000_000, 100_000_000, BUSY)).is_empty());
        // Active overhead opens causes 1 and 2 only; inactive overhead 3 and 4, and 2 when a
        // run makes many tasks (a linear spawn whose thieves wait for the spawner).
        assert_eq!(codes(&region(FEW, ACTIVE, 0, BUSY)), Vec::<Code>::new());
        assert_eq!(
            codes(&region(tiny_stolen, 0, ACTIVE, QUIET)),
            vec![Code::ExcessiveStealing]
        );
        let few_stolen = TaskCounts {
            local: 1,
            stolen: 20,
            injected: 0,
            inline: 0,
        };
        assert_eq!(
            codes(&region(few_stolen, 0, ACTIVE, QUIET)),
            vec![Code::LoadImbalance]
        );
    }

    #[test]
    fn both_pairs_fire_in_the_specified_order() {
        let tiny_stolen = TaskCounts {
            local: 1_000_000,
            stolen: 8_000_000,
            injected: 0,
            inline: 0,
        };
        assert_eq!(
            codes(&region(tiny_stolen, ACTIVE, ACTIVE, BUSY)),
            vec![
                Code::TooFineGranularity,
                Code::ExcessiveStealing,
                Code::InsufficientParallelSlack
            ]
        );
    }

    #[test]
    fn thresholds_are_configurable() {
        let r = region(FEW, ACTIVE, 0, QUIET);
        let strict = Thresholds {
            tasks_per_worker_per_s: 100.0,
            ..Thresholds::default()
        };
        let found: Vec<Code> = diagnose(&r, &strict, None)
            .into_iter()
            .map(|d| d.code)
            .collect();
        assert_eq!(found, vec![Code::TooFineGranularity]);
    }

    #[test]
    fn evidence_impact_and_advice_are_quantitative() {
        let d = diagnose(
            &region(MANY, ACTIVE, 0, QUIET),
            &Thresholds::default(),
            None,
        )
        .remove(0);
        assert_eq!(d.evidence.metric, "tasks_per_worker_per_s");
        assert_eq!(d.evidence.value, 2_000_000.0);
        assert_eq!(d.threshold, 400_000.0);
        assert_eq!(d.evidence.overhead_share, 0.25);
        // 25 % of 4 workers' time = 250 ms of the region's 1 s: 1/0.75 faster.
        assert_eq!(d.impact.time_lost_ns, 250_000_000);
        assert!((d.impact.speedup_if_fixed - 4.0 / 3.0).abs() < 1e-9);
        // 2 million per second against 400,000: tasks 10× larger (a margin of two).
        assert!(d.advice.contains("about 10× larger"), "{}", d.advice);
        assert!(d.advice.contains("with_min_len"), "{}", d.advice);
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["code"], "too_fine_granularity");
        for code in [
            Code::TooFineGranularity,
            Code::ExcessiveStealing,
            Code::InsufficientParallelSlack,
            Code::LoadImbalance,
        ] {
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
        }
    }

    /// Hand-computed: 4 workers for 1 s (4 s of worker time); 200 ms in LQ + GS; the CPU
    /// samples in UC say 25% of its 3.8 s is rayon's code (950 ms). Active overhead 1.15 s,
    /// 28.75% of worker time: the region loses 287.5 ms of its 1 s, 1 ÷ 0.7125 = 1.40× faster
    /// if fixed.
    #[test]
    fn the_schedulers_code_in_the_tasks_is_active_overhead() {
        let mut r = region(MANY, 200_000_000, 0, QUIET);
        r.sched = crate::analysis::sched_share::share(300, 100, 0, r.state_ns.uc);
        r.active_overhead_ns = 200_000_000 + r.sched.sched_ns;
        assert_eq!(r.sched.sched_ns, 950_000_000);
        let d = diagnose(&r, &Thresholds::default(), None).remove(0);
        assert_eq!(d.code, Code::TooFineGranularity);
        assert_eq!(d.evidence.overhead_share, 1_150_000_000.0 / 4e9);
        assert_eq!(d.impact.time_lost_ns, 287_500_000);
        assert!((d.impact.speedup_if_fixed - 1.0 / 0.7125).abs() < 1e-9);
        assert!(
            d.evidence
                .summary
                .contains("5% finding tasks, 24% ±2 in rayon's code"),
            "{}",
            d.evidence.summary
        );
        // Without the samples' share, LQ + GS alone (5%) stays under the 10% gate.
        r.sched = SchedShare::default();
        r.active_overhead_ns = 200_000_000;
        assert!(codes(&r).is_empty());
    }

    /// Hand-computed, the case above with its uncertainty: 100 of 400 samples in rayon's code,
    /// ±√(0.2525 × 0.7475 ÷ 404) = ±2.16% of UC's 3.8 s = ±82.1 ms; the states' marks exact.
    /// Overhead 1.15 s ± 82.1 ms of the 4 s: 1 ÷ (1 − 0.2670) = 1.364× to 1 ÷ (1 − 0.3080) =
    /// 1.445×. With rayon's share at nearly all of UC (99.5%) even the low end leaves the
    /// region under 5% of its time: more than 20× is not promised, and no high end is stated. With too few samples to tell rayon's share the
    /// overhead leaves it out and is a lower bound.
    #[test]
    fn the_speedup_carries_the_range_its_measurement_leaves() {
        let mut r = region(MANY, 200_000_000, 0, QUIET);
        r.sched = crate::analysis::sched_share::share(300, 100, 0, r.state_ns.uc);
        r.active_overhead_ns = 200_000_000 + r.sched.sched_ns;
        assert_eq!(r.sched.sched_uncertainty_ns, 82_132_512);
        let i = diagnose(&r, &Thresholds::default(), None).remove(0).impact;
        assert!((i.speedup_low - 1.3642).abs() < 1e-4, "{i:?}");
        assert!((i.speedup_high.unwrap() - 1.4452).abs() < 1e-4, "{i:?}");

        r.sched = crate::analysis::sched_share::share(2, 398, 0, r.state_ns.uc);
        r.active_overhead_ns = 200_000_000 + r.sched.sched_ns;
        let i = diagnose(&r, &Thresholds::default(), None).remove(0).impact;
        assert_eq!(i.speedup_high, None, "{i:?}");
        assert!((i.speedup_low - 20.0).abs() < 1e-9, "{i:?}");
        assert_eq!(i.speedup_low, i.speedup_if_fixed);

        r.sched = crate::analysis::sched_share::share(2, 1, 0, r.state_ns.uc);
        r.active_overhead_ns = 600_000_000;
        let i = diagnose(&r, &Thresholds::default(), None).remove(0).impact;
        assert_eq!(i.speedup_high, None, "{i:?}");
        assert!((i.speedup_low - 1.0 / 0.85).abs() < 1e-9, "{i:?}");
    }

    /// Hand-computed: 4 workers for 1 s, of which the hooks took 400 ms of worker time (taken
    /// out of UC and LQ already): the plain region lasts 900 ms, its workers 3.6 s. 720 ms of
    /// active overhead is 20% of that: 180 ms lost, 0.9 ÷ 0.72 = 1.25× faster if fixed.
    #[test]
    fn the_hooks_own_time_is_not_the_plain_programs() {
        let mut r = region(MANY, 720_000_000, 0, QUIET);
        r.hook_ns = StateNs {
            uc: 300_000_000,
            lq: 100_000_000,
            ..StateNs::default()
        };
        r.state_ns.uc -= 400_000_000;
        let d = diagnose(&r, &Thresholds::default(), None).remove(0);
        assert!((d.evidence.overhead_share - 0.2).abs() < 1e-12);
        assert_eq!(d.impact.time_lost_ns, 180_000_000);
        assert!((d.impact.speedup_if_fixed - 1.25).abs() < 1e-9);
        // Rates are per second of the plain workers' time: 8 M tasks in 3.6 s.
        assert!((d.evidence.value - 8_000_000.0 / 3.6).abs() < 1e-3);
    }

    /// Hand-computed: 4 workers for 1 s beside other programs that took half the CPUs (2 s of
    /// UC switched out while runnable): 500 ms of LQ + GS is 25% of the 2 s the workers could
    /// run, so the region takes a quarter less: 1 ÷ 0.75 = 1.33× faster if fixed, 250 ms of
    /// its 1 s lost (not 500 ms ÷ 4 workers = 125 ms: the other programs' part of the CPUs
    /// follows the work).
    #[test]
    fn beside_other_programs_the_gain_is_the_share_of_the_work() {
        let mut r = region(MANY, 500_000_000, 0, QUIET);
        r.preempted_ns.uc = 2_000_000_000;
        let d = diagnose(&r, &Thresholds::default(), None).remove(0);
        assert_eq!(d.code, Code::TooFineGranularity);
        assert_eq!(d.evidence.overhead_share, 0.25);
        assert_eq!(d.impact.time_lost_ns, 250_000_000);
        assert!((d.impact.speedup_if_fixed - 4.0 / 3.0).abs() < 1e-9);
        assert_eq!(d.impact.share_of_worker_time, 0.125);
    }

    /// The advice for the region's kind, with the number: 5 µs (two tasks' worth at the
    /// 400,000 a second threshold) over a median piece of 77 ns is 65 pieces.
    #[test]
    fn too_fine_advice_fits_the_regions_kind_with_the_number_filled_in() {
        let advice = |kind: Option<RegionKind>| {
            let mut r = region(MANY, ACTIVE, 0, QUIET);
            r.kind = kind;
            r.task_ns.median = 77;
            diagnose(&r, &Thresholds::default(), None).remove(0).advice
        };
        let iterator = advice(Some(RegionKind::Iterator));
        assert!(iterator.contains("`.with_min_len(65)`"), "{iterator}");
        assert!(
            iterator.contains("make the inner loop sequential"),
            "{iterator}"
        );
        let join = advice(Some(RegionKind::Join));
        assert!(
            join.contains("cut-off") && join.contains("below about 65 elements"),
            "{join}"
        );
        assert!(!join.contains("with_min_len"), "{join}");
        let spawn = advice(Some(RegionKind::Spawn));
        assert!(spawn.contains("about 65 of today's each"), "{spawn}");
        // Not known: the general advice, iterator and join both.
        let unknown = advice(None);
        assert!(
            unknown.contains("with_min_len") && unknown.contains("join"),
            "{unknown}"
        );
    }

    /// With rayon's hook the iterator's items are known. MANY's 10 runs split 4,000,000 times
    /// (inline tasks) over 10 iterators: 4,000,010 pieces, 400,001 a run. 8,000,020 items hold
    /// 2 a piece: 65 pieces of 77 ns are 130 items. Inner iterators of 16 items, nested in the
    /// tasks, are each less work than 65 pieces: made sequential.
    #[test]
    fn an_iterators_advice_counts_its_items() {
        let advice = |items: IteratorItems| {
            let mut r = region(MANY, ACTIVE, 0, QUIET);
            r.kind = Some(RegionKind::Iterator);
            r.task_ns.median = 77;
            r.tasks.inline = 4_000_000;
            r.iterator_items = Some(items);
            diagnose(&r, &Thresholds::default(), None).remove(0).advice
        };
        let own = advice(IteratorItems {
            iterators: 10,
            items: 8_000_020,
            ..IteratorItems::default()
        });
        assert!(
            own.contains("over about 2.0 items (800k items in 400k pieces a run)"),
            "{own}"
        );
        assert!(own.contains("`.with_min_len(130)`"), "{own}");
        assert!(!own.contains("inner loop"), "{own}");
        let nested = IteratorItems {
            iterators: 10,
            items: 10_000,
            nested_iterators: 10_000,
            nested_items: 160_000,
        };
        let rows = advice(nested);
        assert!(
            rows.contains("ran 1k parallel iterators nested in its own, of about 16 items each")
                && rows.contains("Make the inner loop sequential"),
            "{rows}"
        );
        assert!(!rows.contains("with_min_len"), "{rows}");
        // Inner iterators of more items than a piece should hold: `with_min_len` in items.
        let long_rows = advice(IteratorItems {
            nested_items: 1_000_000,
            ..nested
        });
        assert!(long_rows.contains("with_min_len"), "{long_rows}");
    }

    #[test]
    fn an_idle_region_loses_at_most_all_of_its_time() {
        let d = diagnose(
            &region(FEW, 0, 4_000_000_000, QUIET),
            &Thresholds::default(),
            None,
        )
        .remove(0);
        assert!(d.impact.speedup_if_fixed.is_finite());
        // Overhead estimated past the workers' whole time (rayon's code in the tasks is
        // sampled): never more than all of it.
        let mut r = region(
            TaskCounts {
                local: 4_000_000,
                stolen: 0,
                injected: 0,
                inline: 0,
            },
            3_900_000_000,
            0,
            BUSY,
        );
        r.active_overhead_ns = 4_400_000_000;
        let d = diagnose(&r, &Thresholds::default(), None).remove(0);
        assert_eq!(d.impact.share_of_worker_time, 1.0, "{d:#?}");
        assert!(
            diagnose(
                &RegionReport {
                    workers: 0,
                    ..region(FEW, 0, 0, QUIET)
                },
                &Thresholds::default(),
                None
            )
            .is_empty()
        );
    }
}
