//! Insufficient parallel slack: far fewer tasks than workers, again and again.
//!
//! The global pool has 4 workers on a 2-core machine. 225 requests arrive one every 2 ms (the
//! main thread waits for each); each is handled in a run of the region `request`, a join of
//! two 50 µs tasks. Each join wakes sleeping workers that search, find nothing and go back to
//! sleep; half of the pool never has anything to do. `cargo parprof --example
//! rayon_low_slack` reports `insufficient_parallel_slack`. The fix is to give the pool more
//! independent work at once (batch the requests and handle a batch with one `par_iter`, or
//! cut each request finer), or to use a pool as small as the work.
//!
//! `rayon_low_slack [WORKERS] [INTERVAL_US] [REQUESTS]` changes the figures. The interval is
//! long enough for idle workers to fall asleep between requests (rayon's 32 yielding search
//! rounds take well under a millisecond when a core is free) and short enough that they are
//! woken hundreds of times a second. The main thread waits rather than computes, so that it
//! leaves the cores to the workers. On a machine whose cores are all busy with other
//! programs, each yield waits for them, the workers never get to sleep, and the pattern shows
//! as searching instead (see the end-to-end test).
//!
//! Prints `joins=<n>`: the joins it ran, one per request. Each enters the pool from `main` (one
//! task) and runs two halves, so the region has 3·joins tasks over all its runs.

use parprof_rt::parallel_region;
use parprof_suite::spin;

use std::time::Duration;

static JOINS: parprof_suite::Tally = parprof_suite::Tally::new();

/// Command-line argument `index` as a number, `default` when absent.
fn arg(index: usize, default: u64) -> u64 {
    std::env::args()
        .nth(index)
        .map_or(default, |a| a.parse().expect("a whole number"))
}

fn main() {
    let workers = arg(1, 4) as usize;
    let interval = Duration::from_micros(arg(2, 2_000));
    let requests = arg(3, 225);
    rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build_global()
        .expect("the global pool");
    let half = Duration::from_micros(50);
    let mut checksum = 0u64;
    for _ in 0..requests {
        // Waiting for the next request.
        std::thread::sleep(interval);
        checksum ^= parallel_region!("request", {
            JOINS.add();
            let (a, b) = rayon::join(|| spin(half), || spin(half));
            a ^ b
        });
    }
    println!("checksum={checksum:016x}");
    println!("joins={}", JOINS.total());
}
