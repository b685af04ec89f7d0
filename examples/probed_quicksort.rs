//! A probe on a hot recursive function, as a new user writes one: `#[probe]` on the textbook
//! quicksort that recurses down to single elements, sorting LEN integers (default 3,000,000):
//! about 2·LEN probed calls, most of them a few nanoseconds long.
//!
//! `probed_quicksort [LEN]` prints `calls=<n>`: the probed calls, counted by the program.

use parprof_rt::probe;
use std::sync::atomic::{AtomicU64, Ordering};

static CALLS: AtomicU64 = AtomicU64::new(0);

#[probe]
fn quicksort(v: &mut [u64]) {
    CALLS.fetch_add(1, Ordering::Relaxed);
    if v.len() <= 1 {
        return;
    }
    let pivot = v[v.len() - 1];
    let mut store = 0;
    for i in 0..v.len() - 1 {
        if v[i] < pivot {
            v.swap(i, store);
            store += 1;
        }
    }
    let last = v.len() - 1;
    v.swap(store, last);
    let (low, high) = v.split_at_mut(store);
    quicksort(low);
    quicksort(&mut high[1..]);
}

fn main() {
    let len = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3_000_000);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut v: Vec<u64> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        })
        .collect();
    quicksort(&mut v);
    assert!(v.is_sorted());
    println!("calls={}", CALLS.load(Ordering::Relaxed));
}
