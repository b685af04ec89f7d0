//! Hooks that `cargo parprof` compiles into the program's own copy of rayon-core.
//!
//! `cargo parprof` builds the profiled program with a copy of the rayon-core version the program
//! already uses, edited at a few points to call these functions (see `cargo-parprof`'s
//! `rayon_hooks` module for the points and the supported versions). So every rayon task of
//! the program is recorded — `join`, `scope`/`spawn`, `install`, parallel iterators, and what
//! rayon itself or a dependency calls — wherever the call is written, without annotations:
//!
//! - every job carries the [`Tag`] of the thread that created it: the region current there
//!   and the creating worker. Running a job is a task of that region ([`Task::begin`]), so a
//!   stolen task counts in the region that created it;
//! - a join's first half, and its second half when the joining worker pops it back, run
//!   without a job: [`Fork`] records them as inline and local tasks, and the return of the
//!   fork to the joining code ([`Fork::resume`], [`fork_returned`]);
//! - a thread outside every pool that enters one ([`PoolEntry::from_outside`]: `join`, a
//!   parallel iterator, `scope`, `in_place_scope`, `install`, `broadcast`) with no region
//!   current opens an *implicit region* for the call, named after its call site (the program's
//!   innermost frame on the stack, or the operation's type without debug information), with
//!   its kind of entry;
//! - a job spawned with no region current (`spawn`, `spawn_fifo`, `spawn_broadcast`: [`Spawn`])
//!   carries the implicit region of its spawn's call site, and its run on a worker is a run of
//!   that region, as are the further spawns it makes;
//! - workers announce themselves when they start ([`worker_started`]), and record their failed
//!   search rounds ([`search_round`]) and their sleeps ([`Sleep`]);
//! - rayon itself (a copy edited at one point) says when an indexed parallel iterator bridges
//!   its producer to its consumer, and over how many items ([`IteratorBridge`]): a region's
//!   own iterators' items, so that a piece of work's items are known.
//!
//! Not a public API: the names and signatures change with the edits.

use crate::call_site::{self, CallSite, MACHINERY};
use crate::lifecycle_totals;
use crate::recorder;
use crate::region::{self, NOT_A_WORKER, RegionGuard};
use crate::runtime;
use crate::trace::{EntryKind, EventKind, NO_WORKER, SiteKind, SiteRecord, TaskOrigin};
use std::collections::BTreeMap;
use std::panic::Location;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// What a job carries from the thread that created it: the region current there (high half)
/// and the creating thread's worker identity (low half). 0 when nothing is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tag(u64);

impl Tag {
    /// A job created outside every region: its task is not recorded.
    pub const NONE: Tag = Tag(0);

    /// The tag of a job created on the calling thread now.
    #[inline(always)]
    pub fn here() -> Tag {
        if region::recording_off() {
            return Tag::NONE;
        }
        let context = region::context();
        if context >> 32 == 0 {
            Tag::NONE
        } else {
            Tag(context)
        }
    }

    fn region(self) -> u32 {
        (self.0 >> 32) as u32
    }

    fn creator(self) -> u32 {
        self.0 as u32
    }

    /// How the calling thread obtained a job with this tag, by comparing the creating worker
    /// with the executing one.
    fn origin_here(self) -> TaskOrigin {
        origin(self.creator(), region::identity())
    }
}

/// The origin of a job created by `creator` and run by `me` (worker identities).
fn origin(creator: u32, me: u32) -> TaskOrigin {
    if creator == me {
        TaskOrigin::Local
    } else if creator == NOT_A_WORKER || (creator & 0xFFFF) != (me & 0xFFFF) {
        // From outside every pool, or from a worker of another pool.
        TaskOrigin::Injected
    } else {
        TaskOrigin::Stolen
    }
}

/// A task running on this thread: its begin is recorded when made, its end (unwinding
/// included) when dropped, and its region is current meanwhile.
#[must_use = "the task lasts until this guard is dropped"]
pub struct Task {
    /// 0 when nothing was recorded.
    region: u32,
    previous: u32,
}

impl Task {
    const INERT: Task = Task {
        region: 0,
        previous: 0,
    };

