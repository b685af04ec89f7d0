//! Work that enters rayon by `spawn` from the main thread, the shape of a command-line tool that
//! runs trials in the background: each trial is started by a plain function on the main thread
//! (fire and forget), evaluates its variants with a parallel iterator inside the spawned job,
//! and sends its best result over a channel that the main thread drains.
//!
//! One trial, started last, costs 10× the others and has three variants for two workers: while
//! its third variant runs, the other worker has nothing left to do. Without annotation,
//! `cargo parprof --example spawn_trials` reports one region named at the `spawn` call in
//! `start_trial`, with `load_imbalance` (or `insufficient_parallel_slack`).
//!
//! `spawn_trials [TRIALS] [VARIANTS] [VARIANT_US]`. Prints `trials=<n>` (spawned jobs) and
//! `leaves=<n>` (the pieces the parallel iterators were cut into, counted in their folds): the
//! iterators split by `join` down to their leaves, so the region has
//! 2·(leaves − trials) + trials tasks, trials of them injected.

use rayon::prelude::*;
use std::sync::mpsc::{self, Sender};
use std::time::Duration;

static LEAVES: parprof_suite::Tally = parprof_suite::Tally::new();
static TRIALS: parprof_suite::Tally = parprof_suite::Tally::new();

/// Command-line argument `index` as a number, `default` when absent.
fn arg(index: usize, default: u64) -> u64 {
    std::env::args()
        .nth(index)
        .map_or(default, |a| a.parse().expect("a whole number"))
}

fn main() {
    let trials = arg(1, 3);
    let variants = arg(2, 3);
    let variant = Duration::from_micros(arg(3, 1_000));
    let (results, best) = mpsc::channel();
    for trial in 0..trials {
        let heavy = trial + 1 == trials;
        let cost = if heavy { variant * 10 } else { variant };
        start_trial(variants, cost, results.clone());
    }
    drop(results);
    let best = best.iter().fold(0u64, |a, b| a ^ b);
    println!("best={best:016x}");
    println!("trials={} leaves={}", TRIALS.total(), LEAVES.total());
}

/// Starts one trial in the background: its variants are evaluated in parallel, and the best
/// score is sent to `results`.
fn start_trial(variants: u64, cost: Duration, results: Sender<u64>) {
    TRIALS.add();
    rayon::spawn(move || {
        let best = (0..variants)
            .into_par_iter()
            .fold(
                || {
                    LEAVES.add();
                    0u64
                },
                |best, v| best.max(parprof_suite::spin(cost) ^ v),
            )
            .reduce(|| 0, u64::max);
        // The receiver lives until every trial has sent.
        let _ = results.send(best);
    });
}
