//! Analysis throughput and peak memory on a synthetic trace of 50+ million events:
//! `cargo bench -p cargo-parprof --bench analysis_throughput`.
//!
//! The trace has 8 threads running nested probes (3 levels, 42 events per outermost call) and
//! a switch-out every 100 µs per thread, so every part of method 1 is exercised. Memory should
//! grow with threads, stack depth and call paths, not with events: the figure printed is the
//! process's peak resident set during the analysis. The CPU time beside the wall time shows how
//! much of a second core the analysis used (on a loaded machine, wall time alone does not).
//!
//! The same trace is then analysed with counter attribution on (method 3): one counter read on
//! both CPUs every 100 µs, attributed to the probe calls that ran between the reads.

use cargo_parprof::analysis::{self, AnalysisOptions};
use cargo_parprof::recording::counters::{
    CounterRecords, CounterSample, CounterSeries, CounterSource, Scaling,
};
use cargo_parprof::recording::kernel_records::{
    Capabilities, Capability, KernelRecords, SwitchKind, SwitchRecord,
};
use parprof_rt::trace::*;
use std::io::Write;
use std::time::Instant;

const THREADS: u32 = 8;
const EVENTS_PER_ITERATION: u64 = 42;
const TARGET_EVENTS: u64 = 50_000_000;
const TICK_STEP: u64 = 10;
/// The counter's reads, in ns (the trace's ticks are ns).
const COUNTER_INTERVAL: u64 = 100_000;

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

/// User and system CPU time of this process so far, in seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
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
                cost_ticks: 3.0,
                spread: 0.0,
                rounds: 21,
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
            caller: String::new(),
            entry: None,
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

/// A cumulative counter read on CPUs 0 and 1 every [`COUNTER_INTERVAL`] until `end`, counting
/// one per ns on each.
fn counters(end: u64) -> CounterRecords {
    let cpu_samples = (0..=end / COUNTER_INTERVAL)
        .flat_map(|k| {
            let time_ns = k * COUNTER_INTERVAL;
            (0..2).map(move |cpu| CounterSample {
                time_ns,
                cpu,
                value: time_ns as f64,
            })
        })
        .collect();
    CounterRecords {
        counters: vec![CounterSeries {
            name: "task-clock".into(),
            source: CounterSource::Software,
            cpu_samples,
            scaling: Scaling::default(),
            stored: None,
        }],
        read_interval_ns: COUNTER_INTERVAL,
        ..CounterRecords::default()
    }
}

/// Analyses the trace and prints the figures under `label`.
fn measure(
    label: &str,
    path: &std::path::Path,
    kernel: &KernelRecords,
    counters: &CounterRecords,
    events: u64,
) -> anyhow::Result<analysis::Analysis> {
    reset_peak_rss();
    let rss_before = peak_rss_mib();
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    let analysis = cargo_parprof::pipeline::analyse_trace(
        path,
        kernel,
        counters,
        &AnalysisOptions {
            child_pid: Some(1),
            ..AnalysisOptions::default()
        },
    )?;
    let secs = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    assert_eq!(analysis.trace.events, events, "every event was analysed");
    println!(
        "{label}: {secs:.2} s ({cpu:.2} s of CPU), {:.1} M events/s; peak RSS {:.0} MiB (at its start: {:.0} MiB)",
        events as f64 / secs / 1e6,
        peak_rss_mib(),
        rss_before
    );
    Ok(analysis)
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
    let analysis = measure(
        "analysis",
        &path,
        &kernel,
        &CounterRecords::default(),
        events,
    )?;
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
    let counted = measure(
        "with counter attribution",
        &path,
        &kernel,
        &counters(end),
        events,
    )?;
    let attributed = counted.counters.as_ref().map_or(0, |c| c.items.len());
    println!("check: counters attributed to {attributed} items (expected 3 probes)");
    Ok(())
}
