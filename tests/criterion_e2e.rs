//! A criterion benchmark with `iter_batched_ref` (`sort_words` of `benches/criterion_pair.rs`)
//! profiled with `--bench-time 1` and `2`: criterion 0.5's profile mode must never be asked for
//! a measured batch of 0 iterations (it panics then, "Batch size must not be zero"), and the
//! report says what was measured.

mod common;

use common::{exclusive, parprof_while_holding};
use serde_json::Value;

#[test]
fn iter_batched_ref_never_panics_and_the_report_says_what_was_measured() {
    let _machine = exclusive();
    for (bench_time, profile_time) in [("1", 3.0), ("2", 4.0)] {
        let run = parprof_while_holding(
            &[
                "--bench",
                "criterion_pair",
                "--bench-time",
                bench_time,
                "--",
                "sort_words",
            ],
            &[],
        );
        let stderr = run.stderr();
        assert!(
            run.output.status.success(),
            "--bench-time {bench_time}: {stderr}"
        );
        assert!(!stderr.contains("Batch size must not be zero"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        let index: Value =
            serde_json::from_str(&std::fs::read_to_string(run.path("benchmarks.json")).unwrap())
                .unwrap();
        let entry = &index["benchmarks"][0];
        assert_eq!(entry["name"], "sort_words", "{index:#}");
        assert_eq!(entry["profile_time_s"], profile_time, "{index:#}");
        let md = std::fs::read_to_string(run.path("report.md")).unwrap();
        assert!(
            md.contains("Measured: criterion's warm-up"),
            "report.md says what was measured: {md}"
        );
        assert!(
            md.contains(&format!("`--profile-time {profile_time}`")),
            "{md}"
        );
    }
}
