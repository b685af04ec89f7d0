//! A probed parent calling a tiny probed child many times, next to the same parent work with
//! an unprobed child. Method 1 removes the child probes' overhead from the parent, so the two
//! parents' active times should agree; their elapsed times do not.
//! Usage: `nested_probes [CALLS]` (default 2,000,000 child calls per parent call).

use parprof_rt::probe;
use std::hint::black_box;

/// A few nanoseconds of dependent arithmetic: about the cost of one probe pair.
#[inline(always)]
fn small_work(x: u64) -> u64 {
    (0..8).fold(black_box(x), |h, i| {
        (h ^ i).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17)
    })
}

#[probe]
#[inline(never)]
fn tiny(x: u64) -> u64 {
    small_work(x)
}

#[inline(never)]
fn tiny_unprobed(x: u64) -> u64 {
    small_work(x)
}

#[probe]
fn parent_with_probed_child(calls: u64) -> u64 {
    (0..calls).fold(0, |acc, i| acc ^ tiny(i))
}

#[probe]
fn parent_with_plain_child(calls: u64) -> u64 {
    (0..calls).fold(0, |acc, i| acc ^ tiny_unprobed(i))
}

fn main() {
    let calls = std::env::args()
        .nth(1)
        .map_or(2_000_000, |a| a.parse().expect("CALLS is a number"));
    let mut acc = 0;
    // Interleaved rounds so that both parents see the same machine conditions.
    for _ in 0..5 {
        acc ^= parent_with_plain_child(calls / 5);
        acc ^= parent_with_probed_child(calls / 5);
    }
    println!("calls={calls} checksum={acc:x}");
}
