//! `PARPROF_DETAIL=full`: the slices' detailed instrumentation in the program itself, on
//! every recording thread, for the whole run, every call measured (sampling off). Slow, and
//! the reference that slices make affordable: each thread is one entry of the results file,
//! with end `full`.

use crate::attention;
use crate::clock;
use crate::detail::{self, MAX_SITES, Measure, SiteAcc};
use crate::perf_group::{Group, MAX_COUNTERS};
use crate::slice_results::{
    Checkpoints, CounterColumn, DetailMode, Slice, SliceConfig, SliceEnd, SliceResults,
    UnavailableCounter,
};
use crate::trace::EventKind;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock};

struct Full {
    columns: Vec<CounterColumn>,
    unavailable: Vec<UnavailableCounter>,
    dir: PathBuf,
    threads: Mutex<Vec<Arc<Mutex<Thread>>>>,
    stopped: AtomicBool,
}

/// One thread's measurement; the owner updates it, the exit of the process reads it.
struct Thread {
    tid: u32,
    start_ts: u64,
    start_wall_ns: u64,
    start_values: [u64; MAX_COUNTERS],
    /// `None` once the thread has exited (its counters closed).
    measure: Option<Measure>,
    /// The table `measure` points to: moving the box does not move the entries.
    sites: Box<[SiteAcc]>,
    cpu_ns: u64,
    wall_ns: u64,
    used: u32,
}

// SAFETY: `measure`'s pointer into `sites` moves with it, and the mutex serialises access.
unsafe impl Send for Thread {}

impl Thread {
    /// Closes the counters and keeps the totals.
    fn finish(&mut self) {
        if let Some(measure) = self.measure.take() {
            if let Some(values) = measure.read_now() {
                self.cpu_ns = values[0].saturating_sub(self.start_values[0]);
            }
            self.wall_ns = clock::monotonic_ns().saturating_sub(self.start_wall_ns);
            self.used = measure.used();
        }
    }
}

static FULL: OnceLock<Full> = OnceLock::new();

thread_local! {
    static MINE: RefCell<Option<Arc<Mutex<Thread>>>> = const { RefCell::new(None) };
}

/// Whether `PARPROF_DETAIL` asks for full detail; another value is said on stderr.
pub(crate) fn requested() -> bool {
    match std::env::var(crate::slice_results::DETAIL_ENV) {
        Ok(v) if v == "full" => true,
        Ok(v) if !v.is_empty() => {
            eprintln!("parprof: PARPROF_DETAIL={v} ignored (the only value is `full`)");
            false
        }
        _ => false,
    }
}

/// Turns full detail on (recording is on and it was requested).
pub(crate) fn init(dir: &Path) {
    let (columns, unavailable) = crate::perf_group::available();
    if columns.is_empty() {
        eprintln!("parprof: PARPROF_DETAIL=full ignored: no counter opens");
        return;
    }
    let _ = FULL.set(Full {
        columns,
        unavailable,
        dir: dir.to_owned(),
        threads: Mutex::new(Vec::new()),
        stopped: AtomicBool::new(false),
    });
}

/// A thread starts recording: open its counters.
pub(crate) fn attach_thread() {
    let Some(full) = FULL.get() else { return };
    if full.stopped.load(Ordering::Acquire) || MINE.with(|m| m.borrow().is_some()) {
        return;
    }
    let group = match Group::open(&full.columns) {
        Ok(group) => group,
        Err(e) => {
            static ONCE: Once = Once::new();
            ONCE.call_once(|| eprintln!("parprof: a thread has no detail counters: {e}"));
            return;
        }
    };
    let mut sites = vec![SiteAcc::default(); MAX_SITES].into_boxed_slice();
    // SAFETY: the table has MAX_SITES entries and lives in the same `Thread` as the measure.
    let measure = unsafe { Measure::new(group, sites.as_mut_ptr(), u32::MAX) };
    let Some(start_values) = measure.read_now() else {
        return;
    };
    let thread = Arc::new(Mutex::new(Thread {
        // SAFETY: gettid has no preconditions.
        tid: unsafe { libc::gettid() } as u32,
        start_ts: clock::now(),
        start_wall_ns: clock::monotonic_ns(),
        start_values,
        measure: Some(measure),
        sites,
        cpu_ns: 0,
        wall_ns: 0,
        used: 0,
    }));
    lock(&full.threads).push(thread.clone());
    MINE.with(|m| *m.borrow_mut() = Some(thread));
    attention::set(attention::DETAIL);
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A probe event of the calling thread.
pub(crate) fn event(kind: EventKind, site: u32) {
    let _ = MINE.try_with(|m| {
        if let Some(thread) = m.borrow().as_ref()
            && let Some(measure) = lock(thread).measure.as_mut()
        {
            measure.event(kind, site);
        }
    });
}

/// A recording thread exits: close its counters, keep its totals.
pub(crate) fn detach_thread() {
    let _ = MINE.try_with(|m| {
        if let Some(thread) = m.borrow_mut().take() {
            lock(&thread).finish();
        }
    });
    attention::clear(attention::DETAIL);
}

/// At process exit: ends every thread's measurement and writes the results file.
pub(crate) fn shutdown() {
    let Some(full) = FULL.get() else { return };
    if full.stopped.swap(true, Ordering::AcqRel) {
        return;
    }
    let threads = std::mem::take(&mut *lock(&full.threads));
    let slices = threads
        .iter()
        .map(|thread| {
            let mut t = lock(thread);
            t.finish();
            Slice {
                tid: t.tid,
                pid: None,
                cpu: None,
                start_ts: t.start_ts,
                cpu_ns: t.cpu_ns,
                wall_ns: t.wall_ns,
                end: SliceEnd::Full,
                // SAFETY: the table has MAX_SITES entries.
                sites: unsafe { detail::site_stats(t.sites.as_ptr(), t.used, full.columns.len()) },
            }
        })
        .collect();
    let usable_cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let results = SliceResults {
        mode: DetailMode::Full,
        config: SliceConfig {
            load_threshold: 0.0,
            slice_threshold: 0,
            length_ns: 0,
            period_ns: 0,
            usable_cpus,
        },
        counters: full.columns.clone(),
        unavailable: full.unavailable.clone(),
        checkpoints: Checkpoints::default(),
        slices,
    };
    crate::slices::write_results(&full.dir, &results);
}
