//! Insufficient parallel slack: far fewer tasks than workers, again and again.
//!
//! The global pool has 4 workers on a 2-core machine (`rayon_low_slack [WORKERS]` to change
//! it). A region runs a loop of 1,000 steps: 300 µs of sequential preparation, then a join of
//! two 50 µs tasks. Each join wakes sleeping workers that search, find nothing and go back to
//! sleep; half of the pool never has anything to do.
//! `cargo parprof --example rayon_low_slack` reports `insufficient_parallel_slack`. The fix is
//! to give the pool more independent work at once (parallelise the loop over the steps, or cut
//! each step finer), or to use a pool as small as the work.
//!
//! Prints `tasks=<n>`: the halves of the joins it ran, the region's tasks.

use parprof_rt::parallel_region;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

static TASKS: AtomicU64 = AtomicU64::new(0);

/// Busy work for `d` of wall-clock time.
fn spin(d: Duration) -> u64 {
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

/// One half of a step's join.
fn task(d: Duration) -> u64 {
    TASKS.fetch_add(1, Ordering::Relaxed);
    spin(d)
}

fn main() {
    let workers = std::env::args()
        .nth(1)
        .map_or(4, |a| a.parse().expect("a number of workers"));
    rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build_global()
        .expect("the global pool");
    let arg = |i: usize, default: u64| {
        std::env::args()
            .nth(i)
            .map_or(default, |a| a.parse().expect("a number"))
    };
    let prep = Duration::from_micros(arg(2, 300));
    let steps = arg(3, 1000);
    let step = Duration::from_micros(arg(4, 50));
    let checksum = parallel_region!("steps", {
        let mut checksum = 0u64;
        for _ in 0..steps {
            checksum ^= spin(prep);
            let (a, b) = rayon::join(|| task(step), || task(step));
            checksum ^= a ^ b;
        }
        checksum
    });
    println!("checksum={checksum:016x}");
    println!("tasks={}", TASKS.load(Ordering::Relaxed));
}
