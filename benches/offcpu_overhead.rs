//! What the off-CPU flamegraph's context-switch samples cost the profiled program: its wall
//! time (from release to exit) profiled with and without them, rounds alternating so that
//! both see the same machine load: `cargo bench --bench offcpu_overhead`.
//!
//! The cost is per switch-out (one sample with its call chain each), so the targets switch
//! a lot: `demo_join_loop` (a pool of 8 workers woken for thousands of joins on 2 cores) and
//! `offcpu_waits` (few, long waits; its wall time is mostly sleeping).

use cargo_parprof::build::target::BuildOptions;
use cargo_parprof::record::collect::CollectOptions;

mod common;

use common::{build_example, median, run_profiled};
use std::path::Path;

const ROUNDS: usize = 7;

/// The child's wall time in ms and the switch samples taken.
fn profiled(exe: &Path, args: &[&str], switch_stacks: bool) -> anyhow::Result<(f64, usize)> {
    let out = tempfile::tempdir()?;
    let opts = CollectOptions {
        switch_stacks,
        symbolize: false,
        ..CollectOptions::default()
    };
    let outcome = run_profiled(exe, args, out.path(), &opts)?;
    Ok((
        outcome.wall_ns as f64 / 1e6,
        outcome.kernel.switch_samples.len(),
    ))
}

fn main() -> anyhow::Result<()> {
    for (example, args) in [
        ("demo_join_loop", &["8", "3000"][..]),
        ("offcpu_waits", &[][..]),
    ] {
        let exe = build_example(example, &BuildOptions::default())?;
        let (mut with, mut without, mut samples) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let (ms, n) = profiled(&exe, args, true)?;
            with.push(ms);
            samples.push(n as f64);
            without.push(profiled(&exe, args, false)?.0);
        }
        let (w, wo, n) = (median(with), median(without), median(samples));
        let command = [example].iter().chain(args).copied().collect::<Vec<_>>();
        println!(
            "{}: {ROUNDS} rounds, medians: without switch samples {wo:.1} ms, \
             with {w:.1} ms ({n:.0} samples): {:+.1}% ({:+.2} µs per sample)",
            command.join(" "),
            (w / wo - 1.0) * 100.0,
            if n > 0.0 { (w - wo) * 1e3 / n } else { 0.0 },
        );
    }
    Ok(())
}
