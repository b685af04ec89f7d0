//! Slices (method 5) end to end: the real `cargo parprof --slices` on programs shaped like
//! users' code, checked against what the programs count themselves.

mod common;

use common::{Run, profile_example};
use serde_json::Value;

/// Lines of the form `step <n> value <v>` in `text`, as (n, line).
fn step_lines(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("step ")?.split(' ').next()?.parse().ok())
        .collect()
}

/// Each of `0..steps` exactly once, in order.
fn assert_each_step_once(lines: &[u64], steps: u64, what: &str) {
    let expected: Vec<u64> = (0..steps).collect();
    assert_eq!(
        lines,
        expected.as_slice(),
        "{what}: every step once, in order"
    );
}

fn slices(run: &Run) -> Value {
    let report = run.report();
    assert!(
        report["slices"].is_object(),
        "no slices in report.json; stderr:\n{}",
        run.stderr()
    );
    report["slices"].clone()
}

fn slice_probe(slices: &Value, name: &str) -> Value {
    slices["probes"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == name).cloned())
        .unwrap_or_else(|| panic!("no probe `{name}` in slices: {slices:#}"))
}

/// Page faults per call from the slices against the program's own count.
fn assert_faults_per_call(run: &Run, slices: &Value) {
    let truth = run.printed("faults_per_grow_buffer_x100") as f64 / 100.0;
    let grow = slice_probe(slices, "step_log::grow_buffer");
    let measured = grow["counters"]["page-faults"]
        .as_f64()
        .expect("page-faults per call");
    assert!(
        grow["calls_observed"].as_u64().unwrap() >= 3,
        "too few calls measured: {grow:#}"
    );
    assert!(
        (measured - truth).abs() <= 0.15 * truth,
        "page faults per call: slices {measured}, program {truth}"
    );
}

#[test]
fn slices_leave_the_output_alone_and_measure_page_faults_per_call() {
    let log_dir = tempfile::tempdir().unwrap();
    let log = log_dir.path().join("steps.log");
    let run = profile_example("step_log", &["--slices", "--", log.to_str().unwrap()], &[]);
    let steps = run.printed("steps");
    assert_each_step_once(&step_lines(&run.stdout()), steps, "stdout");
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert_each_step_once(&step_lines(&log_text), steps, "the log file");

    let slices = slices(&run);
    assert_eq!(slices["mode"], "slices");
    assert!(slices["taken"].as_u64().unwrap() >= 2, "{slices:#}");
    assert_faults_per_call(&run, &slices);
    let coverage = slices["coverage"].as_f64().expect("coverage");
    assert!(coverage > 0.0 && coverage <= 1.0, "{coverage}");
    // The report says what they are, in every view.
    let md = std::fs::read_to_string(run.path("report.md")).unwrap();
    assert!(md.contains("Exact per-call counters (slices)"), "{md}");
    let html = std::fs::read_to_string(run.path("report.html")).unwrap();
    assert!(html.contains("Exact per-call counters (slices)"));

    // Saved with the run: `cargo parprof report` finds the same figures again.
    let again = tempfile::tempdir().unwrap();
    let output = common::cargo_parprof()
        .arg("report")
        .arg(run.dir.path())
        .arg("-o")
        .arg(again.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let reread: Value =
        serde_json::from_str(&std::fs::read_to_string(again.path().join("report.json")).unwrap())
            .unwrap();
    assert_eq!(reread["slices"], run.report()["slices"]);
}

#[test]
fn detail_full_measures_every_call_in_the_program_itself() {
    let log_dir = tempfile::tempdir().unwrap();
    let log = log_dir.path().join("steps.log");
    let run = profile_example(
        "step_log",
        &["--detail", "full", "--", log.to_str().unwrap(), "60"],
        &[],
    );
    assert_each_step_once(&step_lines(&run.stdout()), 60, "stdout");
    let slices = slices(&run);
    assert_eq!(slices["mode"], "full");
    assert_faults_per_call(&run, &slices);
    // Every call of the run, not a sample of them.
    let grow = slice_probe(&slices, "step_log::grow_buffer");
    assert_eq!(grow["calls_observed"], 60, "{grow:#}");
}

#[test]
fn blocked_slices_are_ended_and_the_program_finishes() {
    let run = profile_example("worker_handoff", &["--slices", "--", "300"], &[]);
    assert_eq!(run.printed("answers"), run.printed("expected"));
    let slices = slices(&run);
    let ended = &slices["ended_early"];
    let blocked = ended["blocked"].as_u64().unwrap() + ended["timeout"].as_u64().unwrap();
    assert!(blocked >= 1, "no slice ended as blocked: {slices:#}");
    assert!(
        run.summary().contains("blocked"),
        "the summary says why slices ended: {}",
        run.summary()
    );
    // Said by the slices' own sentence, with the count (the correction sentence says
    // "blocked" too, so the word alone proves nothing).
    let said = match ended["blocked"].as_u64().unwrap() {
        0 => format!("{} out of wall time", ended["timeout"]),
        n => format!("ended early: {n} blocked"),
    };
    assert!(
        run.summary().contains(&said),
        "the summary should say `{said}`: {}",
        run.summary()
    );
}
