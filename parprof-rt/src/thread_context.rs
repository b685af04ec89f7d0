//! What the calling thread is: its kernel id, its rayon identity and the region it runs (read
//! by the hooks that run at every job, together as one context word), and which thread is the
//! writer.

use crate::trace::NO_WORKER;
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

/// Identity bits of a thread outside every pool: [`NO_WORKER`] index, pool `u16::MAX`.
pub(crate) const NOT_A_WORKER: u32 = u32::MAX;

thread_local! {
    /// The region this thread runs (0: none), and its rayon identity
    /// (`rayon_index << 16 | pool`). Two words, not one: the hooks set the region at every
    /// task and read both at the next, and a store into half of a word the next load reads whole
    /// cannot be forwarded to it (the load waits for the store to reach the cache).
    static REGION: Cell<u32> = const { Cell::new(0) };
    static IDENTITY: Cell<u32> = const { Cell::new(NOT_A_WORKER) };
}

/// The calling thread's context word: `region << 32 | identity`.
#[inline(always)]
pub(crate) fn context() -> u64 {
    (u64::from(REGION.with(Cell::get)) << 32) | u64::from(IDENTITY.with(Cell::get))
}

/// Makes `region` current on this thread and returns the region that was current.
#[inline(always)]
pub(crate) fn set_region(region: u32) -> u32 {
    REGION.with(|r| r.replace(region))
}

/// Marks the calling thread as worker `index` of pool `pool`.
pub(crate) fn set_worker(index: u16, pool: u16) {
    IDENTITY.with(|c| c.set((u32::from(index) << 16) | u32::from(pool)));
}

/// The calling thread's rayon identity, `rayon_index << 16 | pool` ([`NOT_A_WORKER`] outside
/// every pool).
#[inline(always)]
pub(crate) fn identity() -> u32 {
    IDENTITY.with(Cell::get)
}

/// The calling thread's rayon index ([`NO_WORKER`] outside every pool) and pool.
pub(crate) fn worker() -> (u16, u32) {
    let identity = identity();
    if identity == NOT_A_WORKER {
        (NO_WORKER, 0)
    } else {
        ((identity >> 16) as u16, identity & 0xFFFF)
    }
}

/// The region current on this thread (0: none).
pub fn current_region() -> u32 {
    REGION.with(Cell::get)
}

pub(crate) fn current_tid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

static WRITER_TID: AtomicU32 = AtomicU32::new(0);

/// The writer thread's id (0 before it starts): not a program thread.
pub(crate) fn writer_tid() -> u32 {
    WRITER_TID.load(Ordering::Relaxed)
}

/// The calling thread is the writer.
pub(crate) fn set_writer_tid() {
    WRITER_TID.store(current_tid(), Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_context_word_keeps_region_and_worker_apart() {
        assert_eq!(worker(), (NO_WORKER, 0));
        set_worker(3, 2);
        assert_eq!(set_region(7), 0);
        assert_eq!(worker(), (3, 2));
        assert_eq!(current_region(), 7);
        assert_eq!(set_region(0), 7);
        assert_eq!(worker(), (3, 2));
    }
}
