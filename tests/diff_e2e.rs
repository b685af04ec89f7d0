//! `cargo parprof diff` end to end: real runs of a program whose second step is made twice as
//! slow by an argument, compared with the noise rule — unchanged code recorded five times
//! under a load on one core diffs clean, the slowed step is `slower` — and the errors on input
//! that is not a pair of runs of one program.

mod common;

use common::{cargo_parprof, exclusive, parprof_while_holding};
use serde_json::Value;
use std::path::Path;
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// `cargo parprof --example two_steps -o <dir> -- <scale>`.
fn record(dir: &Path, scale: &str) {
    let run = parprof_while_holding(&["--example", "two_steps", "--", scale], &[]);
    assert!(run.output.status.success(), "stderr:\n{}", run.stderr());
    // The run went to a temporary folder; keep it as `dir`.
    std::fs::create_dir_all(dir.parent().expect("a parent")).expect("the side's folder");
    std::fs::rename(run.dir.path(), dir).expect("keep the run");
    std::mem::forget(run.dir);
}

/// A thread that keeps CPU 0 busy until dropped, as another job on a shared CI machine does.
struct LoadOnOneCore {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LoadOnOneCore {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            // SAFETY: a zeroed cpu_set_t is a valid empty set; 0 names the calling thread.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(0, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            }
            let mut x = 1u64;
            while !flag.load(Ordering::Relaxed) {
                for _ in 0..100_000 {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            }
        });
        LoadOnOneCore {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for LoadOnOneCore {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Runs per side. With three, a VM's slow phase that caught two runs of one side (21.9, 20.9,
/// 17.5 ms against 16.2–16.6 ms) read as a `faster` verdict for the unchanged step.
const RUNS: usize = 5;

/// [`RUNS`] runs of each side (`run-1` …), of `two_steps` with the given scale, taken
/// round-robin: a drift of the machine during the test then reaches every side alike, as it
/// would not if one side's runs all came first (seen: every base run 6 % slower than every
/// head run, a `faster` verdict for the unchanged step). Each round starts one side later, so
/// that no side holds the same place in every round.
fn record_round_robin(sides: &[(&Path, &str)]) {
    for round in 0..RUNS {
        for k in 0..sides.len() {
            let (dir, scale) = sides[(k + round) % sides.len()];
            record(&dir.join(format!("run-{}", round + 1)), scale);
        }
    }
}

fn diff_json(out: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("diff.json")).unwrap()).unwrap()
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

/// The no-op check: the same code recorded [`RUNS`] times under a load on one core; each
/// pair of recordings diffs clean (no `slower`/`faster`, exit 0 with `--fail-above`), and a step
/// made twice as slow is `slower` and fails the gate.
#[test]
fn unchanged_code_under_load_diffs_clean_and_a_slowed_step_fails() {
    let _machine = exclusive();
    let work = tempfile::tempdir().unwrap();
    let side = |name: &str| work.path().join(name);
    let (a, b, c, slow) = (side("a"), side("b"), side("c"), side("slow"));
    {
        let _load = LoadOnOneCore::start();
        record_round_robin(&[(&a, "1"), (&b, "1"), (&c, "1"), (&slow, "2")]);
    }
    let out = work.path().join("out");
    for (base, head) in [(&a, &b), (&b, &c), (&a, &c)] {
        let output = diff(
            &[
                base.to_str().unwrap(),
                head.to_str().unwrap(),
                "--fail-above",
                "20",
            ],
            &out,
        );
        let json = diff_json(&out);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{stderr}\n{json:#}");
        for r in json["rows"].as_array().unwrap() {
            assert!(
                !["slower", "faster"].contains(&r["verdict"].as_str().unwrap()),
                "unchanged code: {r:#}"
            );
        }
        // Recorded round robin: the sides' middles are seconds apart, and nothing is said.
        let apart = json["recorded_apart_s"].as_f64().expect("recorded_apart_s");
        assert!(apart < 120.0, "{json:#}");
        assert!(!stderr.contains("far apart"), "{stderr}");
    }
    let output = diff(
        &[
            a.to_str().unwrap(),
            slow.to_str().unwrap(),
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
    let json = diff_json(&out);
    assert_eq!(json["schema"], "parprof-diff/2");
    let solve = row(&json, "two_steps::solve");
    assert_eq!(solve["verdict"], "slower", "{solve:#}");
    let change = solve["change"].as_f64().unwrap();
    assert!((0.6..1.4).contains(&change), "about +100%: {solve:#}");
    assert_eq!(solve["base_calls"], 1.0, "{solve:#}");
    assert_eq!(solve["calls_changed"], false, "{solve:#}");
    let parse = row(&json, "two_steps::parse");
    assert!(
        ["within_noise", "noisy"].contains(&parse["verdict"].as_str().unwrap()),
        "{parse:#}"
    );
    // Rows are ordered by verdict: the slowed step first.
    assert_eq!(json["rows"][0]["name"], "two_steps::solve", "{json:#}");
    assert_eq!(
        (json["base_runs"].as_u64(), json["head_runs"].as_u64()),
        (Some(RUNS as u64), Some(RUNS as u64))
    );
    let md = std::fs::read_to_string(out.join("diff.md")).unwrap();
    assert!(md.contains("`two_steps::solve`"), "{md}");
    assert!(md.contains("| 1 call |"), "the call count: {md}");
    assert!(md.contains("Holm"), "the rule: {md}");
    for svg in ["diff-active.svg", "diff-cpu.svg"] {
        let text = std::fs::read_to_string(out.join(svg)).unwrap();
        assert!(text.contains("<svg"), "{svg}");
        assert!(text.contains("solve"), "{svg} shows the changed step");
        assert!(
            text.contains(&format!("{RUNS} runs of BASE, {RUNS} of HEAD")),
            "{svg} states the runs"
        );
    }

    // The same runs of `a`, said to have started ten minutes later: the sides were recorded far
    // apart, which diff.md and the console say once, with the paired command.
    let later = work.path().join("later");
    for i in 1..=RUNS {
        let run = format!("run-{i}");
        copy_run(&a.join(&run), &later.join(&run), |report| {
            let started = &mut report["target"]["started_unix_ms"];
            *started = (started.as_u64().expect("a start time") + 600_000).into();
        });
    }
    let output = diff(&[a.to_str().unwrap(), later.to_str().unwrap()], &out);
    let console = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{console}");
    assert_eq!(
        console.matches("10.0 minutes apart").count(),
        1,
        "{console}"
    );
    let md = std::fs::read_to_string(out.join("diff.md")).unwrap();
    assert_eq!(md.matches("10.0 minutes apart").count(), 1, "{md}");
    assert!(md.contains("`cargo parprof diff --base REV"), "{md}");
    assert_eq!(diff_json(&out)["recorded_apart_s"], 600.0);

    // Bad input: a clear error, and nothing written.
    let nothing = work.path().join("nothing");
    let not_a_run = diff(
        &[work.path().to_str().unwrap(), slow.to_str().unwrap()],
        &nothing,
    );
    assert_bad_input(&not_a_run, "not a run folder", &nothing);
    let other = work.path().join("other");
    copy_run(&slow.join("run-1"), &other, |report| {
        report["target"]["name"] = "some_other_program".into();
    });
    let different = diff(&[a.to_str().unwrap(), other.to_str().unwrap()], &nothing);
    assert_bad_input(&different, "different programs", &nothing);
    let damaged = work.path().join("damaged");
    copy_run(&slow.join("run-1"), &damaged, |_| {});
    std::fs::write(damaged.join("report.json"), "{\"schema\": \"parprof-rep").unwrap();
    let broken = diff(&[a.to_str().unwrap(), damaged.to_str().unwrap()], &nothing);
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
