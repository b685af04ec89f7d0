//! The region context of a thread, the guards that record region and task events, and the
//! one-time registration of a pool's workers.
//!
//! A thread's context is the site id of the region whose code it runs (0: none). A region
//! guard sets it on the thread that enters the region; a task guard sets it on the worker
//! that runs a task, so that a stolen task counts in the region that created it and probes
//! and nested forks inside the task belong to it.

use crate::recorder;
use crate::trace::{EventKind, NO_WORKER, TaskOrigin};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

pub use crate::probe::Site;

thread_local! {
    /// Site id of the region whose code this thread runs; 0 outside every region.
    static CURRENT: Cell<u32> = const { Cell::new(0) };
    /// Whether this worker has written its thread record with its pool identity.
    static REGISTERED: Cell<bool> = const { Cell::new(false) };
}

/// True when nothing is recorded: wrappers then fall through to plain rayon.
#[inline(always)]
pub(crate) fn recording_off() -> bool {
    cfg!(feature = "off") || recorder::is_off()
}

/// Rayon index of the calling thread in its pool, [`NO_WORKER`] outside every pool.
#[inline(always)]
pub(crate) fn worker_index() -> u16 {
    // Indexes at or above NO_WORKER cannot be told apart in a u16; they are clamped (a pool
    // of 65,535 threads is not a practical case).
    rayon::current_thread_index().map_or(NO_WORKER, |i| i.min(NO_WORKER as usize - 1) as u16)
}

/// The region current on this thread (0: none).
pub fn current_region() -> u32 {
    CURRENT.with(Cell::get)
}

/// How the job that will run a task is handed over, as known where the task is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum How {
    /// Run directly by the creating thread (the first half of a join, a scope body).
    Inline,
    /// Pushed onto the creating worker's deque (the second half of a join, a spawn).
    Pushed,
    /// Already decided: the task continues a job obtained this way (the left half of a
    /// parallel iterator's split runs in the job that was split).
    Acquired(TaskOrigin),
}

/// Where a task was created: its region, its creating worker and how it is handed over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tag {
    pub region: u32,
    pub creator: u16,
    pub how: How,
}

impl Tag {
    /// A tag for a task created here, or `None` when nothing is recorded (recording off, or
    /// no region current on this thread).
    #[inline(always)]
    pub fn here(how: How) -> Option<Tag> {
        if recording_off() {
            return None;
        }
        let region = CURRENT.with(Cell::get);
        if region == 0 {
            return None;
        }
        Some(Tag {
            region,
            creator: worker_index(),
            how,
        })
    }

    /// The task's origin, found on the thread that runs it by comparing the creating worker
    /// with the executing one. `me` is the executing thread's rayon index.
    #[inline(always)]
    pub fn origin(&self, me: u16) -> TaskOrigin {
        match self.how {
            How::Acquired(origin) => origin,
            How::Inline | How::Pushed if me == self.creator => {
                if self.how == How::Inline {
                    TaskOrigin::Inline
                } else {
                    TaskOrigin::Local
                }
            }
            // Created outside the pool (or outside the executing pool's workers): injected.
            _ if self.creator == NO_WORKER => TaskOrigin::Injected,
            _ => TaskOrigin::Stolen,
        }
    }

    /// Starts the task on the calling thread: records its begin and makes its region current
    /// until the guard drops.
    #[inline(always)]
    pub fn begin(&self) -> TaskGuard {
        let origin = self.origin(worker_index());
        TaskGuard::begin(self.region, self.creator, origin)
    }

    /// Records that the fork that created this tag returned on the creating thread and the
    /// creator's code continues. Only a worker's lifecycle is analysed, so nothing is
    /// recorded on a thread outside the pool.
    #[inline(always)]
    pub fn resume(&self) {
        resume(self.region, self.creator);
    }
}

/// Records that code of `region` continues on the calling thread after a fork returned, when
/// the thread is a worker (`caller` is its rayon index).
#[inline(always)]
pub(crate) fn resume(region: u32, caller: u16) {
    if caller != NO_WORKER {
        recorder::record(EventKind::TaskResume, region, 0, 0);
    }
}

/// Records the end of a task when dropped (unwinding included) and restores the region that
/// was current before the task.
#[must_use = "the task lasts until this guard is dropped"]
pub(crate) struct TaskGuard {
    region: u32,
    previous: u32,
    recorded: bool,
}

