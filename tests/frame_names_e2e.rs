//! Frame names in the cpu flamegraph, end to end, on a crate the test writes into a folder
//! whose name is no crate's (`Not-The-Crate.v2`): a library (`framedemo`) and a bin
//! (`simulate`), unannotated, with closures in `par_iter` chains.
//!
//! Checks: the frames are named by their crate and module, as the symbols say
//! (`framedemo::physics::speed_squared`, inlined; `simulate::setup::make_values`), never by
//! folder;
//! by default no name carries generic arguments or `closure_env`, and between two frames of
//! the program at most one frame stands for rayon's and std's plumbing; `cargo parprof report
//! --all-frames --full-names` on the same run restores every frame.

mod common;

use common::{cargo_parprof, exclusive, repo_root};
use std::path::Path;

const ODD_FOLDER: &str = "Not-The-Crate.v2";

const LIBRARY: &str = r#"//! A library whose parallel code the test profiles.
pub mod physics {
    use rayon::prelude::*;

    pub struct Body {
        pub mass: f64,
        pub velocity: [f64; 3],
    }

    /// Total kinetic energy, summed in parallel.
    #[inline(never)]
    pub fn kinetic_energy(bodies: &[Body]) -> f64 {
        bodies
            .par_iter()
            .map(|b| 0.5 * b.mass * speed_squared(&b.velocity))
            .sum()
    }

    /// A few hundred ns per body, so that the closure is sampled.
    #[inline(always)]
    fn speed_squared(v: &[f64; 3]) -> f64 {
        let mut s = 0.0;
        for i in 0..150 {
            s = std::hint::black_box(s * 0.999 + v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + i as f64);
        }
        s
    }
}
"#;

const BIN: &str = r#"use framedemo::physics::{kinetic_energy, Body};

mod report {
    use rayon::prelude::*;

    #[inline(never)]
    pub fn summarise(values: &[f64]) -> f64 {
        values
            .par_iter()
            .map(|v| {
                let mut x = *v;
                for _ in 0..100 {
                    x = std::hint::black_box((x * 1.000_001 + 0.5).sqrt());
                }
                x
            })
            .sum()
    }
}

mod setup {
    /// Serial work on the main thread, about 100 ms.
    #[inline(never)]
    pub fn make_values(n: u32) -> Vec<f64> {
        (0..n)
            .map(|i| {
                let mut x = f64::from(i);
                for _ in 0..300 {
                    x = std::hint::black_box((x * 0.999_999 + 1.0).sqrt());
                }
                x
            })
            .collect()
    }
}

fn main() {
    let bodies: Vec<Body> = (0..100_000)
        .map(|i| Body { mass: 1.0 + (i % 7) as f64, velocity: [i as f64 * 1e-3, 1.0, 2.0] })
        .collect();
    let values = setup::make_values(100_000);
    let mut total = 0.0;
    for _ in 0..4 {
        total += kinetic_energy(&bodies);
        total += report::summarise(&values);
    }
    println!("total={total}");
}
"#;