    /// A job with this tag starts running on the calling thread.
    #[inline(always)]
    pub fn begin(tag: Tag) -> Task {
        if tag == Tag::NONE {
            return Task::INERT;
        }
        Task::begin_as(tag, tag.origin_here())
    }

    #[inline(always)]
    fn begin_as(tag: Tag, origin: TaskOrigin) -> Task {
        let region = tag.region();
        let creator = (tag.creator() >> 16) as u16;
        let previous = region::set_region(region);
        if lifecycle_totals::hook(EventKind::TaskBegin, region, creator, origin as u8) {
            Task { region, previous }
        } else {
            region::set_region(previous);
            Task::INERT
        }
    }
}

impl Drop for Task {
    #[inline(always)]
    fn drop(&mut self) {
        if self.region != 0 {
            lifecycle_totals::hook(EventKind::TaskEnd, self.region, 0, 0);
            region::set_region(self.previous);
        }
    }
}

/// A `join` in progress on the calling worker.
pub struct Fork(Tag);

impl Fork {
    #[inline(always)]
    pub fn here() -> Fork {
        Fork(Tag::here())
    }

    /// The join whose second half's job carries `tag` (made on this thread just before).
    #[inline(always)]
    pub fn of(tag: Tag) -> Fork {
        Fork(tag)
    }

    /// The first half, run directly by the joining worker.
    #[inline(always)]
    pub fn inline_task(&self) -> Task {
        if self.0 == Tag::NONE {
            return Task::INERT;
        }
        Task::begin_as(self.0, TaskOrigin::Inline)
    }

    /// The second half, popped back from the joining worker's own deque.
    #[inline(always)]
    pub fn local_task(&self) -> Task {
        if self.0 == Tag::NONE {
            return Task::INERT;
        }
        Task::begin_as(self.0, TaskOrigin::Local)
    }

    /// The join returns to the code that called it.
    #[inline(always)]
    pub fn resume(&self) {
        if self.0 != Tag::NONE && self.0.creator() != NOT_A_WORKER {
            lifecycle_totals::hook(EventKind::TaskResume, self.0.region(), 0, 0);
        }
    }
}

/// A job that another thread waits for (a join's stolen half, an operation injected into the
/// pool) is done and about to release that thread: the counts of this thread's calls that
/// sampling did not record are written now. Once released, the waiting thread may end the
/// program before this one fails a search and writes them as it idles (a busy machine's
/// preemption between the two lost a few dozen of the quickstart's 300,000 calls).
#[inline(always)]
pub fn job_done() {
    recorder::flush_unrecorded_now();
}

/// A fork that waited for its jobs (`scope`, a cross-pool `install`) returns on the calling
/// thread.
#[inline(always)]
pub fn fork_returned() {
    Fork::here().resume();
}

