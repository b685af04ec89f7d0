//! Pairs of programs written the way users write them: a task shape that parprof diagnoses,
//! and the fix it advises — the same algorithm and the same work, only the task shape changed.
//! `benches/predicted_gain.rs` runs both sides plain and checks parprof's "× faster if fixed"
//! against the real gain.
//!
//! `gain_pairs PAIR SHAPE [SIZE] [WORKERS] [MIN_LEN]`, SHAPE `bad` or `fix`, the global pool of
//! WORKERS (default 2), MIN_LEN the fixed `map_reduce`'s `with_min_len` (default 256; the
//! benchmark passes the one parprof advised); prints `work_ns=<n>`, the wall time of the
//! parallel part, `cpu_ns=<n>`, the CPU time of every thread meanwhile, and `check=<n>`, a
//! result that is the same for both shapes. The pairs:
//!
//! - `quicksort`: a partition quicksort of SIZE keys (default 2 M) joined down to single
//!   elements, against the same recursion with plain calls below 5,000 elements;
//! - `map_reduce`: SIZE items (default 1 M) of about 80 ns each, one item per task
//!   (`with_max_len(1)`), against `with_min_len(MIN_LEN)`;
//! - `nested`: SIZE rows (default 200,000) of 16 items, each row summed by a nested `par_iter`
//!   inside the outer `par_iter` over the rows, against the inner loop sequential;
//! - `imbalance`: 16 tasks, one 40× the others (SIZE rounds, default 3), against the big one
//!   split into 40 pieces;
//! - `spawn_loop`: SIZE pieces of about 20 µs (default 8,000) spawned in a loop in a `scope`,
//!   against a recursive split (`par_iter`) of the same pieces.
//!
//! `gain_pairs item_overlap UNITS` times, on one thread, 2 M calls of the pairs' `work(_, UNITS)`
//! back to back (`back_to_back_ns=`, per call), and the same calls each waiting for the last's
//! result (`alone_ns=`): how much faster the core runs an item's work when the next item's is
//! independent and follows at once, as in a fix's sequential loop, which a recording of the
//! one-item shape cannot see.

use rayon::prelude::*;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Runs `parallel` and times it: the input's making and the result's checks are left out.
/// Prints the process's CPU time meanwhile (`cpu_ns=`, every thread's): on a machine busy with
/// other programs the wall time stretches, the CPU time much less.
fn timed<T>(parallel: impl FnOnce() -> T) -> (T, Duration) {
    let cpu = parprof_suite::process_cpu_ns();
    let start = Instant::now();
    let out = parallel();
    let wall = start.elapsed();
    println!("cpu_ns={}", parprof_suite::process_cpu_ns() - cpu);
    (out, wall)
}

/// Work of `units` steps of a xorshift-multiply chain: about 1 ns a step, the same on every run and
/// in every build. The chain stays in a register: a `black_box` at every step would put it
/// through the stack, and how fast a store and its reload follow each other depends on the
/// build (addressed from the stack pointer, as the user's release build does, or from the frame
/// pointer, as the profiling build does: on this AMD EPYC the second made the same loop 1.3×
/// slower by CPU time in `map_reduce fix` and 2.9× in `nested fix`) — a property of the build,
/// not of the task shape these pairs compare.
#[inline(never)]
fn work(seed: u64, units: u64) -> u64 {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for _ in 0..black_box(units) {
        // The shift keeps the compiler from folding steps together (a multiply-add chain alone
        // is one multiply-add per eight steps once unrolled).
        x = (x ^ (x >> 29)).wrapping_mul(6364136223846793005);
    }
    black_box(x) >> 11
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let pair = args.first().map_or("quicksort", String::as_str);
    if pair == "item_overlap" {
        return item_overlap(args.get(1).map_or(60, |a| a.parse().expect("UNITS")));
    }
    let fix = match args.get(1).map(String::as_str) {
        Some("fix") => true,
        Some("bad") | None => false,
        Some(other) => panic!("SHAPE is `bad` or `fix`, not {other}"),
    };
    let size = |default: usize| args.get(2).map_or(default, |a| a.parse().expect("a SIZE"));
    let workers = args
        .get(3)
        .map_or(2, |a| a.parse().expect("a WORKERS count"));
    let min_len = args.get(4).map_or(256, |a| a.parse().expect("a MIN_LEN"));
    rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build_global()
        .expect("the global pool is built once");
    let (check, work) = match pair {
        "quicksort" => quicksort(size(2_000_000), fix),
        "map_reduce" => map_reduce(size(1_000_000), fix.then_some(min_len)),
        "nested" => nested(size(200_000), fix),
        "imbalance" => imbalance(size(3), fix),
        "spawn_loop" => spawn_loop(size(8_000), fix),
        other => panic!("no pair {other}"),
    };
    println!("work_ns={}", work.as_nanos());
    println!("check={check}");
}

