//! What the calling thread is: its kernel id, its rayon identity and the region it runs (one
//! context word, read by the hooks that run at every job), and which thread is the writer.

use crate::trace::NO_WORKER;
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

/// Identity bits of a thread outside every pool: [`NO_WORKER`] index, pool `u16::MAX`.
pub(crate) const NOT_A_WORKER: u32 = u32::MAX;

thread_local! {
    /// `region << 32 | rayon_index << 16 | pool`, read in one access by the hooks that run at
    /// every job.
    static CONTEXT: Cell<u64> = const { Cell::new(NOT_A_WORKER as u64) };
}

/// The calling thread's context word.
#[inline(always)]
pub(crate) fn context() -> u64 {
    CONTEXT.with(Cell::get)
}

/// Makes `region` current on this thread and returns the region that was current.
#[inline(always)]
pub(crate) fn set_region(region: u32) -> u32 {
    CONTEXT.with(|c| {
        let old = c.get();
        c.set((u64::from(region) << 32) | (old & 0xFFFF_FFFF));
        (old >> 32) as u32
    })
}

/// Marks the calling thread as worker `index` of pool `pool`.
pub(crate) fn set_worker(index: u16, pool: u16) {
    let identity = (u32::from(index) << 16) | u32::from(pool);
    CONTEXT.with(|c| c.set((c.get() & !0xFFFF_FFFF) | u64::from(identity)));
}

/// The calling thread's rayon index ([`NO_WORKER`] outside every pool) and pool.
pub(crate) fn worker() -> (u16, u32) {
    let identity = context() as u32;
    if identity == NOT_A_WORKER {
        (NO_WORKER, 0)
    } else {
        ((identity >> 16) as u16, identity & 0xFFFF)
    }
}

/// The region current on this thread (0: none).
pub fn current_region() -> u32 {
    (context() >> 32) as u32
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
