//! A slice must not write memory that anyone else can see: the program's `MAP_SHARED`
//! mappings (a file, shared anonymous memory another process or the parent also maps) are the
//! same pages in the slice as in the program, so a write there would change the program's
//! state — a counter bumped twice, a file rewritten.
//!
//! At its start a slice makes every shared mapping read-only ([`make_read_only`]), except the
//! runtime's own slot, and keeps their ranges; its seccomp filter then refuses what would make
//! one writable again or create one (`slice_child`'s filter): an `mmap` both shared and
//! writable ends the slice, and an `mprotect` or `pkey_mprotect` that asks for write access
//! is checked against the ranges ([`intersects_shared`]) and ends the slice only when it
//! touches one. A write to
//! a read-only page faults, and the slice ends as killed; the program never sees it.

use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Shared mappings a slice can protect; a program with more gets no slices (a set-up error).
const MAX_SHARED: usize = 256;

/// The shared mappings' `[start, end)`, read by the SIGSYS handler: plain atomics, no lock.
static STARTS: [AtomicU64; MAX_SHARED] = [const { AtomicU64::new(0) }; MAX_SHARED];
static ENDS: [AtomicU64; MAX_SHARED] = [const { AtomicU64::new(0) }; MAX_SHARED];
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// A shared mapping of `/proc/self/maps`: its range and whether it is writable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shared {
    start: u64,
    end: u64,
    writable: bool,
    executable: bool,
}

/// Makes every shared mapping of the calling process read-only, but the one that contains
/// `keep` (the slot the slice reports through), and keeps their ranges for
/// [`intersects_shared`]. To be called in the slice, before its filter is installed. It
/// allocates nothing: the slice is a fork without the C library's handlers, whose allocator
/// locks another thread may have held.
pub(crate) fn make_read_only(keep: usize) -> io::Result<()> {
    let maps = MapsText::read()?;
    let mut count = 0;
    for m in maps
        .text()
        .split(|&b| b == b'\n')
        .filter_map(shared_mapping)
        .filter(|m| !(m.start..m.end).contains(&(keep as u64)))
    {
        if count == MAX_SHARED {
            return Err(io::Error::from_raw_os_error(libc::E2BIG));
        }
        STARTS[count].store(m.start, Ordering::Relaxed);
        ENDS[count].store(m.end, Ordering::Relaxed);
        count += 1;
        if m.writable {
            let prot = libc::PROT_READ | if m.executable { libc::PROT_EXEC } else { 0 };
            let len = (m.end - m.start) as usize;
            // SAFETY: the range is a whole mapping of this process, as the kernel listed it.
            if unsafe { libc::mprotect(m.start as *mut libc::c_void, len, prot) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    COUNT.store(count, Ordering::Release);
    Ok(())
}

/// `/proc/self/maps`, read whole into an anonymous mapping of its own.
struct MapsText {
    buffer: *mut u8,
    len: usize,
}

impl MapsText {
    /// Room for about 40,000 mappings; a program with more gets no slices.
    const CAPACITY: usize = 4 << 20;

    fn read() -> io::Result<MapsText> {
        // SAFETY: a fresh private anonymous mapping, checked; its pages are committed as read.
        let buffer = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                Self::CAPACITY,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if buffer == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut maps = MapsText {
            buffer: buffer.cast(),
            len: 0,
        };
        // SAFETY: a plain open of a NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c"/proc/self/maps".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let read = loop {
            if maps.len == Self::CAPACITY {
                break Err(io::Error::from_raw_os_error(libc::E2BIG));
            }
            // SAFETY: reads into the unused rest of the buffer.
            let n = unsafe {
                libc::read(
                    fd,
                    maps.buffer.add(maps.len).cast(),
                    Self::CAPACITY - maps.len,
                )
            };
            match n {
                0 => break Ok(()),
                n if n > 0 => maps.len += n as usize,
                _ => break Err(io::Error::last_os_error()),
            }
        };
        // SAFETY: the descriptor opened above.
        unsafe { libc::close(fd) };
        read.map(|()| maps)
    }

    fn text(&self) -> &[u8] {
        // SAFETY: the first `len` bytes were written by `read`.
        unsafe { std::slice::from_raw_parts(self.buffer, self.len) }
    }
}

impl Drop for MapsText {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `read`.
        unsafe { libc::munmap(self.buffer.cast(), Self::CAPACITY) };
    }
}

/// Whether `[addr, addr + len)` overlaps a shared mapping kept by [`make_read_only`].
/// Async-signal-safe.
pub(crate) fn intersects_shared(addr: u64, len: u64) -> bool {
    let end = addr.saturating_add(len.max(1));
    (0..COUNT.load(Ordering::Acquire))
        .any(|i| STARTS[i].load(Ordering::Relaxed) < end && addr < ENDS[i].load(Ordering::Relaxed))
}

/// A line of `/proc/self/maps` (`start-end perms offset dev inode path`) that is a shared
/// mapping (`s` in the permissions).
fn shared_mapping(line: &[u8]) -> Option<Shared> {
    let mut fields = line.split(|&b| b == b' ').filter(|f| !f.is_empty());
    let range = fields.next()?;
    let dash = range.iter().position(|&b| b == b'-')?;
    let perms = fields.next()?;
    if perms.get(3) != Some(&b's') {
        return None;
    }
    Some(Shared {
        start: hex(&range[..dash])?,
        end: hex(&range[dash + 1..])?,
        writable: perms.get(1) == Some(&b'w'),
        executable: perms.get(2) == Some(&b'x'),
    })
}

fn hex(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    digits.iter().try_fold(0u64, |v, &d| {
        let digit = (d as char).to_digit(16)?;
        Some(v << 4 | u64::from(digit))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_shared_mappings_are_kept_with_their_write_access() {
        assert_eq!(
            shared_mapping(b"7f00a000-7f00c000 rw-s 00000000 00:05 1234 /dev/zero (deleted)"),
            Some(Shared {
                start: 0x7f00a000,
                end: 0x7f00c000,
                writable: true,
                executable: false,
            })
        );
        assert_eq!(
            shared_mapping(b"7f00a000-7f00c000 r--s 00000000 08:01 99 /data/file")
                .map(|m| m.writable),
            Some(false)
        );
        assert_eq!(
            shared_mapping(b"55d0-55e0 rw-p 00000000 00:00 0 [heap]"),
            None
        );
        assert_eq!(shared_mapping(b"garbage"), None);
    }
}