fn item_overlap(units: u64) {
    const CALLS: u64 = 2_000_000;
    let per_call = |start: Instant| start.elapsed().as_nanos() as f64 / CALLS as f64;
    let start = Instant::now();
    let mut sum = 0u64;
    for i in 0..CALLS {
        sum = sum.wrapping_add(work(i, units));
    }
    println!("back_to_back_ns={:.1}", per_call(start));
    let start = Instant::now();
    let mut last = 0u64;
    for i in 0..CALLS {
        // The seed waits for the last result (its low bit is 0 or 1, the work the same).
        last = work(i ^ (last & 1), units);
    }
    println!("alone_ns={:.1}", per_call(start));
    println!("check={}", black_box(sum ^ last));
}

/// The elements under which the fixed quicksort recurses with plain calls.
const CUTOFF: usize = 5_000;

fn quicksort(len: usize, fix: bool) -> (u64, Duration) {
    let mut v = parprof_suite::pseudo_random(len);
    let ((), work) = timed(|| sort(&mut v, if fix { CUTOFF } else { 1 }));
    assert!(v.windows(2).all(|w| w[0] <= w[1]), "sorted");
    (v.iter().step_by(997).map(|&x| u64::from(x)).sum(), work)
}

/// One partition quicksort: `rayon::join` above `cutoff` elements, plain calls below.
fn sort(v: &mut [u32], cutoff: usize) {
    let len = v.len();
    if len <= 1 {
        return;
    }
    let mid = parprof_suite::partition(v);
    let (lo, hi) = v.split_at_mut(mid);
    if len <= cutoff {
        sort(lo, cutoff);
        sort(&mut hi[1..], cutoff);
    } else {
        rayon::join(|| sort(lo, cutoff), || sort(&mut hi[1..], cutoff));
    }
}

/// One item per task, or `with_min_len(n)` with the `fix`'s n.
fn map_reduce(items: usize, fix: Option<usize>) -> (u64, Duration) {
    let per_item = |i: usize| work(i as u64, 60);
    timed(|| {
        if let Some(min_len) = fix {
            (0..items)
                .into_par_iter()
                .with_min_len(min_len)
                .map(per_item)
                .reduce(|| 0, u64::wrapping_add)
        } else {
            (0..items)
                .into_par_iter()
                .with_max_len(1)
                .map(per_item)
                .reduce(|| 0, u64::wrapping_add)
        }
    })
}

fn nested(rows: usize, fix: bool) -> (u64, Duration) {
    let data: Vec<Vec<u64>> = (0..rows as u64)
        .map(|r| (0..16).map(|i| r * 16 + i).collect())
        .collect();
    let cell = |x: &u64| work(*x, 8);
    timed(|| {
        data.par_iter()
            .map(|row| {
                if fix {
                    row.iter().map(cell).fold(0, u64::wrapping_add)
                } else {
                    row.par_iter().map(cell).reduce(|| 0, u64::wrapping_add)
                }
            })
            .reduce(|| 0, u64::wrapping_add)
    })
}

/// A small task's work, in steps: about 1 ms.
const SMALL: u64 = 1_000_000;

fn imbalance(rounds: usize, fix: bool) -> (u64, Duration) {
    timed(|| imbalanced_rounds(rounds, fix))
}

fn imbalanced_rounds(rounds: usize, fix: bool) -> u64 {
    let mut check = 0u64;
    for round in 0..rounds as u64 {
        // The big task first, where a split iterator gives it to one worker alone.
        let sum = if fix {
            (0..15 + 40usize)
                .into_par_iter()
                .with_max_len(1)
                .map(|i| work(round * 64 + i as u64, SMALL))
                .reduce(|| 0, u64::wrapping_add)
        } else {
            (0..16usize)
                .into_par_iter()
                .with_max_len(1)
                .map(|i| {
                    let i = i as u64;
                    if i == 0 {
                        (0..40)
                            .map(|j| work(round * 64 + 15 + j, SMALL))
                            .fold(0, u64::wrapping_add)
                    } else {
                        work(round * 64 + i - 1, SMALL)
                    }
                })
                .reduce(|| 0, u64::wrapping_add)
        };
        check = check.wrapping_add(sum);
    }
    check
}

/// A piece's work, in steps: about 20 µs.
const PIECE: u64 = 20_000;

fn spawn_loop(pieces: usize, fix: bool) -> (u64, Duration) {
    timed(|| spawned(pieces, fix))
}

fn spawned(pieces: usize, fix: bool) -> u64 {
    let total = std::sync::atomic::AtomicU64::new(0);
    let add = |i: usize| {
        total.fetch_add(work(i as u64, PIECE), std::sync::atomic::Ordering::Relaxed);
    };
    if fix {
        (0..pieces).into_par_iter().for_each(add);
    } else {
        rayon::scope(|s| {
            for i in 0..pieces {
                s.spawn(move |_| add(i));
            }
        });
    }
    total.into_inner()
}
