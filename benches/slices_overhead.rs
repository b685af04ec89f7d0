//! What slices cost the program, and what they save against measuring every call in the
//! program itself: `cargo bench --bench slices_overhead`. The `probed_quicksort` example
//! (single-threaded, so one CPU is idle on a 2-CPU machine; about 2 M probed calls of a few
//! nanoseconds to milliseconds) runs under parprof three ways, rounds alternating: probes
//! only, `--slices` (the defaults of the command line), and `--detail full`. Prints the
//! program's wall time (from its start to its exit) for each, the ratios, and what the slices
//! measured.

use cargo_parprof::build::target::BuildOptions;
use cargo_parprof::record::collect::CollectOptions;
use parprof_rt::slice_results::{self, SliceEnd};
use std::ffi::OsString;

mod common;

use common::{build_example, median, run_profiled_with_env};

const ROUNDS: usize = 3;
const LEN: &str = "1000000";

/// How `cargo parprof <flags>` collects, and the program's environment it sets.
fn mode(flags: &[&str]) -> anyhow::Result<(CollectOptions, Vec<(OsString, OsString)>)> {
    let mut args = vec!["cargo", "parprof"];
    args.extend_from_slice(flags);
    let args = cargo_parprof::cli::parse(args)?;
    let collect = CollectOptions {
        // The program's time is measured: symbolising comes after it exited.
        symbolize: false,
        ..args.recording.collect_options()
    };
    Ok((collect, args.recording.slices.env()))
}

fn main() -> anyhow::Result<()> {
    let exe = build_example("probed_quicksort", &BuildOptions::default())?;
    let modes = [
        ("probes only", mode(&[])?),
        ("--slices", mode(&["--slices"])?),
        ("--detail full", mode(&["--detail", "full"])?),
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut last_slices = None;
    for _ in 0..ROUNDS {
        for (i, (_, (opts, env))) in modes.iter().enumerate() {
            let out = tempfile::tempdir()?;
            let outcome = run_profiled_with_env(&exe, &[LEN], out.path(), opts, env.clone())?;
            times[i].push(outcome.wall_ns as f64 / 1e6);
            if i == 1 {
                let path = out.path().join(slice_results::file_name(outcome.child_pid));
                last_slices = Some(slice_results::read(std::fs::File::open(path)?)?);
            }
        }
    }
    let medians: Vec<f64> = times.into_iter().map(median).collect();
    println!(
        "probed_quicksort ({LEN} integers), {ROUNDS} rounds, median wall time of the program:"
    );
    for ((name, _), ms) in modes.iter().zip(&medians) {
        println!("  {name:<14} {ms:8.1} ms");
    }
    println!(
        "  --slices ÷ probes only: {:.3}   --detail full ÷ --slices: {:.2}",
        medians[1] / medians[0],
        medians[2] / medians[1]
    );
    if let Some(r) = last_slices {
        let completed = r
            .slices
            .iter()
            .filter(|s| s.end == SliceEnd::Completed)
            .count();
        let cpu_ms: f64 = r.slices.iter().map(|s| s.cpu_ns as f64 / 1e6).sum();
        let calls: u64 = r
            .slices
            .iter()
            .flat_map(|s| &s.sites)
            .map(|s| s.calls)
            .sum();
        println!(
            "  last --slices run: {} slices ({completed} completed), {cpu_ms:.1} ms of CPU in slices, \
             {calls} calls measured; checkpoints {:?}",
            r.slices.len(),
            r.checkpoints
        );
    }
    Ok(())
}