/// The crate, written under `root/ODD_FOLDER`; returns its manifest.
fn write_crate(root: &Path) -> std::path::PathBuf {
    let dir = root.join(ODD_FOLDER);
    std::fs::create_dir_all(dir.join("src/bin")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        common::rayon_crate_manifest("framedemo"),
    )
    .unwrap();
    // This repository's lock file: the same rayon, already downloaded by its own build.
    std::fs::copy(repo_root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    std::fs::write(dir.join("src/lib.rs"), LIBRARY).unwrap();
    std::fs::write(dir.join("src/bin/simulate.rs"), BIN).unwrap();
    dir.join("Cargo.toml")
}

/// `cpu.folded` of `dir`: each stack's frames (the thread's root left out) and weight.
fn stacks(dir: &Path) -> Vec<(Vec<String>, u64)> {
    let text = std::fs::read_to_string(dir.join("cpu.folded")).expect("cpu.folded");
    text.lines()
        .map(|line| {
            let (stack, weight) = line.rsplit_once(' ').expect("`stack weight`");
            let frames = stack.split(';').skip(1).map(str::to_owned).collect();
            (frames, weight.parse().expect("a weight"))
        })
        .collect()
}

fn is_program_frame(frame: &str) -> bool {
    frame.starts_with("framedemo::") || frame.starts_with("simulate::")
}

/// The most frames found between two frames of the program in any stack.
fn most_frames_between_program_frames(stacks: &[(Vec<String>, u64)]) -> usize {
    stacks
        .iter()
        .flat_map(|(frames, _)| {
            let at: Vec<usize> = (0..frames.len())
                .filter(|&i| is_program_frame(&frames[i]))
                .collect();
            at.windows(2)
                .map(|pair| pair[1] - pair[0] - 1)
                .collect::<Vec<_>>()
        })
        .max()
        .unwrap_or(0)
}

fn weight(stacks: &[(Vec<String>, u64)]) -> u64 {
    stacks.iter().map(|(_, w)| w).sum()
}

#[test]
fn frames_are_named_by_their_crate_without_generics_and_plumbing_folds() {
    let _machine = exclusive();
    let work = tempfile::tempdir().unwrap();
    let manifest = write_crate(work.path());
    let run_dir = work.path().join("run");
    let output = cargo_parprof()
        .arg("--manifest-path")
        .arg(&manifest)
        .args(["--bin", "simulate", "-o"])
        .arg(&run_dir)
        .env("RAYON_NUM_THREADS", "2")
        .output()
        .expect("cargo parprof");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "stderr:\n{stderr}");

    let shown = stacks(&run_dir);
    let total = weight(&shown);
    assert!(total >= 50, "too few samples to judge: {total}: {shown:?}");
    let frames: Vec<&str> = shown
        .iter()
        .flat_map(|(f, _)| f.iter().map(|f| f.trim_end_matches("_[i]")))
        .collect();
    // The parallel functions wait on the main thread while the workers run their closures:
    // their closures are sampled, and `speed_squared` inlined into one.
    for name in [
        "framedemo::physics::kinetic_energy::{closure}",
        "framedemo::physics::speed_squared",
        "simulate::report::summarise::{closure}",
        "simulate::setup::make_values",
    ] {
        assert!(frames.contains(&name), "no frame `{name}` in {frames:#?}");
    }
    for frame in &frames {
        assert!(
            !frame.contains(ODD_FOLDER)
                && !frame.contains("::bin::")
                && !frame.starts_with("src::"),
            "a name taken from a folder: {frame}"
        );
        assert!(
            !frame.contains('<') && !frame.contains("closure_env"),
            "generic arguments in {frame}"
        );
    }
    let between = most_frames_between_program_frames(&shown);
    assert!(
        between <= 1,
        "{between} frames between two program frames: {shown:#?}"
    );
    assert!(
        frames.iter().any(|f| f.starts_with("[rayon: ")),
        "no folded rayon frames: {frames:#?}"
    );

    // The same run, every frame under its symbol's name.
    let full_dir = work.path().join("full");
    let output = cargo_parprof()
        .args(["report", "--all-frames", "--full-names", "-o"])
        .arg(&full_dir)
        .arg(&run_dir)
        .output()
        .expect("cargo parprof report");
    assert!(
        output.status.success(),
        "stderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let every = stacks(&full_dir);
    assert_eq!(weight(&every), total, "the same samples");
    assert!(
        every
            .iter()
            .flat_map(|(f, _)| f)
            .all(|f| !f.starts_with("[rayon: ") && !f.starts_with("[std: ")),
        "folded frames left: {every:#?}"
    );
    assert!(
        most_frames_between_program_frames(&every) >= 2,
        "rayon's frames between the program's not restored: {every:#?}"
    );
}
