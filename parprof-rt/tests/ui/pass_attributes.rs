//! Attributes, doc comments and visibility of probed functions are kept.
#![deny(warnings, missing_docs)]

use parprof_rt::probe;

/// A documented public module.
pub mod api {
    use parprof_rt::probe;

    /// Documented: `missing_docs` would fail the build if the expansion lost this comment.
    #[must_use]
    #[probe]
    pub fn checksum(x: &[u8]) -> u8 {
        x.iter().fold(0, |a, b| a ^ b)
    }

    /// Visible in the crate only.
    #[probe]
    pub(crate) fn double(x: u32) -> u32 {
        x * 2
    }
}

#[probe]
#[inline(never)]
fn inner_attributes() -> u32 {
    #![allow(unused_variables)]
    let unused = 0;
    1
}

#[probe]
#[cfg(any())]
fn compiled_out() -> u32 {
    compile_error!("a function removed by `cfg` must stay removed")
}

#[probe]
fn r#match() -> u32 {
    3
}

fn main() {
    assert_eq!(api::checksum(b"ab"), b'a' ^ b'b');
    assert_eq!(api::double(2), 4);
    assert_eq!(inner_attributes(), 1);
    assert_eq!(r#match(), 3);
}
