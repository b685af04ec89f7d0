//! `cargo parprof` on the rayon examples, end to end: each anti-pattern gets its diagnosis,
//! the well-tuned program gets none, and the tasks of each region match what the example
//! counts itself under the lifecycle model: two tasks per `join` (one inline), one per spawn,
//! one per entry into the pool from `main`.
//!
//! The examples state their pool sizes and durations for a 2-core machine. The profiled runs
//! take turns (`common::parprof` holds the machine); the two inactive-overhead diagnoses,
//! which depend on idle workers getting to sleep, get a second run when the first misses (see
//! [`profile_load_sensitive`]).

mod common;

use common::{Run, codes, diagnosis, only_region, task_count};
use serde_json::Value;

fn profile(example: &str, flags: &[&str]) -> Run {
    common::profile_example(example, flags, &[])
}

/// The tasks of a region that runs one parallel iterator from `main`, against the leaves the
/// example counted (`leaves=`): the iterator splits by `join` down to its leaves, so it makes
/// leaves − 1 joins of two tasks each, one of them run inline; entering the pool from `main`
/// is one more task, injected.
fn assert_iterator_tasks(run: &Run, region: &Value) {
    common::assert_origins_add_up(region);
    let joins = run.printed("leaves") - 1;
    assert_eq!(task_count(region, "tasks"), 2 * joins + 1, "{region:#}");
    assert_eq!(task_count(region, "tasks_inline"), joins, "{region:#}");
    assert_eq!(task_count(region, "tasks_injected"), 1, "{region:#}");
}

/// Profiles an example whose diagnosis is `expected` and returns the run and its region.
///
/// For `insufficient_parallel_slack` and `load_imbalance` only: when the first run misses the
/// diagnosis, the example runs once more. Both need idle workers to fall asleep (W), and rayon's
/// idle loop yields 32 times before sleeping: when other programs keep both cores busy, each
/// yield waits for them, the worker stays searching (GS, as the spec counts a preemption) and
/// the inactive overhead that opens these two causes does not appear. A brief burst of load
/// on the machine must not fail the test; a pattern that is not found twice in a row does.
fn profile_load_sensitive(example: &str, expected: &str) -> (Run, Value) {
    again_if_missed(example, expected, |example| {
        let run = profile(example, &[]);
        let region = only_region(&run);
        (run, region)
    })
}

/// `profile(example)`, and once more when its region misses the diagnosis `expected`; the
/// second run's result stands.
fn again_if_missed(
    example: &str,
    expected: &str,
    profile: impl Fn(&str) -> (Run, Value),
) -> (Run, Value) {
    let (run, region) = profile(example);
    if codes(&region).iter().any(|c| c == expected) {
        return (run, region);
    }
    eprintln!(
        "{example}: no `{expected}` in the first run (machine busy?), running it again: {region:#}"
    );
    profile(example)
}

/// Tasks that take turns at one lock: the waiting worker is blocked in user code, which the
/// region's UC share must not count as work, and the diagnosis names the function that locked.
#[test]
fn tasks_that_share_a_lock_are_blocking_in_tasks() {
    let (run, region) = again_if_missed("lock_in_tasks", "blocking_in_tasks", |example| {
        let run = profile(example, &[]);
        let region = only_region(&run);
        (run, region)
    });
    assert_eq!(run.printed("items"), 4_000);
    let d = diagnosis(&region, "blocking_in_tasks");
    common::assert_beyond_threshold(&d);
    let summary = d["evidence"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("lock_in_tasks::add_to_histogram") && summary.contains("lock"),
        "{d:#}"
    );
    // The blocked time is UC time in which the worker did not run.
    let blocked = region["blocked_ns"]["UC"].as_u64().unwrap();
    let uc = region["state_ns"]["UC"].as_u64().unwrap();
    assert!(blocked > 0 && blocked <= uc, "{region:#}");
    // The regions table counts it apart, not as work (nor rayon's code in the tasks, its own
    // column).
    let sched = region["sched"]["sched_ns"]
        .as_u64()
        .unwrap()
        .min(uc - blocked);
    let total: u64 = ["UC", "LQ", "GS", "W"]
        .iter()
        .map(|s| region["state_ns"][s].as_u64().unwrap())
        .sum();
    let markdown = std::fs::read_to_string(run.path("report.md")).expect("report.md");
    let shown = |column: &str| table_percent(&markdown, column);
    let percent = |ns: u64| ns as f64 * 100.0 / total as f64;
    assert!(
        (shown("UC") - percent(uc - blocked - sched)).abs() <= 0.5,
        "UC without the blocked time and rayon's code: {markdown}"
    );
    assert!(
        (shown("blocked") - percent(blocked)).abs() <= 0.5,
        "{markdown}"
    );
}

