//! A nested pool: a library-style function builds its own `ThreadPool` and runs its work there
//! with `install`, called from tasks of the global pool.
//!
//! `demo_nested_pool [LEN] [CUTOFF] [--region]`: `checksum_all` splits LEN integers (default
//! 2,000,000) into two halves with `rayon::join` on the global pool; each half calls
//! `library_checksum`, which builds a pool of 2 workers and `install`s a recursive `join` sum
//! (slices of at most CUTOFF items, default 50,000, are summed sequentially) in it. With
//! `--region` the top call is wrapped in `parallel_region!("nested_pool", ..)`; without it the
//! program has no annotation at all.
//!
//! Prints `joins=<n> spawns=0 installs=<n>`: the calls it made, counted by the program itself.
//! Each join runs two tasks, each `install` from a worker of another pool one, and entering
//! the global pool from `main` one more, so the region has 2·joins + installs + 1.

use parprof_suite::calls::{self, INSTALLS, JOINS};

fn checksum(v: &[u32], cutoff: usize) -> u64 {
    if v.len() <= cutoff.max(1) {
        return v
            .iter()
            .fold(0u64, |acc, &x| acc.rotate_left(5) ^ u64::from(x));
    }
    let (lo, hi) = v.split_at(v.len() / 2);
    calls::count(&JOINS);
    let (a, b) = rayon::join(|| checksum(lo, cutoff), || checksum(hi, cutoff));
    a.rotate_left(7) ^ b
}

/// What a library does when it wants its own workers: a pool of its own, built per call.
fn library_checksum(v: &[u32], cutoff: usize) -> u64 {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("the library's pool");
    calls::count(&INSTALLS);
    pool.install(|| checksum(v, cutoff))
}

fn checksum_all(v: &[u32], cutoff: usize) -> u64 {
    let (lo, hi) = v.split_at(v.len() / 2);
    calls::count(&JOINS);
    let (a, b) = rayon::join(
        || library_checksum(lo, cutoff),
        || library_checksum(hi, cutoff),
    );
    a ^ b
}

fn main() {
    let args = parprof_suite::DemoArgs::from_env();
    let cutoff = args.number(1, 50_000);
    let v = parprof_suite::pseudo_random(args.number(0, 2_000_000));
    let sum = if args.region() {
        parprof_rt::parallel_region!("nested_pool", { checksum_all(&v, cutoff) })
    } else {
        checksum_all(&v, cutoff)
    };
    println!("checksum={sum:016x}");
    calls::print();
}
