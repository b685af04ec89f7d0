//! `cargo parprof diff` end to end: two sets of real runs of a program whose second step is
//! made twice as slow by an argument, compared with the noise rule; and the errors on input
//! that is not a pair of runs of one program.

mod common;

use common::{cargo_parprof, exclusive, parprof_while_holding};
use serde_json::Value;
use std::path::Path;
use std::process::Output;

/// `cargo parprof --example two_steps -o <dir> -- <scale>`.
fn record(dir: &Path, scale: &str) {
    let run = parprof_while_holding(&["--example", "two_steps", "--", scale], &[]);
    assert!(run.output.status.success(), "stderr:\n{}", run.stderr());
    // The run went to a temporary folder; keep it as `dir`.
    std::fs::create_dir_all(dir.parent().expect("a parent")).expect("the side's folder");
    std::fs::rename(run.dir.path(), dir).expect("keep the run");
    std::mem::forget(run.dir);
}

/// Three runs of each side, `run-1` … `run-3` in `base` (scale 1) and `head` (scale 2), taken
/// alternately: a drift of the machine during the test then reaches both sides alike, as it
/// would not if one side's runs all came first (seen: every base run 6 % slower than every
/// head run, a `faster` verdict for the unchanged step).
fn record_alternately(base: &Path, head: &Path) {
    for i in 1..=3 {
        record(&base.join(format!("run-{i}")), "1");
        record(&head.join(format!("run-{i}")), "2");
    }
}

/// `cargo parprof diff <args> -o <out>`.
fn diff(args: &[&str], out: &Path) -> Output {
    cargo_parprof()
        .arg("diff")
        .args(args)
        .arg("-o")
        .arg(out)
        .output()
        .expect("run cargo")
}

fn row<'a>(json: &'a Value, name: &str) -> &'a Value {
    json["rows"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["name"] == name))
        .unwrap_or_else(|| panic!("no row `{name}`: {json:#}"))
}

#[test]
fn a_step_made_twice_as_slow_is_slower_and_the_other_within_noise() {
    let _machine = exclusive();
    let work = tempfile::tempdir().unwrap();
    let (base, head, out) = (
        work.path().join("base"),
        work.path().join("head"),
        work.path().join("out"),
    );
    record_alternately(&base, &head);
    let output = diff(
        &[
            base.to_str().unwrap(),
            head.to_str().unwrap(),
            "--fail-above",
            "50",
        ],
        &out,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(1),
        "--fail-above 50 fails: {stderr}"
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("diff.json")).unwrap()).unwrap();
    assert_eq!(json["schema"], "parprof-diff/1");
    assert_eq!(
        (json["base_runs"].as_u64(), json["head_runs"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(json["noise_estimate"], true);
    let solve = row(&json, "two_steps::solve");
    assert_eq!(solve["verdict"], "slower", "{solve:#}");
    let change = solve["change"].as_f64().unwrap();
    assert!((0.6..1.4).contains(&change), "about +100%: {solve:#}");
    let parse = row(&json, "two_steps::parse");
    assert_eq!(parse["verdict"], "within_noise", "{parse:#}");
    let md = std::fs::read_to_string(out.join("diff.md")).unwrap();
    assert!(md.contains("`two_steps::solve`"), "{md}");
    assert!(md.contains("slower"), "{md}");
    // Rows are sorted by time changed: the slowed step first.
    assert_eq!(json["rows"][0]["name"], "two_steps::solve", "{json:#}");
    for svg in ["diff-active.svg", "diff-cpu.svg"] {
        let text = std::fs::read_to_string(out.join(svg)).unwrap();
        assert!(text.contains("<svg"), "{svg}");
        assert!(text.contains("solve"), "{svg} shows the changed step");
    }
    // Without --fail-above, a change is not a failure.
    let output = diff(&[base.to_str().unwrap(), head.to_str().unwrap()], &out);
    assert_eq!(output.status.code(), Some(0));

    // Bad input: a clear error, and nothing written.
    let nothing = work.path().join("nothing");
    let not_a_run = diff(
        &[work.path().to_str().unwrap(), head.to_str().unwrap()],
        &nothing,
    );
    assert_bad_input(&not_a_run, "not a run folder", &nothing);
    let other = work.path().join("other");
    copy_run(&head.join("run-1"), &other, |report| {
        report["target"]["name"] = "some_other_program".into();
    });
    let different = diff(&[base.to_str().unwrap(), other.to_str().unwrap()], &nothing);
    assert_bad_input(&different, "different programs", &nothing);
    let damaged = work.path().join("damaged");
    copy_run(&head.join("run-1"), &damaged, |_| {});
    std::fs::write(damaged.join("report.json"), "{\"schema\": \"parprof-rep").unwrap();
    let broken = diff(
        &[base.to_str().unwrap(), damaged.to_str().unwrap()],
        &nothing,
    );
    assert_bad_input(&broken, "is damaged", &nothing);
}

fn copy_run(from: &Path, to: &Path, edit: impl FnOnce(&mut Value)) {
    std::fs::create_dir_all(to).unwrap();
    let mut report: Value =
        serde_json::from_str(&std::fs::read_to_string(from.join("report.json")).unwrap()).unwrap();
    edit(&mut report);
    std::fs::write(to.join("report.json"), report.to_string()).unwrap();
}

fn assert_bad_input(output: &Output, says: &str, out: &Path) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(101), "{stderr}");
    assert!(stderr.contains(says), "expected `{says}`: {stderr}");
    assert!(!out.exists(), "nothing written on bad input");
}
