//! The mark that `cargo parprof build` leaves in an executable whose rayon-core it hooked, so
//! that `cargo-parprof record` knows it on a machine with no cargo, no rustc and no sources:
//! a string in the executable's read-only data, `parprof-rayon-hooks:rayon-core=<version>;`.
//!
//! The hooked copy of rayon-core defines it as a static and passes it to `black_box` where a
//! worker starts, so the linker keeps it in every program whose pool runs a worker.

/// What precedes the version in the mark.
const PREFIX: &[u8] = b"parprof-rayon-hooks:rayon-core=";
/// What ends the version.
const END: u8 = b';';
/// A version is short; a longer run of bytes is not one.
const MAX_VERSION_LEN: usize = 64;

/// The mark of a build hooked in rayon-core `version`.
pub fn mark(version: &str) -> String {
    format!(
        "{}{version}{}",
        String::from_utf8_lossy(PREFIX),
        char::from(END)
    )
}

/// The rayon-core version of the first well-formed mark in `bytes`, if any.
pub fn find(bytes: &[u8]) -> Option<String> {
    memchr::memmem::find_iter(bytes, PREFIX).find_map(|at| version_at(&bytes[at + PREFIX.len()..]))
}

/// The version that starts `rest` and is ended by [`END`]: digits, letters, `.`, `-`, `+`.
fn version_at(rest: &[u8]) -> Option<String> {
    let len = rest
        .iter()
        .take(MAX_VERSION_LEN + 1)
        .position(|&b| b == END)?;
    let version = &rest[..len];
    let valid = !version.is_empty()
        && version[0].is_ascii_digit()
        && version
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b".-+".contains(b));
    valid.then(|| String::from_utf8_lossy(version).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_is_found_among_other_bytes() {
        let mut bytes = b"\x7fELF\0\0garbage".to_vec();
        bytes.extend_from_slice(mark("1.13.0").as_bytes());
        bytes.extend_from_slice(b"\0more");
        assert_eq!(find(&bytes).as_deref(), Some("1.13.0"));
    }

    #[test]
    fn a_prefix_without_a_version_is_no_mark() {
        assert_eq!(find(b"parprof-rayon-hooks:rayon-core=\0\0;"), None);
        assert_eq!(find(b"parprof-rayon-hooks:rayon-core="), None);
        assert_eq!(find(b"parprof-rayon-hooks:rayon-core=x.y;"), None);
        let long = format!("parprof-rayon-hooks:rayon-core=1{};", "0".repeat(80));
        assert_eq!(find(long.as_bytes()), None);
        // The first prefix is cut; the second is whole.
        let second = mark("1.12.1");
        let both = [
            b"parprof-rayon-hooks:rayon-core=".as_slice(),
            second.as_bytes(),
        ]
        .concat();
        assert_eq!(find(&both).as_deref(), Some("1.12.1"));
    }
}
