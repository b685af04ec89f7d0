//! Wall time of a profiled run (build excluded) ÷ wall time of the same executable run
//! directly: `cargo bench -p cargo-parprof --bench run_overhead`. Goal ≤ 1.10.
//!
//! The profiled run is what `cargo parprof` does after building: start suspended, collect
//! kernel records, analyse, write every report. The target is the repository's
//! `oversubscribed` example (probed, CPU-bound, more threads than cores).

use cargo_parprof::analysis::{self, AnalysisOptions};
use cargo_parprof::collect::CollectOptions;
use cargo_parprof::target::{self, BuildOptions, TargetKind, TargetRequest};
use cargo_parprof::{launch, report};
use std::ffi::OsString;
use std::path::Path;
use std::time::Instant;

const ROUNDS: usize = 5;
const ARGS: [&str; 2] = ["6", "150"];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let metadata = cargo_metadata::MetadataCommand::new()
        .manifest_path(&manifest)
        .no_deps()
        .exec()?;
    let request = TargetRequest {
        kind_and_name: Some((TargetKind::Example, "oversubscribed".into())),
        package: None,
    };
    let resolved = target::resolve(&metadata, &request)?;
    let build_dir = metadata
        .target_directory
        .as_std_path()
        .join("parprof")
        .join("build");
    let exe = target::build(&resolved, &BuildOptions::default(), &build_dir)?;
    let args: Vec<OsString> = ARGS.iter().map(OsString::from).collect();

    let mut direct = Vec::new();
    let mut profiled = Vec::new();
    let mut phases = (Vec::new(), Vec::new());
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
        let opts = AnalysisOptions {
            child_pid: Some(outcome.child_pid),
            ..AnalysisOptions::default()
        };
        let analysis = analysis::analyse(out.path(), &outcome.kernel, &opts)?;
        report::write_all(&analysis, out.path())?;
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
        "ratio: {:.3}  (goal ≤ 1.10: {})",
        p / d,
        if p / d <= 1.10 { "met" } else { "NOT met" }
    );
    Ok(())
}