/// A thread outside every pool runs an operation in a pool and waits for it.
#[must_use = "the entry lasts until this guard is dropped"]
pub struct PoolEntry(#[allow(dead_code)] RegionGuard);

impl PoolEntry {
    /// An entry that records nothing (the calling thread is a worker of a pool).
    pub const NONE: PoolEntry = PoolEntry(RegionGuard::INERT);

    /// `operation` is `std::any::type_name` of the operation that `in_worker` runs and
    /// `caller` the location the call into rayon-core was made from: they name the call site
    /// of an implicit region when no region is current, and tell its kind of entry.
    pub fn from_outside(operation: &'static str, caller: &'static Location<'static>) -> PoolEntry {
        PoolEntry::from_outside_as(entry_kind(operation, caller.file()), operation, caller)
    }

    /// An entry whose kind the hook point knows (`broadcast`, `in_place_scope`).
    pub fn from_outside_as(
        entry: EntryKind,
        operation: &'static str,
        caller: &'static Location<'static>,
    ) -> PoolEntry {
        if region::recording_off() || !runtime::is_enabled() || region::current_region() != 0 {
            return PoolEntry::NONE;
        }
        PoolEntry(RegionGuard::begin(implicit_region(
            operation, caller, entry, false,
        )))
    }
}

/// A job spawned to run detached (`spawn`, `spawn_fifo`, `spawn_broadcast`). Spawned with no
/// region current, it is a run of an implicit region named after the spawn's call site: its
/// tag carries the region, and the job's run on a worker opens and closes a run of it, so that
/// spawned jobs in flight at once are runs of one region. Spawned by such a job (a further
/// spawn), it is a run of the same region; spawned inside any other region, it is a task of
/// that region, as every job made there.
#[derive(Clone, Copy)]
pub struct Spawn {
    /// The region whose run the job is (0: none).
    region: u32,
}

impl Spawn {
    /// A job is spawned on the calling thread now: `operation` and `caller` name the call site
    /// (see [`PoolEntry::from_outside`]).
    #[inline]
    pub fn here(
        entry: EntryKind,
        operation: &'static str,
        caller: &'static Location<'static>,
    ) -> Spawn {
        if region::recording_off() {
            return Spawn { region: 0 };
        }
        let current = region::current_region();
        if current != 0 {
            let region = if is_detached_region(current) {
                current
            } else {
                0
            };
            return Spawn { region };
        }
        if !runtime::is_enabled() {
            return Spawn { region: 0 };
        }
        Spawn {
            region: implicit_region(operation, caller, entry, true),
        }
    }

    /// While the job is made on the spawning thread: its tag carries the region.
    pub fn tagging(&self) -> SpawnTagging {
        if self.region == 0 || region::current_region() == self.region {
            return SpawnTagging(None);
        }
        SpawnTagging(Some(region::set_region(self.region)))
    }

    /// The job runs on the calling worker: a run of the region until the guard is dropped.
    pub fn run(&self) -> SpawnRun {
        if self.region == 0 || region::recording_off() {
            return SpawnRun(RegionGuard::INERT);
        }
        SpawnRun(RegionGuard::begin(self.region))
    }
}

/// See [`Spawn::tagging`]: restores the spawning thread's region when dropped.
#[must_use = "the tagging lasts until this guard is dropped"]
pub struct SpawnTagging(Option<u32>);

impl Drop for SpawnTagging {
    fn drop(&mut self) {
        if let Some(previous) = self.0 {
            region::set_region(previous);
        }
    }
}

/// See [`Spawn::run`].
#[must_use = "the run lasts until this guard is dropped"]
pub struct SpawnRun(#[allow(dead_code)] RegionGuard);

/// Implicit regions whose runs are spawned jobs, by id (ids past the set's size are not
/// marked: a further spawn inside one is then a task of it, not a run).
static DETACHED_REGIONS: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];

fn is_detached_region(id: u32) -> bool {
    let (word, bit) = (id as usize / 64, id % 64);
    DETACHED_REGIONS
        .get(word)
        .is_some_and(|w| w.load(Ordering::Relaxed) & (1 << bit) != 0)
}

fn mark_detached_region(id: u32) {
    let (word, bit) = (id as usize / 64, id % 64);
    if let Some(w) = DETACHED_REGIONS.get(word) {
        w.fetch_or(1 << bit, Ordering::Relaxed);
    }
}

/// The kind of entry of an operation that a thread outside every pool runs in one, from its
/// type and the location of the call: `ThreadPool::install` of a pool's `join` or `scope` is
/// that call; a `join` called from rayon's own sources is a parallel iterator's (or slice
/// operation's).
fn entry_kind(operation: &str, caller_file: &str) -> EntryKind {
    let mut paths = operation
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .filter(|p| p.starts_with("rayon_core::"));
    let mut outer = paths.next().unwrap_or("");
    if outer.ends_with("ThreadPool::install")
        && let Some(inner) = paths.next()
        && inner.starts_with("rayon_core::thread_pool::ThreadPool::")
    {
        outer = inner;
    }
    let function = outer
        .trim_end_matches(':')
        .rsplit("::")
        .next()
        .unwrap_or("");
    match function {
        _ if in_rayon_sources(caller_file) && !caller_file.contains("rayon-core-") => {
            EntryKind::Iterator
        }
        "join" | "join_context" => EntryKind::Join,
        "scope" | "scope_fifo" => EntryKind::Scope,
        _ => EntryKind::Install,
    }
}

/// An implicit region's call site: as [`CallSite`], with its kind of entry.
type ImplicitSite = (String, String, u32, Option<String>, EntryKind);

/// Implicit-region sites by the addresses of the operation's type name (one per monomorphised
/// call) and of the caller's location, and by call site (function, location, calling
/// function, kind of entry), so that one call site made of several operation types is one
/// region.
#[allow(clippy::type_complexity)]
static IMPLICIT_REGIONS: Mutex<(
    BTreeMap<(usize, usize, EntryKind), u32>,
    BTreeMap<ImplicitSite, u32>,
)> = Mutex::new((BTreeMap::new(), BTreeMap::new()));

/// `detached`: the region's runs are spawned jobs ([`Spawn`]).
#[cold]
fn implicit_region(
    operation: &'static str,
    caller: &'static Location<'static>,
    entry: EntryKind,
    detached: bool,
) -> u32 {
    let mut regions = IMPLICIT_REGIONS.lock().unwrap_or_else(|e| e.into_inner());
    let (by_address, by_site) = &mut *regions;
    let key = (
        operation.as_ptr() as usize,
        caller as *const Location as usize,
        entry,
    );
    if let Some(&id) = by_address.get(&key) {
        return id;
    }
    let site = implicit_site(operation, caller, entry);
    let id = match by_site.get(&site) {
        Some(&id) => id,
        None => {
            // One slot per implicit region for the program's lifetime: a handful of statics.
            let slot: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
            let (function, file, line, calling, entry) = site.clone();
            let id = recorder::register_site(
                slot,
                SiteRecord {
                    id: 0,
                    kind: SiteKind::ImplicitRegion,
                    name: function,
                    file,
                    line,
                    caller: calling.unwrap_or_default(),
                    entry: Some(entry),
                },
            );
            if detached {
                mark_detached_region(id);
            }
            by_site.insert(site, id);
            id
        }
    };
    by_address.insert(key, id);
    id
}

/// The call site on the calling thread's stack; without debug information, the operation's
/// type names it, and rayon-core's caller locates it unless that is inside rayon (a parallel
/// iterator's own join).
fn implicit_site(
    operation: &'static str,
    caller: &'static Location<'static>,
    entry: EntryKind,
) -> ImplicitSite {
    match call_site::from_stack() {
        Some(CallSite {
            name,
            file,
            line,
            caller,
        }) => (name, file, line, caller, entry),
        None if in_rayon_sources(caller.file()) => {
            (call_site_name(operation), String::new(), 0, None, entry)
        }
        None => (
            call_site_name(operation),
            caller.file().to_owned(),
            caller.line(),
            None,
            entry,
        ),
    }
}

/// Whether a source path lies in rayon's or rayon-core's own sources (cargo's registry
/// folders `rayon-1.12.0`, `rayon-core-1.13.0`; the hooked copy of the latter is named so too).
fn in_rayon_sources(file: &str) -> bool {
    file.split(['/', '\\']).any(|part| {
        let version = part
            .strip_prefix("rayon-core-")
            .or_else(|| part.strip_prefix("rayon-"));
        version.is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
    })
}

/// The call site named by the type of the operation a thread runs in a pool: the first closure
/// in it outside rayon and the standard library, named by the function it is written in (the
/// function whose closure the operation runs), e.g. `rayon_core::join::join_context<quicksort::
/// quick_sort<i32>::{{closure}}, …>::{{closure}}` → `quicksort::quick_sort`. A closure names
/// the code that started the operation; a plain type (the element type of a parallel
/// iterator, `nbody::Body`) does not. Without a closure of the program's, the first rayon path
/// below rayon-core names it (`par_sort` → `rayon::slice::mergesort::par_mergesort`), and
/// failing that the program's first type.
pub(crate) fn call_site_name(operation: &str) -> String {
    let paths = operation
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':' || c == '{' || c == '}'))
        // A path that starts with `::` continues a qualified one (`<impl X for T>::f`).
        .filter(|p| p.contains("::") && !p.starts_with("::"))
        .map(|p| {
            let mut p = p.trim_end_matches(':');
            let mut closure = false;
            while let Some(stripped) = p.strip_suffix("::{{closure}}") {
                p = stripped;
                closure = true;
            }
            (p, closure)
        });
    let mut program_type = None;
    let mut rayon_path = None;
    for (path, closure) in paths {
        let krate = path.split("::").next().unwrap_or(path);
        if !MACHINERY.contains(&krate) {
            if closure {
                return path.to_owned();
            }
            program_type.get_or_insert(path);
        }
        if rayon_path.is_none() && krate == "rayon" && !path.starts_with("rayon::iter::plumbing") {
            rayon_path = Some(path);
        }
    }
    rayon_path.or(program_type).unwrap_or("rayon").to_owned()
}

