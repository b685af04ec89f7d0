// The function's own attributes survive the expansion: ignoring a `#[must_use]` result of a
// probed function is still an error here.
#![deny(unused_must_use)]

#[must_use]
#[parprof_rt::probe]
fn checksum(x: &[u8]) -> u8 {
    x.iter().fold(0, |a, b| a ^ b)
}

fn main() {
    checksum(b"abc");
}
