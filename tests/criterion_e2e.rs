//! Criterion benchmarks with `iter_batched_ref` profiled with `--bench-time 1` and `2`:
//! criterion 0.5's profile mode must never be asked for a measured batch of 0 iterations (it
//! panics then, "Batch size must not be zero"), the report states the iterations criterion
//! counted itself (criterion is built with parprof's hooks), and the profile keeps to the
//! measured batch.

mod common;

use common::{Run, exclusive, parprof_while_holding};
use serde_json::Value;

fn profile_bench(bench: &str, bench_time: &str, filter: &[&str]) -> Run {
    let mut args = vec!["--bench", bench, "--bench-time", bench_time];
    if !filter.is_empty() {
        args.push("--");
        args.extend_from_slice(filter);
    }
    let run = parprof_while_holding(&args, &[]);
    let stderr = run.stderr();
    assert!(
        run.output.status.success(),
        "--bench-time {bench_time}: {stderr}"
    );
    assert!(!stderr.contains("Batch size must not be zero"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    run
}

fn json(run: &Run, file: &str) -> Value {
    let text = std::fs::read_to_string(run.path(file))
        .unwrap_or_else(|e| panic!("no {file} ({e}); stderr:\n{}", run.stderr()));
    serde_json::from_str(&text).unwrap()
}

#[test]
fn iter_batched_ref_never_panics_and_the_report_says_what_was_measured() {
    let _machine = exclusive();
    for (bench_time, profile_time) in [("1", 3.0), ("2", 4.0)] {
        let run = profile_bench("criterion_pair", bench_time, &["sort_words"]);
        let index = json(&run, "benchmarks.json");
        let entry = &index["benchmarks"][0];
        assert_eq!(entry["name"], "sort_words", "{index:#}");
        assert_eq!(entry["profile_time_s"], profile_time, "{index:#}");
        let md = std::fs::read_to_string(run.path("report.md")).unwrap();
        assert!(
            md.contains("**Measured:** criterion's measured batch, "),
            "report.md says what was measured: {md}"
        );
        assert!(
            !md.contains("Measured: criterion's warm-up (the routine"),
            "no estimate where criterion counted: {md}"
        );
    }
}

/// The fixture counts its routine's calls itself: the warm-up's and the measured batch's
/// iterations in the report add up to it, and the probe in the routine counts the batch's.
#[test]
fn the_reported_iterations_are_criterions_own_and_the_probes_keep_to_the_batch() {
    let _machine = exclusive();
    for bench_time in ["1", "2"] {
        let run = profile_bench("criterion_counted", bench_time, &[]);
        let truth = run.printed("routine_calls");
        let report = json(&run, "sort_counted/report.json");
        let bench = &report["bench"];
        let warm_up = bench["warm_up_iterations"]
            .as_u64()
            .expect("warm-up counted");
        let measured = bench["measured_iterations"].as_u64().expect("a batch ran");
        eprintln!(
            "--bench-time {bench_time}: warm-up {warm_up}, measured {measured}, \
             routine calls {truth}; {bench:#}"
        );
        assert!(measured > 0, "{bench:#}");
        assert_eq!(warm_up + measured, truth, "{bench:#}");
        let probe = |name: &str| {
            report["probes"]
                .as_array()
                .and_then(|p| p.iter().find(|p| p["name"] == name))
                .unwrap_or_else(|| panic!("no probe {name}: {report:#}"))
                .clone()
        };
        let sort = probe("criterion_counted::sort_numbers");
        let checks = probe("criterion_counted::sorted_at");
        eprintln!(
            "sort_numbers: {} calls; sorted_at: {} calls, {} of them unrecorded",
            sort["calls"], checks["calls"], checks["unrecorded_calls"]
        );
        assert_eq!(sort["calls"], measured, "{sort:#}\n{bench:#}");
        // `CHECKS` (2048) checks an iteration, most of them counted by sampling, not recorded.
        assert!(checks["unrecorded_calls"].as_u64() > Some(0), "{checks:#}");
        assert_eq!(checks["calls"], 2048 * measured, "{checks:#}\n{bench:#}");
        // The warm-up ran the same routine for over a second: its calls were dropped (one
        // sort and 2048 checks an iteration), and its samples.
        assert_eq!(
            bench["probe_calls_dropped"].as_u64(),
            Some(2049 * warm_up),
            "{bench:#}"
        );
        assert!(bench["samples_dropped"].as_u64() > Some(0), "{bench:#}");
        let batch_ns = bench["measured_ns"].as_u64().unwrap();
        let batch = batch_ns as f64 / 1e9;
        let wanted: f64 = bench_time.parse().unwrap();
        assert!(batch > 0.5 * wanted && batch < wanted + 2.5, "{bench:#}");
        let said = format!("criterion's measured batch, {measured} iterations in ");
        for md in ["report.md", "sort_counted/report.md"] {
            let text = std::fs::read_to_string(run.path(md)).unwrap();
            assert!(text.contains(&said), "{md}: {text}");
            assert!(text.contains(&format!("warm-up before it, {warm_up} iterations")));
            assert_eq!(
                text.matches("Still over the whole run").count(),
                1,
                "{text}"
            );
        }
    }
}
