//! Tasks that share a lock, written as a histogram often is at first: every task of a
//! `par_iter` adds its item to one `Mutex<Vec<u64>>` and works while holding it, so the workers
//! take turns, and the one that waits is blocked in user code. `cargo parprof --example
//! lock_in_tasks` reports `blocking_in_tasks` naming `lock_in_tasks::add_to_histogram`.
//!
//! The global pool has 2 workers (`lock_in_tasks [ITEMS] [WORKERS]`); ITEMS (default 4,000)
//! tasks each spin 5 µs outside the lock and 20 µs inside it. Prints `items=<n>`: the items
//! the histogram counted.

use rayon::prelude::*;
use std::sync::Mutex;
use std::time::Duration;

fn add_to_histogram(histogram: &Mutex<Vec<u64>>, item: u64) {
    let mut bins = histogram.lock().expect("no task panics");
    // The bin's update stands for work done under the lock (a lookup, a merge).
    parprof_suite::spin(Duration::from_micros(20));
    let bin = (item % 64) as usize;
    bins[bin] += 1;
}

fn main() {
    let args = parprof_suite::DemoArgs::from_env();
    let items = args.number(0, 4_000) as u64;
    let workers = args.number(1, 2);
    rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build_global()
        .expect("the global pool is built once");
    let histogram = Mutex::new(vec![0u64; 64]);
    (0..items).into_par_iter().for_each(|item| {
        parprof_suite::spin(Duration::from_micros(5));
        add_to_histogram(&histogram, item);
    });
    let counted: u64 = histogram
        .into_inner()
        .expect("no task panicked")
        .iter()
        .sum();
    println!("items={counted}");
}
