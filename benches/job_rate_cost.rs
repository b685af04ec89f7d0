//! What profiling costs a program that makes millions of rayon jobs
//! (`cargo bench --bench job_rate_cost`): the profiler's cost must follow run time and
//! threads, not the job rate.
//!
//! Two unannotated workloads, each run plain (`cargo build --release`, as users build them) and
//! under `cargo parprof`, alternately, over [`ROUNDS`] rounds (the profiling build is made
//! beforehand, so the command's time is a freshness check of cargo, the run, the collection,
//! the analysis and the reports):
//! - `demo_quicksort 12000000 1`: a `rayon::join` quicksort recursing to single elements
//!   (about 16 M jobs);
//! - `one_item_tasks 4000000`: a `par_iter` of 4 M one-item tasks (8 M jobs);
//! - `gain_pairs nested bad 2000000`: 2 M rows of 16 items, each summed by a `par_iter` nested
//!   in the outer `par_iter` over the rows (tens of millions of jobs, each a few ns of work).
//!
//! Printed per workload (medians, with the range): the program's own work time under the
//! profiler ÷ plain (`work_ns=` it prints itself; goals on 2 cores: ≤ 1.2 for the quicksort,
//! ≤ 1.3 for the nested iterators), the same by the CPU time of the work (`cpu_ns=`, every
//! thread's: on a machine busy with other programs the wall time stretches by what they take,
//! the CPU time of a program that keeps its workers busy does not), the whole command ÷ the
//! plain program's wall time (goal ≤ 1.6), the run folder's size (goal ≤ 25 MB), the time
//! `cargo parprof report` takes to analyse the saved run and write every view, the program's
//! waits for the trace writer, and the region's task count in report.json against the one
//! the program counted (must be exact) where it counts them.

mod common;

use cargo_parprof::build::target::BuildOptions;
use common::{build_example, folder_bytes, median, release_profiler, users_release_build};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

const ROUNDS: usize = 3;

struct Workload {
    example: &'static str,
    args: &'static [&'static str],
    /// The tasks the region must have, from what the program printed (`None`: not counted).
    expected_tasks: Option<fn(&str) -> u64>,
    /// The goal for the work's time under the profiler ÷ plain.
    work_goal: f64,
    /// A diagnosis every profiled run must report.
    diagnosis: &'static str,
}

fn printed(stdout: &str, key: &str) -> u64 {
    stdout
        .lines()
        .flat_map(str::split_whitespace)
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
        .unwrap_or_else(|| panic!("the program printed no {key}= in:\n{stdout}"))
}

const WORKLOADS: [Workload; 3] = [
    Workload {
        example: "demo_quicksort",
        args: &["12000000", "1"],
        expected_tasks: Some(|out| 2 * printed(out, "joins") + 1),
        work_goal: 1.2,
        diagnosis: "too_fine_granularity",
    },
    Workload {
        example: "one_item_tasks",
        args: &["4000000"],
        expected_tasks: Some(|out| 2 * (printed(out, "leaves") - 1) + 1),
        work_goal: 1.2,
        diagnosis: "too_fine_granularity",
    },
    Workload {
        example: "gain_pairs",
        args: &["nested", "bad", "2000000"],
        expected_tasks: None,
        work_goal: 1.3,
        diagnosis: "too_fine_granularity",
    },
];

/// The work's wall time and CPU time, in seconds, as the program printed them.
#[derive(Clone, Copy)]
struct Work {
    wall_s: f64,
    cpu_s: f64,
}

fn work_of(stdout: &str) -> Work {
    Work {
        wall_s: printed(stdout, "work_ns") as f64 / 1e9,
        cpu_s: printed(stdout, "cpu_ns") as f64 / 1e9,
    }
}

/// One profiled run's figures.
struct Profiled {
    work: Work,
    wall_s: f64,
    folder_mb: f64,
    report_s: f64,
    tasks: u64,
    expected_tasks: Option<u64>,
    stalls: u64,
    diagnosed: bool,
}

fn main() -> anyhow::Result<()> {
    let profiler = release_profiler()?;
    let opts = BuildOptions::default();
    let scratch = tempfile::tempdir()?;
    for w in &WORKLOADS {
        // Plain: the program as its users build it; the profiler's cost includes its build's
        // flags (frame pointers, aligned functions) and the hooks.
        let plain_exe = users_release_build(w.example)?;
        // The profiling build, made now so that no round pays for it.
        build_example(w.example, &opts)?;
        let mut plain = Vec::new();
        let mut runs = Vec::new();
        for round in 0..ROUNDS {
            plain.push(run_plain(&plain_exe, w.args)?);
            runs.push(run_profiled(
                &profiler,
                w,
                &scratch.path().join(format!("{round}")),
            )?);
        }
        print_figures(w, &plain, &runs);
    }
    Ok(())
}

