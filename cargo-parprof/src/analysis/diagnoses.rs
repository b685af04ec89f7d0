//! The four parallel-overhead diagnoses of a region (method 2 of the spec).
//!
//! Active overhead (LQ + GS) and inactive overhead (W) are compared with their thresholds as
//! shares of the region's worker time (workers × elapsed). Only above the active threshold are
//! causes 1 and 2 looked for, and only above the inactive threshold causes 3 and 4, each pair
//! in this order:
//!
//! 1. `too_fine_granularity`: local + stolen tasks per worker per second above
//!    [`Thresholds::tasks_per_worker_per_s`];
//! 2. `excessive_stealing`: stolen tasks ÷ local tasks above [`Thresholds::stolen_per_local`];
//! 3. `insufficient_parallel_slack`: GS→GS + GS→W transitions per worker per second above
//!    [`Thresholds::search_wait_per_worker_per_s`];
//! 4. `load_imbalance`: otherwise (inactive overhead high, searches and sleeps rare).
//!
//! The impact of a diagnosis is the overhead it explains, spread over the workers: the region
//! would end that much sooner without it, hence the speedup if fixed.

use super::lifecycle::RegionReport;
use serde::Serialize;

/// Thresholds of the diagnoses; every field is configurable.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Thresholds {
    /// LQ + GS as a share of worker time above which causes 1 and 2 are looked for. Default
    /// 0.10: a well-tuned region spends a few percent finding its tasks.
    pub active_overhead: f64,
    /// W (while the region runs) as a share of worker time above which causes 3 and 4 are
    /// looked for. Default 0.10: the tail of a region, where the last tasks run, is usually
    /// well under a tenth of it.
    pub inactive_overhead: f64,
    /// Local + stolen tasks per worker per second. Default 400,000 (the spec's: a task shorter
    /// than ~5,000 cycles at 2 GHz costs more to schedule than it gains).
    pub tasks_per_worker_per_s: f64,
    /// Stolen tasks per local task. Default 1 (the spec's: more stolen than local).
    pub stolen_per_local: f64,
    /// GS→GS + GS→W transitions per worker per second. Default 5,000. A worker that sleeps
    /// once at the end of its share makes 34 of them (rayon's 33 failed rounds, then the
    /// sleep); 5,000 per second means it cycles through search and sleep more than ~150 times
    /// a second, i.e. it keeps being woken up for work that is gone.
    pub search_wait_per_worker_per_s: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            active_overhead: 0.10,
            inactive_overhead: 0.10,
            tasks_per_worker_per_s: 400_000.0,
            stolen_per_local: 1.0,
            search_wait_per_worker_per_s: 5_000.0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Code {
    TooFineGranularity,
    ExcessiveStealing,
    InsufficientParallelSlack,
    LoadImbalance,
}

impl Code {
    /// The code as `report.json` writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::TooFineGranularity => "too_fine_granularity",
            Code::ExcessiveStealing => "excessive_stealing",
            Code::InsufficientParallelSlack => "insufficient_parallel_slack",
            Code::LoadImbalance => "load_imbalance",
        }
    }
}

