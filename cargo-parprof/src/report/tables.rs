//! The tables the reports share — parallel regions, probes, threads: one set of columns and
//! cells, rendered by `report.md` and `report.html`.

use super::counter_cells;
use super::regions::{codes, preempted_percent, state_percents, task_origins};
use super::wording::{
    correction_percent, correction_sentence, human_count, human_duration, slices_sentence,
};
use crate::analysis::Analysis;
use crate::analysis::slices::SliceMode;
use crate::units::per_call_figure;
use serde::Serialize;

/// A table of text cells; the first column names the row, the others are figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Table {
    /// Element id of its section in `report.html`.
    pub id: String,
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// A sentence under the table (what the columns mean).
    pub note: Option<String>,
}

/// Every region, longest first.
pub fn regions(analysis: &Analysis) -> Table {
    Table {
        id: "regions".into(),
        title: "Parallel regions".into(),
        header: [
            "region",
            "entry",
            "runs",
            "elapsed",
            "workers",
            "tasks",
            "local / stolen / injected / inline",
            "median task",
            "UC",
            "sched",
            "blocked",
            "LQ",
            "GS",
            "W",
            "preempted",
            "diagnoses",
        ]
        .map(String::from)
        .to_vec(),
        rows: analysis
            .regions
            .iter()
            .map(|r| {
                let [uc, sched, blocked, lq, gs, w] = state_percents(r);
                vec![
                    r.name.clone(),
                    r.kind.map_or("—", |k| k.label()).to_owned(),
                    r.instances.to_string(),
                    human_duration(r.elapsed_ns),
                    r.workers.to_string(),
                    human_count(r.tasks.total() as f64),
                    task_origins(r),
                    human_duration(r.task_ns.median),
                    uc,
                    sched,
                    blocked,
                    lq,
                    gs,
                    w,
                    preempted_percent(r),
                    codes(r),
                ]
            })
            .collect(),
        note: Some(
            "entry: how the region's work entered the pool (named: `parallel_region!`; join, \
             iterator, scope, spawn, install, broadcast: that rayon call from outside the pool, where \
             the region is named). UC, LQ, GS, W: share of the workers' time running tasks, looking in their own deque, \
             searching other deques, asleep; sched: the part of the tasks' time spent in rayon's own \
             code on their behalf (creating and splitting jobs, latches, waking workers, reduce \
             plumbing), from the CPU samples taken in the tasks (± one standard deviation; ?: too few \
             samples to tell), not counted in UC; blocked: in a task but switched out waiting (a lock, a \
             channel, I/O, a sleep), not counted in UC. preempted: switched out while runnable, in any of the \
             four states, as a share of the workers' time (a diagnosis names its own share: of the \
             states it looks at, less the profiler's trace writer)."
                .into(),
        ),
    }
}

/// Every probe, by self active time.
pub fn probes(analysis: &Analysis) -> Table {
    Table {
        id: "probes".into(),
        title: "Probes by self active time".into(),
        header: [
            "probe",
            "calls",
            "self active",
            "active",
            "elapsed",
            "correction",
            "median call",
        ]
        .map(String::from)
        .to_vec(),
        rows: analysis
            .probes
            .iter()
            .map(|p| {
                vec![
                    p.name.clone(),
                    human_count(p.calls as f64),
                    human_duration(p.self_active_ns),
                    human_duration(p.active_ns),
                    human_duration(p.elapsed_ns),
                    correction_percent(p.elapsed_ns, p.active_ns),
                    human_duration(p.median_active_ns),
                ]
            })
            .collect(),
        note: correction_sentence(analysis),
    }
}

/// Every thread, the busiest first.
pub fn threads(analysis: &Analysis) -> Table {
    let mut threads: Vec<_> = analysis.threads.iter().collect();
    threads.sort_by(|a, b| b.on_cpu_ns.cmp(&a.on_cpu_ns).then(a.tid.cmp(&b.tid)));
    let unknown = || "?".to_owned();
    Table {
        id: "threads".into(),
        title: "Threads".into(),
        header: [
            "thread",
            "tid",
            "on CPU",
            "preempted",
            "blocked",
            "switches (vol. / preempt.)",
            "cpu samples",
        ]
        .map(String::from)
        .to_vec(),
        rows: threads
            .iter()
            .map(|t| {
                vec![
                    t.role.clone(),
                    t.tid.to_string(),
                    t.on_cpu_ns.map_or_else(unknown, human_duration),
                    t.off_cpu_preempted_ns.map_or_else(unknown, human_duration),
                    t.off_cpu_voluntary_ns.map_or_else(unknown, human_duration),
                    match (t.switches_voluntary, t.switches_preempted) {
                        (Some(v), Some(p)) => format!("{v} / {p}"),
                        _ => unknown(),
                    },
                    t.cpu_samples.to_string(),
                ]
            })
            .collect(),
        note: Some(
            "Each thread's time over the whole run: on CPU; preempted: switched out while \
             runnable; blocked: switched out waiting (a lock, I/O, a sleep)."
                .into(),
        ),
    }
}

/// Exact per-call counters of method 5, beside method 3's estimates (`None` without
/// `--slices` or `--detail full`).
pub fn slices(analysis: &Analysis) -> Option<Table> {
    let s = analysis.slices.as_ref()?;
    let attributed: Vec<bool> = s
        .counters
        .iter()
        .map(|c| s.probes.iter().any(|p| p.attributed.contains_key(c)))
        .collect();
    let mut header = vec!["probe".to_owned(), "calls measured".to_owned()];
    for (counter, &with_attributed) in s.counters.iter().zip(&attributed) {
        header.push(format!("{counter} per call"));
        if with_attributed {
            header.push(format!("{counter} attributed"));
        }
    }
    let rows = s
        .probes
        .iter()
        .map(|p| {
            let calls = match p.calls_total {
                Some(total) => format!(
                    "{} of {}",
                    human_count(p.calls_observed as f64),
                    human_count(total as f64)
                ),
                None => human_count(p.calls_observed as f64),
            };
            let mut row = vec![p.name.clone(), calls];
            for (counter, &with_attributed) in s.counters.iter().zip(&attributed) {
                row.push(match (p.counters.get(counter), p.spread.get(counter)) {
                    (Some(&mean), Some(&spread)) => format!(
                        "{} ± {}",
                        per_call_figure(counter, mean),
                        per_call_figure(counter, spread)
                    ),
                    _ => "–".to_owned(),
                });
                if with_attributed {
                    row.push(p.attributed.get(counter).map_or("–".to_owned(), |a| {
                        if counter_cells::trusted(a.value, a.error) {
                            format!(
                                "{} ± {}",
                                per_call_figure(counter, a.value),
                                per_call_figure(counter, a.error)
                            )
                        } else {
                            format!("— ({})", counter_cells::cause("probe", a.value, a.error))
                        }
                    }));
                }
            }
            row
        })
        .collect();
    Some(Table {
        id: "slices".into(),
        title: match s.mode {
            SliceMode::Full => "Exact per-call counters (every call, --detail full)".into(),
            SliceMode::Slices => "Exact per-call counters (slices)".into(),
        },
        header,
        rows,
        note: Some(slices_sentence(s)),
    })
}
