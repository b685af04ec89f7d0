//! What reading counters (`--counters`) costs the profiled program: its wall time with the
//! default counter set ÷ its wall time with none, everything else collected as usual
//! (`cargo bench --bench counters_overhead`).
//!
//! The wall time is the program's own, from its release to its exit (the build, the analysis
//! and the reports are left out); its CPU time (user + system, from `getrusage` of the
//! reaped child) includes the kernel's work for the counters on its threads and is less
//! disturbed by other load on the machine. Runs with and without counters alternate, and the
//! medians are compared. Two targets: `oversubscribed` (CPU-bound probed threads, more than cores:
//! many preemptions, each one a switch of the counter groups) and `rayon_too_fine` (a rayon
//! region of 250,000 tiny tasks: many probe events and worker wake-ups).

use cargo_parprof::build::target::BuildOptions;
use cargo_parprof::record::collect::CollectOptions;
use cargo_parprof::record::counters::{CounterOptions, CounterSet};
use cargo_parprof::recording::counters::CounterRecords;
mod common;

use common::{build_example, median, run_profiled};
use std::path::Path;

const ROUNDS: usize = 9;

struct Target {
    example: &'static str,
    args: &'static [&'static str],
}

const TARGETS: [Target; 2] = [
    Target {
        example: "oversubscribed",
        args: &["6", "40"],
    },
    Target {
        example: "rayon_too_fine",
        args: &["2"],
    },
];

/// CPU time (user + system) of the reaped children so far, in s.
fn children_cpu_s() -> f64 {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// The program's wall time and CPU time in s, and the counter records.
fn run(
    exe: &Path,
    args: &[&str],
    counters: Option<CounterOptions>,
) -> anyhow::Result<(f64, f64, CounterRecords)> {
    let out = tempfile::tempdir()?;
    let cpu_before = children_cpu_s();
    let opts = CollectOptions {
        counters,
        symbolize: false,
        ..CollectOptions::default()
    };
    let outcome = run_profiled(exe, args, out.path(), &opts)?;
    Ok((
        outcome.wall_ns as f64 / 1e9,
        children_cpu_s() - cpu_before,
        outcome.counters,
    ))
}

fn main() -> anyhow::Result<()> {
    let default = CounterOptions::default();
    let mut summary = vec![format!(
        "counters: the default set ({}), read every {} µs; \
         {ROUNDS} rounds each; wall time of the program, median (minimum)",
        CounterSet::default_set().names().join(","),
        default.read_interval_ns / 1000
    )];
    for t in &TARGETS {
        let exe = build_example(t.example, &BuildOptions::default())?;
        let (mut without, mut with) = (Vec::new(), Vec::new());
        let (mut cpu_without, mut cpu_with) = (Vec::new(), Vec::new());
        let mut records = CounterRecords::default();
        for round in 0..ROUNDS {
            // Alternate which goes first, so that a trend of the machine hits both alike.
            let first_with = round % 2 == 1;
            for with_counters in [first_with, !first_with] {
                let (secs, cpu, r) = run(&exe, t.args, with_counters.then(|| default.clone()))?;
                if with_counters {
                    with.push(secs);
                    cpu_with.push(cpu);
                    records = r;
                } else {
                    without.push(secs);
                    cpu_without.push(cpu);
                }
            }
        }
        let (cpu_a, cpu_b) = (median(cpu_without), median(cpu_with));
        let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        let (a_min, b_min) = (min(&without), min(&with));
        let (a, b) = (median(without), median(with));
        let collected: Vec<&str> = records.counters.iter().map(|c| c.name.as_str()).collect();
        let unavailable: Vec<&str> = records
            .unavailable
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        summary.push(format!("\nexample {} {}", t.example, t.args.join(" ")));
        summary.push(format!(
            "  without counters: {:8.1} ms ({:.1} ms)",
            a * 1e3,
            a_min * 1e3
        ));
        summary.push(format!(
            "  with counters:    {:8.1} ms ({:.1} ms)  collected: {}; unavailable: {}",
            b * 1e3,
            b_min * 1e3,
            collected.join(","),
            unavailable.join(",")
        ));
        summary.push(format!(
            "  ratio:            {:8.3} ({:.3})",
            b / a,
            b_min / a_min
        ));
        summary.push(format!(
            "  CPU time:         {:8.1} ms without, {:.1} ms with: ratio {:.3}",
            cpu_a * 1e3,
            cpu_b * 1e3,
            cpu_b / cpu_a
        ));
        let cost = records.read_cost;
        if cost.passes > 0 {
            summary.push(format!(
                "  collector reads:  {} passes, {:.1} µs each: {:.2}% of the run, on the profiler's thread",
                cost.passes,
                cost.total_ns as f64 / cost.passes as f64 / 1e3,
                cost.total_ns as f64 / 1e9 / b * 100.0
            ));
        }
    }
    // After the programs' own output.
    println!("\n{}", summary.join("\n"));
    Ok(())
}
