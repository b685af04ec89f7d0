//! A hot loop inside the standard library's precompiled code, as real programs spend time in
//! `str::from_utf8`, `memchr` or `memcpy`: `count_valid` checks text buffers with
//! `std::str::from_utf8`, which is not generic and so comes compiled, without frame pointers,
//! with the toolchain. A frame-pointer walk from inside it skips its caller; the cpu flamegraph
//! must still show `count_valid` directly above it (tests/flamegraph_e2e.rs).

#[inline(never)]
fn count_valid(buffers: &[Vec<u8>]) -> usize {
    buffers
        .iter()
        .filter(|b| std::str::from_utf8(b).is_ok())
        .count()
}

fn main() {
    // Multi-byte text, so validation takes the slow path through every byte.
    let line = "déjà vu — ça coûte ½ € ".repeat(4096);
    let buffers: Vec<Vec<u8>> = (0..64).map(|_| line.clone().into_bytes()).collect();
    let mut valid = 0;
    for _ in 0..400 {
        valid += count_valid(std::hint::black_box(&buffers));
    }
    println!("valid={valid}");
}
