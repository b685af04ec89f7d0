//! `cargo parprof` end to end on real builds of this repository's examples: real child
//! processes, real kernel records, real reports.

mod common;

use common::parprof;

#[test]
fn active_time_matches_thread_cpu_time_when_threads_are_oversubscribed() {
    let run = parprof(&["--example", "oversubscribed"], &[]);
    assert!(run.output.status.success(), "stderr:\n{}", run.stderr());
    let report = run.report();
    assert_eq!(report["schema"], "parprof-report/1");
    assert_eq!(
        report["capabilities"]["context_switches"]["available"], true,
        "{report:#}"
    );
    let probe = run.probe("oversubscribed::crunch");
    let cpu_ns = run.printed("thread_cpu_ns") as f64;
    let active = probe["active_ns"].as_f64().unwrap();
    let elapsed = probe["elapsed_ns"].as_f64().unwrap();
    // Steal time (a busy VM host) is outside the threads' CPU time and in no switch record:
    // what the hypervisor took during the run is allowed on top.
    let steal = report["steal_ns"].as_f64().unwrap_or(0.0);
    let error = (active - cpu_ns).abs();
    assert!(
        error < 0.05 * cpu_ns + steal,
        "active {active} ns vs thread CPU time {cpu_ns} ns: {:.1}% apart, steal {steal} ns\n\
         probe {probe:#}\nthreads {:#}",
        100.0 * error / cpu_ns,
        report["threads"],
    );
    assert!(
        elapsed > 1.3 * cpu_ns,
        "elapsed {elapsed} ns should be well above CPU time {cpu_ns} ns"
    );
    assert!(probe["switched_out_ns"].as_f64().unwrap() > 0.0);
    for file in [
        "report.md",
        "active.svg",
        "active.folded",
        "cpu.svg",
        "cpu.folded",
        "timeline.json",
    ] {
        assert!(run.path(file).is_file(), "{file} missing");
    }
}

/// One run of `nested_probes` (3 M calls of the ~5 ns child) under the optimised collector, as
/// users run it (an unoptimised one disturbed about one run in ten by 10 % more): the probed
/// parent against the same work with an unprobed child.
struct NestedRun {
    /// The parent's corrected (active) time, relative to the reference.
    corrected_error: f64,
    /// The parent's elapsed time less its switched-out time, relative to the reference.
    uncorrected_error: f64,
    /// Whether the report says that the overhead removed from the parent is uncertain (the
    /// machine's speed varied while the probes' cost was calibrated).
    said_uncertain: bool,
    /// The runtime's in-run references of the probes' cost (method 1 follows the machine's
    /// speed with them).
    speed_references: u64,
    /// What the references put the probes' cost at, over the start-up calibration's.
    overhead_scale: f64,
}

const PROBED_PARENT: &str = "nested_probes::parent_with_probed_child";

