//! Load imbalance: a few huge tasks among small ones.
//!
//! The global pool has 2 workers, one per core of a 2-core machine (`rayon_imbalance
//! [WORKERS]` to change it). A parallel iterator processes 41 items, one at a time
//! (`with_max_len(1)`): the first takes 600 ms, the others 1 ms each. The worker that gets
//! the first item runs it for the whole region while the other finishes the 40 small ones in
//! 40 ms and then has nothing left to do. `cargo parprof --example rayon_imbalance` reports
//! `load_imbalance`; the fix is to split the huge item itself.
//!
//! The huge item is that long so that the idle worker sleeps for most of the region even on a
//! busy machine, where each of rayon's 32 yielding search rounds before sleeping waits for
//! other programs and the search can last a hundred milliseconds.
//!
//! Prints `leaves=<n>`: the leaves it counted itself (`fold` makes one accumulator per leaf).
//! The iterator splits by `join` down to them, so the region has 2·(leaves − 1) tasks, and one
//! more for entering the pool from `main`.

use parprof_rt::parallel_region;
use parprof_suite::spin;
use rayon::prelude::*;
use std::time::Duration;

static LEAVES: parprof_suite::Tally = parprof_suite::Tally::new();

fn main() {
    parprof_suite::global_pool_from_args(2);
    let mut sizes = vec![Duration::from_millis(600)];
    sizes.extend(std::iter::repeat_n(Duration::from_millis(1), 40));
    let checksum = parallel_region!("imbalance", {
        sizes
            .par_iter()
            .with_max_len(1)
            .fold(
                || {
                    LEAVES.add();
                    0u64
                },
                |acc, &d| acc ^ spin(d),
            )
            .reduce(|| 0, |a, b| a ^ b)
    });
    println!("checksum={checksum:016x}");
    println!("leaves={}", LEAVES.total());
}
