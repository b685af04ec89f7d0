//! A probe on a hot recursive function, as a new user writes one: `#[probe]` on the textbook
//! quicksort that recurses down to single elements, sorting LEN integers (default 3,000,000):
//! about 2·LEN probed calls, most of them a few nanoseconds long.
//!
//! `probed_quicksort [LEN]` prints `calls=<n>`: the probed calls, counted by the program.

use parprof_rt::probe;
use std::sync::atomic::{AtomicU64, Ordering};

static CALLS: AtomicU64 = AtomicU64::new(0);

#[probe]
fn quicksort(v: &mut [u32]) {
    CALLS.fetch_add(1, Ordering::Relaxed);
    if v.len() <= 1 {
        return;
    }
    let mid = parprof_suite::partition(v);
    let (low, high) = v.split_at_mut(mid);
    quicksort(low);
    quicksort(&mut high[1..]);
}

fn main() {
    let len = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3_000_000);
    let mut v = parprof_suite::pseudo_random(len);
    quicksort(&mut v);
    assert!(v.is_sorted());
    println!("calls={}", CALLS.load(Ordering::Relaxed));
}
