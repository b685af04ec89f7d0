//! rayon-core's hook points: every rayon task of the program recorded.
//!
//! Why: rayon's lifecycle events (a job runs, a join's halves, a worker searches or sleeps)
//! happen inside rayon-core, and its start/exit handlers see only thread start and end; a
//! wrapper around rayon's public functions sees only the calls written where it is applied. So
//! the program is built against a copy of rayon-core ([`crate::build::hooked_copy`]) that calls
//! `parprof_rt::rayon_hooks` where a job is created / runs, a join runs its halves and returns,
//! a thread enters a pool from outside, a worker starts, a search round fails, a worker sleeps.

use crate::build::hooked_copy::{HookPoint, HookedCrate, PreparedCopy, Program, track_caller};
use crate::record::hook_marker;
use crate::recording::RayonHooks;
use std::path::Path;

/// rayon-core, as parprof hooks it.
pub const RAYON_CORE: HookedCrate = HookedCrate {
    package: "rayon-core",
    supported: &["1.12", "1.13"],
    hook_points: HOOK_POINTS,
    purpose: "record the worker lifecycle",
    lib_items: build_mark,
};

/// The mark of the hooked build, kept in the executable for `record` (see [`hook_marker`]).
fn build_mark(version: &str) -> String {
    format!(
        "\n#[doc(hidden)]\npub static PARPROF_BUILD_MARK: &str = \"{}\";\n",
        hook_marker::mark(version)
    )
}

/// Prepares the hooked copy of the program's rayon-core in `build_dir`, or says why not.
pub fn prepare(program: &Program, build_dir: &Path) -> Result<PreparedCopy, RayonHooks> {
    match program.prepare(&RAYON_CORE, build_dir) {
        Ok(Some(copy)) => Ok(copy),
        Ok(None) => Err(RayonHooks::NoRayon),
        Err(reason) => Err(RayonHooks::Unavailable { reason }),
    }
}

