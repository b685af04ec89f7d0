//! Analysis throughput and peak memory on a synthetic trace of 50+ million events:
//! `cargo bench -p cargo-parprof --bench analysis_throughput`.
//!
//! The trace has 8 threads running nested probes (3 levels, 42 events per outermost call) and
//! a switch-out every 100 µs per thread, so every part of method 1 is exercised. Memory should
//! grow with threads, stack depth and call paths, not with events: the figure printed is the
//! process's peak resident set during the analysis.

use cargo_parprof::analysis::{self, AnalysisOptions};
use cargo_parprof::kernel::{Capabilities, Capability, KernelRecords, SwitchKind, SwitchRecord};
use parprof_rt::trace::*;
use std::io::Write;
use std::time::Instant;

const THREADS: u32 = 8;
const EVENTS_PER_ITERATION: u64 = 42;
const TARGET_EVENTS: u64 = 50_000_000;
const TICK_STEP: u64 = 10;

/// Peak resident set of this process since the last [`reset_peak_rss`], in MiB.
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<f64>()
                .ok()
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// Writing 5 to clear_refs resets the peak RSS (Linux ≥ 4.0), so the figure is the analysis's.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn one_iteration(ts: &mut u64, out: &mut Vec<Event>) {
    let mut push = |kind: EventKind, id: u32| {
        *ts += TICK_STEP;
        out.push(Event::new(*ts, kind, id));
    };
    push(EventKind::Enter, 1);
    for _ in 0..4 {
        push(EventKind::Enter, 2);
        for _ in 0..4 {
            push(EventKind::Enter, 3);
            push(EventKind::Exit, 3);
        }
        push(EventKind::Exit, 2);
    }
    push(EventKind::Exit, 1);
}

fn write_trace(path: &std::path::Path) -> anyhow::Result<(u64, u64)> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut enc = ChunkEncoder::new();
    enc.preamble();
    enc.chunk(&Chunk::Header(Header {
        pid: 1,
        clock: ClockKind::Monotonic,
        ticks_per_ns: 1.0,
        start: ClockSync {
            ticks: 0,
            monotonic_ns: 0,
            uncertainty_ticks: 20,
        },
        bare_read_ticks: 40,
        calibration: EventKind::ALL
            .iter()
            .map(|&kind| Calibration {
                kind,
                cost_ticks: 3,
            })
            .collect(),
        program: "synthetic".into(),
    }));
    for (id, name) in [(1, "bench::outer"), (2, "bench::mid"), (3, "bench::leaf")] {
        enc.chunk(&Chunk::Site(SiteRecord {
            id,
            kind: SiteKind::Probe,
            name: name.into(),
            file: "bench.rs".into(),
            line: id,
        }));
    }
    for tid in 1..=THREADS {
        enc.chunk(&Chunk::Thread(ThreadRecord {
            tid,
            rayon_index: NO_WORKER,
            pool: 0,
            name: format!("t{tid}"),
        }));
    }
    enc.flush_to(&mut file)?;
    let iterations_per_thread = TARGET_EVENTS.div_ceil(EVENTS_PER_ITERATION * THREADS as u64);
    let mut clocks = vec![0u64; THREADS as usize];
    let mut events = Vec::with_capacity(100 * EVENTS_PER_ITERATION as usize);
    let mut total = 0;
    let mut done = 0;
    while done < iterations_per_thread {
        let batch = 100.min(iterations_per_thread - done);
        for tid in 1..=THREADS {
            events.clear();
            for _ in 0..batch {
                one_iteration(&mut clocks[tid as usize - 1], &mut events);
            }
            total += events.len() as u64;
            enc.events(tid, &events, &[]);
            enc.flush_to(&mut file)?;
        }
        done += batch;
    }
    let end = *clocks.iter().max().unwrap_or(&0) + 1;
    enc.chunk(&Chunk::End(End {
        end: ClockSync {
            ticks: end,
            monotonic_ns: end,
            uncertainty_ticks: 20,
        },
        events_written: total,
        events_lost: 0,
    }));
    enc.flush_to(&mut file)?;
    file.flush()?;
    Ok((total, end))
}

fn switches(end: u64) -> Vec<SwitchRecord> {
    let mut records = Vec::new();
    let mut t = 50_000;
    while t + 5_000 < end {
        for tid in 1..=THREADS {
            let kind = if t % 200_000 == 50_000 {
                SwitchKind::OutVoluntary
            } else {
                SwitchKind::OutPreempted
            };
            records.push(SwitchRecord {
                time_ns: t + tid as u64,
                tid,
                cpu: tid % 2,
                kind,
            });
            records.push(SwitchRecord {
                time_ns: t + 3_000 + tid as u64,
                tid,
                cpu: tid % 2,
                kind: SwitchKind::In,
            });
        }
        t += 100_000;
    }
    records.sort_by_key(|r| r.time_ns);
    records
}

fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace-1.ppt");
    let started = Instant::now();
    let (events, end) = write_trace(&path)?;
    let bytes = std::fs::metadata(&path)?.len();
    println!(
        "synthetic trace: {events} events, {:.0} MiB, written in {:.1} s",
        bytes as f64 / (1 << 20) as f64,
        started.elapsed().as_secs_f64()
    );
    let kernel = KernelRecords {
        capabilities: Capabilities {
            context_switches: Capability::yes(),
            cpu_samples: Capability::yes(),
            hardware_counters: Capability::no("synthetic run"),
            ..Capabilities::default()
        },
        switches: switches(end),
        ..KernelRecords::default()
    };
    reset_peak_rss();
    let rss_before = peak_rss_mib();
    let started = Instant::now();
    let analysis = analysis::analyse(
        &path,
        &kernel,
        &AnalysisOptions {
            child_pid: Some(1),
            ..AnalysisOptions::default()
        },
    )?;
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(analysis.trace.events, events, "every event was analysed");
    println!(
        "analysis: {:.2} s, {:.1} M events/s; peak RSS {:.0} MiB (at its start: {:.0} MiB)",
        secs,
        events as f64 / secs / 1e6,
        peak_rss_mib(),
        rss_before
    );
    let leaf = analysis
        .probes
        .iter()
        .find(|p| p.name == "bench::leaf")
        .expect("leaf probe analysed");
    println!(
        "check: bench::leaf calls = {} (expected {})",
        leaf.calls,
        events / EVENTS_PER_ITERATION * 16
    );
    Ok(())
}
