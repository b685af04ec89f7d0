//! A criterion benchmark that counts its own iterations: `sort_counted` sorts 20,000 integers
//! with `iter_batched_ref` (criterion 0.5 panics there when asked for a batch of 0 iterations),
//! and its routine counts every call and runs two probes: `sort_numbers` once and `sorted_at`
//! [`CHECKS`] times (short calls, sampled).
//!
//! It prints `routine_calls=N` when criterion is done, so that tests/criterion_e2e.rs can
//! check the iterations that `cargo parprof --bench criterion_counted` reports against the
//! truth: in profile mode, criterion's warm-up and its measured batch together.

use criterion::{BatchSize, Criterion, criterion_group};
use rayon::prelude::*;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

/// Calls of the benchmarked routine, warm-up included.
static ROUTINE_CALLS: AtomicU64 = AtomicU64::new(0);

#[parprof_rt::probe]
fn sort_numbers(numbers: &mut [u64]) {
    numbers.par_sort_unstable();
}

/// Checks of the sorted numbers per iteration: short calls on the main thread, close enough
/// together for the runtime to sample them (most are counted, not recorded one by one).
const CHECKS: usize = 2048;

#[parprof_rt::probe]
fn sorted_at(numbers: &[u64], at: usize) -> bool {
    numbers[at..].iter().take(8).is_sorted()
}

fn benches(c: &mut Criterion) {
    let numbers: Vec<u64> = (0..20_000u64)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17))
        .collect();
    c.bench_function("sort_counted", |b| {
        b.iter_batched_ref(
            || numbers.clone(),
            |n| {
                ROUTINE_CALLS.fetch_add(1, Ordering::Relaxed);
                sort_numbers(black_box(n));
                let step = n.len() / CHECKS;
                let sorted = (0..CHECKS).all(|i| sorted_at(n, i * step));
                assert!(black_box(sorted));
            },
            BatchSize::LargeInput,
        )
    });
}

criterion_group!(counted, benches);

/// `criterion_main!`'s main, with the count printed after criterion is done.
fn main() {
    counted();
    Criterion::default().configure_from_args().final_summary();
    println!("routine_calls={}", ROUTINE_CALLS.load(Ordering::Relaxed));
}
