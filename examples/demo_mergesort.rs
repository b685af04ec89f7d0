//! A parallel merge sort written the way rayon's own demo is: `rayon::join` inside a plain
//! recursive function, no annotation in it.
//!
//! `demo_mergesort [LEN] [CUTOFF] [--region]` sorts LEN pseudo-random integers (default
//! 1,000,000): halves are sorted in parallel with `rayon::join` and merged through a buffer,
//! in parallel too above 16,384 items (split at the middle of the longer side, joined);
//! slices of at most CUTOFF are sorted sequentially (default 1: down to single items, as the
//! textbook algorithm goes — too fine; 16,384 is tuned).
//! With `--region` the top call is wrapped in `parallel_region!("mergesort", ..)`; without it
//! the program has no annotation at all. The global pool has one worker per CPU
//! (`RAYON_NUM_THREADS` to change it).
//!
//! Prints `joins=<n> spawns=0 installs=0`: the calls it made, counted by the program itself.
//! Each join runs two tasks, and each entry into the pool from `main` one more: the sort's top
//! join, then the top merge's (on `main` once the halves are sorted), so the region has
//! 2·joins + 2 (without annotation, in two implicit regions: `merge_sort` and `merge`).

use parprof_suite::calls::{self, JOINS};

/// Merges the sorted `lo` and `hi` into `out`.
fn merge_sequential<T: Ord + Copy>(lo: &[T], hi: &[T], out: &mut [T]) {
    let (mut i, mut j) = (0, 0);
    for slot in out.iter_mut() {
        if j == hi.len() || (i < lo.len() && lo[i] <= hi[j]) {
            *slot = lo[i];
            i += 1;
        } else {
            *slot = hi[j];
            j += 1;
        }
    }
}

/// Merges below this many items stay sequential: a parallel merge of fewer would cost more
/// to schedule than it gains.
const SEQUENTIAL_MERGE: usize = 16_384;

/// Merges the sorted `a` and `b` into `out`: the longer is split at its middle item, the
/// other where that item would go, and the two pairs merge in parallel.
fn merge<T: Ord + Copy + Send + Sync>(a: &[T], b: &[T], out: &mut [T]) {
    if out.len() <= SEQUENTIAL_MERGE {
        merge_sequential(a, b, out);
        return;
    }
    let (long, short) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    let mid = long.len() / 2;
    let split = short.partition_point(|x| *x < long[mid]);
    let (out_lo, out_hi) = out.split_at_mut(mid + split);
    calls::count(&JOINS);
    rayon::join(
        || merge(&long[..mid], &short[..split], out_lo),
        || merge(&long[mid..], &short[split..], out_hi),
    );
}

fn merge_sort<T: Ord + Copy + Send + Sync>(v: &mut [T], buf: &mut [T], cutoff: usize) {
    if v.len() <= cutoff.max(1) {
        v.sort_unstable();
        return;
    }
    let mid = v.len() / 2;
    {
        let (lo, hi) = v.split_at_mut(mid);
        let (buf_lo, buf_hi) = buf.split_at_mut(mid);
        calls::count(&JOINS);
        rayon::join(
            || merge_sort(lo, buf_lo, cutoff),
            || merge_sort(hi, buf_hi, cutoff),
        );
    }
    let (lo, hi) = v.split_at(mid);
    merge(lo, hi, buf);
    v.copy_from_slice(buf);
}

fn main() {
    let args = parprof_suite::DemoArgs::from_env();
    let cutoff = args.number(1, 1);
    let mut v = parprof_suite::pseudo_random(args.number(0, 1_000_000));
    let mut buf = vec![0; v.len()];
    if args.region() {
        parprof_rt::parallel_region!("mergesort", { merge_sort(&mut v, &mut buf, cutoff) });
    } else {
        merge_sort(&mut v, &mut buf, cutoff);
    }
    assert!(v.windows(2).all(|w| w[0] <= w[1]), "sorted");
    calls::print();
}
