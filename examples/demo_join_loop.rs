//! A join-of-two loop on a large pool: thousands of `ThreadPool::join` calls of two small
//! closures, one after the other from `main`, on a pool of 8 workers (on a 2-core machine) —
//! the shape of a bench harness timing a small parallel step.
//!
//! `demo_join_loop [WORKERS] [CALLS] [--region]`: `serve` builds a pool of WORKERS (default 8)
//! and calls `pool.join` CALLS times (default 3,000), each of two closures of about 2 µs.
//! With `--region` the call of `serve` is wrapped in `parallel_region!("join_loop", ..)`;
//! without it the program has no annotation at all.
//!
//! Prints `joins=<n> spawns=0 installs=0`: the calls it made, counted by the program itself.
//! Each `pool.join` enters the pool from `main` (one task) and runs two, so the region has
//! 3·joins.

use parprof_suite::calls::{self, JOINS};
use parprof_suite::spin;
use std::time::Duration;

fn serve(workers: usize, calls: usize) -> u64 {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build()
        .expect("the pool");
    let step = Duration::from_micros(2);
    let mut checksum = 0;
    for _ in 0..calls {
        calls::count(&JOINS);
        let (a, b) = pool.join(|| spin(step), || spin(step));
        checksum ^= a ^ b;
    }
    checksum
}

fn main() {
    let args = parprof_suite::DemoArgs::from_env();
    let (workers, joins) = (args.number(0, 8), args.number(1, 3_000));
    let checksum = if args.region() {
        parprof_rt::parallel_region!("join_loop", { serve(workers, joins) })
    } else {
        serve(workers, joins)
    };
    println!("checksum={checksum:016x}");
    calls::print();
}
