//! `cargo parprof diff --base REV --bin NAME` end to end: a git repository made by the test,
//! holding a program of 12 probes of equal fixed work (parprof-rt by path), in three commits —
//! BASE, a head that changes a comment only, and a head whose probe `p07` does 25 % more work.
//! Both commits are built by the one command and run alternated, pair by pair.
//!
//! Checks: the comment-only head (given as `--head REV`) has no row `slower` or `faster` and
//! exits 0 under `--fail-above 10`; the slower head (the work tree as it is) has `p07` `slower`
//! near +25 %, no other probe flagged, and exits 1.

mod common;

use common::{exclusive, git, repo_root};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// About 10 ms of arithmetic per probe on this project's VM: fixed work, not fixed time.
const UNIT: u64 = 6_000_000;

/// The program: probes `p01` … `p12`, each `work(UNIT)` but `p07`, whose work is `p07_work`;
/// `comment` goes above `main`.
fn program(p07_work: &str, comment: &str) -> String {
    let mut src = format!(
        "use parprof_rt::probe;\nuse std::hint::black_box;\n\nconst UNIT: u64 = {UNIT};\n\n\
         fn work(iterations: u64) -> u64 {{\n    let mut x = 1u64;\n    for _ in 0..iterations {{\n\
         \x20       x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407));\n\
         \x20   }}\n    x\n}}\n"
    );
    let names: Vec<String> = (1..=12).map(|i| format!("p{i:02}")).collect();
    for name in &names {
        let work = if name == "p07" { p07_work } else { "UNIT" };
        src.push_str(&format!(
            "\n#[probe]\nfn {name}() -> u64 {{\n    work({work})\n}}\n"
        ));
    }
    src.push_str(&format!(
        "\n{comment}\nfn main() {{\n    let x = {};\n    println!(\"checksum={{x:x}}\");\n}}\n",
        names
            .iter()
            .map(|n| format!("{n}()"))
            .collect::<Vec<_>>()
            .join(" ^ ")
    ));
    src
}

/// The repository in three commits; returns (BASE, the comment-only head). The work tree is
/// left at the third commit, whose `p07` does 25 % more work.
fn fixture_repository(repo: &Path) -> (String, String) {
    std::fs::create_dir_all(repo.join("src")).unwrap();
    let runtime = repo_root().join("parprof-rt");
    std::fs::write(
        repo.join("Cargo.toml"),
        format!(
            "[package]\nname = \"twelve\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\nparprof-rt = {{ path = {:?} }}\n\n[workspace]\n",
            runtime.display().to_string()
        ),
    )
    .unwrap();
    // This repository's lock file: the same versions, already downloaded by its own build.
    std::fs::copy(repo_root().join("Cargo.lock"), repo.join("Cargo.lock")).unwrap();
    std::fs::write(repo.join(".gitignore"), "/target\n/parprof-diff\n").unwrap();
    let main = repo.join("src/main.rs");
    std::fs::write(&main, program("UNIT", "// Twelve probes.")).unwrap();
    git(repo, &["init", "--quiet"]);
    git(repo, &["add", "."]);
    git(repo, &["commit", "--quiet", "-m", "base"]);
    let base = git(repo, &["rev-parse", "HEAD"]);
    std::fs::write(
        &main,
        program("UNIT", "// Twelve probes, each of equal work."),
    )
    .unwrap();
    git(repo, &["commit", "--quiet", "-am", "a comment"]);
    let comment_only = git(repo, &["rev-parse", "HEAD"]);
    std::fs::write(
        &main,
        program("UNIT * 5 / 4", "// Twelve probes, each of equal work."),
    )
    .unwrap();
    git(repo, &["commit", "--quiet", "-am", "p07 does 25% more"]);
    (base, comment_only)
}

/// `cargo parprof diff ARGS -o OUT --bin twelve --fail-above 10` in `repo`.
fn paired_diff(exe: &Path, repo: &Path, args: &[&str], out: &Path) -> Output {
    Command::new(exe)
        .current_dir(repo)
        .args(["parprof", "diff", "--bin", "twelve", "--fail-above", "10"])
        .args(args)
        .arg("-o")
        .arg(out)
        // Everything is in the lock file and downloaded already.
        .env("CARGO_NET_OFFLINE", "true")
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .expect("cargo-parprof")
}

fn diff_json(out: &Path, output: &Output) -> Value {
    let text = std::fs::read_to_string(out.join("diff.json")).unwrap_or_else(|e| {
        panic!(
            "no diff.json ({e}):\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    serde_json::from_str(&text).expect("diff.json is JSON")
}

/// The probe rows of `diff.json`, by name.
fn probe_rows(json: &Value) -> Vec<&Value> {
    let rows: Vec<&Value> = (json["rows"].as_array().expect("rows[]").iter())
        .filter(|r| r["kind"] == "probe")
        .collect();
    let mut names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    names.sort();
    let expected: Vec<String> = (1..=12).map(|i| format!("twelve::p{i:02}")).collect();
    assert_eq!(names, expected, "{json:#}");
    rows
}

fn flagged(r: &Value) -> bool {
    ["slower", "faster"].contains(&r["verdict"].as_str().unwrap())
}

#[test]
fn a_comment_diffs_clean_and_a_probe_with_more_work_fails_the_gate() {
    let exe = common::parprof_binary();
    let work = tempfile::tempdir().unwrap();
    let repo = work.path().join("repo");
    let (base, comment_only) = fixture_repository(&repo);
    let _machine = exclusive();

    let out = work.path().join("comment");
    let output = paired_diff(
        &exe,
        &repo,
        &["--base", &base, "--head", &comment_only, "--budget", "60"],
        &out,
    );
    let json = diff_json(&out, &output);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}\n{json:#}");
    for r in probe_rows(&json) {
        assert!(!flagged(r), "a comment changed nothing: {r:#}");
    }
    let pairs = json["pairing"]["pairs"].as_u64().expect("pairing.pairs");
    assert!(pairs >= 4 && pairs.is_multiple_of(2), "{json:#}");
    for side in ["base", "head"] {
        let last = out.join(side).join(format!("run-{pairs}"));
        assert!(last.join("report.json").is_file(), "{}", last.display());
    }
    // The worktrees are gone from the repository once the diff is made.
    let worktrees = git(&repo, &["worktree", "list"]);
    assert_eq!(worktrees.lines().count(), 1, "{worktrees}");

    let out = work.path().join("slower");
    let output = paired_diff(&exe, &repo, &["--base", &base, "--budget", "60"], &out);
    let json = diff_json(&out, &output);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let rows = probe_rows(&json);
    let p07 = rows.iter().find(|r| r["name"] == "twelve::p07").unwrap();
    assert_eq!(p07["verdict"], "slower", "{p07:#}\n{stderr}");
    let change = p07["change"].as_f64().unwrap();
    assert!((0.15..0.40).contains(&change), "about +25%: {p07:#}");
    for r in rows.iter().filter(|r| r["name"] != "twelve::p07") {
        assert!(!flagged(r), "unchanged probe: {r:#}");
    }
    assert_eq!(
        output.status.code(),
        Some(1),
        "`--fail-above 10` fails the step: {stderr}"
    );
    let md = std::fs::read_to_string(out.join("diff.md")).unwrap();
    let headline = md.lines().nth(2).unwrap_or("");
    assert!(
        headline.contains("`twelve::p07` slower") && headline.contains("pairs"),
        "{md}"
    );
}
