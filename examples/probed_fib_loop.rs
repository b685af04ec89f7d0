//! A probe on a small recursive function called in a loop, the shape of a benchmark's
//! iterations (`b.iter(|| fib(black_box(n)))`): the recursion is entered anew at every
//! iteration, its outermost calls about a microsecond apart, so both they and the calls nested
//! in them are sampled, and the loop's last calls are untimed, with no probe event after them.
//!
//! `probed_fib_loop [N [ITERATIONS]]` (default 10 and 100,000) prints `calls=<n>`: the probed
//! calls, counted by the program.

use parprof_rt::probe;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

static CALLS: AtomicU64 = AtomicU64::new(0);

#[probe]
fn fib(n: u64) -> u64 {
    CALLS.fetch_add(1, Ordering::Relaxed);
    if n < 2 { n } else { fib(n - 1) + fib(n - 2) }
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse().ok());
    let n = args.next().flatten().unwrap_or(10);
    let iterations = args.next().flatten().unwrap_or(100_000);
    for _ in 0..iterations {
        black_box(fib(black_box(n)));
    }
    println!("calls={}", CALLS.load(Ordering::Relaxed));
}
