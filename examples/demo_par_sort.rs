//! Sorting a large `Vec` with rayon's `par_sort` (a stable parallel merge sort) or
//! `par_sort_unstable` (a parallel pattern-defeating quicksort): every `join` of the sort is
//! written inside rayon, none in the program.
//!
//! `demo_par_sort [LEN] [--unstable] [--region]` sorts LEN pseudo-random integers (default
//! 1,000,000) with `par_sort`, or `par_sort_unstable` with `--unstable`. With `--region` the
//! sort is wrapped in `parallel_region!("par_sort", ..)`; without it the program has no
//! annotation at all. The global pool has one worker per CPU (`RAYON_NUM_THREADS` to change
//! it).
//!
//! Prints `joins=0 spawns=0 installs=0` (the program itself calls none) and `len=<n>`: the
//! tasks of the sort follow from rayon's algorithm and the length (see the end-to-end test).

use parprof_suite::calls;
use rayon::prelude::*;

fn sort(v: &mut [u32], unstable: bool) {
    if unstable {
        v.par_sort_unstable();
    } else {
        v.par_sort();
    }
}

fn main() {
    let args = parprof_suite::DemoArgs::from_env();
    let unstable = args.flag("--unstable");
    let mut v = parprof_suite::pseudo_random(args.number(0, 1_000_000));
    if args.region() {
        parprof_rt::parallel_region!("par_sort", { sort(&mut v, unstable) });
    } else {
        sort(&mut v, unstable);
    }
    assert!(v.windows(2).all(|w| w[0] <= w[1]), "sorted");
    calls::print();
    println!("len={}", v.len());
}