/// The plain program's work and wall time.
fn run_plain(exe: &Path, args: &[&str]) -> anyhow::Result<(Work, f64)> {
    let started = Instant::now();
    let out = Command::new(exe).args(args).output()?;
    let wall = started.elapsed().as_secs_f64();
    anyhow::ensure!(out.status.success(), "{} failed", exe.display());
    Ok((work_of(&String::from_utf8_lossy(&out.stdout)), wall))
}
fn run_profiled(profiler: &Path, w: &Workload, dir: &Path) -> anyhow::Result<Profiled> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let started = Instant::now();
    let out = Command::new(profiler)
        .args(["parprof", "--example", w.example, "-o"])
        .arg(dir)
        .arg("--")
        .args(w.args)
        .current_dir(root)
        .output()?;
    let wall_s = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    anyhow::ensure!(out.status.success(), "cargo parprof failed: {stderr}");
    let folder_mb = folder_bytes(dir)? as f64 / 1e6;
    let again = dir.with_extension("report");
    let started = Instant::now();
    let status = Command::new(profiler)
        .args(["parprof", "report"])
        .arg(dir)
        .arg("-o")
        .arg(&again)
        .current_dir(root)
        .output()?;
    let report_s = started.elapsed().as_secs_f64();
    anyhow::ensure!(status.status.success(), "cargo parprof report failed");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("report.json"))?)?;
    let regions = report["regions"].as_array().cloned().unwrap_or_default();
    let tasks = regions
        .iter()
        .map(|r| r["tasks"].as_u64().unwrap_or(0))
        .sum();
    let diagnosed = regions.iter().any(|r| {
        r["diagnoses"]
            .as_array()
            .is_some_and(|d| d.iter().any(|d| d["code"] == w.diagnosis))
    });
    Ok(Profiled {
        work: work_of(&stdout),
        wall_s,
        folder_mb,
        report_s,
        tasks,
        expected_tasks: w.expected_tasks.map(|count| count(&stdout)),
        stalls: report["buffer_stalls"]["count"].as_u64().unwrap_or(0),
        diagnosed,
    })
}

fn range(v: &[f64]) -> String {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(0.0, f64::max);
    format!("{:.2} ({min:.2}–{max:.2})", median(v.to_vec()))
}

fn print_figures(w: &Workload, plain: &[(Work, f64)], runs: &[Profiled]) {
    let ratios = |f: fn(&Profiled, &(Work, f64)) -> f64| -> Vec<f64> {
        runs.iter().zip(plain).map(|(r, p)| f(r, p)).collect()
    };
    let work_ratio = ratios(|r, p| r.work.wall_s / p.0.wall_s);
    let cpu_ratio = ratios(|r, p| r.work.cpu_s / p.0.cpu_s);
    let wall_ratio = ratios(|r, p| r.wall_s / p.1);
    let pick = |f: fn(&Profiled) -> f64| runs.iter().map(f).collect::<Vec<f64>>();
    let plain_pick = |f: fn(&(Work, f64)) -> f64| plain.iter().map(f).collect::<Vec<f64>>();
    println!("{} {}:", w.example, w.args.join(" "));
    println!(
        "  plain: work {} s (CPU {} s), wall {} s",
        range(&plain_pick(|p| p.0.wall_s)),
        range(&plain_pick(|p| p.0.cpu_s)),
        range(&plain_pick(|p| p.1))
    );
    println!(
        "  under cargo parprof: work {} s (CPU {} s), command {} s",
        range(&pick(|r| r.work.wall_s)),
        range(&pick(|r| r.work.cpu_s)),
        range(&pick(|r| r.wall_s))
    );
    println!(
        "  work ÷ plain work      {} (goal ≤ {})",
        range(&work_ratio),
        w.work_goal
    );
    println!("  work CPU ÷ plain CPU   {}", range(&cpu_ratio));
    println!(
        "  command ÷ plain wall   {} (goal ≤ 1.6)",
        range(&wall_ratio)
    );
    println!(
        "  run folder             {} MB (goal ≤ 25)",
        range(&pick(|r| r.folder_mb))
    );
    println!(
        "  report of the saved run {} s",
        range(&pick(|r| r.report_s))
    );
    for r in runs {
        let tasks = match r.expected_tasks {
            Some(expected) if expected == r.tasks => format!("{} (exact)", r.tasks),
            Some(expected) => format!("{} against the program's {expected} (DIFFERENT)", r.tasks),
            None => r.tasks.to_string(),
        };
        println!(
            "  tasks {tasks}; writer waits {}; {} {}",
            r.stalls,
            w.diagnosis,
            if r.diagnosed {
                "diagnosed"
            } else {
                "NOT diagnosed"
            }
        );
    }
}
