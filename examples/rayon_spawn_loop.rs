//! Excessive stealing: one thread spawns every task in a loop.
//!
//! The global pool has 4 workers on a 2-core machine (`rayon_spawn_loop [WORKERS]` to change
//! it). The body of a `scope` prepares 20,000 work items one after the other (3 µs each) and
//! spawns a 3 µs task for each: the spawning worker is busy in its loop while the other three
//! take the tasks from its deque one by one, searching again after each.
//! `cargo parprof --example rayon_spawn_loop` reports `excessive_stealing`: far more tasks
//! stolen than taken from a worker's own deque. The fix is to split the items recursively
//! (`items.par_iter().for_each(..)`), so that every worker creates tasks for itself.
//!
//! Prints `tasks=<n>`: the spawned tasks it ran plus the scope's body, the region's tasks.

use parprof_rt::parallel_region;
use parprof_suite::spin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

static TASKS: parprof_suite::Tally = parprof_suite::Tally::new();

fn main() {
    parprof_suite::global_pool_from_args(4);
    let checksum = AtomicU64::new(0);
    parallel_region!("spawn_loop", {
        rayon::scope(|s| {
            TASKS.add();
            for _ in 0..20_000 {
                let item = spin(Duration::from_micros(3));
                let checksum = &checksum;
                s.spawn(move |_| {
                    TASKS.add();
                    checksum.fetch_xor(item ^ spin(Duration::from_micros(3)), Ordering::Relaxed);
                });
            }
        })
    });
    println!("checksum={:016x}", checksum.load(Ordering::Relaxed));
    println!("tasks={}", TASKS.total());
}
