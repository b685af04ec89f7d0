//! Insufficient parallel slack: far fewer tasks than workers, again and again.
//!
//! The global pool has 8 workers on a 2-core machine (`rayon_low_slack [WORKERS]` to change
//! it). A loop runs 2,000 steps; each step is a region that joins two 50 µs tasks, so each
//! time a step starts, sleeping workers are woken up, search, find nothing and go back to
//! sleep. `cargo parprof --example rayon_low_slack` reports `insufficient_parallel_slack`.
//! The fix is to give the pool more independent work at once (parallelise the loop over the
//! steps, or cut each step finer), or to use a pool as small as the work.
//!
//! Prints `tasks=<n>`: the halves of the joins it ran, the region's tasks.

use parprof_rt::parallel_region;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

static TASKS: AtomicU64 = AtomicU64::new(0);

/// Busy work for `d` of wall-clock time.
fn spin(d: Duration) -> u64 {
    TASKS.fetch_add(1, Ordering::Relaxed);
    let start = Instant::now();
    let mut x = 1u64;
    while start.elapsed() < d {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407));
    }
    x
}

fn main() {
    let workers = std::env::args().nth(1).map_or(8, |a| a.parse().expect("a number of workers"));
    rayon::ThreadPoolBuilder::new().num_threads(workers).build_global().expect("the global pool");
    let step = Duration::from_micros(50);
    let mut checksum = 0u64;
    for _ in 0..2_000 {
        let (a, b) = parallel_region!("step", { rayon::join(|| spin(step), || spin(step)) });
        checksum ^= a ^ b;
    }
    println!("checksum={checksum:016x}");
    println!("tasks={}", TASKS.load(Ordering::Relaxed));
}
