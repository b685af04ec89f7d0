//! Quick start: a few probed functions on several threads.
//!
//! `cargo parprof --example quickstart` profiles it; run plainly it just computes.

use parprof_rt::probe;

#[probe]
fn checksum(data: &[u64]) -> u64 {
    data.iter()
        .fold(0u64, |acc, &x| acc.rotate_left(5) ^ mix(x))
}

#[probe]
fn mix(x: u64) -> u64 {
    let mut h = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^= h >> 29;
    h.wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

#[probe]
fn fill(seed: u64, n: usize) -> Vec<u64> {
    (0..n as u64)
        .map(|i| i.wrapping_mul(seed) ^ 0x5555)
        .collect()
}

#[probe]
fn work(seed: u64) -> u64 {
    let data = fill(seed, 20_000);
    (0..20u64)
        .map(|i| checksum(&data).wrapping_add(i))
        .fold(0, |a, b| a.wrapping_add(b))
}

fn main() {
    let threads: Vec<_> = (0..3u64)
        .map(|t| {
            std::thread::Builder::new()
                .name(format!("worker-{t}"))
                .spawn(move || work(t + 1))
                .unwrap()
        })
        .collect();
    let total = threads
        .into_iter()
        .map(|h| h.join().unwrap())
        .fold(0, |a, b| a ^ b);
    println!("checksum {total:016x}");
}
