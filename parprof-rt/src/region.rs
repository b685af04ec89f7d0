//! Parallel regions: the region context of a thread, and the guard `parallel_region!` holds.
//!
//! A thread's context is the site id of the region whose code it runs (0: none) and, on a
//! rayon worker, its identity (rayon index and pool). A region guard sets the region on
//! the thread that enters it; every rayon job created while it is current carries it (see
//! [`crate::rayon_hooks`]), so the tasks a region runs count in it wherever they are written
//! and whichever worker runs them.
//!
//! Tasks, forks, searches and sleeps are recorded by hooks that `cargo parprof` compiles into
//! the program's own copy of rayon-core; a region needs nothing from the code inside it.

use crate::lifecycle_totals;
use crate::recorder;
use crate::runtime;
use crate::trace::EventKind;

pub use crate::probe::Site;
pub use crate::thread_context::current_region;
pub(crate) use crate::thread_context::{NOT_A_WORKER, context, identity, set_region, set_worker};

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
    if !runtime::is_enabled() {
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
