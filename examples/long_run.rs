//! A program that runs for as long as it is told, written as a batch service is: round after
//! round, a parallel sort and a parallel scoring pass over a batch of records, and a logger
//! thread that the main thread hands each round's result to.
//!
//! `long_run [SECONDS]` (default 10): until SECONDS have passed, each round sorts 200,000
//! pseudo-random keys with `par_sort_unstable`, scores them in a `par_iter` (`score`, a probed
//! function of a few hundred nanoseconds per key, in a region named `score`) and sends the
//! total to the logger over a channel. Every core is busy sampling-wise, the workers sleep
//! and wake each round, and the logger blocks between messages: the samples, the context
//! switches and the stacks at switch-outs all keep coming for the whole run, which is what
//! `benches/long_run_memory.rs` needs to measure the profiler's memory against run length.
//!
//! Prints `rounds=<n>`: the rounds it ran, counted by the logger.

use parprof_rt::{parallel_region, probe};
use rayon::prelude::*;
use std::hint::black_box;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const KEYS: usize = 200_000;

/// A few hundred nanoseconds of arithmetic per key.
#[probe]
fn score(chunk: &[u32]) -> u64 {
    chunk
        .iter()
        .map(|&key| {
            let mut x = u64::from(key);
            for _ in 0..64 {
                x = black_box(
                    x.wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407),
                );
            }
            x >> 48
        })
        .sum()
}

fn round(seed: u32) -> u64 {
    let mut keys = parprof_suite::pseudo_random(KEYS);
    keys.iter_mut().for_each(|k| *k ^= seed);
    keys.par_sort_unstable();
    parallel_region!("score", { keys.par_chunks(256).map(score).sum::<u64>() })
}

fn main() {
    let args = parprof_suite::DemoArgs::from_env();
    let run_for = Duration::from_secs(args.number(0, 10) as u64);
    let (send, receive) = mpsc::channel::<u64>();
    let logger = std::thread::Builder::new()
        .name("logger".into())
        .spawn(move || {
            let mut rounds = 0u64;
            let mut checksum = 0u64;
            for total in receive {
                rounds += 1;
                checksum ^= total;
            }
            (rounds, checksum)
        })
        .expect("spawn the logger");
    let start = Instant::now();
    let mut seed = 0;
    while start.elapsed() < run_for {
        send.send(round(seed)).expect("the logger runs");
        seed = seed.wrapping_add(0x9E37_79B9);
    }
    drop(send);
    let (rounds, checksum) = logger.join().expect("the logger");
    println!("checksum={checksum:016x}");
    println!("rounds={rounds}");
}
