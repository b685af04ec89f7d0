//! What the example programs of parprof share. The end-to-end tests live in `tests/`.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Busy work for `d` of wall-clock time: a task whose length does not depend on the CPU.
pub fn spin(d: Duration) -> u64 {
    let start = Instant::now();
    let mut x = 1u64;
    while start.elapsed() < d {
        x = black_box(
            x.wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407),
        );
    }
    x
}

/// Builds rayon's global pool with the worker count given as the program's first argument,
/// or `default_workers`; returns the count.
pub fn global_pool_from_args(default_workers: usize) -> usize {
    let workers = std::env::args()
        .nth(1)
        .map_or(default_workers, |a| a.parse().expect("a number of workers"));
    rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build_global()
        .expect("the global pool");
    workers
}
