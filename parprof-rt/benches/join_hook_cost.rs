//! What the rayon-core hooks cost one `join`, printed as figures:
//! `cargo bench -p parprof-rt --bench join_hook_cost`.
//!
//! A join whose second half the joining worker pops back (the common case of a recursive
//! `join`) calls the hooks as the hooked rayon-core does: the job's tag when it is made, the
//! fork, the inline half's begin and end, the local half's begin and end, the return. Timed
//! on one thread, in ns per join, in three modes, each in its own child process (the runtime
//! reads `PARPROF_OUT` once per process), alternated over [`ROUNDS`] rounds:
//! - `off`: no `PARPROF_OUT`, what an unprofiled run of the hooked build pays;
//! - `counted`: recording, per-job detail in bounded windows, counted in between (the default);
//! - `every job`: `PARPROF_RAYON_DETAIL=all`, an event per hook (the cost that followed the
//!   job rate).
//!
//! Printed: the fastest and the median round of each mode, and the counted mode's cost over
//! `off`. This machine's speed varies, so compare figures of one run only.

use parprof_rt::rayon_hooks::{Fork, Tag};
use std::hint::black_box;
use std::process::Command;
use std::time::Instant;

const JOINS_PER_BURST: u64 = 1_000_000;
const BURSTS: usize = 8;
const ROUNDS: usize = 5;
/// The child's argument: the mode it times.
const CHILD: &str = "--time-joins";

/// One join's hooks, the second half popped back by the joining worker.
#[inline(never)]
fn one_join(i: u64) {
    let job_tag = black_box(Tag::here());
    let fork = Fork::here();
    {
        let _inline = fork.inline_task();
        black_box(i);
    }
    {
        let _local = fork.local_task();
        black_box(job_tag);
    }
    fork.resume();
}

/// The child: a worker of a pool, in a region, times bursts of joins and prints the fastest
/// burst's ns per join.
fn time_joins() {
    parprof_rt::rayon_hooks::worker_started(0, 0x1000);
    let best = parprof_rt::parallel_region!("joins", {
        (0..BURSTS)
            .map(|_| {
                let start = Instant::now();
                (0..JOINS_PER_BURST).for_each(one_join);
                start.elapsed().as_nanos() as f64 / JOINS_PER_BURST as f64
            })
            .fold(f64::MAX, f64::min)
    });
    println!("{best}");
}

struct Mode {
    name: &'static str,
    env: &'static [(&'static str, &'static str)],
    recording: bool,
}

const MODES: [Mode; 3] = [
    Mode {
        name: "off",
        env: &[],
        recording: false,
    },
    Mode {
        name: "counted",
        env: &[],
        recording: true,
    },
    Mode {
        name: "every job",
        env: &[(parprof_rt::lifecycle_totals::DETAIL_ENV, "all")],
        recording: true,
    },
];

fn run_child(mode: &Mode) -> f64 {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let mut child = Command::new(std::env::current_exe().expect("this bench's path"));
    child.arg(CHILD).envs(mode.env.iter().copied());
    child.env_remove("PARPROF_OUT");
    if mode.recording {
        child.env("PARPROF_OUT", dir.path());
    }
    let out = child.output().expect("the child runs");
    assert!(out.status.success(), "{}: {out:?}", mode.name);
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{}: no figure in {text:?}", mode.name))
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

fn main() {
    if std::env::args().any(|a| a == CHILD) {
        time_joins();
        return;
    }
    let mut figures: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    for _ in 0..ROUNDS {
        for (mode, figures) in MODES.iter().zip(&mut figures) {
            figures.push(run_child(mode));
        }
    }
    let figures: Vec<Vec<f64>> = figures.into_iter().map(sorted).collect();
    println!(
        "rayon-core hooks, ns per join (second half popped back), {ROUNDS} alternated rounds:"
    );
    for (mode, f) in MODES.iter().zip(&figures) {
        println!(
            "  {:<10} fastest {:6.1}  median {:6.1}",
            mode.name,
            f[0],
            f[f.len() / 2]
        );
    }
    let (off, counted) = (figures[0][0], figures[1][0]);
    println!(
        "  counted mode over off: {:.1} ns per join (fastest rounds)",
        counted - off
    );
}
