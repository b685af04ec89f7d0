//! A probe on a hot recursive function, what a new user tries first: the `probed_quicksort`
//! example (`#[probe]` on a quicksort recursing to single elements, 3 M integers, about 6 M
//! probed calls) run directly (probes off) and under parprof, rounds alternating:
//! `cargo bench --bench hot_probe`. Prints the slowdown of the program (its wall time from
//! release to exit), the trace's bytes per call and per recorded event, and the probe's active
//! and elapsed time. `PARPROF_SAMPLING=off` in the environment records every call.
//!
//! The slowdown is the median of each round's own ratio (the profiled run against the direct
//! run just before it), beside the ratio of the two medians: on a VM whose host changes the
//! CPU's speed every few seconds, a round's two runs mostly see the same speed, while the two
//! medians can come from different ones.

use cargo_parprof::analysis::{self, AnalysisOptions};
use cargo_parprof::build::target::BuildOptions;
use cargo_parprof::pipeline::trace_file;
use cargo_parprof::record::collect::CollectOptions;

mod common;

use common::{build_example, median, run_profiled};
use std::time::Instant;

const ROUNDS: usize = 9;

fn main() -> anyhow::Result<()> {
    let exe = build_example("probed_quicksort", &BuildOptions::default())?;
    let (mut direct, mut profiled) = (Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let status = std::process::Command::new(&exe)
            .stdout(std::process::Stdio::null())
            .status()?;
        anyhow::ensure!(status.success(), "{} {status}", exe.display());
        direct.push(start.elapsed().as_secs_f64() * 1e3);

        let out = tempfile::tempdir()?;
        let opts = CollectOptions {
            symbolize: false,
            ..CollectOptions::default()
        };
        let outcome = run_profiled(&exe, &[], out.path(), &opts)?;
        profiled.push(outcome.wall_ns as f64 / 1e6);
        last = Some((out, outcome));
    }
    let (out, outcome) = last.expect("at least one round");
    let trace_bytes = std::fs::metadata(
        out.path()
            .join(parprof_rt::trace_file_name(outcome.child_pid)),
    )?
    .len();
    let opts = AnalysisOptions {
        child_pid: Some(outcome.child_pid),
        ..AnalysisOptions::default()
    };
    let analysis = analysis::analyse(trace_file::open(out.path(), &opts)?, &outcome.kernel, &opts);
    let probe = analysis
        .probes
        .iter()
        .find(|p| p.name.ends_with("quicksort"))
        .ok_or_else(|| anyhow::anyhow!("no quicksort probe in the analysis"))?;
    let timed = probe.calls - probe.unrecorded_calls;
    let mut ratios: Vec<f64> = profiled.iter().zip(&direct).map(|(p, d)| p / d).collect();
    ratios.sort_by(f64::total_cmp);
    let (d, p) = (median(direct), median(profiled));
    println!("probed_quicksort (3 M integers), {ROUNDS} rounds:");
    println!(
        "  slowdown {:.2}× (median of the rounds' ratios, {:.2}–{:.2}×); medians: direct (probes \
         off) {d:.1} ms, under parprof {p:.1} ms, {:.2}×",
        median(ratios.clone()),
        ratios[0],
        ratios[ratios.len() - 1],
        p / d
    );
    println!(
        "  trace: {} calls, {timed} timed (2 events each), {:.2} MB: {:.2} bytes per call, {:.2} per \
         timed call's event",
        probe.calls,
        trace_bytes as f64 / 1e6,
        trace_bytes as f64 / probe.calls as f64,
        trace_bytes as f64 / (2 * timed).max(1) as f64
    );
    println!(
        "  probe: elapsed {:.1} ms, active {:.1} ms (active ≤ elapsed: {})",
        probe.elapsed_ns as f64 / 1e6,
        probe.active_ns as f64 / 1e6,
        probe.active_ns <= probe.elapsed_ns
    );
    Ok(())
}
