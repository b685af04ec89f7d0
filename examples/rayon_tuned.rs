//! A well-tuned parallel region: the baseline with no diagnosis.
//!
//! The global pool has 2 workers, one per core of a 2-core machine (`rayon_tuned [WORKERS]`
//! to change it). A parallel iterator over 40,000 items of about 10 µs each, in leaves of at
//! most 32 items (`with_max_len(32)`): about two thousand leaves of a few hundred
//! microseconds, enough to keep both workers busy to the end, few enough that finding them
//! costs little. The region lasts a few hundred milliseconds, so that the start (waking the
//! workers) and the end (the last leaf) stay a small part of it even on a busy machine.
//! `cargo parprof --example rayon_tuned` reports no parallel-overhead diagnosis.
//!
//! Prints `leaves=<n>`: the leaves it counted itself (`fold` makes one accumulator per leaf).
//! The iterator splits by `join` down to them, so the region has 2·(leaves − 1) tasks, and one
//! more for entering the pool from `main`; and `region_ns=<n>`: the region's wall time, which
//! `benches/rayon_overhead.rs` compares with and without parprof.

use parprof_rt::parallel_region;
use rayon::prelude::*;
use std::hint::black_box;
use std::time::Instant;

static LEAVES: parprof_suite::Tally = parprof_suite::Tally::new();

/// About 10 µs of arithmetic.
fn work(seed: u64) -> u64 {
    let mut x = seed;
    for _ in 0..8_000 {
        x = black_box(
            x.wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407),
        );
    }
    x
}

fn main() {
    parprof_suite::global_pool_from_args(2);
    let start = Instant::now();
    let checksum = parallel_region!("tuned", {
        (0..40_000u32)
            .into_par_iter()
            .with_max_len(32)
            .fold(
                || {
                    LEAVES.add();
                    0u64
                },
                |acc, i| acc ^ work(u64::from(i)),
            )
            .reduce(|| 0, |a, b| a ^ b)
    });
    let region_ns = start.elapsed().as_nanos();
    println!("checksum={checksum:016x}");
    println!("leaves={}", LEAVES.total());
    println!("region_ns={region_ns}");
}
