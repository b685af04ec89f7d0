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

#[probe]
fn parent_with_probed_child<const ROUNDS: u64>(calls: u64) -> u64 {
    (0..calls).fold(0, |acc, i| acc ^ tiny::<ROUNDS>(i))
}

#[probe]
fn parent_with_plain_child<const ROUNDS: u64>(calls: u64) -> u64 {
    (0..calls).fold(0, |acc, i| acc ^ tiny_unprobed::<ROUNDS>(i))
}

/// How many times each parent runs, alternating with the other. A VM's speed drifts within
/// milliseconds: at 5 alternations of about 6 ms the parents' active times differed by
/// -3 … +15 % over 14 runs on the project's 2-core VM, at 25 by -5 … +8 % over 26.
const ALTERNATIONS: u64 = 25;

/// Both parents, interleaved so that they see the same machine conditions.
fn both_parents<const ROUNDS: u64>(calls: u64) -> u64 {
    (0..ALTERNATIONS).fold(0, |acc, _| {
        acc ^ parent_with_plain_child::<ROUNDS>(calls / ALTERNATIONS)
            ^ parent_with_probed_child::<ROUNDS>(calls / ALTERNATIONS)
    })
}

fn main() {
    let arg = |n: usize, default: u64| {
        std::env::args().nth(n).map_or(default, |a| {
            a.parse().expect("CALLS and ROUNDS are numbers")
        })
    };
    let calls = arg(1, 2_000_000);
    let rounds = arg(2, 16);
    let acc = match rounds {
        8 => both_parents::<8>(calls),
        16 => both_parents::<16>(calls),
        32 => both_parents::<32>(calls),
        _ => panic!("ROUNDS is 8, 16 or 32"),
    };
    println!("calls={calls} rounds={rounds} checksum={acc:x}");
}
