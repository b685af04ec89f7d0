//! What copying the user stack with each cpu-clock sample costs the profiled program (the
//! kernel's 16 KiB copy, and the collector thread unwinding it while the program runs),
//! against frame-pointer chains only: its wall time (from release to exit) with
//! `--call-graph dwarf` and `--call-graph fp`, rounds alternating so that both see the same
//! machine load: `cargo bench --bench unwind_overhead`.
//!
//! Targets: `utf8_check` (one busy thread, in std code without frame pointers) and
//! `demo_mergesort` (every CPU busy in recursive `join`s, so the collector competes with
//! the program for the CPUs).

use cargo_parprof::build::target::BuildOptions;
use cargo_parprof::record::collect::{CallGraph, CollectOptions};

mod common;

use common::{build_example, median, run_profiled};
use std::path::Path;

const ROUNDS: usize = 7;

/// The child's wall time in ms, the samples taken and the kernel records lost.
fn profiled(exe: &Path, args: &[&str], call_graph: CallGraph) -> anyhow::Result<(f64, f64, u64)> {
    let out = tempfile::tempdir()?;
    let opts = CollectOptions {
        call_graph,
        symbolize: false,
        ..CollectOptions::default()
    };
    let outcome = run_profiled(exe, args, out.path(), &opts)?;
    Ok((
        outcome.wall_ns as f64 / 1e6,
        outcome.kernel.samples.len() as f64,
        outcome.kernel.lost_records,
    ))
}

fn main() -> anyhow::Result<()> {
    for (example, args) in [
        ("utf8_check", &[][..]),
        ("demo_mergesort", &["2000000", "64"][..]),
    ] {
        let exe = build_example(example, &BuildOptions::default())?;
        let (mut dwarf, mut fp, mut samples, mut lost) = (Vec::new(), Vec::new(), Vec::new(), 0);
        for _ in 0..ROUNDS {
            let (ms, n, l) = profiled(&exe, args, CallGraph::Dwarf)?;
            dwarf.push(ms);
            samples.push(n);
            lost += l;
            fp.push(profiled(&exe, args, CallGraph::Fp)?.0);
        }
        let (d, f, n) = (median(dwarf), median(fp), median(samples));
        let command = [example].iter().chain(args).copied().collect::<Vec<_>>();
        println!(
            "{}: {ROUNDS} rounds, medians: frame pointers {f:.1} ms, stack copies {d:.1} ms \
             ({n:.0} samples): ratio {:.3} ({:+.1} µs per sample); kernel records lost with \
             copies: {lost} in all rounds",
            command.join(" "),
            d / f,
            if n > 0.0 { (d - f) * 1e3 / n } else { 0.0 },
        );
    }
    Ok(())
}
