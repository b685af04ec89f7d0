//! A pool larger than the CPUs: a `ThreadPool` of 8 workers (on a 2-core machine) built with
//! `ThreadPoolBuilder`, running a recursive `join` sum.
//!
//! `demo_big_pool [WORKERS] [LEN] [CUTOFF] [--region]`: `sum_in_pool` builds a pool of WORKERS
//! (default 8) and `install`s in it a recursive `join` over LEN integers (default 4,000,000);
//! slices of at most CUTOFF items (default 20,000) are summed sequentially. With `--region`
//! the top call is wrapped in `parallel_region!("big_pool", ..)`; without it the program has
//! no annotation at all.
//!
//! Prints `joins=<n> spawns=0 installs=1`: the calls it made, counted by the program itself.
//! Each join runs two tasks and the `install` from `main` (outside every pool) one, so the
//! region has 2·joins + 1.

use parprof_suite::calls::{self, INSTALLS, JOINS};

fn mix(x: u32) -> u64 {
    let h = u64::from(x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^ (h >> 29)
}

fn sum(v: &[u32], cutoff: usize) -> u64 {
    if v.len() <= cutoff.max(1) {
        return v.iter().map(|&x| mix(x)).fold(0, u64::wrapping_add);
    }
    let (lo, hi) = v.split_at(v.len() / 2);
    calls::count(&JOINS);
    let (a, b) = rayon::join(|| sum(lo, cutoff), || sum(hi, cutoff));
    a.wrapping_add(b)
}

fn sum_in_pool(workers: usize, v: &[u32], cutoff: usize) -> u64 {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build()
        .expect("the pool");
    calls::count(&INSTALLS);
    pool.install(|| sum(v, cutoff))
}

fn main() {
    let args = parprof_suite::DemoArgs::from_env();
    let workers = args.number(0, 8);
    let cutoff = args.number(2, 20_000);
    let v = parprof_suite::pseudo_random(args.number(1, 4_000_000));
    let total = if args.region() {
        parprof_rt::parallel_region!("big_pool", { sum_in_pool(workers, &v, cutoff) })
    } else {
        sum_in_pool(workers, &v, cutoff)
    };
    println!("sum={total:016x}");
    calls::print();
}
