//! `parallel_region!` and the instrumented rayon calls with recording on: the events they
//! write, the origins they give tasks, and the region they carry into tasks.
//!
//! One test function runs every case in order, because the runtime reads `PARPROF_OUT` once
//! per process and this file's events must be the only ones in the trace.
#![cfg(not(feature = "off"))]

use parprof_rt::parallel_region;
use parprof_rt::region::current_region;
use parprof_rt::trace::{
    Chunk, Completeness, Event, EventKind, NO_WORKER, TaskOrigin, ThreadRecord, TraceReader,
};
use rayon::prelude::*;
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

fn fib(n: u32) -> u64 {
    if n < 2 {
        return u64::from(n);
    }
    let (a, b) = parprof_rt::region::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

/// A task as read back: its region's name, origin, creating worker and executing thread.
#[derive(Debug)]
struct Task {
    region: String,
    origin: TaskOrigin,
    creator: u16,
    tid: u32,
}

#[derive(Default)]
struct Trace {
    threads: HashMap<u32, ThreadRecord>,
    tasks: Vec<Task>,
    /// Per region name: resumes, and (begin, end) counts.
    resumes: HashMap<String, usize>,
    regions: HashMap<String, (usize, usize)>,
}

fn read_trace(path: &std::path::Path) -> Trace {
    let mut reader =
        TraceReader::new(std::fs::File::open(path).expect("trace file")).expect("header");
    let mut names = HashMap::new();
    let mut events: HashMap<u32, Vec<Event>> = HashMap::new();
    let mut trace = Trace::default();
    while let Some(chunk) = reader.next_chunk().expect("readable trace") {
        match chunk {
            Chunk::Site(site) => {
                names.insert(site.id, site.name);
            }
            Chunk::Thread(t) => {
                trace.threads.insert(t.tid, t);
            }
            Chunk::Events { tid, events: e } => events.entry(tid).or_default().extend(e),
            Chunk::Lost { count, .. } => panic!("{count} events lost"),
            _ => {}
        }
    }
    assert_eq!(reader.completeness(), Some(&Completeness::Complete));
    for (tid, events) in events {
        // Tasks nest properly on each thread, and end in the region they began in.
        let mut open: Vec<u32> = Vec::new();
        for e in events {
            let name = || {
                names
                    .get(&e.id)
                    .cloned()
                    .unwrap_or_else(|| format!("site {}", e.id))
            };
            match e.kind() {
                EventKind::TaskBegin => {
                    open.push(e.id);
                    trace.tasks.push(Task {
                        region: name(),
                        origin: TaskOrigin::from_u8(e.flags).expect("valid origin"),
                        creator: e.aux,
                        tid,
                    });
                }
                EventKind::TaskEnd => assert_eq!(open.pop(), Some(e.id), "task end on {tid}"),
                EventKind::TaskResume => *trace.resumes.entry(name()).or_default() += 1,
                EventKind::RegionBegin => trace.regions.entry(name()).or_default().0 += 1,
                EventKind::RegionEnd => trace.regions.entry(name()).or_default().1 += 1,
                _ => {}
            }
        }
        assert!(open.is_empty(), "tasks left open on {tid}: {open:?}");
    }
    trace
}

impl Trace {
    fn tasks_of<'a>(&'a self, region: &'a str) -> impl Iterator<Item = &'a Task> + 'a {
        self.tasks.iter().filter(move |t| t.region == region)
    }

    fn origins(&self, region: &str) -> HashMap<TaskOrigin, usize> {
        let mut counts = HashMap::new();
        for t in self.tasks_of(region) {
            *counts.entry(t.origin).or_default() += 1;
        }
        counts
    }

    fn rayon_index(&self, tid: u32) -> u16 {
        self.threads.get(&tid).map_or(NO_WORKER, |t| t.rayon_index)
    }
}

