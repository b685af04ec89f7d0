//! Two criterion benchmarks, written as a library's bench is: `checksum` (a parallel map and
//! reduce over 200,000 integers) and `sort_words` (`par_sort_unstable` of 100,000 integers).
//!
//! `cargo parprof --bench criterion_pair` profiles each alone in criterion's profile mode
//! (tests/ci_workflow_e2e.rs). That test copies this file into a repository of its own and, in
//! a second commit, doubles `MIX_ROUNDS`: `checksum` gets twice as slow, `sort_words` does not
//! change.

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use rayon::prelude::*;
use std::hint::black_box;

/// Rounds of mixing per element in `checksum`.
const MIX_ROUNDS: u32 = 8;

fn mix(mut x: u64, rounds: u32) -> u64 {
    for _ in 0..rounds {
        x = x.rotate_left(13).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (x >> 7);
    }
    x
}

fn checksum(v: &[u64]) -> u64 {
    v.par_iter()
        .map(|&x| mix(x, MIX_ROUNDS))
        .reduce(|| 0, |a, b| a ^ b)
}

fn sort_words(words: &mut [u64]) {
    words.par_sort_unstable();
}

fn benches(c: &mut Criterion) {
    let v: Vec<u64> = (0..200_000).collect();
    c.bench_function("checksum", |b| b.iter(|| checksum(black_box(&v))));
    let words: Vec<u64> = (0..100_000).map(|i| mix(i, 1)).collect();
    c.bench_function("sort_words", |b| {
        b.iter_batched_ref(|| words.clone(), |w| sort_words(w), BatchSize::LargeInput)
    });
}

criterion_group!(pair, benches);
criterion_main!(pair);
