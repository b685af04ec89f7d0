//! What profiling a rayon region costs the program (`cargo bench --bench rayon_overhead`): the
//! region's wall time under `cargo parprof` ÷ its wall time without parprof. Goal ≤ 1.05 for
//! the well-tuned workload (`rayon_tuned`); for the too-fine one (`rayon_too_fine`, where
//! instrumentation costs most: a task pair per few nanoseconds of work) the figure is reported
//! and its diagnosis checked.
//!
//! Each example is built as `cargo parprof` builds it, and run these ways, in turns:
//! - **uninstrumented**: built with `parprof-rt/off`, which compiles the region hooks out —
//!   the baseline;
//! - **not profiled**: the profiled binary run directly, without `PARPROF_OUT`: every hook is
//!   one load and branch;
//! - **traced only**: the same with `PARPROF_OUT`, without the profiler: what recording the
//!   trace costs, alone;
//! - **under parprof, no counters**: as `cargo parprof --counters none` runs it;
//! - **under parprof**: launched and collected as `cargo parprof` does by default (trace,
//!   kernel records, the default counters), then analysed, to check the diagnoses.
//!
//! Times are medians over the rounds (minimum in parentheses) of the region's wall time as the
//! example measures it (`region_ns=`), of the region's elapsed time in the trace where there
//! is one, and of the process's wall time. The runtime starts at the program's first event —
//! the region's begin —, so the example's figure includes the runtime's one-time start-up
//! (clock and overhead calibration) and the trace's figure does not.

use cargo_parprof::analysis::{self, AnalysisOptions};
use cargo_parprof::build::target::BuildOptions;
use cargo_parprof::pipeline::trace_file;
use cargo_parprof::record::collect::CollectOptions;
use cargo_parprof::record::launch;
use cargo_parprof::recording::kernel_records::KernelRecords;
mod common;

use common::{build_example, build_example_unhooked, median};
use std::ffi::OsString;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const ROUNDS: usize = 9;
const GOAL: f64 = 1.05;

struct Workload {
    example: &'static str,
    /// The diagnosis codes every profiled run must report; when empty, it must report none.
    expected: &'static [&'static str],
}

const WORKLOADS: [Workload; 2] = [
    Workload {
        example: "rayon_tuned",
        expected: &[],
    },
    Workload {
        example: "rayon_too_fine",
        expected: &["too_fine_granularity"],
    },
];

/// One run's wall times, in s.
struct Times {
    /// The region as the example measures it.
    region: f64,
    /// The region's elapsed time in the trace, when there is one.
    region_in_trace: Option<f64>,
    process: f64,
}

/// Builds `example` with `features` and copies the executable to `dir`: the builds with and
/// without `parprof-rt/off` leave it at the same path.
fn build(example: &str, features: &[&str], dir: &Path) -> anyhow::Result<PathBuf> {
    let opts = BuildOptions {
        features: features.iter().map(|f| (*f).to_owned()).collect(),
        ..BuildOptions::default()
    };
    // The baseline is the program as its users build it: plain rayon-core, probes compiled out.
    let built = if features.contains(&"parprof-rt/off") {
        build_example_unhooked(example, &opts)?
    } else {
        build_example(example, &opts)?
    };
    let copy = dir.join(format!(
        "{example}-{}",
        features.join("-").replace('/', "_")
    ));
    std::fs::copy(&built, &copy)?;
    Ok(copy)
}

/// The `region_ns=` the example printed, in s.
fn printed_region(stdout: &str) -> anyhow::Result<f64> {
    stdout
        .split_whitespace()
        .find_map(|w| w.strip_prefix("region_ns=")?.parse::<f64>().ok())
        .map(|ns| ns / 1e9)
        .ok_or_else(|| anyhow::anyhow!("the example printed no region_ns=: {stdout}"))
}