/// A whole percent of the first row of report.md's regions table, in `column`.
fn table_percent(markdown: &str, column: &str) -> f64 {
    let cells = |line: &str| -> Vec<String> {
        line.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_owned())
            .collect()
    };
    let mut lines = markdown
        .lines()
        .skip_while(|l| !l.starts_with("| region |"));
    let header = cells(lines.next().expect("the regions table"));
    let row = cells(lines.nth(1).expect("a region's row"));
    let at = header.iter().position(|h| h == column).expect(column);
    row[at].trim_end_matches('%').parse().expect("a percent")
}

#[test]
fn tiny_tasks_are_too_fine_granularity() {
    let run = profile("rayon_too_fine", &[]);
    let region = only_region(&run);
    assert_iterator_tasks(&run, &region);
    // The program's one iterator, of 4 M items (rayon's hook), taken 4 at a time.
    assert_eq!(
        region["iterator_items"],
        serde_json::json!({"iterators": 1, "items": 4_000_000, "nested_iterators": 0, "nested_items": 0}),
        "{region:#}"
    );
    let d = diagnosis(&region, "too_fine_granularity");
    common::assert_beyond_threshold(&d);
    // `with_max_len(4)` halves 4 M items down to 2^20 pieces of 3.8 items: the advice's
    // `with_min_len` counts items, several of today's pieces' worth.
    let per_piece = 4e6 / run.printed("leaves") as f64;
    let advice = d["advice"].as_str().unwrap();
    assert!(
        advice.contains(&format!("over about {per_piece:.1} items")),
        "{per_piece}: {d:#}"
    );
    let min_len: f64 = advice
        .split("with_min_len(")
        .nth(1)
        .and_then(|n| n.split(')').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{d:#}"));
    assert!(min_len >= 2.0 * per_piece, "{d:#}");
    assert!(
        !codes(&region).contains(&"excessive_stealing".to_owned()),
        "the tasks come from the workers' own deques: {region:#}"
    );
}

/// Four workers on two CPUs: half of the workers' time is switched out, and the search the
/// diagnosis weighs is the rest. Beside the other tests of this file (run in parallel on the
/// 2-core VM), a fresh-clone pass read 8.4 ms of runnable search in 137 ms of runnable worker
/// time (7.9 %, under the 10 % gate) in one of three passes; alone it was found 10 times in 10.
#[test]
fn a_spawn_loop_is_excessive_stealing() {
    let (run, region) = profile_load_sensitive("rayon_spawn_loop", "excessive_stealing");
    // Each spawn is one task, and the scope's body, entered from `main`, one more.
    common::assert_origins_add_up(&region);
    assert_eq!(
        task_count(&region, "tasks"),
        run.printed("tasks"),
        "{region:#}"
    );
    assert_eq!(task_count(&region, "tasks_injected"), 1, "{region:#}");
    assert_eq!(task_count(&region, "tasks_inline"), 0, "{region:#}");
    let d = diagnosis(&region, "excessive_stealing");
    assert!(
        region["tasks_stolen"].as_u64() > region["tasks_local"].as_u64(),
        "{region:#}"
    );
    assert!(d["advice"].as_str().unwrap().contains("par_iter"), "{d:#}");
    assert!(
        !codes(&region).contains(&"too_fine_granularity".to_owned()),
        "3 µs tasks are not too fine: {region:#}"
    );
}

#[test]
fn few_tasks_for_many_workers_is_insufficient_parallel_slack() {
    let (run, region) = profile_load_sensitive("rayon_low_slack", "insufficient_parallel_slack");
    // Each request's join enters the pool from `main` (one task) and runs two halves.
    common::assert_origins_add_up(&region);
    let joins = run.printed("joins");
    assert_eq!(task_count(&region, "tasks"), 3 * joins, "{region:#}");
    assert_eq!(task_count(&region, "tasks_injected"), joins, "{region:#}");
    let d = diagnosis(&region, "insufficient_parallel_slack");
    common::assert_beyond_threshold(&d);
    assert_eq!(
        (region["workers"].as_u64(), region["instances"].as_u64()),
        (Some(4), Some(225)),
        "a pool of 4 workers, one run of 2 tasks per request: {region:#}"
    );
}

/// `cargo parprof --example <example>` while programs beside it keep every core busy; the
/// run's only region.
fn profile_saturated(example: &str) -> (Run, Value) {
    let run = {
        // The other tests of this file must not run beside the busy loops.
        let _machine = common::exclusive();
        let _busy = common::BusyMachine::start(1);
        common::parprof_while_holding(&["--example", example], &[])
    };
    assert!(run.output.status.success(), "stderr:\n{}", run.stderr());
    let region = only_region(&run);
    eprintln!(
        "{example} on a saturated machine: diagnoses {:?}, state_ns {}, preempted_ns {}",
        codes(&region),
        region["state_ns"],
        region["preempted_ns"]
    );
    (run, region)
}

/// Profiles `example` on a saturated machine and checks its diagnosis `expected`, with a
/// second run when the first misses it. How much of the CPUs the busy loops take varies from
/// run to run, and the time they take from the workers counts in the worker time that the
/// overhead shares are relative to: a region near a threshold can miss it once (seen in CI:
/// `rayon_too_fine`'s active overhead at 9.7 % of worker time for a 10 % threshold, 44 of its
/// 77 ms preempted). A pattern not found twice in a row fails the test.
fn diagnosed_on_a_saturated_machine(example: &str, expected: &str) {
    let (_, region) = again_if_missed(example, expected, profile_saturated);
    diagnosis(&region, expected);
}

/// The anti-patterns keep their diagnoses when other programs take both cores: a fine
/// region's overhead, a spawn loop's steals and a huge task's idle worker do not depend on
/// the machine being free.
#[test]
fn on_a_saturated_machine_tiny_tasks_are_still_too_fine() {
    diagnosed_on_a_saturated_machine("rayon_too_fine", "too_fine_granularity");
}

#[test]
fn on_a_saturated_machine_a_spawn_loop_is_still_excessive_stealing() {
    diagnosed_on_a_saturated_machine("rayon_spawn_loop", "excessive_stealing");
}

#[test]
fn on_a_saturated_machine_one_huge_task_is_still_load_imbalance() {
    diagnosed_on_a_saturated_machine("rayon_imbalance", "load_imbalance");
}

#[test]
fn on_a_saturated_machine_few_tasks_for_many_workers_is_still_insufficient_parallel_slack() {
    diagnosed_on_a_saturated_machine("rayon_low_slack", "insufficient_parallel_slack");
}

/// With every core taken by other programs, idle workers yield instead of sleeping and the
/// low-slack pattern may not show as wait: the report then says that it could not look for
/// it, instead of staying silent.
#[test]
fn on_a_saturated_machine_a_missed_slack_diagnosis_is_said() {
    let (run, region) = profile_saturated("rayon_low_slack");
    let report = run.report();
    let notes = report["notes"].to_string();
    let diagnosed = codes(&region).contains(&"insufficient_parallel_slack".to_owned());
    let said = notes.contains("could not be looked for");
    eprintln!(
        "saturated: diagnoses {:?}, note {said}, preempted_ns {}, inactive_overhead_ns {}",
        codes(&region),
        region["preempted_ns"],
        region["inactive_overhead_ns"]
    );
    assert!(diagnosed || said, "{region:#}\nnotes: {notes}");
}

#[test]
fn one_huge_task_is_load_imbalance() {
    let (run, region) = profile_load_sensitive("rayon_imbalance", "load_imbalance");
    assert_iterator_tasks(&run, &region);
    let d = diagnosis(&region, "load_imbalance");
    assert!(
        d["evidence"]["value"].as_f64().unwrap() <= d["threshold"].as_f64().unwrap(),
        "load imbalance is the searches and sleeps staying rare: {d:#}"
    );
    // The idle worker's states are on the timeline: asleep within the region.
    let timeline: Value = serde_json::from_str(
        &std::fs::read_to_string(run.path("timeline.json")).expect("timeline.json"),
    )
    .expect("timeline.json is JSON");
    let states: Vec<&Value> = timeline["traceEvents"]
        .as_array()
        .expect("traceEvents")
        .iter()
        .filter(|e| e["cat"] == "lifecycle")
        .collect();
    for state in ["UC", "W"] {
        assert!(
            states
                .iter()
                .any(|e| e["name"] == state && e["args"]["region"] == "imbalance"),
            "no {state} span of region `imbalance` on the timeline"
        );
    }
}

/// Rows of 16 items each summed by a `par_iter` nested in the outer `par_iter`'s tasks
/// (`gain_pairs nested`): the outer iterator is the region's own, the 200,000 inner ones are
/// nested in its tasks (rayon's hook counts both, exactly), and the advice is the fix that
/// `cargo bench --bench predicted_gain` measures: the inner loop made sequential.
#[test]
fn an_iterator_nested_over_short_rows_is_told_to_be_sequential() {
    let run = profile("gain_pairs", &["--", "nested", "bad", "200000", "2"]);
    let region = only_region(&run);
    assert_eq!(
        region["iterator_items"],
        serde_json::json!({
            "iterators": 1,
            "items": 200_000,
            "nested_iterators": 200_000,
            "nested_items": 3_200_000
        }),
        "{region:#}"
    );
    let d = diagnosis(&region, "too_fine_granularity");
    let advice = d["advice"].as_str().unwrap();
    assert!(
        advice.contains("of about 16 items each")
            && advice.contains("Make the inner loop sequential"),
        "{d:#}"
    );
    assert!(!advice.contains("with_min_len"), "{d:#}");
}

#[test]
fn a_well_tuned_region_has_no_diagnosis() {
    let run = profile("rayon_tuned", &[]);
    let region = only_region(&run);
    assert_iterator_tasks(&run, &region);
    assert_eq!(
        common::work_codes(&region),
        Vec::<String>::new(),
        "{region:#}"
    );
    assert_eq!(region["workers"], 2, "{region:#}");
    let states = &region["state_ns"];
    let uc = states["UC"].as_u64().unwrap();
    let total: u64 = ["UC", "LQ", "GS", "W"]
        .iter()
        .map(|s| states[*s].as_u64().unwrap())
        .sum();
    assert!(uc * 10 > total * 7, "workers mostly run tasks: {region:#}");
    // The unoptimised collector the tests run takes much of the other CPU while it unwinds:
    // that is oversubscription, and the only diagnosis the summary may give.
    assert!(
        run.summary()
            .contains("No parallel-overhead diagnosis in 1 parallel region(s).")
            || common::codes(&region) == ["oversubscription"],
        "summary:\n{}",
        run.summary()
    );
}

#[test]
fn thresholds_come_from_the_command_line_and_reports_lead_with_the_diagnoses() {
    // The well-tuned region's few hundred tasks per second exceed a threshold of 1.
    let run = profile(
        "rayon_tuned",
        &[
            "--active-overhead-threshold",
            "0",
            "--tasks-per-worker-per-s-threshold",
            "1",
        ],
    );
    let region = only_region(&run);
    let d = diagnosis(&region, "too_fine_granularity");
    assert_eq!(d["threshold"], 1.0, "{d:#}");
    assert_eq!(d["evidence"]["overhead_threshold"], 0.0, "{d:#}");

    let summary = run.summary();
    let diagnoses = summary.find("Diagnoses:").expect("a Diagnoses section");
    assert!(
        summary[diagnoses..].contains("region `tuned`: too_fine_granularity"),
        "summary:\n{summary}"
    );
    let markdown = std::fs::read_to_string(run.path("report.md")).expect("report.md");
    let first_section = markdown.find("### ").expect("sections");
    assert!(
        markdown[first_section..].starts_with("### Diagnoses"),
        "report.md:\n{markdown}"
    );
    assert!(
        markdown.contains("**`too_fine_granularity`** in region `tuned`"),
        "report.md:\n{markdown}"
    );
    assert!(
        markdown.contains("### Parallel regions"),
        "report.md:\n{markdown}"
    );
}
