//! parprof's "× faster if fixed" checked against the fix (`cargo bench --bench
//! predicted_gain`): pairs of programs written like users' code (`examples/gain_pairs.rs`) —
//! the task shape parprof diagnoses and the fix it advises, the same algorithm on both sides —
//! run plain (built as users build, `cargo build --release`), the two sides alternated over
//! [`ROUNDS`] rounds, so that a busy machine's drift falls on both. The bad side is also recorded with `cargo-parprof record` ([`PROFILED`]
//! times): its predicted gain is the `speedup_if_fixed` of the region's first diagnosis of the
//! schedule (oversubscription, the machine's, aside), 1.0 when there is none.
//!
//! The fixed `map_reduce` takes the `with_min_len(n)` the recordings advised (the median n).
//! Printed per pair: the predicted gain (median, range), the real gain (median of the plain
//! bad ÷ plain fix work times of each round, range), the same by the CPU time the work took
//! (every thread's: a machine busy with other programs stretches the wall time of both sides,
//! not their CPU time; where both sides keep every worker busy — too-fine tasks — it is the
//! gain an idle machine shows, and where the fix fills idle workers it is about 1), and
//! predicted ÷ real (wall) against the goal of
//! 0.85–1.18. `PREDICTED_GAIN_WORKERS` sets the pool size (default 2);
//! `PREDICTED_GAIN_PAIRS` a comma-separated subset of the pairs.

mod common;

use cargo_parprof::build::target::BuildOptions;
use common::{build_example, median, release_profiler, users_release_build};
use std::path::Path;
use std::process::Command;

const ROUNDS: usize = 5;
const PROFILED: usize = 3;
const GOAL: (f64, f64) = (0.85, 1.18);
const PAIRS: [&str; 5] = [
    "quicksort",
    "map_reduce",
    "nested",
    "imbalance",
    "spawn_loop",
];

fn main() -> anyhow::Result<()> {
    let workers = std::env::var("PREDICTED_GAIN_WORKERS").unwrap_or_else(|_| "2".into());
    let chosen = std::env::var("PREDICTED_GAIN_PAIRS").unwrap_or_default();
    let profiler = release_profiler()?;
    let opts = BuildOptions::default();
    // The fix's gain is the one the user's own build shows: the profiling build's frame
    // pointers and aligned functions make the sequential inner loop of `nested` 1.7× slower.
    let plain = users_release_build("gain_pairs")?;
    let hooked = build_example("gain_pairs", &opts)?;
    let scratch = tempfile::tempdir()?;
    println!(
        "pair         predicted (range)        real (range)             real by CPU time  predicted ÷ real  diagnosis"
    );
    for pair in PAIRS
        .iter()
        .filter(|p| chosen.is_empty() || chosen.split(',').any(|c| c == **p))
    {
        let mut predicted = Vec::new();
        let mut codes = Vec::new();
        let mut min_lens = Vec::new();
        for round in 0..PROFILED {
            let dir = scratch.path().join(format!("{pair}-{round}"));
            let p = predicted_gain(&profiler, &hooked, pair, &workers, &dir)?;
            predicted.push(p.gain);
            codes.push(p.code);
            min_lens.extend(p.min_len);
        }
        let min_len = if min_lens.is_empty() {
            "256".to_owned()
        } else {
            median(min_lens).to_string()
        };
        let (mut real, mut real_cpu) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let bad = work_s(&plain, pair, "bad", &workers, &min_len)?;
            let fix = work_s(&plain, pair, "fix", &workers, &min_len)?;
            real.push(bad.wall / fix.wall);
            real_cpu.push(bad.cpu / fix.cpu);
        }
        print_pair(pair, &predicted, &real, &real_cpu, &codes);
        if *pair == "map_reduce" {
            println!("             (fixed with `.with_min_len({min_len})`, as advised)");
            print_item_overlap(&plain, MAP_REDUCE_ITEM_UNITS)?;
        }
    }
    Ok(())
}

/// What one plain run of a side took for its work, in seconds.
struct Work {
    wall: f64,
    cpu: f64,
}

/// The work times one plain run of a side prints.
fn work_s(
    exe: &Path,
    pair: &str,
    shape: &str,
    workers: &str,
    min_len: &str,
) -> anyhow::Result<Work> {
    let out = Command::new(exe)
        .args([pair, shape, default_size(pair), workers, min_len])
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "{} {pair} {shape} failed",
        exe.display()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    Ok(Work {
        wall: printed(&stdout, "work_ns") / 1e9,
        cpu: printed(&stdout, "cpu_ns") / 1e9,
    })
}

