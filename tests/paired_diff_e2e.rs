//! `cargo parprof diff --base REV --bin NAME` end to end: a git repository made by the test,
//! holding a program of 12 probes of equal fixed work (parprof-rt by path) and, after them, an
//! unprobed function `region` that calls four functions of fixed work, in three commits — BASE,
//! a head that changes a comment only, and a head whose probe `p07` does 25 % more work, whose
//! `slow_fn` (inside the unchanged `region`) does 3× its work and whose hot `hash_old` is
//! renamed `hash_new`. Both commits are built by the one command and run alternated, pair by
//! pair.
//!
//! Checks: the comment-only head (given as `--head REV`) has no row `slower` or `faster`, no CPU
//! frame judged or marked, and exits 0 under `--fail-above 10`; the other head (the work tree
//! as it is) has `p07` `slower` near +25 %, no other probe flagged, and exits 1; in its
//! `diff-cpu.svg` `slow_fn`'s frame is red and no frame outside `slow_fn` and `p07` is,
//! `hash_new` is marked appeared, and in `diff-cpu-base.svg` `hash_old` is marked vanished.

mod common;

use common::{exclusive, git, repo_root};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// About 10 ms of arithmetic per probe on this project's VM: fixed work, not fixed time.
const UNIT: u64 = 6_000_000;
/// About 25 ms of xorshift steps (a few ns each) per function of `region`: 25 CPU samples a
/// run at the default 999 Hz.
const SPIN: u64 = 10_000_000;

/// How one commit's program differs from the others'.
struct Version<'a> {
    p07_work: &'a str,
    comment: &'a str,
    /// `slow_fn`'s work, in [`SPIN`]s.
    slow: u64,
    /// The name of `region`'s hot function.
    hot: &'a str,
}

/// `region` and its four functions. Each has its own loop of plain operators, so that its
/// samples are its own (a shared helper, or a method such as `wrapping_mul`, would be a frame
/// of its own under it), and its own seed, so that no two are merged into one symbol.
fn region(v: &Version) -> String {
    let function = |name: &str, spins: u64, seed: u64| {
        format!(
            "\n#[inline(never)]\nfn {name}() -> u64 {{\n    let (mut x, mut i) = ({seed}u64, 0u64);\n\
             \x20   let n = std::hint::black_box(SPIN * {spins});\n\
             \x20   while i < n {{\n        x ^= x << 13;\n        x ^= x >> 7;\n        x ^= x << 17;\n\
             \x20       i += 1;\n    }}\n    x\n}}\n"
        )
    };
    let mut src = format!("\nconst SPIN: u64 = {SPIN};\n");
    src.push_str(&function("steady_a", 1, 11));
    src.push_str(&function("slow_fn", v.slow, 13));
    src.push_str(&function("steady_b", 1, 17));
    src.push_str(&function(v.hot, 1, 19));
    src.push_str(&format!(
        "\n#[inline(never)]\nfn region() -> u64 {{\n    steady_a() ^ slow_fn() ^ steady_b() ^ {}()\n}}\n",
        v.hot
    ));
    src
}

/// The program: probes `p01` … `p12`, each `work(UNIT)` but `p07`, whose work is `p07_work`,
/// then [`region`]; `comment` goes above `main`.
fn program(v: &Version) -> String {
    let Version {
        p07_work, comment, ..
    } = *v;
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
    src.push_str(&region(v));
    src.push_str(&format!(
        "\n{comment}\nfn main() {{\n    let x = {} ^ region();\n    println!(\"checksum={{x:x}}\");\n}}\n",
        names
            .iter()
            .map(|n| format!("{n}()"))
            .collect::<Vec<_>>()
            .join(" ^ ")
    ));
    src
}

/// The repository in three commits; returns (BASE, the comment-only head). The work tree is
/// left at the third commit, whose `p07` does 25 % more work, `slow_fn` 3×, and whose
/// `hash_old` is named `hash_new`.
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
    let first = Version {
        p07_work: "UNIT",
        comment: "// Twelve probes.",
        slow: 1,
        hot: "hash_old",
    };
    std::fs::write(&main, program(&first)).unwrap();
    git(repo, &["init", "--quiet"]);
    git(repo, &["add", "."]);
    git(repo, &["commit", "--quiet", "-m", "base"]);
    let base = git(repo, &["rev-parse", "HEAD"]);
    let commented = Version {
        comment: "// Twelve probes, each of equal work.",
        ..first
    };
    std::fs::write(&main, program(&commented)).unwrap();
    git(repo, &["commit", "--quiet", "-am", "a comment"]);
    let comment_only = git(repo, &["rev-parse", "HEAD"]);
    let changed = Version {
        p07_work: "UNIT * 5 / 4",
        slow: 3,
        hot: "hash_new",
        ..commented
    };
    std::fs::write(&main, program(&changed)).unwrap();
    git(
        repo,
        &[
            "commit",
            "--quiet",
            "-am",
            "p07 does 25% more, slow_fn 3x, a rename",
        ],
    );
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

/// The fill of a box not judged changed, and of those marked appeared and vanished.
const WHITE: &str = "rgb(250,250,250)";
const APPEARED: &str = "rgb(120,200,120)";
const VANISHED: &str = "rgb(185,145,220)";

/// A box of a differential flamegraph: its name, tooltip and fill.
struct Drawn {
    name: String,
    title: String,
    fill: String,
}

