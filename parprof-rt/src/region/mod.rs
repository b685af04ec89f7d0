//! Parallel regions and rayon's worker lifecycle (method 2 of the spec).
//!
//! `parallel_region!("name", { body })` enters a region for the duration of its body and
//! rewrites rayon calls inside the body to the instrumented equivalents below. They behave
//! like rayon's functions of the same names and signatures, and in addition:
//!
//! - carry the region into the tasks they create, so that a stolen task counts in the region
//!   that created it and probes inside a task belong to it;
//! - record each task's begin (`TaskBegin`: region, creating worker, origin) and end
//!   (`TaskEnd`) on the worker that runs it, and `TaskResume` when a fork returns on a worker.
//!
//! The origin of a task is found on the thread that runs it by comparing the creating worker
//! (the rayon index of the thread that created the task, `NO_WORKER` outside every pool) with
//! the executing one: equal → `Inline` when the creator runs it directly (the first half of a
//! join, a scope body) or `Local` when it was pushed onto the creator's deque (the second half
//! of a join, a spawn); created outside the pool → `Injected`; otherwise → `Stolen`.
//!
//! Outside a region, or when nothing is recorded, every wrapper falls through to plain rayon
//! after one load and branch; with the `off` feature, at compile time.
//!
//! On the first region entered for a pool, every worker of the pool writes its thread record
//! (a broadcast), so that workers that never get a task still appear, idle, in the analysis.
//! A region entered outside every pool registers the global pool, which creates it if needed.

mod context;
mod iter;
mod join;
mod pool;
mod scope;

pub use context::{RegionGuard, Site, current_region, enter};
pub use iter::{Instrumented, ParallelIteratorExt, instrument};
pub use join::{join, join_context};
pub use pool::install;
pub use scope::{Scope, scope, spawn};