fn nested_run(env: &[(&str, &str)]) -> NestedRun {
    let run = common::run_parprof(
        common::cargo_parprof_release(),
        &["--example", "nested_probes", "--", "3000000"],
        env,
    );
    assert!(run.output.status.success(), "stderr:\n{}", run.stderr());
    let report = run.report();
    let with_probe = run.probe(PROBED_PARENT);
    let without = run.probe("nested_probes::parent_with_plain_child");
    let reference_ns = without["active_ns"].as_f64().unwrap();
    let corrected = with_probe["active_ns"].as_f64().unwrap();
    let uncorrected = with_probe["elapsed_ns"].as_f64().unwrap()
        - with_probe["switched_out_ns"].as_f64().unwrap();
    let said_uncertain = report["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .any(|n| n.contains("is uncertain by") && n.contains(PROBED_PARENT));
    let nested = NestedRun {
        corrected_error: (corrected - reference_ns) / reference_ns,
        uncorrected_error: (uncorrected - reference_ns) / reference_ns,
        said_uncertain,
        speed_references: report["clock"]["in_run_speed"]["references"]
            .as_u64()
            .unwrap_or(0),
        overhead_scale: report["clock"]["in_run_speed"]["overhead_scale"]
            .as_f64()
            .unwrap_or(1.0),
    };
    eprintln!(
        "parent with probed child: corrected {corrected:.0} ns, uncorrected {uncorrected:.0} ns; \
         same work without child probes {reference_ns:.0} ns: errors {:+.1}% vs {:+.1}%; steal {} ns; \
         said uncertain: {}; references {:.2}× the start-up cost",
        100.0 * nested.corrected_error,
        100.0 * nested.uncorrected_error,
        report["steal_ns"],
        nested.said_uncertain,
        nested.overhead_scale,
    );
    nested
}

#[test]
fn nested_probes_timed_at_every_call_are_corrected() {
    // Every call recorded: the correction of recorded probes is what is measured here, and the
    // runtime's in-run references of a timed pair's in-place cost, which the correction follows.
    // A figure over runs, not one run: on the project's 2-core VM, busy with other builds, the
    // corrected parent was +2 to +29 % over the reference in steady runs and up to +116 % in
    // runs where the probes' in-place cost flipped between 14 and 50 ns, against +160 to +360 %
    // uncorrected: the share of the distortion left was 0.01 to 0.32, median 0.1
    // (`cargo bench --bench nested_correction`). The bound, the median of 5 runs left under a
    // quarter, fails a correction that removes two thirds or less of the distortion (which a
    // start-up calibration alone did: a third left).
    //
    // This VM also has episodes of 10 to 30 s in which a recorded pair costs two to three times
    // what it usually does (+260 to +480 % uncorrected); the references then read it (they
    // put the probes' cost at 2-3× the start-up figure) and the correction removes more, but
    // not all: 0.15 to 0.41 of the distortion was left in the five runs of one such episode
    // (2026-11-28); in others the references read nothing unusual (0.97×) and the parent came
    // out +73 %. A series that misses the bound is taken again once, 30 s later, after such an
    // episode; a correction wrong on a steady machine fails the second series.
    const RUNS: usize = 5;
    let _machine = common::exclusive();
    let series = || -> Vec<NestedRun> {
        (0..RUNS)
            .map(|_| nested_run(&[("PARPROF_SAMPLING", "off")]))
            .collect()
    };
    let distortion_left = |runs: &[NestedRun]| -> Vec<f64> {
        let mut left: Vec<f64> = runs
            .iter()
            .map(|r| r.corrected_error.abs() / r.uncorrected_error)
            .collect();
        left.sort_by(f64::total_cmp);
        left
    };
    let mut runs = series();
    if distortion_left(&runs)[RUNS / 2] >= 0.25 {
        eprintln!(
            "the correction left a quarter of the distortion or more: running the series again \
             after 30 s"
        );
        std::thread::sleep(std::time::Duration::from_secs(30));
        runs = series();
    }
    let mut uncorrected: Vec<f64> = runs.iter().map(|r| r.uncorrected_error).collect();
    uncorrected.sort_by(f64::total_cmp);
    assert!(
        uncorrected[RUNS / 2] > 0.5,
        "the child probes should cost much: {uncorrected:?}"
    );
    let left = distortion_left(&runs);
    assert!(
        left[RUNS / 2] < 0.25,
        "correction removed too little: shares of the distortion left {left:?}"
    );
    for r in &runs {
        // Three back to back at the child's first return, then one a millisecond.
        assert!(
            r.speed_references >= 10,
            "{} references",
            r.speed_references
        );
    }
}

#[test]
fn a_probed_function_computed_in_registers_keeps_its_own_time() {
    // `nested_probes`' child reads no memory: 32 rounds of dependent arithmetic in registers.
    // Unless its value is tied to the exit probe, the compiler computes it after the exit
    // (seen in the disassembly), and the child read about 3 ns a call, the probe pair's
    // residue, while its parent got its work. Every call timed, so the figures are exact.
    let _machine = common::exclusive();
    let run = common::run_parprof(
        common::cargo_parprof_release(),
        &["--example", "nested_probes", "--", "3000000", "32"],
        &[("PARPROF_SAMPLING", "off")],
    );
    assert!(run.output.status.success(), "stderr:\n{}", run.stderr());
    let active = |name: &str, field: &str| run.probe(name)[field].as_f64().unwrap();
    let child = active("nested_probes::tiny", "active_ns");
    let parent_own = active(PROBED_PARENT, "self_active_ns");
    let same_work = active("nested_probes::parent_with_plain_child", "active_ns");
    eprintln!(
        "child {child:.0} ns, its parent's own {parent_own:.0} ns; the same work with an \
         unprobed child {same_work:.0} ns"
    );
    // Measured with the tie: the child 0.8-0.95 of the same work, its parent's own time under
    // a third of it; without: the child 0.19, its parent's own 0.85.
    assert!(
        child > 0.5 * same_work && child > parent_own,
        "the child's work was counted outside it: child {child:.0} ns, parent's own \
         {parent_own:.0} ns, same work {same_work:.0} ns"
    );
}

#[test]
fn nested_probes_are_within_10_percent_or_said_uncertain_in_9_runs_of_10() {
    // The default: the hot child is sampled. The project's goal, checked over 10 runs, with
    // what a user is told: a run is right when the parent's corrected time is within 10 % of
    // the reference (the same work in the same process, no child probes), or when its report
    // says that the overhead removed from the parent is uncertain. On a VM whose host slows
    // its CPU at times the probe's in-place cost changes twofold during a run; the runtime's
    // in-run references of that cost let the correction follow it (12 of 12 runs within
    // 10 % on such a VM, where a start-up calibration alone left 3 of 10), and every run here
    // must have taken them.
    const RUNS: usize = 10;
    let _machine = common::exclusive();
    let right = |runs: &[NestedRun]| {
        runs.iter()
            .filter(|r| r.corrected_error.abs() <= 0.10 || r.said_uncertain)
            .count()
    };
    // A series is repeated once when it misses the goal: in a slow phase of this project's VM
    // the parent came out 13–16 % short in two runs of one series (the reference 37 ms instead
    // of 32–33 ms, the corrected parent 31–32 ms), unsaid. A correction that is wrong by itself
    // fails both series.
    let mut runs: Vec<NestedRun> = (0..RUNS).map(|_| nested_run(&[])).collect();
    if right(&runs) < 9 {
        eprintln!("repeating the series: {} of {RUNS} right", right(&runs));
        runs = (0..RUNS).map(|_| nested_run(&[])).collect();
    }
    let errors: Vec<String> = runs
        .iter()
        .map(|r| {
            let said = if r.said_uncertain {
                " (said uncertain)"
            } else {
                ""
            };
            format!("{:+.1}%{said}", 100.0 * r.corrected_error)
        })
        .collect();
    let right = right(&runs);
    assert!(
        right >= 9,
        "{right} of {RUNS} runs within 10 % or said uncertain: {}",
        errors.join(", ")
    );
    // The premise: the child probes distort the parent much. Their cost in place varies from
    // run to run (+27 … +65 % over the reference seen in one series): the series' median.
    let mut uncorrected: Vec<f64> = runs.iter().map(|r| r.uncorrected_error).collect();
    uncorrected.sort_by(f64::total_cmp);
    assert!(
        uncorrected[RUNS / 2] > 0.3,
        "the child probes should cost much: {uncorrected:?}"
    );
    for r in &runs {
        // Three back to back when the child becomes hot, then one a millisecond in a run
        // of about 30 ms.
        assert!(
            r.speed_references >= 10,
            "{} references",
            r.speed_references
        );
    }
}

#[test]
fn a_crashing_target_still_gets_a_report_and_its_signal() {
    let run = parprof(&["--example", "misbehave", "--", "segv"], &[]);
    assert!(!run.output.status.success());
    assert!(
        run.stderr().contains("SIGSEGV"),
        "stderr:\n{}",
        run.stderr()
    );
    let report = run.report();
    assert_eq!(report["exit"]["signal"], 11, "{report:#}");
    assert!(run.probe("misbehave::some_work")["calls"].as_u64().unwrap() >= 10);
}

#[test]
fn a_panicking_target_reports_its_exit_code() {
    let run = parprof(&["--example", "misbehave", "--", "panic"], &[]);
    assert_eq!(run.output.status.code(), Some(101));
    assert_eq!(run.report()["exit"]["code"], 101);
}

#[test]
fn a_target_killed_by_a_signal_gets_a_report_of_what_was_collected() {
    // `misbehave hang` never ends: the test SIGKILLs the target (not the profiler) once its
    // trace exists, as the out-of-memory killer or a user would.
    let _machine = common::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let child = common::parprof_command(&["--example", "misbehave", "--", "hang"], dir.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the target's trace to appear, then SIGKILL the target (not the profiler).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let trace = loop {
        let found = std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with("trace-"));
        if let Some(entry) = found {
            break entry.path();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the target never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pid: i32 = trace
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .trim_start_matches("trace-")
        .parse()
        .unwrap();
    // SAFETY: sending a signal to the target's pid, which is alive (it hangs by design).
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("SIGKILL"), "stderr:\n{stderr}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap())
            .unwrap();
    assert_eq!(report["exit"]["signal"], 9);
    assert_eq!(
        report["trace"]["completeness"]["state"], "cut",
        "a SIGKILLed trace is cut: {report:#}"
    );
}

#[test]
fn a_missing_target_lists_the_choices_and_suggests_a_name() {
    let run = parprof(&["--example", "quikstart"], &[]);
    assert_eq!(run.output.status.code(), Some(101));
    let stderr = run.stderr();
    assert!(
        stderr.contains("no example target named `quikstart`"),
        "stderr:\n{stderr}"
    );
    assert!(
        stderr.contains("Did you mean `quickstart`?"),
        "stderr:\n{stderr}"
    );
    assert!(
        stderr.contains("nested_probes"),
        "the available examples are listed:\n{stderr}"
    );
}

#[test]
fn refused_perf_access_degrades_with_an_explanation() {
    let run = parprof(
        &["--example", "quickstart"],
        &[("PARPROF_SIMULATE_PERF_REFUSED", "1")],
    );
    assert!(run.output.status.success(), "stderr:\n{}", run.stderr());
    let report = run.report();
    let switches = &report["capabilities"]["context_switches"];
    assert_eq!(switches["available"], false);
    assert!(
        switches["reason"]
            .as_str()
            .unwrap()
            .contains("perf_event_paranoid"),
        "{report:#}"
    );
    assert!(
        run.stdout().contains("perf_event_paranoid")
            || run.stderr().contains("perf_event_paranoid")
    );
    assert!(
        run.probe("quickstart::sum_wide_rows")["calls"]
            .as_u64()
            .unwrap()
            == 3
    );
}

/// A probe on a hot recursive function, as a new user writes one: sampled, every call counted
/// (the program counts them too), inclusive time within the calls' elapsed time, and the report
/// says which probe was sampled.
#[test]
fn a_hot_recursive_probe_is_sampled_and_every_call_counted() {
    let run = parprof(&["--example", "probed_quicksort", "--", "1000000"], &[]);
    assert!(run.output.status.success(), "stderr:\n{}", run.stderr());
    let probe = run.probe("probed_quicksort::quicksort");
    let calls = probe["calls"].as_u64().unwrap();
    assert_eq!(calls, run.printed("calls"), "{probe:#}");
    let untimed = probe["unrecorded_calls"].as_u64().unwrap();
    // One call in 64 is timed once the site is hot, after its first 1024 calls.
    assert!(untimed * 10 > calls * 9, "{probe:#}");
    assert!(
        probe["active_ns"].as_u64() <= probe["elapsed_ns"].as_u64(),
        "{probe:#}"
    );
    let md = std::fs::read_to_string(run.path("report.md")).expect("report.md");
    assert!(
        md.contains("Hot probes were sampled") && md.contains("probed_quicksort::quicksort ("),
        "{md}"
    );
}

/// The active time of `probed_join_quicksort ARGS`'s recursive probe, checked against the
/// counts the program printed: (active, self, the sort of small slices' active) in ns.
fn probed_join_run(args: &[&str], env: &[(&str, &str)]) -> (u64, u64, u64) {
    let mut command = vec!["--example", "probed_join_quicksort", "--"];
    command.extend_from_slice(args);
    let run = parprof(&command, env);
    assert!(run.output.status.success(), "stderr:\n{}", run.stderr());
    let quicksort = run.probe("probed_join_quicksort::quicksort");
    let small = run.probe("probed_join_quicksort::insertion_sort");
    assert_eq!(quicksort["calls"].as_u64().unwrap(), run.printed("calls"));
    assert_eq!(small["calls"].as_u64().unwrap(), run.printed("small_sorts"));
    let ns = |probe: &serde_json::Value, key: &str| probe[key].as_u64().unwrap();
    let active = ns(&quicksort, "active_ns");
    assert!(active <= ns(&quicksort, "elapsed_ns"), "{quicksort:#}");
    // Its outermost activations are few and far apart: all timed, nothing estimated.
    assert_eq!(
        ns(&quicksort, "sampling_uncertainty_ns"),
        0,
        "{quicksort:#}"
    );
    (
        active,
        ns(&quicksort, "self_active_ns"),
        ns(&small, "active_ns"),
    )
}

/// Probes on a recursive `rayon::join` (rayon's demo quicksort) and on the sort of its small
/// slices, sorted in a loop: a worker's calls nest in the activation it started when idle,
/// so the recursion is entered anew a few times per round on each worker. Sampled, the
/// recursion's inclusive time is what timing every call gives (within what the correction of
/// every-call timing leaves, about a quarter at most), and it is its own time plus that of the
/// small sorts inside it.
///
/// The every-call side is the one that may miss once: its correction leaves +14 … +51 % on
/// small calls (issue 40; `cargo bench --bench nested_correction`), and in one of CI's runs the
/// 40 × 20,000 case read 2.2× the sampled time while it passed alone 3 of 3. A miss is measured
/// again; two in a row fail.
#[test]
fn a_sampled_rayon_join_recursion_counts_each_activation_once() {
    let measure = |args: &[&str]| {
        let (active, self_active, small) = probed_join_run(args, &[]);
        let (every_call, _, _) = probed_join_run(args, &[("PARPROF_SAMPLING", "off")]);
        (active, self_active, small, every_call)
    };
    let within = |(active, _, _, every_call): (u64, u64, u64, u64)| {
        (0.7..1.3).contains(&(active as f64 / every_call as f64))
    };
    for args in [&["6", "400000"][..], &["40", "20000"][..]] {
        let mut measured = measure(args);
        if !within(measured) {
            eprintln!("{args:?}: {measured:?} (sampled, self, small, every call) missed; again");
            measured = measure(args);
        }
        let (active, self_active, small, every_call) = measured;
        let ratio = active as f64 / every_call as f64;
        assert!(
            (0.7..1.3).contains(&ratio),
            "{args:?}: sampled {active} ns against {every_call} ns with every call timed"
        );
        let parts = (self_active + small) as f64 / active as f64;
        assert!(
            (0.98..1.02).contains(&parts),
            "{args:?}: self {self_active} + small sorts {small} against {active} ns"
        );
    }
}

/// A probe on a small recursion called in a loop, as a benchmark's iterations call it: its
/// outermost calls are sampled too, and the loop's last calls are untimed with no probe event
/// after them (their counts are written when the main thread exits). Every call is counted,
/// and the estimated part of the time says its sampling uncertainty.
#[test]
fn a_loop_over_a_probed_recursion_counts_every_call() {
    let run = parprof(&["--example", "probed_fib_loop", "--", "10", "100001"], &[]);
    assert!(run.output.status.success(), "stderr:\n{}", run.stderr());
    let fib = run.probe("probed_fib_loop::fib");
    let ns = |key: &str| fib[key].as_u64().unwrap();
    assert_eq!(ns("calls"), run.printed("calls"), "{fib:#}");
    assert!(ns("unrecorded_calls") * 10 > ns("calls") * 9, "{fib:#}");
    assert!(ns("active_ns") <= ns("elapsed_ns"), "{fib:#}");
    // The estimate's uncertainty is the spread of the recorded outermost calls it rests on,
    // which can be none: most of fib's calls measure 0 ns once the probe's cost is taken out,
    // and a run whose sampled outermost calls all did reads 0 (seen twice in some hundred
    // runs). The unit tests of `active_time` check the variance itself.
    let uncertainty = ns("sampling_uncertainty_ns");
    assert!(uncertainty < ns("active_ns"), "{fib:#}");
}
