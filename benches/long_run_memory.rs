//! The profiler's memory and time on a long run (`cargo bench --bench long_run_memory`, or
//! `-- SECONDS` for another length than 60 s): they must follow what the run recorded, never
//! grow with its length (goal: the peaks of `record` and of `report` at 60 s within 1.2× of
//! theirs at 15 s, and at most 150 MB).
//!
//! `examples/long_run.rs` (a parallel sort and a probed scoring pass, round after round, and a
//! logger thread) is recorded by `cargo-parprof record` for a quarter of the length, then for
//! the whole length, so that growth with run length shows. Printed for each:
//! - the profiler's peak resident memory (`VmHWM` of the `cargo-parprof` process, read every
//!   10 ms until it exits: a high-water mark, so only a peak in its last 10 ms could be
//!   missed) — the program's own memory is not in it;
//! - the time from the program's exit to the profiler's (symbolising, saving `records.ppr`,
//!   the analysis and every report);
//! - the run folder's size and its `records.ppr`;
//! - `cargo-parprof report` of the saved run: its time and its peak memory.

mod common;

use cargo_parprof::build::target::BuildOptions;
use common::{build_example, folder_bytes, release_profiler};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const DEFAULT_SECONDS: u64 = 60;
const GOAL_MB: f64 = 150.0;
const GOAL_GROWTH: f64 = 1.2;

/// One command's figures.
struct Measured {
    wall_s: f64,
    peak_mb: f64,
    /// From the program's exit (the profiler says so on stderr) to the profiler's.
    after_program_s: Option<f64>,
}

/// One length's figures.
struct Figures {
    seconds: u64,
    record: Measured,
    folder_mb: f64,
    records_mb: f64,
    report: Measured,
}

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; a number is the run's length.
    let seconds = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<u64>().ok())
        .unwrap_or(DEFAULT_SECONDS)
        .max(1);
    let profiler = release_profiler()?;
    let exe = build_example("long_run", &BuildOptions::default())?;
    let scratch = tempfile::tempdir()?;
    let mut all = Vec::new();
    for length in [(seconds / 4).max(1), seconds] {
        let figures = measure(&profiler, &exe, length, scratch.path())?;
        print_figures(&figures);
        all.push(figures);
    }
    if let [short, long] = &all[..] {
        for (command, short_mb, long_mb) in [
            ("record", short.record.peak_mb, long.record.peak_mb),
            ("report", short.report.peak_mb, long.report.peak_mb),
        ] {
            let growth = long_mb / short_mb;
            let met = growth <= GOAL_GROWTH && long_mb <= GOAL_MB;
            println!(
                "{command}: peak ×{growth:.2} for ×{:.1} the run length; {} MB at {} s (goal \
                 ≤ ×{GOAL_GROWTH} and ≤ {GOAL_MB} MB: {})",
                long.seconds as f64 / short.seconds as f64,
                long_mb.round(),
                long.seconds,
                if met { "met" } else { "NOT met" }
            );
        }
    }
    Ok(())
}

fn measure(profiler: &Path, exe: &Path, seconds: u64, scratch: &Path) -> anyhow::Result<Figures> {
    let dir = scratch.join(format!("run-{seconds}s"));
    let mut record = Command::new(profiler);
    record
        .arg("record")
        .arg("-o")
        .arg(&dir)
        .arg("--")
        .arg(exe)
        .arg(seconds.to_string());
    let record = run_watched(record)?;
    let again = scratch.join(format!("report-{seconds}s"));
    let mut report = Command::new(profiler);
    report
        .args(["parprof", "report"])
        .arg(&dir)
        .arg("-o")
        .arg(&again);
    let report = run_watched(report)?;
    Ok(Figures {
        seconds,
        record,
        folder_mb: folder_bytes(&dir)? as f64 / 1e6,
        records_mb: std::fs::metadata(dir.join("records.ppr"))?.len() as f64 / 1e6,
        report,
    })
}

/// Runs `cmd` to its end, reading its peak memory as it goes.
fn run_watched(mut cmd: Command) -> anyhow::Result<Measured> {
    let started = Instant::now();
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn()?;
    let stderr = child.stderr.take().expect("piped");
    // The profiler says when the program ended; the lines are kept for an error.
    let reader = std::thread::spawn(move || {
        let mut program_ended = None;
        let mut lines = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.starts_with("parprof: the target ") {
                program_ended = Some(Instant::now());
            }
            lines.push(line);
        }
        (program_ended, lines)
    });
    let status_file = PathBuf::from(format!("/proc/{}/status", child.id()));
    let mut peak_kib = 0;
    let status = loop {
        // Read before checking for the exit: a zombie has no memory left to report.
        if let Some(kib) = high_water_kib(&status_file) {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let ended = Instant::now();
    let (program_ended, lines) = reader.join().expect("the stderr reader");
    anyhow::ensure!(
        status.success(),
        "{cmd:?} failed ({status}):\n{}",
        lines.join("\n")
    );
    Ok(Measured {
        wall_s: ended.duration_since(started).as_secs_f64(),
        peak_mb: peak_kib as f64 * 1024.0 / 1e6,
        after_program_s: program_ended.map(|t| ended.duration_since(t).as_secs_f64()),
    })
}

/// `VmHWM` (peak resident set) of a process, in KiB.
fn high_water_kib(status_file: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(status_file).ok()?;
    let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn print_figures(f: &Figures) {
    let after = f
        .record
        .after_program_s
        .map_or_else(|| "?".to_owned(), |s| format!("{s:.2}"));
    println!("long_run {} s:", f.seconds);
    println!(
        "  cargo-parprof record: peak {:.0} MB, {:.1} s in all, {after} s after the program \
         ended (symbolise, save, analyse, report)",
        f.record.peak_mb, f.record.wall_s
    );
    println!(
        "  run folder {:.1} MB (records.ppr {:.1} MB)",
        f.folder_mb, f.records_mb
    );
    println!(
        "  report of the saved run: {:.2} s, peak {:.0} MB",
        f.report.wall_s, f.report.peak_mb
    );
}
