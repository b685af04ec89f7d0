//! Wall time of a profiled run (build excluded) ÷ wall time of the same executable run
//! directly: `cargo bench --bench run_overhead`. Goal ≤ 1.10.
//!
//! The profiled run is what `cargo parprof` does after building: start suspended, collect
//! kernel records, analyse, write every report. The target is the repository's
//! `oversubscribed` example (probed, CPU-bound, more threads than cores).

use cargo_parprof::analysis::{self, AnalysisOptions};
use cargo_parprof::build::target::BuildOptions;
use cargo_parprof::pipeline::trace_file;
use cargo_parprof::record::collect::CollectOptions;
use cargo_parprof::{record::launch, report};

mod common;

use common::{build_example, median};
use std::ffi::OsString;
use std::time::Instant;

const ROUNDS: usize = 5;
const ARGS: [&str; 2] = ["6", "150"];

fn main() -> anyhow::Result<()> {
    let exe = build_example("oversubscribed", &BuildOptions::default())?;
    let args: Vec<OsString> = ARGS.iter().map(OsString::from).collect();

    let mut direct = Vec::new();
    let mut profiled = Vec::new();
    let mut phases = (Vec::new(), Vec::new());
    let mut child_wall = Vec::new();
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let status = std::process::Command::new(&exe)
            .args(&args)
            .stdout(std::process::Stdio::null())
            .status()?;
        assert!(status.success());
        direct.push(start.elapsed().as_secs_f64());

        let out = tempfile::tempdir()?;
        let start = Instant::now();
        let outcome = launch::run_and_collect(
            &exe,
            &args,
            &[(
                OsString::from("PARPROF_OUT"),
                out.path().as_os_str().to_owned(),
            )],
            None,
            &CollectOptions::default(),
        )?;
        let ran = start.elapsed().as_secs_f64();
        child_wall.push(outcome.wall_ns as f64 / 1e9);
        let opts = AnalysisOptions {
            child_pid: Some(outcome.child_pid),
            ..AnalysisOptions::default()
        };
        let analysis =
            analysis::analyse(trace_file::open(out.path(), &opts)?, &outcome.kernel, &opts);
        report::write_all(&analysis, out.path(), &report::ReportOptions::default())?;
        let total = start.elapsed().as_secs_f64();
        profiled.push(total);
        phases.0.push(ran);
        phases.1.push(total - ran);
    }
    let (d, p) = (median(direct), median(profiled));
    println!(
        "target: example oversubscribed {}, {ROUNDS} rounds, medians",
        ARGS.join(" ")
    );
    println!("direct run:              {:8.1} ms", d * 1e3);
    println!(
        "under parprof:           {:8.1} ms  (run + collect {:.1} ms, analyse + reports {:.1} ms)",
        p * 1e3,
        median(phases.0) * 1e3,
        median(phases.1) * 1e3
    );
    println!(
        "child from release to exit: {:8.1} ms",
        median(child_wall) * 1e3
    );
    println!(
        "ratio: {:.3}  (goal ≤ 1.10: {})",
        p / d,
        if p / d <= 1.10 { "met" } else { "NOT met" }
    );
    Ok(())
}
