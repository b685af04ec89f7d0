//! Byte-level pieces of parprof's file formats, shared by the trace (here) and the run records
//! (`cargo-parprof`'s `recording::format`): LEB128 varints, and reading a stream until a buffer
//! is full or the stream ends (a cut file).

use std::io::{self, Read};

/// Appends `value` as an unsigned LEB128 varint (1 to 10 bytes).
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The varint that starts `bytes`, and how many bytes it took.
#[inline(always)]
pub fn read_varint(bytes: &[u8]) -> Result<(u64, usize), &'static str> {
    // Most of a trace's varints (time deltas, site ids) are one byte: decoded in place, without
    // a call or a loop; the rare longer ones out of line, so that this stays small enough to
    // inline into every field's read.
    if let Some(&byte) = bytes.first()
        && byte & 0x80 == 0
    {
        return Ok((u64::from(byte), 1));
    }
    read_long_varint(bytes)
}

#[inline(never)]
fn read_long_varint(bytes: &[u8]) -> Result<(u64, usize), &'static str> {
    let mut value = 0u64;
    for (i, &byte) in bytes.iter().enumerate().take(10) {
        let bits = u64::from(byte & 0x7f);
        if i == 9 && bits > 1 {
            return Err("a varint exceeds 64 bits");
        }
        value |= bits << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    Err(if bytes.len() < 10 {
        "ends inside a varint"
    } else {
        "a varint exceeds 64 bits"
    })
}

/// Fills `buf` as far as `input` goes; returns how much was read.
pub fn read_full(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_what_is_not_one() {
        for value in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut bytes = Vec::new();
            put_varint(&mut bytes, value);
            assert_eq!(read_varint(&bytes), Ok((value, bytes.len())));
            assert_eq!(read_varint(&bytes[..bytes.len() - 1]).ok(), None);
        }
        assert_eq!(read_varint(&[]), Err("ends inside a varint"));
        assert_eq!(read_varint(&[0xff; 10]), Err("a varint exceeds 64 bits"));
        assert_eq!(read_varint(&[0xff; 11]), Err("a varint exceeds 64 bits"));
    }
}
