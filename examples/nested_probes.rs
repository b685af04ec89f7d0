//! A probed parent calling a tiny probed child many times, next to the same parent work with
//! an unprobed child. Method 1 removes the child probes' overhead from the parent, so the two
//! parents' active times should agree; their elapsed times do not.
//! Usage: `nested_probes [CALLS] [ROUNDS]`: CALLS child calls per parent (default 2,000,000),
//! each doing ROUNDS (8, 16 or 32) rounds of dependent arithmetic, unrolled: 16 (the default) is
//! about 5 ns a call, 8 about 2.5 ns (less than the untimed probe pair around it).

use parprof_rt::probe;
use std::hint::black_box;

/// Dependent arithmetic: about 0.3 ns a round when calls overlap.
#[inline(always)]
fn small_work<const ROUNDS: u64>(x: u64) -> u64 {
    (0..ROUNDS).fold(black_box(x), |h, i| {
        (h ^ i).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17)
    })
}

#[probe]
#[inline(never)]
fn tiny<const ROUNDS: u64>(x: u64) -> u64 {
    small_work::<ROUNDS>(x)
}

#[inline(never)]
fn tiny_unprobed<const ROUNDS: u64>(x: u64) -> u64 {
    small_work::<ROUNDS>(x)
}

/// One of the children, as the parents call it.
type Child = fn(u64) -> u64;

#[probe]
fn parent_with_probed_child(calls: u64, child: Child) -> u64 {
    (0..calls).fold(0, |acc, i| acc ^ child(i))
}

#[probe]
fn parent_with_plain_child(calls: u64, child: Child) -> u64 {
    (0..calls).fold(0, |acc, i| acc ^ child(i))
}

fn main() {
    let arg = |n: usize, default: u64| {
        std::env::args().nth(n).map_or(default, |a| {
            a.parse().expect("CALLS and ROUNDS are numbers")
        })
    };
    let calls = arg(1, 2_000_000);
    let rounds = arg(2, 16);
    let (probed, plain): (Child, Child) = match rounds {
        8 => (tiny::<8>, tiny_unprobed::<8>),
        16 => (tiny::<16>, tiny_unprobed::<16>),
        32 => (tiny::<32>, tiny_unprobed::<32>),
        _ => panic!("ROUNDS is 8, 16 or 32"),
    };
    let mut acc = 0;
    // Interleaved rounds so that both parents see the same machine conditions.
    for _ in 0..5 {
        acc ^= parent_with_plain_child(calls / 5, plain);
        acc ^= parent_with_probed_child(calls / 5, probed);
    }
    println!("calls={calls} rounds={rounds} checksum={acc:x}");
}