/// Each pair's size: runs of a few tenths of a second, so that a recording has hundreds of CPU
/// samples in the region (the scheduler's share and the hooks' time rest on them).
fn default_size(pair: &str) -> &'static str {
    match pair {
        "quicksort" => "4000000",
        "map_reduce" => "2000000",
        "nested" => "2000000",
        "imbalance" => "3",
        _ => "8000",
    }
}

/// The steps of `work` in one `map_reduce` item (`examples/gain_pairs.rs`).
const MAP_REDUCE_ITEM_UNITS: &str = "60";

/// Prints how much faster the core runs an item's work back to back than alone: a part of
/// the fix's real gain that is not the schedule's, so not in the prediction. Printed for
/// `map_reduce`, whose item (about 250 cycles of one dependent chain) is longer than the core
/// can overlap with the scheduler's code after it; the nested rows' cells (about 40 cycles) are
/// overlapped with it in the bad shape already.
fn print_item_overlap(exe: &Path, units: &str) -> anyhow::Result<()> {
    let out = Command::new(exe).args(["item_overlap", units]).output()?;
    anyhow::ensure!(
        out.status.success(),
        "{} item_overlap failed",
        exe.display()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (alone, back_to_back) = (
        printed(&stdout, "alone_ns"),
        printed(&stdout, "back_to_back_ns"),
    );
    println!(
        "             (an item's work: {alone:.1} ns alone, {back_to_back:.1} ns back to back on one thread: \
         up to {:.2}× of the real gain is the core overlapping independent items, not the schedule)",
        alone / back_to_back
    );
    Ok(())
}

fn printed(stdout: &str, key: &str) -> f64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
        .unwrap_or_else(|| panic!("the program printed no {key}= in:\n{stdout}"))
}

/// What a recording of the bad side predicts.
struct Prediction {
    gain: f64,
    /// The diagnosis' code ("none": predicted 1.0).
    code: String,
    /// The `with_min_len(n)` its advice gives, if any.
    min_len: Option<f64>,
}

/// Records the bad side and reads the predicted gain of its longest region's first diagnosis
/// of the schedule.
fn predicted_gain(
    profiler: &Path,
    exe: &Path,
    pair: &str,
    workers: &str,
    dir: &Path,
) -> anyhow::Result<Prediction> {
    let out = Command::new(profiler)
        .arg("record")
        .arg("-o")
        .arg(dir)
        .arg("--")
        .arg(exe)
        .args([pair, "bad", default_size(pair), workers])
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "cargo-parprof record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("report.json"))?)?;
    let regions = report["regions"].as_array().cloned().unwrap_or_default();
    let longest = regions
        .iter()
        .max_by_key(|r| r["elapsed_ns"].as_u64().unwrap_or(0));
    let diagnosis = longest.and_then(|r| {
        r["diagnoses"]
            .as_array()?
            .iter()
            .find(|d| d["code"] != "oversubscription")
            .cloned()
    });
    Ok(match diagnosis {
        Some(d) => Prediction {
            gain: d["impact"]["speedup_if_fixed"].as_f64().unwrap_or(1.0),
            code: d["code"].as_str().unwrap_or("?").to_owned(),
            min_len: d["advice"].as_str().and_then(|a| {
                let n = a.split("with_min_len(").nth(1)?.split(')').next()?;
                n.parse().ok()
            }),
        },
        None => Prediction {
            gain: 1.0,
            code: "none".to_owned(),
            min_len: None,
        },
    })
}

fn range(v: &[f64]) -> String {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(0.0, f64::max);
    format!("{:.2} ({min:.2}–{max:.2})", median(v.to_vec()))
}

fn print_pair(pair: &str, predicted: &[f64], real: &[f64], real_cpu: &[f64], codes: &[String]) {
    let ratio = median(predicted.to_vec()) / median(real.to_vec());
    let verdict = if (GOAL.0..=GOAL.1).contains(&ratio) {
        "within goal"
    } else {
        "OUTSIDE goal"
    };
    println!(
        "{pair:<12} {:<24} {:<24} {:<17} {ratio:.2} ({verdict})  {}",
        range(predicted),
        range(real),
        range(real_cpu),
        codes.join(", ")
    );
}