impl Drawn {
    /// Red: judged slower (inferno's scale, `rgb(255,c,c)` with c under 250).
    fn red(&self) -> bool {
        let c: Vec<&str> = (self.fill.trim_start_matches("rgb(").trim_end_matches(')'))
            .split(',')
            .collect();
        c.len() == 3 && c[0] == "255" && c[1] == c[2] && c[1] != "250"
    }
}

/// The boxes of the SVG `file` of `out`.
fn boxes(out: &Path, file: &str) -> Vec<Drawn> {
    let svg = std::fs::read_to_string(out.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    (svg.split("<g><title>").skip(1))
        .map(|frame| {
            let title = frame[..frame.find("</title>").unwrap()].to_owned();
            let name = title[..title.rfind(" (").unwrap_or(title.len())].to_owned();
            let fill = frame.split(" fill=\"").nth(1).unwrap_or("");
            let fill = fill[..fill.find('"').unwrap_or(0)].to_owned();
            Drawn { name, title, fill }
        })
        .collect()
}

/// The box named `name`.
fn find<'a>(boxes: &'a [Drawn], name: &str) -> &'a Drawn {
    let names: Vec<&str> = boxes.iter().map(|b| b.name.as_str()).collect();
    (boxes.iter().find(|b| b.name == name))
        .unwrap_or_else(|| panic!("no box `{name}` among {names:?}"))
}

/// The CPU frame of `diff.json` whose path ends at `name`, with `verdict`.
fn cpu_frame<'a>(json: &'a Value, name: &str, verdict: &str) -> &'a Value {
    (json["cpu_frames"].as_array().expect("cpu_frames[]").iter())
        .find(|r| r["path"].as_array().and_then(|p| p.last()) == Some(&Value::from(name)))
        .filter(|r| r["verdict"] == verdict)
        .unwrap_or_else(|| panic!("`{name}` not {verdict}: {:#}", json["cpu_frames"]))
}

/// Where the CPU time moved: `slow_fn` slower, and red; no frame outside `slow_fn` and `p07`
/// (which does 25 % more work) judged changed; `hash_old` renamed `hash_new`: vanished from
/// BASE's shape, appeared in HEAD's.
fn check_cpu_frames(out: &Path, json: &Value) {
    let slow = cpu_frame(json, "twelve::slow_fn", "slower");
    let change = slow["change"].as_f64().unwrap();
    assert!((1.2..3.5).contains(&change), "about +200%: {slow:#}");
    let changed: Vec<&Value> = (json["cpu_frames"].as_array().unwrap().iter())
        .filter(|r| flagged(r))
        .collect();
    for r in &changed {
        let path = r["path"].to_string();
        assert!(
            r["verdict"] == "slower" && (path.contains("twelve::slow_fn") || path.contains("p07")),
            "an unchanged frame judged changed: {r:#}"
        );
    }
    let head = boxes(out, "diff-cpu.svg");
    let slow = find(&head, "twelve::slow_fn");
    assert!(
        slow.red() && slow.title.contains("slower"),
        "{}",
        slow.title
    );
    // The tooltip names an inlined frame without its `_[i]`, as inferno does.
    let judged: Vec<&str> = (changed.iter())
        .filter_map(|r| r["path"].as_array()?.last()?.as_str())
        .map(|name| name.trim_end_matches("_[i]"))
        .collect();
    for b in head.iter().filter(|b| b.red()) {
        assert!(
            judged.contains(&b.name.as_str()),
            "red but not judged slower: {}",
            b.title
        );
    }
    cpu_frame(json, "twelve::hash_new", "appeared");
    let new = find(&head, "twelve::hash_new");
    assert!(
        new.fill == APPEARED && new.title.contains("appeared"),
        "{}",
        new.title
    );
    assert!(head.iter().all(|b| b.name != "twelve::hash_old"));
    cpu_frame(json, "twelve::hash_old", "vanished");
    let base = boxes(out, "diff-cpu-base.svg");
    let old = find(&base, "twelve::hash_old");
    assert!(
        old.fill == VANISHED && old.title.contains("vanished"),
        "{}",
        old.title
    );
    let md = std::fs::read_to_string(out.join("diff.md")).unwrap();
    assert!(
        md.contains("### Where the CPU time moved") && md.contains("| `twelve::slow_fn` |"),
        "{md}"
    );
    assert!(
        md.contains("`diff-cpu.svg`") && md.contains("`diff-cpu-base.svg`"),
        "{md}"
    );
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
    // Nor did it move a CPU frame: none judged or marked, every box white (but inferno's root).
    assert_eq!(json["cpu_frames"], serde_json::json!([]), "{json:#}");
    for b in boxes(&out, "diff-cpu.svg")
        .iter()
        .filter(|b| b.name != "all")
    {
        assert_eq!(b.fill, WHITE, "{}", b.title);
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
    check_cpu_frames(&out, &json);
    let console = String::from_utf8_lossy(&output.stdout) + stderr.as_ref();
    assert!(
        console.contains("CPU frames that moved most: `twelve::slow_fn` slower +"),
        "{console}"
    );
    let md = std::fs::read_to_string(out.join("diff.md")).unwrap();
    let headline = md.lines().nth(2).unwrap_or("");
    assert!(
        headline.contains("`twelve::p07` slower") && headline.contains("pairs"),
        "{md}"
    );
}
