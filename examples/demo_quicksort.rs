//! A parallel quicksort written the way rayon's own demo is: `rayon::join` inside a plain
//! recursive function, no annotation in it.
//!
//! `demo_quicksort [LEN] [CUTOFF] [--region]` sorts LEN pseudo-random integers (default
//! 1,000,000); slices of at most CUTOFF (default 16: too fine; 5,000 is tuned) are sorted sequentially
//! with `sort_unstable_by`. With
//! `--region` the top call is wrapped in `parallel_region!("quicksort", ..)`; without it the
//! program has no annotation at all. The global pool has 2 workers (`RAYON_NUM_THREADS` to
//! change it).
//!
//! Prints `joins=<n>`: the `rayon::join` calls it made, counted by the program itself. Each join
//! runs two tasks, and entering the pool from `main` one more, so the region has 2·joins + 1.
//! Then `work_ns=<n>`: the sort's own wall time, and `cpu_ns=<n>`: the CPU time of every thread
//! of the process meanwhile (on a machine busy with other programs the wall time stretches by
//! whatever they take; the CPU time of a sort that keeps every worker busy does not).

use parprof_suite::calls::{self, JOINS};

fn partition<T: PartialOrd>(v: &mut [T]) -> usize {
    let pivot = v.len() - 1;
    let mut i = 0;
    for j in 0..pivot {
        if v[j] <= v[pivot] {
            v.swap(i, j);
            i += 1;
        }
    }
    v.swap(i, pivot);
    i
}

fn quick_sort<T: PartialOrd + Send>(v: &mut [T], cutoff: usize) {
    if v.len() <= cutoff.max(1) {
        v.sort_unstable_by(|a, b| a.partial_cmp(b).expect("comparable"));
        return;
    }
    let mid = partition(v);
    let (lo, hi) = v.split_at_mut(mid);
    calls::count(&JOINS);
    rayon::join(
        || quick_sort(lo, cutoff),
        || quick_sort(&mut hi[1..], cutoff),
    );
}

fn main() {
    let args = parprof_suite::DemoArgs::from_env();
    let cutoff = args.number(1, 16);
    let mut v = parprof_suite::pseudo_random(args.number(0, 1_000_000));
    let start = std::time::Instant::now();
    let cpu = parprof_suite::process_cpu_ns();
    if args.region() {
        parprof_rt::parallel_region!("quicksort", { quick_sort(&mut v, cutoff) });
    } else {
        quick_sort(&mut v, cutoff);
    }
    let sort_ns = start.elapsed().as_nanos();
    let cpu_ns = parprof_suite::process_cpu_ns() - cpu;
    assert!(v.windows(2).all(|w| w[0] <= w[1]), "sorted");
    calls::print();
    println!("work_ns={sort_ns} cpu_ns={cpu_ns}");
}
