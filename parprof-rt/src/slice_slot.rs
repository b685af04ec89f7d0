//! The shared memory through which slices hand their results back: one `MAP_SHARED`
//! anonymous mapping made before the first fork, one slot per possible live slice. The child
//! adds its per-call deltas straight into its slot's site table and writes its end last; the
//! parent reads the slot once the child is gone. The slot, not the exit status, is the
//! channel: a program that reaps children itself (`waitpid(-1)`) may take the status.

use crate::detail::{MAX_SITES, SiteAcc};
use crate::slice_results::SliceEnd;
use std::io;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};

/// The child has not written its end (yet).
pub(crate) const END_NONE: u32 = 0;
pub(crate) const END_COMPLETED: u32 = 1;
pub(crate) const END_TIMEOUT: u32 = 2;
pub(crate) const END_BLOCKED: u32 = 3;
pub(crate) const END_FORBIDDEN: u32 = 4;
/// The child could not set itself up; `setup_error` says why.
pub(crate) const END_SETUP_FAILED: u32 = 5;
pub(crate) const END_SHARED_WRITE: u32 = 6;

#[repr(C)]
pub(crate) struct Slot {
    /// One of the `END_*` values, stored last (release) by the child.
    pub(crate) end: AtomicU32,
    /// The step of the child's set-up that failed and its errno, for `END_SETUP_FAILED`.
    pub(crate) setup_error: AtomicU64,
    /// The forbidden system call, for `END_FORBIDDEN`.
    pub(crate) syscall: AtomicI64,
    pub(crate) cpu_ns: AtomicU64,
    pub(crate) wall_ns: AtomicU64,
    /// One past the highest site id in `sites` with calls.
    pub(crate) used: AtomicU32,
    pub(crate) sites: [SiteAcc; MAX_SITES],
}

/// The mapping; never unmapped (slices may still write until the process ends).
pub(crate) struct Slots {
    base: *mut Slot,
    len: usize,
}

// SAFETY: the slots are plain shared memory; the parent hands each to one child at a time and
// reads it only after that child is gone.
unsafe impl Send for Slots {}
unsafe impl Sync for Slots {}

impl Slots {
    pub(crate) fn map(len: usize) -> io::Result<Slots> {
        let bytes = len * std::mem::size_of::<Slot>();
        // SAFETY: a fresh anonymous mapping; zero-filled, which is a valid `Slot`.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Slots {
            base: base.cast(),
            len,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Slot `i` (< `len`).
    pub(crate) fn get(&self, i: usize) -> *mut Slot {
        debug_assert!(i < self.len);
        // SAFETY: within the mapping.
        unsafe { self.base.add(i.min(self.len - 1)) }
    }
}

/// Readies `slot` for a new child that can measure site ids below `sites`: its table is
/// zeroed here, so that a child killed before it wrote anything leaves no stale figures.
pub(crate) fn reset(slot: *mut Slot, sites: u32) {
    // SAFETY: the slot is in the mapping and no child uses it.
    let slot = unsafe { &mut *slot };
    for acc in slot.sites.iter_mut().take(sites as usize) {
        *acc = Default::default();
    }
    slot.end.store(END_NONE, Ordering::Relaxed);
    slot.setup_error.store(0, Ordering::Relaxed);
    slot.syscall.store(0, Ordering::Relaxed);
    slot.cpu_ns.store(0, Ordering::Relaxed);
    slot.wall_ns.store(0, Ordering::Relaxed);
    slot.used.store(0, Ordering::Release);
}

/// How a gone child's slot says it ended; `Killed` when it wrote nothing.
pub(crate) fn end_of(slot: &Slot) -> SliceEnd {
    match slot.end.load(Ordering::Acquire) {
        END_COMPLETED => SliceEnd::Completed,
        END_TIMEOUT => SliceEnd::Timeout,
        END_BLOCKED => SliceEnd::Blocked,
        END_FORBIDDEN => SliceEnd::ForbiddenSyscall {
            syscall: slot.syscall.load(Ordering::Relaxed),
        },
        END_SHARED_WRITE => SliceEnd::SharedWrite,
        _ => SliceEnd::Killed,
    }
}
