//! Instrumented `ThreadPool::install`.

use super::context::{self, How, Tag, register_pool_workers};
use crate::trace::{NO_WORKER, TaskOrigin};
use rayon::ThreadPool;

/// [`ThreadPool::install`] whose closure is a task of the current region: inline when the
/// caller is already a worker of `pool`, injected otherwise. The first install into a pool
/// registers its workers (see `parallel_region!`), so its idle workers are analysed too.
pub fn install<OP, R>(pool: &ThreadPool, op: OP) -> R
where
    OP: FnOnce() -> R + Send,
    R: Send,
{
    let Some(here) = Tag::here(How::Inline) else {
        return pool.install(op);
    };
    let task = if pool.current_thread_index().is_some() {
        here
    } else {
        // The caller is outside this pool (maybe a worker of another one): whatever its index,
        // the task enters the pool by injection.
        Tag {
            creator: NO_WORKER,
            how: How::Acquired(TaskOrigin::Injected),
            ..here
        }
    };
    let result = pool.install(move || {
        register_pool_workers();
        let _task = task.begin();
        op()
    });
    context::resume(here.region, here.creator);
    result
}
