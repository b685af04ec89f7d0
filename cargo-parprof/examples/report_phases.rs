//! Where the time after a program goes: `report_phases RUN_DIR` does again, on a copy of a
//! saved run folder, what `cargo-parprof record` does once the program has ended — save the
//! records, symbolise the samples (the copy's symbols cut off), append the symbols, analyse,
//! write every view — and prints each phase's wall time and CPU time (all threads of the
//! process): CPU above wall is a phase that ran on several cores.
//!
//! `cargo build --release -p cargo-parprof --example report_phases`; an executable, so it runs
//! where the run was recorded (symbolising reads the files the program mapped, where they
//! were), with no cargo there. `record` appends the symbols while it analyses and writes the
//! views; they are timed apart here.

use anyhow::{Context, Result, bail};
use cargo_parprof::record::session::return_freed_memory;
use cargo_parprof::{pipeline, recording, report};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn main() -> Result<()> {
    let Some(run) = std::env::args_os().nth(1).map(PathBuf::from) else {
        bail!("usage: report_phases RUN_DIR (a run folder of `cargo parprof`, left unchanged)");
    };
    let copy = tempfile::tempdir()?;
    let records_len = copy_without_symbols(&run, copy.path())?;
    let dir = copy.path();
    println!(
        "{}: records {records_len} bytes before the symbols",
        run.display()
    );
    println!("phase            wall ms    CPU ms   CPU/wall");
    let total = Phase::start();
    let loaded = Phase::start().end("load", || recording::load(dir))?;
    let mut recording = loaded.recording;
    Phase::start().end("save records", || recording::save(dir, &recording))?;
    Phase::start().end("symbolise", || {
        recording.addresses.symbolize(&mut recording.kernel)
    });
    Phase::start().end("append symbols", || {
        recording::append_symbols(dir, records_len, &recording.kernel)
    })?;
    recording.release_call_chains();
    return_freed_memory();
    let options = recording.run.options.clone();
    let analysis =
        Phase::start().end("analyse", || pipeline::analyse(&recording, dir, &options))?;
    let views = report::ReportOptions {
        merge_threads: options.merge_threads,
        frames: report::FrameView::default(),
    };
    Phase::start().end("views", || report::write_all(&analysis, dir, &views))?;
    total.end("all", || ());
    let k = &recording.kernel;
    println!(
        "{} cpu samples, {} switch samples, {} stack nodes",
        k.samples.len(),
        k.switch_samples.len(),
        k.stacks.nodes().count()
    );
    Ok(())
}

/// Copies the files of the run folder `run` into `copy`, its records cut before their
/// symbols; returns the records' length.
fn copy_without_symbols(run: &Path, copy: &Path) -> Result<u64> {
    let loaded = recording::load(run)?;
    let Some(records_len) = loaded.records_len else {
        bail!(
            "{}: records of version 1, or cut: not re-symbolisable",
            run.display()
        );
    };
    for entry in std::fs::read_dir(run).with_context(|| format!("cannot read {}", run.display()))? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), copy.join(entry.file_name()))?;
        }
    }
    let records = std::fs::OpenOptions::new()
        .write(true)
        .open(copy.join(recording::RECORDS_FILE))?;
    records.set_len(records_len)?;
    Ok(records_len)
}

/// A phase's start: wall clock and the process's CPU time.
struct Phase {
    wall: Instant,
    cpu_s: f64,
}

impl Phase {
    fn start() -> Phase {
        Phase {
            wall: Instant::now(),
            cpu_s: cpu_seconds(),
        }
    }

    /// Runs `work`, then prints the phase's times.
    fn end<T>(self, name: &str, work: impl FnOnce() -> T) -> T {
        let out = work();
        let wall_ms = self.wall.elapsed().as_secs_f64() * 1e3;
        let cpu_ms = (cpu_seconds() - self.cpu_s) * 1e3;
        println!(
            "{name:<15} {wall_ms:8.1} {cpu_ms:9.1} {:10.2}",
            cpu_ms / wall_ms.max(1e-3)
        );
        out
    }
}

/// CPU time of this process so far, all threads, in seconds.
fn cpu_seconds() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: the process's CPU clock, into a timespec it fills.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}
