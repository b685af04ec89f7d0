//! Parallel regions: the region context of a thread, and the guard `parallel_region!` holds.
//!
//! A thread's context is one word: the site id of the region whose code it runs (0: none) and,
//! on a rayon worker, its identity (rayon index and pool). A region guard sets the region on
//! the thread that enters it; every rayon job created while it is current carries it (see
//! [`crate::rayon_hooks`]), so the tasks a region runs count in it wherever they are written
//! and whichever worker runs them.
//!
//! Tasks, forks, searches and sleeps are recorded by hooks that `cargo parprof` compiles into
//! the program's own copy of rayon-core; a region needs nothing from the code inside it.

use crate::lifecycle_totals;
use crate::recorder;
use crate::trace::{EventKind, NO_WORKER};
use std::cell::Cell;

pub use crate::probe::Site;

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

/// True when nothing is recorded.
#[inline(always)]
pub(crate) fn recording_off() -> bool {
    cfg!(feature = "off") || recorder::is_off()
}

/// The guard `parallel_region!` holds for the duration of its body: records the region's
/// begin and end and makes the region current on this thread.
#[must_use = "the region lasts until this guard is dropped"]
pub struct RegionGuard {
    /// 0 when nothing was recorded.
    id: u32,
    previous: u32,
}

impl RegionGuard {
    pub(crate) const INERT: RegionGuard = RegionGuard { id: 0, previous: 0 };

    /// Begins region `id` on this thread (recording is on).
    pub(crate) fn begin(id: u32) -> RegionGuard {
        let previous = set_region(id);
        if lifecycle_totals::hook(EventKind::RegionBegin, id, 0, 0) {
            RegionGuard { id, previous }
        } else {
            set_region(previous);
            Self::INERT
        }
    }
}

/// Enters a region. When recording is off this is one load and one branch.
#[inline(always)]
pub fn enter(site: &'static Site) -> RegionGuard {
    if recording_off() {
        return RegionGuard::INERT;
    }
    enter_recording(site)
}

#[inline(never)]
fn enter_recording(site: &'static Site) -> RegionGuard {
    // Entering a region is rare next to tasks, so settling the mode here costs nothing that
    // matters.
    if !recorder::is_enabled() {
        return RegionGuard::INERT;
    }
    RegionGuard::begin(site.id(None))
}

impl Drop for RegionGuard {
    #[inline(always)]
    fn drop(&mut self) {
        if self.id != 0 {
            lifecycle_totals::hook(EventKind::RegionEnd, self.id, 0, 0);
            set_region(self.previous);
        }
    }
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