impl TaskGuard {
    #[inline(always)]
    fn begin(region: u32, creator: u16, origin: TaskOrigin) -> TaskGuard {
        let previous = CURRENT.with(|c| c.replace(region));
        let recorded = recorder::record(EventKind::TaskBegin, region, creator, origin as u8);
        TaskGuard {
            region,
            previous,
            recorded,
        }
    }
}

impl Drop for TaskGuard {
    #[inline(always)]
    fn drop(&mut self) {
        if self.recorded {
            recorder::record(EventKind::TaskEnd, self.region, 0, 0);
        }
        CURRENT.with(|c| c.set(self.previous));
    }
}

/// The guard `parallel_region!` holds for the duration of its body: records the region's
/// begin and end and makes the region current on this thread.
#[must_use = "the region lasts until this guard is dropped"]
pub struct RegionGuard {
    /// 0 when nothing was recorded.
    id: u32,
    previous: u32,
}

/// Enters a region. When recording is off this is one load and one branch.
#[inline(always)]
pub fn enter(site: &'static Site) -> RegionGuard {
    if recording_off() {
        return RegionGuard { id: 0, previous: 0 };
    }
    enter_recording(site)
}

#[inline(never)]
fn enter_recording(site: &'static Site) -> RegionGuard {
    // Entering a region is rare next to tasks, so settling the mode here costs nothing
    // that matters, and spares a pool registration when recording turns out to be off.
    if !recorder::is_enabled() {
        return RegionGuard { id: 0, previous: 0 };
    }
    let id = site.id(None);
    register_pool_workers();
    let previous = CURRENT.with(|c| c.replace(id));
    if recorder::record(EventKind::RegionBegin, id, 0, 0) {
        RegionGuard { id, previous }
    } else {
        CURRENT.with(|c| c.set(previous));
        RegionGuard { id: 0, previous: 0 }
    }
}

impl Drop for RegionGuard {
    #[inline(always)]
    fn drop(&mut self) {
        if self.id != 0 {
            recorder::record(EventKind::RegionEnd, self.id, 0, 0);
            CURRENT.with(|c| c.set(self.previous));
        }
    }
}

/// Whether the global pool's workers were registered from a thread outside every pool.
static GLOBAL_REGISTERED: AtomicBool = AtomicBool::new(false);
/// Identity of the next pool registered from one of its own workers (0 is the global pool).
static NEXT_POOL: AtomicU32 = AtomicU32::new(1);

/// Gives every worker of the pool the calling thread's rayon operations go to a thread record
/// (with its rayon index and pool), so that workers that never run a task still appear, idle,
/// in the lifecycle analysis. Runs a broadcast once per pool; afterwards one flag check.
pub(crate) fn register_pool_workers() {
    if rayon::current_thread_index().is_some() {
        if !REGISTERED.with(Cell::get) {
            broadcast_registration(NEXT_POOL.fetch_add(1, Ordering::Relaxed));
        }
    } else if !GLOBAL_REGISTERED.swap(true, Ordering::AcqRel) {
        // From outside every pool, rayon's operations go to the global pool.
        broadcast_registration(0);
    }
}

#[cold]
fn broadcast_registration(pool: u32) {
    rayon::broadcast(|_| {
        // A worker registered earlier (through another path to the same pool) keeps its
        // identity, so that one pool never has two.
        if !REGISTERED.with(|r| r.replace(true)) {
            recorder::register_current_thread(pool);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(creator: u16, how: How) -> Tag {
        Tag {
            region: 7,
            creator,
            how,
        }
    }

    #[test]
    fn origin_compares_the_creating_worker_with_the_executing_one() {
        assert_eq!(tag(2, How::Inline).origin(2), TaskOrigin::Inline);
        assert_eq!(tag(2, How::Pushed).origin(2), TaskOrigin::Local);
        assert_eq!(tag(2, How::Pushed).origin(3), TaskOrigin::Stolen);
        assert_eq!(tag(2, How::Inline).origin(0), TaskOrigin::Stolen);
        assert_eq!(tag(NO_WORKER, How::Pushed).origin(1), TaskOrigin::Injected);
        assert_eq!(tag(NO_WORKER, How::Inline).origin(1), TaskOrigin::Injected);
        // A task that never entered the pool runs on the thread that created it.
        assert_eq!(
            tag(NO_WORKER, How::Inline).origin(NO_WORKER),
            TaskOrigin::Inline
        );
        assert_eq!(
            tag(2, How::Acquired(TaskOrigin::Stolen)).origin(2),
            TaskOrigin::Stolen
        );
    }
}
