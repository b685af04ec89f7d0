//! A sort through the standard library that calls back into user code, as programs sort with
//! a comparison of their own: `sort_unstable_by` with `costly_compare`, which spends most of
//! the run. The cpu flamegraph must reach `costly_compare` through std's sort frames, under
//! `main` (tests/flamegraph_e2e.rs).

fn costly_compare(a: &u64, b: &u64) -> std::cmp::Ordering {
    let (mut x, mut y) = (*a, *b);
    for _ in 0..50 {
        x = x.rotate_left(5).wrapping_mul(31);
        y = y.rotate_left(5).wrapping_mul(31);
    }
    x.cmp(&y)
}

fn main() {
    let mut v: Vec<u64> = (0..400_000u64)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .collect();
    v.sort_unstable_by(costly_compare);
    println!("first={}", v[0]);
}