#[test]
fn regions_record_their_tasks_with_origins() {
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: this file's only test runs alone and the runtime has not started yet (it reads
    // the variable once, in the next line), so nothing reads the environment concurrently.
    unsafe { std::env::set_var("PARPROF_OUT", dir.path()) };
    assert!(parprof_rt::is_enabled());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();

    // A join from outside the pool: both halves enter the pool by injection, and both run in
    // the region.
    let (a, b) = parallel_region!("outside_join", {
        rayon::join(current_region, current_region)
    });
    assert_ne!(a, 0);
    assert_eq!(a, b);
    assert_eq!(current_region(), 0, "the region ends with its body");

    // A parallel iterator: one task per leaf, each running in the region wherever it runs.
    let seen = Mutex::new(BTreeSet::new());
    let sum = parallel_region!("iter", {
        (0..10_000u32)
            .into_par_iter()
            .with_max_len(100)
            .map(|x| {
                seen.lock().unwrap().insert(current_region());
                u64::from(x)
            })
            .sum::<u64>()
    });
    assert_eq!(sum, 10_000 * 9_999 / 2);
    assert_eq!(seen.lock().unwrap().len(), 1);

    // Recursive joins inside a custom pool, reached through `install`.
    let f = parallel_region!("pool_join", { pool.install(|| fib(12)) });
    assert_eq!(f, 144);

    // A scope spawning from its body, and a nested region inside a task.
    let spawned = AtomicU64::new(0);
    let nested = Mutex::new(Vec::new());
    parallel_region!("scope", {
        rayon::scope(|s| {
            for _ in 0..20 {
                s.spawn(|_| {
                    spawned.fetch_add(1, Ordering::Relaxed);
                });
            }
            s.spawn(|_| {
                let outer = current_region();
                let inner = parallel_region!("nested", { current_region() });
                nested
                    .lock()
                    .unwrap()
                    .push((outer, inner, current_region()));
            });
        })
    });
    assert_eq!(spawned.load(Ordering::Relaxed), 20);
    let (outer, inner, after) = nested.lock().unwrap()[0];
    assert_ne!(outer, inner);
    assert_eq!(
        outer, after,
        "the task's region is current again after the nested one"
    );

    // A task that panics still ends.
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        parallel_region!("panics", {
            pool.install(|| {
                rayon::join(
                    || 1,
                    || -> u32 { std::panic::resume_unwind(Box::new("expected")) },
                )
            })
        })
    }));
    assert!(caught.is_err());

    parprof_rt::shutdown();
    let trace = read_trace(
        &dir.path()
            .join(parprof_rt::trace_file_name(std::process::id())),
    );

    for name in [
        "outside_join",
        "iter",
        "pool_join",
        "scope",
        "nested",
        "panics",
    ] {
        assert_eq!(
            trace.regions.get(name),
            Some(&(1, 1)),
            "one begin and one end of {name}"
        );
    }

    // Created outside the pool: injected, with no creating worker, run by workers.
    let outside: Vec<_> = trace.tasks_of("outside_join").collect();
    assert_eq!(outside.len(), 2);
    for t in &outside {
        assert_eq!(
            (t.origin, t.creator),
            (TaskOrigin::Injected, NO_WORKER),
            "{t:?}"
        );
        assert_ne!(trace.rayon_index(t.tid), NO_WORKER);
    }
    assert_eq!(
        trace.resumes.get("outside_join"),
        None,
        "the main thread is not a worker"
    );

    // Leaves: at least one per 100 items; the split made outside the pool is injected, every
    // other leaf local or stolen from the worker that split it.
    let origins = trace.origins("iter");
    assert!(trace.tasks_of("iter").count() >= 100, "{origins:?}");
    assert_eq!(origins.get(&TaskOrigin::Inline), None, "{origins:?}");
    assert!(
        origins.get(&TaskOrigin::Injected).is_some_and(|&n| n <= 2),
        "{origins:?}"
    );
    for t in trace.tasks_of("iter") {
        match t.origin {
            TaskOrigin::Local => assert_eq!(t.creator, trace.rayon_index(t.tid), "{t:?}"),
            TaskOrigin::Stolen => {
                assert_ne!(t.creator, trace.rayon_index(t.tid), "{t:?}");
                assert_ne!(t.creator, NO_WORKER, "{t:?}");
            }
            _ => {}
        }
    }

    // fib(12) makes 232 joins: each first half inline, each second half local or stolen; the
    // install is one injected task, and each join resumes its caller on a worker.
    let origins = trace.origins("pool_join");
    let joins = 232;
    assert_eq!(
        origins.get(&TaskOrigin::Inline),
        Some(&joins),
        "{origins:?}"
    );
    let pushed = origins.get(&TaskOrigin::Local).unwrap_or(&0)
        + origins.get(&TaskOrigin::Stolen).unwrap_or(&0);
    assert_eq!(pushed, joins, "{origins:?}");
    assert_eq!(origins.get(&TaskOrigin::Injected), Some(&1), "{origins:?}");
    assert_eq!(trace.resumes.get("pool_join"), Some(&joins));
    // Every worker of the custom pool wrote its record, with one pool identity that is not the
    // global pool's, whether or not it ran a task.
    let pool_tid = trace
        .tasks_of("pool_join")
        .find(|t| t.origin == TaskOrigin::Injected)
        .unwrap()
        .tid;
    let pool_id = trace.threads[&pool_tid].pool;
    assert_ne!(pool_id, 0);
    let indexes: BTreeSet<u16> = trace
        .threads
        .values()
        .filter(|t| t.pool == pool_id)
        .map(|t| t.rayon_index)
        .collect();
    assert_eq!(indexes, (0..3).collect());

    // The scope body (injected) and its 21 spawns; the nested region's own task count is 0.
    let origins = trace.origins("scope");
    assert_eq!(trace.tasks_of("scope").count(), 22, "{origins:?}");
    assert_eq!(origins.get(&TaskOrigin::Injected), Some(&1), "{origins:?}");
    assert_eq!(trace.tasks_of("nested").count(), 0);

    // The panicking half ended all the same (checked by the nesting above) and was recorded.
    assert_eq!(trace.tasks_of("panics").count(), 3);
}
