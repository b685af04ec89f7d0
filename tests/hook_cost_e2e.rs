//! The rayon-core hooks' own time, measured by the runtime at start-up and taken out of every
//! state by the analysis: a measurement build whose hooks each spin [`SPIN_NS`] more
//! (`PARPROF_HOOK_SPIN_NS`) must leave every state's share of the workers' running time (the
//! hooks run on the CPU; the time switched out is the machine's, and on a busy machine it
//! differs from run to run) of a too-fine quicksort within its uncertainty, and its diagnoses
//! unchanged.

mod common;

use serde_json::Value;

/// The extra cost of each hook: about twice what a hook costs on its own.
const SPIN_NS: u64 = 40;
/// What a busy machine moves a share by from one run to the next, beyond the stated
/// uncertainties (the runs are not the same schedule).
const RUN_TO_RUN: f64 = 0.03;

const ARGS: [&str; 6] = [
    "--example",
    "gain_pairs",
    "--",
    "quicksort",
    "bad",
    "400000",
];

/// The region's shares of its workers' running time: the tasks' own code, sched, LQ, GS, W;
/// and the uncertainty of each.
fn shares(region: &Value) -> ([f64; 5], [f64; 5]) {
    let (s, p) = (&region["state_ns"], &region["preempted_ns"]);
    let ns = |k: &str| s[k].as_f64().unwrap() - p[k].as_f64().unwrap();
    let total = ns("UC") + ns("LQ") + ns("GS") + ns("W");
    let sched = region["sched"]["sched_ns"].as_f64().unwrap();
    let sched_u = region["sched"]["sched_uncertainty_ns"].as_f64().unwrap() / total;
    let marks_u = region["state_share_uncertainty"].as_f64().unwrap();
    let own_u = (marks_u * marks_u + sched_u * sched_u).sqrt();
    (
        [ns("UC") - sched, sched, ns("LQ"), ns("GS"), ns("W")].map(|v| v / total),
        [own_u, sched_u, marks_u, marks_u, marks_u],
    )
}

fn hook_ns(region: &Value) -> f64 {
    ["UC", "LQ", "GS", "W"]
        .iter()
        .map(|k| region["hook_ns"][k].as_f64().unwrap())
        .sum()
}

/// Not met. On the quiet VM (2026-11-28 04:19 UTC) it failed on the model: 533,227 tasks, the
/// dearer hooks added 36 ms to UC and 46 ms to LQ, and the removal then (a task's pair split
/// half and half, scaled to the profiler's 83 of 111 samples) took 13 ms too much from UC: the
/// own-code share read 0.48 against 0.86 plain. Since, each hook's part is measured at start-up
/// and nothing is scaled to the samples (see `analysis/hook_time.rs`). Six alternated pairs
/// saved on the busy VM (load 1.5–2.3, 06:00 UTC) and re-reported: the raw UC grew 39.3 ms for
/// 38.2 ms more of begins and returns measured, the raw LQ 29.8 ms for 25.6 ms of ends (4.2 ±
/// 1.6 ms more; 4.9 ± 1.9 by the marks alone in three more pairs): what a dearer end hook costs
/// the gap in place beyond its own time is still not in the model. Mean shares plain → dearer:
/// own UC 0.82 → 0.68, sched 0.08 → 0.10, LQ 0.09 → 0.17, GS 0.01 → 0.04 (±0.06, ±0.05,
/// ±0.03 each; scaled to the samples, as before: own 0.73, LQ 0.08), 5 of 6 pairs within the
/// bounds (before: 5 of 6). Run here at load 3.6 (06:44 UTC) it passed 2 of 5, the hooks' time
/// taken out the same in each (UC 42.1–42.2 ms, LQ and GS 22–26 ms): the machine's preemption
/// (13–116 ms of runs of 40–120 ms) moved LQ, GS and W, and the diagnoses, more than their
/// uncertainty, both ways. With timed stretches less what their ends' general path adds
/// (`state_clock::set_timed_path_extra`), on the quiet VM (07:27 UTC, load 1.1–1.5): 9 of 12
/// runs passed (the one failure read in full: the own-code share, 0.77 plain, 0.49 dearer, bound
/// ±0.27), and each of ten alternated recordings, plain and dearer, was `too_fine_granularity` alone.
/// Six alternated recordings each, plain and with hooks 10 and 40 ns dearer (quiet VM, 10:19 UTC,
/// `PARPROF_HOOK_SPIN_NS`): mean shares own 0.74 / 0.70 / 0.73, sched 0.13 / 0.10 / 0.09, LQ
/// 0.09 / 0.18 / 0.14 (the hooks' time measured 6.2 / 29.0 / 70.9 ms); one run in each series
/// read own 0.54–0.64 or 0.94: single runs move a share by more than the dearer hooks do on
/// average, but LQ grows with any spin, by 5–9 points beyond the spin's own time taken out.
/// Run it with `cargo test --test hook_cost_e2e -- --ignored` on an idle machine.
#[test]
#[ignore = "not met: on an idle machine 9 of 12 runs keep every share within its bound (see above)"]
fn a_dearer_hook_moves_no_state_share_nor_diagnosis() {
    let plain = common::parprof(&ARGS, &[]);
    assert!(plain.output.status.success(), "{}", plain.stderr());
    let spin = SPIN_NS.to_string();
    let dear = common::parprof(&ARGS, &[("PARPROF_HOOK_SPIN_NS", spin.as_str())]);
    assert!(dear.output.status.success(), "{}", dear.stderr());
    let (a, b) = (common::only_region(&plain), common::only_region(&dear));
    // The spin was there, and measured: about two hooks per task, each SPIN_NS dearer.
    let tasks = a["tasks"].as_f64().unwrap();
    let added = hook_ns(&b) - hook_ns(&a);
    let expected = 2.0 * tasks * SPIN_NS as f64;
    assert!(
        (0.8 * expected..2.0 * expected).contains(&added),
        "hooks' time grew by {added} ns for {expected} ns of spin: {a:#} {b:#}"
    );
    let ((sa, ua), (sb, ub)) = (shares(&a), shares(&b));
    for (i, name) in ["own UC", "sched", "LQ", "GS", "W"].iter().enumerate() {
        let bound = 3.0 * (ua[i] * ua[i] + ub[i] * ub[i]).sqrt() + RUN_TO_RUN;
        assert!(
            (sa[i] - sb[i]).abs() <= bound,
            "{name}: {:.3} plain, {:.3} with dearer hooks (bound ±{bound:.3}): {a:#} {b:#}",
            sa[i],
            sb[i]
        );
    }
    assert_eq!(
        common::work_codes(&a),
        common::work_codes(&b),
        "{a:#} {b:#}"
    );
    assert!(
        common::work_codes(&a).contains(&"too_fine_granularity".to_owned()),
        "{a:#}"
    );
}
