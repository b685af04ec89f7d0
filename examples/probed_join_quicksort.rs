//! Probes on a recursive `rayon::join`, as a new user writes them: `#[probe]` on rayon's demo
//! quicksort (recursion through `join` in a plain function) and on the sequential sort of its
//! small slices, sorted ROUNDS times in a loop (default 6 rounds of 400,000 integers). Every
//! task a worker steals starts a new outermost activation of `quicksort` there, so the probe
//! is entered anew thousands of times: a sampled site must still count each activation once.
//!
//! `probed_join_quicksort [ROUNDS [LEN]]` prints `calls=<n> small_sorts=<m>`: the probed calls,
//! counted by the program.

use parprof_rt::probe;
use std::sync::atomic::{AtomicU64, Ordering};

static CALLS: AtomicU64 = AtomicU64::new(0);
static SMALL_SORTS: AtomicU64 = AtomicU64::new(0);

#[probe]
fn quicksort(v: &mut [u32]) {
    CALLS.fetch_add(1, Ordering::Relaxed);
    if v.len() <= 32 {
        insertion_sort(v);
        return;
    }
    let mid = parprof_suite::partition(v);
    let (low, high) = v.split_at_mut(mid);
    rayon::join(|| quicksort(low), || quicksort(&mut high[1..]));
}

#[probe]
fn insertion_sort(v: &mut [u32]) {
    SMALL_SORTS.fetch_add(1, Ordering::Relaxed);
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && v[j - 1] > v[j] {
            v.swap(j - 1, j);
            j -= 1;
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse().ok());
    let rounds = args.next().flatten().unwrap_or(6);
    let len = args.next().flatten().unwrap_or(400_000);
    for _ in 0..rounds {
        let mut v = parprof_suite::pseudo_random(len);
        quicksort(&mut v);
        assert!(v.is_sorted());
    }
    println!(
        "calls={} small_sorts={}",
        CALLS.load(Ordering::Relaxed),
        SMALL_SORTS.load(Ordering::Relaxed)
    );
}