/// Pools by the address of their registry, numbered in the order their first worker started.
static POOLS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// Worker `index` of the pool whose registry is at `registry` starts: the thread gets its
/// identity and its record in the trace, so that workers that never run a task still appear,
/// idle, in the analysis.
pub fn worker_started(index: usize, registry: usize) {
    if region::recording_off() {
        return;
    }
    let pool = {
        let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
        match pools.iter().position(|&r| r == registry) {
            Some(p) => p,
            None => {
                pools.push(registry);
                pools.len() - 1
            }
        }
    };
    // Indexes and pools past what a u16 holds are clamped: not a practical case.
    let index = index.min(usize::from(NO_WORKER) - 1) as u16;
    region::set_worker(index, pool.min(usize::from(u16::MAX) - 1) as u16);
    runtime::register_current_thread();
}

/// A searching worker's round over the deques and the injector found nothing; `rounds` counts
/// the failed rounds of this search so far.
#[inline]
pub fn search_round(rounds: u32) {
    if region::recording_off() {
        return;
    }
    let rounds = rounds.min(u32::from(u16::MAX)) as u16;
    lifecycle_totals::hook(EventKind::SearchRound, region::current_region(), rounds, 0);
}

/// An indexed parallel iterator bridging its producer to its consumer over `len` items
/// (rayon's `bridge_producer_consumer`): counted for the region it runs in when it is the
/// region's own (bridged in the region's body, or in the task that entered the pool; one
/// bridged in a task below is nested in the region's work), or for the region its first split
/// opens when it runs outside every region.
#[must_use = "the bridge lasts until this guard is dropped"]
pub struct IteratorBridge(bool);

