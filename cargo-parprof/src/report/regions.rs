//! What the terminal summary and `report.md` say about parallel regions: the diagnoses first,
//! then one row per region.

use crate::analysis::diagnosis::{Diagnosis, UNBOUNDED_ABOVE};
use crate::analysis::lifecycle::RegionReport;
use crate::units::human_duration;

/// Every diagnosis with its region, regions longest first, each region's in the spec's order.
pub(crate) fn diagnosed(
    regions: &[RegionReport],
) -> impl Iterator<Item = (&RegionReport, &Diagnosis)> {
    regions
        .iter()
        .flat_map(|r| r.diagnoses.iter().map(move |d| (r, d)))
}

/// "loses 39.2 ms of its 41.4 ms elapsed (95% of worker time): 18.7× faster if fixed (15.2–24.3×)":
/// the two denominators named, as the region's table gives shares of worker time, and the
/// range the measurement's uncertainty leaves — only its low end where the high one runs away.
pub(crate) fn impact_text(region: &RegionReport, d: &Diagnosis) -> String {
    let i = &d.impact;
    let lost = format!(
        "loses {} of its {} elapsed ({:.0}% of worker time)",
        human_duration(i.time_lost_ns),
        human_duration(region.elapsed_ns),
        i.share_of_worker_time * 100.0,
    );
    match i.speedup_high {
        None if i.speedup_low >= 1.0 / UNBOUNDED_ABOVE - 1e-9 => {
            format!("{lost}: more than {:.0}× faster if fixed", i.speedup_low)
        }
        None => format!(
            "{lost}: at least {:.2}× faster if fixed (the samples bound it only from below: \
             `--frequency 4999` takes more)",
            i.speedup_low
        ),
        Some(high) if high - i.speedup_low < 0.005 => {
            format!("{lost}: {:.2}× faster if fixed", i.speedup_if_fixed)
        }
        Some(high) => format!(
            "{lost}: {:.2}× faster if fixed ({:.2}–{high:.2}×)",
            i.speedup_if_fixed, i.speedup_low
        ),
    }
}

/// Shares of the region's worker time in UC less the scheduler's part (the tasks' own code,
/// running or switched out while runnable), sched (rayon's code on the tasks' behalf, ± its
/// sampling uncertainty; "?" when too few samples tell it), UC blocked (a lock, a channel, I/O,
/// a sleep: not work), LQ, GS and W, as whole percents.
pub(crate) fn state_percents(region: &RegionReport) -> [String; 6] {
    let s = &region.state_ns;
    let total = s.uc + s.lq + s.gs + s.w;
    if total == 0 {
        return std::array::from_fn(|_| "–".to_owned());
    }
    let blocked = region.blocked_ns.uc.min(s.uc);
    let sched_ns = region.sched.sched_ns.min(s.uc - blocked);
    let percent = |ns: u64| format!("{:.0}%", ns as f64 / total as f64 * 100.0);
    let sched = match region.sched.share_of_uc {
        None => "?".to_owned(),
        Some(_) => {
            let points = region.sched.sched_uncertainty_ns as f64 / total as f64 * 100.0;
            format!("{} ±{points:.0}", percent(sched_ns))
        }
    };
    [
        percent(s.uc - blocked - sched_ns),
        sched,
        percent(blocked),
        percent(s.lq),
        percent(s.gs),
        percent(s.w),
    ]
}

/// Share of the region's worker time spent switched out while runnable (all states), as a
/// whole percent: the workers' wait for a CPU.
pub(crate) fn preempted_percent(region: &RegionReport) -> String {
    let s = &region.state_ns;
    let p = &region.preempted_ns;
    let total = s.uc + s.lq + s.gs + s.w;
    if total == 0 {
        return "–".to_owned();
    }
    let preempted = p.uc + p.lq + p.gs + p.w;
    format!("{:.0}%", preempted as f64 / total as f64 * 100.0)
}

/// "262139 / 9 / 2 / 0": local / stolen / injected / inline.
pub(crate) fn task_origins(region: &RegionReport) -> String {
    let t = &region.tasks;
    format!("{} / {} / {} / {}", t.local, t.stolen, t.injected, t.inline)
}

/// The region's diagnosis codes, comma-separated, or "none".
pub(crate) fn codes(region: &RegionReport) -> String {
    if region.diagnoses.is_empty() {
        return "none".to_owned();
    }
    region
        .diagnoses
        .iter()
        .map(|d| d.code.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
