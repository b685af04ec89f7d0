//! A counter group of the calling thread (`perf_event_open` with pid 0, cpu -1), read in one
//! `read()`: the detailed instrumentation's counters. Opened with a raw system call and our own
//! `perf_event_attr` (its first, version-0 64 bytes, which every kernel accepts): the runtime
//! is linked into users' programs and needs nothing more than these few fields.
//!
//! User space only (`exclude_kernel`, `exclude_hv`), which is what `perf_event_paranoid = 2`
//! allows; page faults are counted all the same (the fault is taken from user mode).
//!
//! The leader is a `dummy` event that counts nothing: with task-clock (or cpu-clock) as the
//! leader, a page-faults member reads 0 (seen on Linux 6.18), and with page-faults leading,
//! a task-clock member does; under a dummy leader both count.

use crate::slice_results::{CounterColumn, UnavailableCounter};
use std::io;
use std::os::fd::RawFd;

/// The most counters a group holds: task-clock, page-faults, instructions.
pub(crate) const MAX_COUNTERS: usize = 3;

/// The counters, in column order: the software ones first, present wherever perf works.
const COUNTERS: [(&str, u32, u64); MAX_COUNTERS] = [
    ("task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK),
    ("page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS),
    (
        "instructions",
        PERF_TYPE_HARDWARE,
        PERF_COUNT_HW_INSTRUCTIONS,
    ),
];

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
const PERF_COUNT_SW_PAGE_FAULTS: u64 = 2;
const PERF_COUNT_SW_DUMMY: u64 = 9;
const PERF_FORMAT_GROUP: u64 = 1 << 3;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// `struct perf_event_attr` up to `config1` (`PERF_ATTR_SIZE_VER0`).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

fn open_one(type_: u32, config: u64, group_fd: RawFd) -> io::Result<RawFd> {
    let attr = PerfEventAttr {
        type_,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config,
        read_format: PERF_FORMAT_GROUP,
        flags: FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV,
        ..PerfEventAttr::default()
    };
    // SAFETY: a valid attr of the size it states; the kernel only reads it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            0,
            -1,
            group_fd,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(fd as RawFd)
    }
}

/// Which counters this machine opens for a thread, in column order, and why the others not.
/// Each is opened alone and closed again.
pub(crate) fn available() -> (Vec<CounterColumn>, Vec<UnavailableCounter>) {
    let mut columns = Vec::new();
    let mut unavailable = Vec::new();
    for (name, type_, config) in COUNTERS {
        match open_one(type_, config, -1) {
            Ok(fd) => {
                // SAFETY: closing the descriptor just opened.
                unsafe { libc::close(fd) };
                columns.push(CounterColumn { name: name.into() });
            }
            Err(e) => unavailable.push(UnavailableCounter {
                name: name.into(),
                reason: unavailable_reason(&e),
            }),
        }
    }
    (columns, unavailable)
}

/// Why a counter could not be opened, in the user's terms where the error is a known one.
fn unavailable_reason(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) => {
            format!(
                "no such counter on this machine (no hardware PMU exposed, as in most virtual machines; perf_event_open: {e})"
            )
        }
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "not permitted (perf_event_paranoid too high for this user; perf_event_open: {e})"
        ),
        _ => format!("perf_event_open: {e}"),
    }
}

/// An open group of the calling thread.
pub(crate) struct Group {
    /// The dummy leader, then the counters; only the first `1 + len` are open.
    fds: [RawFd; 1 + MAX_COUNTERS],
    /// Counters (the leader excluded).
    len: usize,
}

impl Group {
    /// Opens `columns` (names from [`available`]) on the calling thread.
    pub(crate) fn open(columns: &[CounterColumn]) -> io::Result<Group> {
        if columns.is_empty() {
            return Err(io::Error::other("no counter to open"));
        }
        let mut group = Group {
            fds: [-1; 1 + MAX_COUNTERS],
            len: 0,
        };
        group.fds[0] = open_one(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY, -1)?;
        for column in columns.iter().take(MAX_COUNTERS) {
            let Some(&(_, type_, config)) = COUNTERS.iter().find(|(n, ..)| *n == column.name)
            else {
                return Err(io::Error::other(format!("unknown counter {}", column.name)));
            };
            // On error `group` closes what is open.
            group.fds[1 + group.len] = open_one(type_, config, group.fds[0])?;
            group.len += 1;
        }
        Ok(group)
    }

    /// The leader's descriptor: the only one read.
    pub(crate) fn leader(&self) -> RawFd {
        self.fds[0]
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Reads every counter of the group in one system call (async-signal-safe). False when
    /// the read failed; `values` is then unchanged.
    #[inline]
    pub(crate) fn read(&self, values: &mut [u64; MAX_COUNTERS]) -> bool {
        read_group(self.fds[0], self.len, values)
    }
}

/// [`Group::read`] by the leader's descriptor and the number of counters, for a signal
/// handler that must not borrow the group.
#[inline]
pub(crate) fn read_group(leader: RawFd, len: usize, values: &mut [u64; MAX_COUNTERS]) -> bool {
    // PERF_FORMAT_GROUP: the number of events, then their values, the leader's first.
    let mut buf = [0u64; 2 + MAX_COUNTERS];
    // SAFETY: reading into a buffer of the stated size.
    let n = unsafe { libc::read(leader, buf.as_mut_ptr().cast(), std::mem::size_of_val(&buf)) };
    let len = len.min(MAX_COUNTERS);
    if n < 8 || buf[0] as usize != 1 + len {
        return false;
    }
    values[..len].copy_from_slice(&buf[2..2 + len]);
    true
}

impl Drop for Group {
    fn drop(&mut self) {
        for &fd in self.fds.iter().filter(|&&fd| fd >= 0) {
            // SAFETY: closing descriptors this group opened.
            unsafe { libc::close(fd) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_software_counters_open_and_count_this_thread() {
        let (columns, unavailable) = available();
        assert!(
            columns.len() >= 2,
            "task-clock and page-faults: {unavailable:?}"
        );
        let group = Group::open(&columns).unwrap();
        let mut before = [0; MAX_COUNTERS];
        let mut after = [0; MAX_COUNTERS];
        assert!(group.read(&mut before));
        // Fresh pages (a heap allocation may reuse touched memory), written once each.
        // SAFETY: a private anonymous mapping, written within its bounds, then unmapped.
        unsafe {
            let len = 64 * 4096;
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
            .cast::<u8>();
            assert_ne!(p.cast(), libc::MAP_FAILED);
            for page in 0..64 {
                p.add(page * 4096).write_volatile(1);
            }
            assert!(group.read(&mut after));
            libc::munmap(p.cast(), len);
        }
        assert!(after[0] > before[0]);
        assert!(after[1] - before[1] >= 60, "{before:?} {after:?}");
    }
}