impl IteratorBridge {
    #[inline]
    pub fn begin(len: usize) -> IteratorBridge {
        if region::recording_off() {
            return IteratorBridge(false);
        }
        IteratorBridge(lifecycle_totals::iterator_bridged(
            region::current_region(),
            len as u64,
        ))
    }
}

impl Drop for IteratorBridge {
    fn drop(&mut self) {
        if self.0 {
            lifecycle_totals::bridge_ended();
        }
    }
}

/// A worker sleeping until work arrives: recorded from when it blocks until it wakes.
#[must_use = "the sleep lasts until this guard is dropped"]
pub struct Sleep(bool);

impl Sleep {
    pub fn begin() -> Sleep {
        if region::recording_off() {
            return Sleep(false);
        }
        Sleep(lifecycle_totals::hook(
            EventKind::SleepBegin,
            region::current_region(),
            0,
            0,
        ))
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if self.0 {
            lifecycle_totals::hook(EventKind::SleepEnd, region::current_region(), 0, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_compares_the_creating_worker_with_the_executing_one() {
        let worker = |index: u32, pool: u32| (index << 16) | pool;
        assert_eq!(origin(worker(2, 0), worker(2, 0)), TaskOrigin::Local);
        assert_eq!(origin(worker(2, 0), worker(3, 0)), TaskOrigin::Stolen);
        assert_eq!(origin(NOT_A_WORKER, worker(1, 0)), TaskOrigin::Injected);
        assert_eq!(origin(worker(1, 1), worker(1, 0)), TaskOrigin::Injected);
    }

    #[test]
    fn the_kind_of_entry_is_the_rayon_core_function_called() {
        let user = "src/main.rs";
        let join = "rayon_core::join::join_context<rayon_core::join::join<app::f::{{closure}}, app::f::{{closure}}, (), ()>::{{closure}}>::{{closure}}";
        assert_eq!(entry_kind(join, user), EntryKind::Join);
        let plumbing = "/r/.cargo/registry/src/index/rayon-1.12.0/src/iter/plumbing/mod.rs";
        assert_eq!(entry_kind(join, plumbing), EntryKind::Iterator);
        assert_eq!(
            entry_kind(
                "rayon_core::scope::scope<app::f::{{closure}}, ()>::{{closure}}",
                user
            ),
            EntryKind::Scope
        );
        assert_eq!(
            entry_kind(
                "rayon_core::thread_pool::ThreadPool::install<app::f::{{closure}}, u64>::{{closure}}",
                user
            ),
            EntryKind::Install
        );
        // A pool's `scope` and `join` go through its `install`.
        assert_eq!(
            entry_kind(
                "rayon_core::thread_pool::ThreadPool::install<rayon_core::thread_pool::ThreadPool::scope<app::f::{{closure}}, ()>::{{closure}}, ()>::{{closure}}",
                user
            ),
            EntryKind::Scope
        );
        assert_eq!(
            entry_kind(
                "rayon_core::thread_pool::ThreadPool::install<rayon_core::thread_pool::ThreadPool::join<app::f::{{closure}}, app::g::{{closure}}, (), ()>::{{closure}}, ((), ())>::{{closure}}",
                user
            ),
            EntryKind::Join
        );
    }

    #[test]
    fn locations_in_rayon_sources_are_told_apart() {
        assert!(in_rayon_sources(
            "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rayon-1.12.0/src/iter/plumbing/mod.rs"
        ));
        assert!(in_rayon_sources(
            "/w/target/parprof/build/hooked-crates/rayon-core-1.13.0/src/join/mod.rs"
        ));
        assert!(!in_rayon_sources("examples/demo_quicksort.rs"));
        assert!(!in_rayon_sources("/home/me/rayon-demo/src/main.rs"));
    }

    #[test]
    fn call_sites_are_the_first_path_outside_rayon_and_std() {
        assert_eq!(
            call_site_name(
                "rayon_core::join::join_context<rayon_core::join::join<quicksort::quick_sort<i32>::{{closure}}, quicksort::quick_sort<i32>::{{closure}}, (), ()>::{{closure}}, rayon_core::join::join<quicksort::quick_sort<i32>::{{closure}}, quicksort::quick_sort<i32>::{{closure}}, (), ()>::{{closure}}, (), ()>::{{closure}}"
            ),
            "quicksort::quick_sort"
        );
        assert_eq!(
            call_site_name(
                "rayon_core::thread_pool::ThreadPool::install<app::io::load::{{closure}}, alloc::vec::Vec<u8>>::{{closure}}"
            ),
            "app::io::load"
        );
        assert_eq!(
            call_site_name(
                "rayon_core::join::join_context<rayon::slice::mergesort::par_mergesort<i32, core::cmp::impls::<impl core::cmp::PartialOrd for i32>::lt>::{{closure}}>::{{closure}}"
            ),
            "rayon::slice::mergesort::par_mergesort"
        );
        assert_eq!(call_site_name("()"), "rayon");
        // Two loops over one element type in two functions: named by their functions.
        let loop_in = |function: &str| {
            format!(
                "rayon_core::join::join_context<rayon::iter::plumbing::bridge_producer_consumer::helper<rayon::slice::IterMutProducer<nbody::Body>, rayon::iter::for_each::ForEachConsumer<{function}::{{{{closure}}}}>>::{{{{closure}}}}>::{{{{closure}}}}"
            )
        };
        assert_eq!(
            call_site_name(&loop_in("nbody::Simulation::tick_par")),
            "nbody::Simulation::tick_par"
        );
        assert_eq!(
            call_site_name(&loop_in("nbody::Simulation::tick_par_reduce")),
            "nbody::Simulation::tick_par_reduce"
        );
        // No closure of the program's: rayon's entry names the site, not the element type.
        assert_eq!(
            call_site_name(
                "rayon_core::join::join_context<rayon::slice::mergesort::par_mergesort<app::Row, app::by_key>::{{closure}}>::{{closure}}"
            ),
            "rayon::slice::mergesort::par_mergesort"
        );
    }
}