/// Analyses the trace in `dir`: the regions' elapsed time in s, and their diagnosis codes.
fn analyse(
    dir: &Path,
    kernel: &KernelRecords,
    child_pid: Option<u32>,
) -> anyhow::Result<(f64, Vec<String>)> {
    let opts = AnalysisOptions {
        child_pid,
        ..AnalysisOptions::default()
    };
    let analysis = analysis::analyse(trace_file::open(dir, &opts)?, kernel, &opts);
    let elapsed_ns: u64 = analysis.regions.iter().map(|r| r.elapsed_ns).sum();
    let codes = analysis
        .regions
        .iter()
        .flat_map(|r| &r.diagnoses)
        .map(|d| d.code.as_str().to_owned())
        .collect();
    Ok((elapsed_ns as f64 / 1e9, codes))
}

/// Runs `exe` directly, without the profiler; with `trace`, records a trace (`PARPROF_OUT`).
fn run_plain(exe: &Path, trace: bool) -> anyhow::Result<Times> {
    let trace_dir = tempfile::tempdir()?;
    let mut command = Command::new(exe);
    if trace {
        command.env("PARPROF_OUT", trace_dir.path());
    } else {
        command.env_remove("PARPROF_OUT");
    }
    let start = Instant::now();
    let output = command.stderr(Stdio::inherit()).output()?;
    let process = start.elapsed().as_secs_f64();
    anyhow::ensure!(output.status.success(), "{} failed", exe.display());
    let region_in_trace = if trace {
        Some(analyse(trace_dir.path(), &KernelRecords::default(), None)?.0)
    } else {
        None
    };
    Ok(Times {
        region: printed_region(&String::from_utf8_lossy(&output.stdout))?,
        region_in_trace,
        process,
    })
}

/// Runs `exe` as `cargo parprof` does and analyses the run; returns the times and the
/// diagnosis codes of its regions.
fn run_profiled(exe: &Path, collect: &CollectOptions) -> anyhow::Result<(Times, Vec<String>)> {
    let out = tempfile::tempdir()?;
    // The launcher hands the child the bench's own stdout: point that at a file for the run.
    let mut captured = tempfile::tempfile()?;
    std::io::stdout().flush()?;
    // SAFETY: plain descriptor calls on descriptors this process owns (1, the temporary file
    // and the copy of 1 made here); nothing else in the bench writes to stdout meanwhile.
    let saved_stdout = unsafe { libc::dup(1) };
    anyhow::ensure!(saved_stdout >= 0, "dup(1) failed");
    // SAFETY: as above.
    unsafe { libc::dup2(captured.as_raw_fd(), 1) };
    let outcome = launch::run_and_collect(
        exe,
        &[],
        &[(
            OsString::from("PARPROF_OUT"),
            out.path().as_os_str().to_owned(),
        )],
        None,
        collect,
    );
    // SAFETY: as above; restores stdout whether the run succeeded or not.
    unsafe {
        libc::dup2(saved_stdout, 1);
        libc::close(saved_stdout);
    }
    let outcome = outcome?;
    anyhow::ensure!(outcome.exit.success(), "{} {}", exe.display(), outcome.exit);
    let mut stdout = String::new();
    captured.rewind()?;
    captured.read_to_string(&mut stdout)?;
    let (region_in_trace, codes) = analyse(out.path(), &outcome.kernel, Some(outcome.child_pid))?;
    Ok((
        Times {
            region: printed_region(&stdout)?,
            region_in_trace: Some(region_in_trace),
            process: outcome.wall_ns as f64 / 1e9,
        },
        codes,
    ))
}

fn minimum(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

/// "123.4 ms (120.1 ms)": median and minimum; blank without figures.
fn millis(v: &[f64]) -> String {
    if v.is_empty() {
        return format!("{:20}", "");
    }
    format!(
        "{:8.1} ms ({:5.1} ms)",
        median(v.to_vec()) * 1e3,
        minimum(v) * 1e3
    )
}

fn verdict(ratio: f64) -> &'static str {
    if ratio <= GOAL { "met" } else { "NOT met" }
}

fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut summary = vec![format!(
        "rayon regions under parprof: {ROUNDS} rounds of each example (2 workers); wall time, median (minimum)"
    )];
    let without_counters = CollectOptions {
        counters: None,
        ..CollectOptions::default()
    };
    for w in &WORKLOADS {
        let uninstrumented = build(w.example, &["parprof-rt/off"], dir.path())?;
        let instrumented = build(w.example, &[], dir.path())?;
        let [
            mut off,
            mut plain,
            mut traced,
            mut no_counters,
            mut profiled,
        ]: [Vec<Times>; 5] = Default::default();
        let mut right_diagnoses = 0;
        let mut wrong = Vec::new();
        for round in 0..ROUNDS {
            // Rotate the order, so that a trend of the machine hits every variant alike.
            for variant in (0..5).map(|i| (i + round) % 5) {
                match variant {
                    0 => off.push(run_plain(&uninstrumented, false)?),
                    1 => plain.push(run_plain(&instrumented, false)?),
                    2 => traced.push(run_plain(&instrumented, true)?),
                    3 => no_counters.push(run_profiled(&instrumented, &without_counters)?.0),
                    _ => {
                        let (times, codes) =
                            run_profiled(&instrumented, &CollectOptions::default())?;
                        let right = if w.expected.is_empty() {
                            codes.is_empty()
                        } else {
                            w.expected.iter().all(|c| codes.iter().any(|d| d == c))
                        };
                        if right {
                            right_diagnoses += 1;
                        } else {
                            wrong.push(codes);
                        }
                        profiled.push(times);
                    }
                }
            }
        }
        let regions = |v: &[Times]| v.iter().map(|t| t.region).collect::<Vec<f64>>();
        let in_trace = |v: &[Times]| {
            v.iter()
                .filter_map(|t| t.region_in_trace)
                .collect::<Vec<f64>>()
        };
        let processes = |v: &[Times]| v.iter().map(|t| t.process).collect::<Vec<f64>>();
        let baseline = median(regions(&off));
        summary.push(format!(
            "\nexample {}\n  {:32} {:>26} {:>26} {:>26}",
            w.example, "", "region (example's clock)", "region (trace)", "process"
        ));
        for (label, runs) in [
            ("uninstrumented (parprof-rt/off)", &off),
            ("instrumented, not profiled", &plain),
            ("traced only (PARPROF_OUT)", &traced),
            ("under parprof, no counters", &no_counters),
            ("under parprof", &profiled),
        ] {
            summary.push(format!(
                "  {label:32} {:>26} {:>26} {:>26}",
                millis(&regions(runs)),
                millis(&in_trace(runs)),
                millis(&processes(runs))
            ));
        }
        let ratio = median(regions(&profiled)) / baseline;
        let ratio_in_trace = median(in_trace(&profiled)) / baseline;
        summary.push(format!(
            "  region under parprof / uninstrumented: {ratio:.3} with the runtime's start-up, \
             {ratio_in_trace:.3} without (region timed by the trace); goal ≤ {GOAL}: {}, {}",
            verdict(ratio),
            verdict(ratio_in_trace)
        ));
        summary.push(format!(
            "  runtime start-up inside the first region: {:.1} ms (example's clock − trace, under parprof)",
            (median(regions(&profiled)) - median(in_trace(&profiled))) * 1e3
        ));
        for (label, runs) in [
            ("not profiled", &plain),
            ("traced only", &traced),
            ("no counters", &no_counters),
        ] {
            summary.push(format!(
                "  region {label:12} / uninstrumented: {:.3}",
                median(regions(runs)) / baseline
            ));
        }
        summary.push(format!(
            "  process under parprof / uninstrumented: {:.3}",
            median(processes(&profiled)) / median(processes(&off))
        ));
        summary.push(format!(
            "  diagnoses {:?} in {right_diagnoses} of {ROUNDS} profiled runs{}",
            w.expected,
            if wrong.is_empty() {
                String::new()
            } else {
                format!("; the others: {wrong:?}")
            }
        ));
    }
    println!("\n{}", summary.join("\n"));
    Ok(())
}
