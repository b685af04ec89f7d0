//! A spawn loop: one `scope` whose body walks many small items in a `for` loop and spawns a
//! task for each (linear spawn), instead of splitting them recursively.
//!
//! `demo_spawn_loop [ITEMS] [--region]`: `process_all` prepares ITEMS items (default 20,000)
//! one after the other (about 2 µs each, as reading or parsing them would) and spawns a task of
//! about 1 µs for each with `s.spawn`. The spawning worker is busy in its loop while the others
//! take the tasks from its deque one by one. With `--region` the call of `process_all` is
//! wrapped in `parallel_region!("spawn_loop", ..)`; without it the program has no annotation
//! at all. The global pool has one worker per CPU (`RAYON_NUM_THREADS` to change it).
//!
//! Prints `joins=0 spawns=<n> installs=0`: the calls it made, counted by the program itself.
//! Each spawn runs one task, and the scope entered from `main` one more (its body), so the
//! region has spawns + 1.

use parprof_suite::calls::{self, SPAWNS};
use parprof_suite::spin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

fn process_all(items: usize) -> u64 {
    let checksum = AtomicU64::new(0);
    rayon::scope(|s| {
        for _ in 0..items {
            let item = spin(Duration::from_micros(2));
            let checksum = &checksum;
            calls::count(&SPAWNS);
            s.spawn(move |_| {
                checksum.fetch_xor(item ^ spin(Duration::from_micros(1)), Ordering::Relaxed);
            });
        }
    });
    checksum.into_inner()
}

fn main() {
    let args = parprof_suite::DemoArgs::from_env();
    let items = args.number(0, 20_000);
    let checksum = if args.region() {
        parprof_rt::parallel_region!("spawn_loop", { process_all(items) })
    } else {
        process_all(items)
    };
    println!("checksum={checksum:016x}");
    calls::print();
}