/// The measured figures behind a diagnosis.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evidence {
    /// What the diagnosis compares with its threshold, e.g. `tasks_per_worker_per_s`.
    pub metric: &'static str,
    pub value: f64,
    /// The overhead that opened this pair of causes (`active_overhead_share` or
    /// `inactive_overhead_share`), its value and its threshold.
    pub overhead: &'static str,
    pub overhead_share: f64,
    pub overhead_threshold: f64,
    /// The figures in words.
    pub summary: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Impact {
    /// The explained overhead ÷ workers: wall-clock time the region loses.
    pub time_lost_ns: u64,
    /// The explained overhead ÷ worker time.
    pub share_of_worker_time: f64,
    /// elapsed ÷ (elapsed − time lost).
    pub speedup_if_fixed: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diagnosis {
    pub code: Code,
    pub evidence: Evidence,
    /// The threshold `evidence.value` exceeded (for `load_imbalance`: the search/wait
    /// frequency it stayed under).
    pub threshold: f64,
    pub impact: Impact,
    pub advice: String,
}

/// Figures of a region that the diagnoses share.
struct Figures {
    workers: f64,
    elapsed_s: f64,
    worker_ns: f64,
    runs: f64,
    /// Tasks one run of the region makes.
    tasks_per_run: f64,
}

impl Figures {
    fn impact(&self, overhead_ns: f64) -> Impact {
        let lost_ns = overhead_ns / self.workers;
        let elapsed_ns = self.elapsed_s * 1e9;
        // Never more than all of it, so the speedup stays finite.
        let remaining = (elapsed_ns - lost_ns).max(elapsed_ns * 1e-3);
        Impact {
            time_lost_ns: lost_ns.round() as u64,
            share_of_worker_time: overhead_ns / self.worker_ns,
            speedup_if_fixed: elapsed_ns / remaining,
        }
    }
}

/// A region whose inactive overhead stayed under its threshold only because idle workers
/// yielded to other programs instead of sleeping (their time off CPU counts as search): the
/// causes of inactive overhead could not be looked for, which the user is told.
pub fn hidden_wait_note(r: &RegionReport, t: &Thresholds) -> Option<String> {
    let worker_ns = r.worker_ns();
    if worker_ns <= 0.0 {
        return None;
    }
    let inactive = r.inactive_overhead_ns as f64 / worker_ns;
    let with_yields = (r.inactive_overhead_ns + r.search_preempted_ns) as f64 / worker_ns;
    (inactive <= t.inactive_overhead && with_yields > t.inactive_overhead).then(|| {
        format!(
            "Region `{}`: searching workers were switched out while runnable for {:.1} ms ({:.0}% of worker \
             time): on a machine busy with other programs, rayon's idle workers yield instead of sleeping. \
             That time counts as search (GS), not wait (W), so insufficient parallel slack and load imbalance \
             could not be looked for; profile it on an otherwise idle machine to tell.",
            r.name,
            r.search_preempted_ns as f64 / 1e6,
            100.0 * r.search_preempted_ns as f64 / worker_ns
        )
    })
}

/// The diagnoses of a region, in the spec's order; empty when the region has no workers or
/// no time.
pub fn diagnose(r: &RegionReport, t: &Thresholds) -> Vec<Diagnosis> {
    if r.workers == 0 || r.elapsed_ns == 0 {
        return Vec::new();
    }
    let f = Figures {
        workers: r.workers as f64,
        elapsed_s: r.elapsed_ns as f64 / 1e9,
        worker_ns: r.worker_ns(),
        runs: r.instances.max(1) as f64,
        tasks_per_run: r.tasks.total() as f64 / r.instances.max(1) as f64,
    };
    let mut out = Vec::new();
    let active_ns = r.active_overhead_ns as f64;
    let active_share = active_ns / f.worker_ns;
    if active_share > t.active_overhead {
        let opened = opened_by("active_overhead_share", active_share, t.active_overhead);
        let rate = (r.tasks.local + r.tasks.stolen) as f64 / f.workers / f.elapsed_s;
        if rate > t.tasks_per_worker_per_s {
            out.push(too_fine(r, t, &f, rate, opened));
        }
        let ratio = r.tasks.stolen as f64 / r.tasks.local.max(1) as f64;
        if ratio > t.stolen_per_local {
            let summary = format!(
                "{} tasks stolen for {} taken from the workers' own deques ({ratio:.1} : 1, threshold {}); \
                 {:.0}% of worker time is spent looking for tasks.",
                r.tasks.stolen,
                r.tasks.local,
                t.stolen_per_local,
                active_share * 100.0
            );
            out.push(Diagnosis {
                code: Code::ExcessiveStealing,
                evidence: opened("stolen_per_local", ratio, summary),
                threshold: t.stolen_per_local,
                impact: f.impact(active_ns),
                advice: format!(
                    "One thread creates most of the tasks and the others steal them one by one — typically a \
                     loop of `spawn`s (or `par_bridge` over a sequential iterator). Split the work recursively so \
                     that every worker creates tasks for itself: replace `for x in items {{ s.spawn(..) }}` by \
                     `items.par_iter().for_each(..)` (or `par_chunks(n)` with n ≈ items ÷ {}), or spawn two \
                     halves with `rayon::join` and recurse until a piece is small.",
                    r.workers * 8
                ),
            });
        }
    }
    let inactive_ns = r.inactive_overhead_ns as f64;
    let inactive_share = inactive_ns / f.worker_ns;
    if inactive_share > t.inactive_overhead {
        let opened = opened_by(
            "inactive_overhead_share",
            inactive_share,
            t.inactive_overhead,
        );
        let freq = (r.transitions.gs_gs + r.transitions.gs_w) as f64 / f.workers / f.elapsed_s;
        if freq > t.search_wait_per_worker_per_s {
            let summary = format!(
                "Workers fail to find work {freq:.0} times per second each (GS->GS {} and GS->W {}, threshold {}), \
                 while {:.0}% of worker time is spent asleep; each run of the region creates {:.1} \
                 tasks for {} workers.",
                r.transitions.gs_gs,
                r.transitions.gs_w,
                t.search_wait_per_worker_per_s,
                inactive_share * 100.0,
                f.tasks_per_run,
                r.workers
            );
            out.push(Diagnosis {
                code: Code::InsufficientParallelSlack,
                evidence: opened("search_wait_per_worker_per_s", freq, summary),
                threshold: t.search_wait_per_worker_per_s,
                impact: f.impact(inactive_ns),
                advice: format!(
                    "The region creates fewer tasks than there are free workers, so idle workers are woken for \
                     work that is already gone. Give the pool more independent work at once: parallelise the loop \
                     that runs the region (one `par_iter` over all its runs instead of {:.0} small runs), or cut \
                     each run into at least {} pieces (`with_max_len`, smaller `par_chunks`); or run it in a \
                     smaller pool (`ThreadPoolBuilder::new().num_threads({})`) so that the extra workers stop \
                     waking up.",
                    f.runs,
                    r.workers * 4,
                    (f.tasks_per_run.ceil() as usize).clamp(1, r.workers)
                ),
            });
        } else {
            let longest = r.task_ns.max as f64 / r.task_ns.median.max(1) as f64;
            let summary = format!(
                "{:.0}% of worker time is spent asleep while the region runs, yet workers rarely search again \
                 ({freq:.0} failed searches and sleeps per second each, under {}): they ran out of work and \
                 stayed idle. The longest task took {:.3} ms, {longest:.0}× the median ({:.3} ms).",
                inactive_share * 100.0,
                t.search_wait_per_worker_per_s,
                r.task_ns.max as f64 / 1e6,
                r.task_ns.median as f64 / 1e6
            );
            out.push(Diagnosis {
                code: Code::LoadImbalance,
                evidence: opened("search_wait_per_worker_per_s", freq, summary),
                threshold: t.search_wait_per_worker_per_s,
                impact: f.impact(inactive_ns),
                advice: format!(
                    "The work is cut into too few, too unequal pieces: workers that finish early cannot help the \
                     ones still running. Cut it finer where it is large: `.with_max_len(n)` on the parallel \
                     iterator (n ≈ items ÷ {}), smaller `par_chunks`, a nested `join`/`par_iter` inside the largest \
                     tasks (the longest ran {:.3} ms), or order the work largest first.",
                    r.workers * 4,
                    r.task_ns.max as f64 / 1e6
                ),
            });
        }
    }
    out
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
        "{rate:.0} tasks per second per worker (threshold {:.0}); the median task lasts {} ns and {:.0}% of \
         worker time is spent finding tasks.",
        t.tasks_per_worker_per_s,
        r.task_ns.median,
        r.active_overhead_ns as f64 / f.worker_ns * 100.0
    );
    Diagnosis {
        code: Code::TooFineGranularity,
        evidence: opened("tasks_per_worker_per_s", rate, summary),
        threshold: t.tasks_per_worker_per_s,
        impact: f.impact(r.active_overhead_ns as f64),
        advice: format!(
            "Tasks are too small to pay for their scheduling. Make each about {factor:.0}× larger (at least \
             {:.1} µs of work): on the parallel iterator add `.with_min_len(n)` with n ≈ {factor:.0} × items ÷ \
             {:.0} (the tasks one run makes now), or iterate `par_chunks(n)` and loop sequentially \
             inside each chunk; with recursive `join`, stop splitting below a piece that takes {:.1} µs.",
            target_ns / 1e3,
            f.tasks_per_run,
            target_ns / 1e3
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::lifecycle::{SearchRounds, StateNs, TaskCounts, TaskNs, Transitions};

    /// A region of 4 workers for 1 s, with the given tasks, overheads and transitions.
    fn region(
        tasks: TaskCounts,
        lq_gs_ns: u64,
        w_ns: u64,
        transitions: Transitions,
    ) -> RegionReport {
        let worker_ns = 4_000_000_000;
        RegionReport {
            site: 1,
            name: "r".into(),
            instances: 10,
            elapsed_ns: 1_000_000_000,
            workers: 4,
            tasks,
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
            active_overhead_ns: lq_gs_ns,
            inactive_overhead_ns: w_ns,
            search_preempted_ns: 0,
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
        busy_machine.search_preempted_ns = 500_000_000;
        let note = hidden_wait_note(&busy_machine, &t).expect("a note");
        assert!(note.contains("for 500.0 ms (12% of worker time)"), "{note}");
        assert!(codes(&busy_machine).is_empty());
        // Few yields, or a wait already over its threshold (diagnosed as usual): no note.
        busy_machine.search_preempted_ns = 200_000_000;
        assert_eq!(hidden_wait_note(&busy_machine, &t), None);
        let mut waiting = region(MANY, 0, 500_000_000, QUIET);
        waiting.search_preempted_ns = 500_000_000;
        assert_eq!(hidden_wait_note(&waiting, &t), None);
    }

    fn codes(r: &RegionReport) -> Vec<Code> {
        diagnose(r, &Thresholds::default())
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
        // Active overhead opens causes 1 and 2 only; inactive overhead 3 and 4 only.
        assert_eq!(codes(&region(FEW, ACTIVE, 0, BUSY)), Vec::<Code>::new());
        assert_eq!(
            codes(&region(tiny_stolen, 0, ACTIVE, QUIET)),
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
        let found: Vec<Code> = diagnose(&r, &strict).into_iter().map(|d| d.code).collect();
        assert_eq!(found, vec![Code::TooFineGranularity]);
    }

    #[test]
    fn evidence_impact_and_advice_are_quantitative() {
        let d = diagnose(&region(MANY, ACTIVE, 0, QUIET), &Thresholds::default()).remove(0);
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

    #[test]
    fn an_idle_region_loses_at_most_all_of_its_time() {
        let d = diagnose(
            &region(FEW, 0, 4_000_000_000, QUIET),
            &Thresholds::default(),
        )
        .remove(0);
        assert!(d.impact.speedup_if_fixed.is_finite());
        assert!(
            diagnose(
                &RegionReport {
                    workers: 0,
                    ..region(FEW, 0, 0, QUIET)
                },
                &Thresholds::default()
            )
            .is_empty()
        );
    }
}
