//! A slice must not write memory that anyone else can see: the program's `MAP_SHARED`
//! mappings (a file, shared anonymous memory another process or the parent also maps) are the
//! same pages in the slice as in the program, so a write there would change the program's
//! state — a counter bumped twice, a file rewritten.
//!
//! At its start a slice makes every shared mapping read-only ([`make_read_only`]), except the
//! runtime's own slot, and keeps their ranges; its seccomp filter then refuses what would make
//! one writable again or create one (`slice_child`'s filter): an `mmap` both shared and
//! writable ends the slice, and an `mprotect` that asks for write access is checked against
//! the ranges ([`intersects_shared`]) and ends the slice only when it touches one. A write to
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
/// [`intersects_shared`]. To be called in the slice, before its filter is installed.
pub(crate) fn make_read_only(keep: usize) -> io::Result<()> {
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    let shared: Vec<Shared> = maps
        .lines()
        .filter_map(shared_mapping)
        .filter(|m| !(m.start..m.end).contains(&(keep as u64)))
        .collect();
    if shared.len() > MAX_SHARED {
        return Err(io::Error::from_raw_os_error(libc::E2BIG));
    }
    for (i, m) in shared.iter().enumerate() {
        STARTS[i].store(m.start, Ordering::Relaxed);
        ENDS[i].store(m.end, Ordering::Relaxed);
        if m.writable {
            let prot = libc::PROT_READ | if m.executable { libc::PROT_EXEC } else { 0 };
            // SAFETY: the range is a whole mapping of this process, as the kernel listed it.
            let r = unsafe {
                libc::mprotect(
                    m.start as *mut libc::c_void,
                    (m.end - m.start) as usize,
                    prot,
                )
            };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    COUNT.store(shared.len(), Ordering::Release);
    Ok(())
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
fn shared_mapping(line: &str) -> Option<Shared> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?.as_bytes();
    if perms.get(3) != Some(&b's') {
        return None;
    }
    Some(Shared {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        writable: perms.get(1) == Some(&b'w'),
        executable: perms.get(2) == Some(&b'x'),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_shared_mappings_are_kept_with_their_write_access() {
        assert_eq!(
            shared_mapping("7f00a000-7f00c000 rw-s 00000000 00:05 1234 /dev/zero (deleted)"),
            Some(Shared {
                start: 0x7f00a000,
                end: 0x7f00c000,
                writable: true,
                executable: false,
            })
        );
        assert_eq!(
            shared_mapping("7f00a000-7f00c000 r--s 00000000 08:01 99 /data/file")
                .map(|m| m.writable),
            Some(false)
        );
        assert_eq!(
            shared_mapping("55d0-55e0 rw-p 00000000 00:00 0 [heap]"),
            None
        );
        assert_eq!(shared_mapping("garbage"), None);
    }
}