const HOOK_POINTS: &[HookPoint] = &[
    // Every job carries the tag of the thread that created it, in the job itself: a tag in
    // `JobRef` made it 24 bytes, returned through memory from every deque pop (a stall that
    // cost nested parallel iterators more than the hooks did)…
    HookPoint {
        file: "src/job.rs",
        anchor: "    result: UnsafeCell<JobResult<R>>,\n}",
        replacement: "    result: UnsafeCell<JobResult<R>>,\n    pub(super) parprof_tag: ::parprof_rt::rayon_hooks::Tag,\n}",
    },
    HookPoint {
        file: "src/job.rs",
        anchor: "            result: UnsafeCell::new(JobResult::None),\n",
        replacement: "            result: UnsafeCell::new(JobResult::None),\n            parprof_tag: ::parprof_rt::rayon_hooks::Tag::here(),\n",
    },
    HookPoint {
        file: "src/job.rs",
        anchor: "    BODY: FnOnce() + Send,\n{\n    job: BODY,\n}",
        replacement: "    BODY: FnOnce() + Send,\n{\n    job: BODY,\n    parprof_tag: ::parprof_rt::rayon_hooks::Tag,\n}",
    },
    HookPoint {
        file: "src/job.rs",
        anchor: "        Box::new(HeapJob { job })",
        replacement: "        Box::new(HeapJob { job, parprof_tag: ::parprof_rt::rayon_hooks::Tag::here() })",
    },
    HookPoint {
        file: "src/job.rs",
        anchor: "    BODY: Fn() + Send + Sync,\n{\n    job: BODY,\n}",
        replacement: "    BODY: Fn() + Send + Sync,\n{\n    job: BODY,\n    parprof_tag: ::parprof_rt::rayon_hooks::Tag,\n}",
    },
    HookPoint {
        file: "src/job.rs",
        anchor: "        Arc::new(ArcJob { job })",
        replacement: "        Arc::new(ArcJob { job, parprof_tag: ::parprof_rt::rayon_hooks::Tag::here() })",
    },
    // …and running it is a task of that tag's region (a FIFO scope's indirection runs the job
    // it holds, which is the task).
    HookPoint {
        file: "src/job.rs",
        anchor: "        let this = &*(this as *const Self);\n        let abort = unwind::AbortIfPanic;\n",
        replacement: "        let this = &*(this as *const Self);\n        let _parprof_task = ::parprof_rt::rayon_hooks::Task::begin(this.parprof_tag);\n        let abort = unwind::AbortIfPanic;\n",
    },
    // A job another thread waits for says so before it releases that thread: the program may
    // end as soon as it is released, before this thread runs another hook.
    HookPoint {
        file: "src/job.rs",
        anchor: "        (*this.result.get()) = JobResult::call(func);\n        Latch::set(&this.latch);\n",
        replacement: "        (*this.result.get()) = JobResult::call(func);\n        ::parprof_rt::rayon_hooks::job_done();\n        Latch::set(&this.latch);\n",
    },
    HookPoint {
        file: "src/job.rs",
        anchor: "        let this = Box::from_raw(this as *mut Self);\n        (this.job)();\n",
        replacement: "        let this = Box::from_raw(this as *mut Self);\n        let _parprof_task = ::parprof_rt::rayon_hooks::Task::begin(this.parprof_tag);\n        (this.job)();\n",
    },
    HookPoint {
        file: "src/job.rs",
        anchor: "        let this = Arc::from_raw(this as *mut Self);\n        (this.job)();\n",
        replacement: "        let this = Arc::from_raw(this as *mut Self);\n        let _parprof_task = ::parprof_rt::rayon_hooks::Task::begin(this.parprof_tag);\n        (this.job)();\n",
    },
    // A join's first half runs inline…
    HookPoint {
        file: "src/join/mod.rs",
        anchor: "        let status_a = unwind::halt_unwinding(call_a(oper_a, injected));\n",
        replacement: "        let parprof_fork = ::parprof_rt::rayon_hooks::Fork::of(job_b.parprof_tag);\n        let status_a = {\n            let _parprof_task = parprof_fork.inline_task();\n            unwind::halt_unwinding(call_a(oper_a, injected))\n        };\n",
    },
    // …its second half, popped back, runs without a job…
    HookPoint {
        file: "src/join/mod.rs",
        anchor: "                let result_b = job_b.run_inline(injected);\n",
        replacement: "                let result_b = {\n                    let _parprof_task = parprof_fork.local_task();\n                    job_b.run_inline(injected)\n                };\n                parprof_fork.resume();\n",
    },
    // …and the join returns to its caller.
    HookPoint {
        file: "src/join/mod.rs",
        anchor: "        (result_a, job_b.into_result())\n",
        replacement: "        parprof_fork.resume();\n        (result_a, job_b.into_result())\n",
    },
    // A thread outside every pool enters one: an implicit region when none is current, named
    // after the call site. `#[track_caller]` on the way there carries the user's source
    // location to it for direct calls (`join`, `scope`, `install`); calls made inside rayon
    // (a parallel iterator) are named by the operation's type instead.
    HookPoint {
        file: "src/registry.rs",
        anchor: "        thread_local!(static LOCK_LATCH",
        replacement: "        let _parprof_entry = ::parprof_rt::rayon_hooks::PoolEntry::from_outside(::std::any::type_name::<OP>(), ::std::panic::Location::caller());\n        thread_local!(static LOCK_LATCH",
    },
    track_caller(
        "src/registry.rs",
        "    unsafe fn in_worker_cold<OP, R>(&self, op: OP) -> R\n",
    ),
    track_caller(
        "src/registry.rs",
        "    pub(super) fn in_worker<OP, R>(&self, op: OP) -> R\n",
    ),
    track_caller(
        "src/registry.rs",
        "pub(super) fn in_worker<OP, R>(op: OP) -> R\n",
    ),
    track_caller(
        "src/join/mod.rs",
        "pub fn join<A, B, RA, RB>(oper_a: A, oper_b: B) -> (RA, RB)\n",
    ),
    track_caller(
        "src/join/mod.rs",
        "pub fn join_context<A, B, RA, RB>(oper_a: A, oper_b: B) -> (RA, RB)\n",
    ),
    track_caller(
        "src/scope/mod.rs",
        "pub fn scope<'scope, OP, R>(op: OP) -> R\n",
    ),
    track_caller(
        "src/scope/mod.rs",
        "pub fn scope_fifo<'scope, OP, R>(op: OP) -> R\n",
    ),
    track_caller(
        "src/thread_pool/mod.rs",
        "    pub fn install<OP, R>(&self, op: OP) -> R\n",
    ),
    // A pool's `broadcast` and an `in_place_scope` from outside every pool: entries whose kind
    // the hook point knows, made on the calling thread.
    HookPoint {
        file: "src/broadcast/mod.rs",
        anchor: "    let n_threads = registry.num_threads();\n    let current_thread = WorkerThread::current().as_ref();\n",
        replacement: "    let n_threads = registry.num_threads();\n    let current_thread = WorkerThread::current().as_ref();\n    let _parprof_entry = if current_thread.is_none() {\n        ::parprof_rt::rayon_hooks::PoolEntry::from_outside_as(::parprof_rt::trace::EntryKind::Broadcast, ::std::any::type_name::<OP>(), ::std::panic::Location::caller())\n    } else {\n        ::parprof_rt::rayon_hooks::PoolEntry::NONE\n    };\n",
    },
    HookPoint {
        file: "src/scope/mod.rs",
        anchor: "    let (thread, registry) = get_in_place_thread_registry(registry);\n    let scope = Scope::<'scope>::new(thread, registry);\n",
        replacement: "    let (thread, registry) = get_in_place_thread_registry(registry);\n    let _parprof_entry = if thread.is_none() {\n        ::parprof_rt::rayon_hooks::PoolEntry::from_outside_as(::parprof_rt::trace::EntryKind::Scope, ::std::any::type_name::<OP>(), ::std::panic::Location::caller())\n    } else {\n        ::parprof_rt::rayon_hooks::PoolEntry::NONE\n    };\n    let scope = Scope::<'scope>::new(thread, registry);\n",
    },
    HookPoint {
        file: "src/scope/mod.rs",
        anchor: "    let (thread, registry) = get_in_place_thread_registry(registry);\n    let scope = ScopeFifo::<'scope>::new(thread, registry);\n",
        replacement: "    let (thread, registry) = get_in_place_thread_registry(registry);\n    let _parprof_entry = if thread.is_none() {\n        ::parprof_rt::rayon_hooks::PoolEntry::from_outside_as(::parprof_rt::trace::EntryKind::Scope, ::std::any::type_name::<OP>(), ::std::panic::Location::caller())\n    } else {\n        ::parprof_rt::rayon_hooks::PoolEntry::NONE\n    };\n    let scope = ScopeFifo::<'scope>::new(thread, registry);\n",
    },
    // A spawned job (`spawn`, `spawn_fifo`) carries the region of its spawn, and its run on a
    // worker is a run of it: spawned from outside every region, the spawn's call site is an
    // implicit region, whose runs the spawned jobs are.
    HookPoint {
        file: "src/spawn/mod.rs",
        anchor: "    registry.increment_terminate_count();\n\n    HeapJob::new({\n        let registry = Arc::clone(registry);\n        move || {\n            registry.catch_unwind(func);\n",
        replacement: "    registry.increment_terminate_count();\n\n    let parprof_spawn = ::parprof_rt::rayon_hooks::Spawn::here(::parprof_rt::trace::EntryKind::Spawn, ::std::any::type_name::<F>(), ::std::panic::Location::caller());\n    let _parprof_tagging = parprof_spawn.tagging();\n    HeapJob::new({\n        let registry = Arc::clone(registry);\n        move || {\n            let parprof_run = parprof_spawn.run();\n            registry.catch_unwind(func);\n            drop(parprof_run);\n",
    },
    // …and so is each job of a `spawn_broadcast`.
    HookPoint {
        file: "src/broadcast/mod.rs",
        anchor: "    let job = ArcJob::new({\n        let registry = Arc::clone(registry);\n        move || {\n            registry.catch_unwind(|| BroadcastContext::with(&op));\n",
        replacement: "    let parprof_spawn = ::parprof_rt::rayon_hooks::Spawn::here(::parprof_rt::trace::EntryKind::Broadcast, ::std::any::type_name::<OP>(), ::std::panic::Location::caller());\n    let _parprof_tagging = parprof_spawn.tagging();\n    let job = ArcJob::new({\n        let registry = Arc::clone(registry);\n        move || {\n            let parprof_run = parprof_spawn.run();\n            registry.catch_unwind(|| BroadcastContext::with(&op));\n            drop(parprof_run);\n",
    },
    track_caller("src/spawn/mod.rs", "pub fn spawn<F>(func: F)\n"),
    track_caller("src/spawn/mod.rs", "pub fn spawn_fifo<F>(func: F)\n"),
    track_caller(
        "src/spawn/mod.rs",
        "pub(super) unsafe fn spawn_in<F>(func: F, registry: &Arc<Registry>)\n",
    ),
    track_caller(
        "src/spawn/mod.rs",
        "pub(super) unsafe fn spawn_fifo_in<F>(func: F, registry: &Arc<Registry>)\n",
    ),
    track_caller(
        "src/spawn/mod.rs",
        "unsafe fn spawn_job<F>(func: F, registry: &Arc<Registry>) -> JobRef\n",
    ),
    track_caller(
        "src/broadcast/mod.rs",
        "pub fn broadcast<OP, R>(op: OP) -> Vec<R>\n",
    ),
    track_caller(
        "src/broadcast/mod.rs",
        "pub fn spawn_broadcast<OP>(op: OP)\n",
    ),
    track_caller(
        "src/broadcast/mod.rs",
        "pub(super) unsafe fn broadcast_in<OP, R>(op: OP, registry: &Arc<Registry>) -> Vec<R>\n",
    ),
    track_caller(
        "src/broadcast/mod.rs",
        "pub(super) unsafe fn spawn_broadcast_in<OP>(op: OP, registry: &Arc<Registry>)\n",
    ),
    track_caller(
        "src/scope/mod.rs",
        "pub fn in_place_scope<'scope, OP, R>(op: OP) -> R\n",
    ),
    track_caller(
        "src/scope/mod.rs",
        "pub fn in_place_scope_fifo<'scope, OP, R>(op: OP) -> R\n",
    ),
    track_caller(
        "src/scope/mod.rs",
        "pub(crate) fn do_in_place_scope<'scope, OP, R>(registry: Option<&Arc<Registry>>, op: OP) -> R\n",
    ),
    track_caller(
        "src/scope/mod.rs",
        "pub(crate) fn do_in_place_scope_fifo<'scope, OP, R>(registry: Option<&Arc<Registry>>, op: OP) -> R\n",
    ),
    track_caller(
        "src/thread_pool/mod.rs",
        "    pub fn join<A, B, RA, RB>(&self, oper_a: A, oper_b: B) -> (RA, RB)\n",
    ),
    track_caller(
        "src/thread_pool/mod.rs",
        "    pub fn scope<'scope, OP, R>(&self, op: OP) -> R\n",
    ),
    track_caller(
        "src/thread_pool/mod.rs",
        "    pub fn scope_fifo<'scope, OP, R>(&self, op: OP) -> R\n",
    ),
    track_caller(
        "src/thread_pool/mod.rs",
        "    pub fn spawn<OP>(&self, op: OP)\n",
    ),
    track_caller(
        "src/thread_pool/mod.rs",
        "    pub fn spawn_fifo<OP>(&self, op: OP)\n",
    ),
    track_caller(
        "src/thread_pool/mod.rs",
        "    pub fn spawn_broadcast<OP>(&self, op: OP)\n",
    ),
    track_caller(
        "src/thread_pool/mod.rs",
        "    pub fn broadcast<OP, R>(&self, op: OP) -> Vec<R>\n",
    ),
    track_caller(
        "src/thread_pool/mod.rs",
        "    pub fn in_place_scope<'scope, OP, R>(&self, op: OP) -> R\n",
    ),
    track_caller(
        "src/thread_pool/mod.rs",
        "    pub fn in_place_scope_fifo<'scope, OP, R>(&self, op: OP) -> R\n",
    ),
    // A worker of another pool waited for its operation here.
    HookPoint {
        file: "src/registry.rs",
        anchor: "        current_thread.wait_until(&job.latch);\n",
        replacement: "        current_thread.wait_until(&job.latch);\n        ::parprof_rt::rayon_hooks::fork_returned();\n",
    },
    HookPoint {
        file: "src/registry.rs",
        anchor: "    let index = worker_thread.index;\n",
        // The mark of the hooked build, kept in the executable for `record`.
        replacement: "    let index = worker_thread.index;\n    ::parprof_rt::rayon_hooks::worker_started(index, registry as *const Registry as usize);\n    ::core::hint::black_box(crate::PARPROF_BUILD_MARK);\n",
    },
    // A scope's owner waited for its spawned jobs.
    HookPoint {
        file: "src/scope/mod.rs",
        anchor: "        self.job_completed_latch.wait(owner);\n",
        replacement: "        self.job_completed_latch.wait(owner);\n        ::parprof_rt::rayon_hooks::fork_returned();\n",
    },
    HookPoint {
        file: "src/sleep/mod.rs",
        anchor: "    ) {\n        if idle_state.rounds < ROUNDS_UNTIL_SLEEPY {\n",
        replacement: "    ) {\n        ::parprof_rt::rayon_hooks::search_round(idle_state.rounds as u32);\n        if idle_state.rounds < ROUNDS_UNTIL_SLEEPY {\n",
    },
    HookPoint {
        file: "src/sleep/mod.rs",
        anchor: "            *is_blocked = true;\n",
        replacement: "            let _parprof_sleep = ::parprof_rt::rayon_hooks::Sleep::begin();\n            *is_blocked = true;\n",
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::hooked_copy::assert_workspace_copy_is_hooked;

    /// This workspace's own rayon-core (a supported version) takes every hook point, and its
    /// library carries the hooked build's mark.
    #[test]
    fn the_workspace_rayon_core_takes_every_hook_point() {
        let dir = tempfile::tempdir().unwrap();
        let (copy, version) = assert_workspace_copy_is_hooked(&RAYON_CORE, dir.path());
        let lib = std::fs::read_to_string(copy.join("src/lib.rs")).unwrap();
        assert!(lib.contains(&hook_marker::mark(&version)), "{lib}");
    }
}
