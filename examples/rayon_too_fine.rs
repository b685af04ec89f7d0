//! Too fine granularity: a parallel sum cut into pieces of a few cheap items.
//!
//! The global pool has 2 workers (one per core of a 2-core machine; `rayon_too_fine [WORKERS]`
//! to change it). They sum 4,000,000 items in leaves of at most 4 items (`with_max_len(4)`):
//! about 1,000,000 leaves reached by as many joins, two million tasks of a few nanoseconds
//! each, so the workers spend more time taking tasks from their deques than running them. `cargo parprof --example rayon_too_fine`
//! reports `too_fine_granularity`.
//!
//! Prints `leaves=<n>`: the leaves it counted itself (`fold` makes one accumulator per leaf).
//! The iterator splits by `join` down to them, so the region has 2·(leaves − 1) tasks, and one
//! more for entering the pool from `main`; and `region_ns=<n>`: the region's wall time, which
//! `benches/rayon_overhead.rs` compares with and without parprof.

use parprof_rt::parallel_region;
use rayon::prelude::*;
use std::time::Instant;

static LEAVES: parprof_suite::Tally = parprof_suite::Tally::new();

fn mix(x: u32) -> u64 {
    let h = u64::from(x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^ (h >> 29)
}

fn main() {
    parprof_suite::global_pool_from_args(2);
    let start = Instant::now();
    let sum = parallel_region!("too_fine", {
        (0..4_000_000u32)
            .into_par_iter()
            .with_max_len(4)
            .fold(
                || {
                    LEAVES.add();
                    0u64
                },
                |acc, x| acc.wrapping_add(mix(x)),
            )
            .reduce(|| 0, u64::wrapping_add)
    });
    let region_ns = start.elapsed().as_nanos();
    println!("sum={sum:016x}");
    println!("leaves={}", LEAVES.total());
    println!("region_ns={region_ns}");
}
