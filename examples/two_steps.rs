//! Two probed steps of fixed work, for `cargo parprof diff`: `two_steps [SCALE]` makes the
//! second step do SCALE times as much work (default 1), so that a diff of a run with 2 against
//! a run with 1 shows `solve` about +100% and `parse` unchanged.

use parprof_rt::probe;
use std::hint::black_box;

/// About 20 ms of arithmetic per unit on this project's VM; fixed work, not fixed time, so
/// that a preempted run does not do less.
const UNIT: u64 = 12_000_000;

fn work(iterations: u64) -> u64 {
    let mut x = 1u64;
    for _ in 0..iterations {
        x = black_box(
            x.wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407),
        );
    }
    x
}

#[probe]
fn parse() -> u64 {
    work(UNIT)
}

#[probe]
fn solve(scale: u64) -> u64 {
    work(UNIT * scale)
}

fn main() {
    let scale = std::env::args()
        .nth(1)
        .map_or(1, |a| a.parse().expect("a whole number"));
    println!("checksum={:x}", parse() ^ solve(scale));
}
