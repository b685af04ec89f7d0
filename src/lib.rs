//! What the example programs of parprof share. The end-to-end tests live in `tests/`.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Busy work for `d` of wall-clock time: a task whose length does not depend on the CPU.
pub fn spin(d: Duration) -> u64 {
    let start = Instant::now();
    let mut x = 1u64;
    while start.elapsed() < d {
        x = black_box(
            x.wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407),
        );
    }
    x
}

/// Builds rayon's global pool with the worker count given as the program's first argument,
/// or `default_workers`; returns the count.
pub fn global_pool_from_args(default_workers: usize) -> usize {
    let workers = std::env::args()
        .nth(1)
        .map_or(default_workers, |a| a.parse().expect("a number of workers"));
    rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build_global()
        .expect("the global pool");
    workers
}

/// `len` pseudo-random integers (a fixed sequence), to sort.
pub fn pseudo_random(len: usize) -> Vec<u32> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u32
        })
        .collect()
}

/// The textbook quicksort step: partitions `v` (not empty) around its last element and returns
/// where that pivot ends up; everything before it is smaller.
#[inline(never)]
pub fn partition<T: Ord + Copy>(v: &mut [T]) -> usize {
    let pivot = v[v.len() - 1];
    let mut store = 0;
    for i in 0..v.len() - 1 {
        if v[i] < pivot {
            v.swap(i, store);
            store += 1;
        }
    }
    let last = v.len() - 1;
    v.swap(store, last);
    store
}

const PAGE: usize = 4096;

/// CPU time of the calling thread so far, in ns.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time of every thread of the process so far, in ns.
pub fn process_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a clock of this machine and a pointer to a timespec it fills.
    unsafe { libc::clock_gettime(clock, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Minor page faults of the calling thread so far.
pub fn thread_minor_faults() -> u64 {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    usage.ru_minflt as u64
}

/// Writes one byte to each of `pages` fresh anonymous pages: one minor fault per page. The
/// pages are mapped and unmapped here, so that every call faults (memory from the allocator
/// would be reused, already faulted).
pub fn touch_fresh_pages(pages: usize) {
    let len = pages * PAGE;
    // SAFETY: a fresh private anonymous mapping, written within its bounds, then unmapped.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "mmap of {len} bytes failed");
        // Transparent huge pages would fault 512 pages at once.
        libc::madvise(p, len, libc::MADV_NOHUGEPAGE);
        for i in 0..pages {
            std::ptr::write_volatile(p.cast::<u8>().add(i * PAGE), 1);
        }
        libc::munmap(p, len);
    }
}

/// A count that many threads add to without slowing each other: one cache line per thread
/// (up to [`Tally::SHARDS`]; more share them), summed when read. A fixture counts its truth with
/// it, so that counting does not make the program it measures a contended one: one shared
/// atomic bumped per join costs a 16-core run more than its tasks do.
pub struct Tally([Shard; Tally::SHARDS]);

#[repr(align(128))]
struct Shard(std::sync::atomic::AtomicU64);

impl Tally {
    pub const SHARDS: usize = 64;

    #[allow(clippy::new_without_default)]
    pub const fn new() -> Tally {
        Tally([const { Shard(std::sync::atomic::AtomicU64::new(0)) }; Tally::SHARDS])
    }

    /// One more, on the calling thread's line.
    #[inline]
    pub fn add(&self) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local! {
            static SHARD: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
        }
        let shard = SHARD.with(|s| {
            if s.get() == usize::MAX {
                s.set(NEXT.fetch_add(1, Ordering::Relaxed) % Tally::SHARDS);
            }
            s.get()
        });
        self.0[shard].0.fetch_add(1, Ordering::Relaxed);
    }

    /// The count so far (exact once the adding threads are done).
    pub fn total(&self) -> u64 {
        self.0
            .iter()
            .map(|s| s.0.load(std::sync::atomic::Ordering::Relaxed))
            .sum()
    }
}

/// The `rayon::join`, `spawn` and `install` calls a demo program makes, counted by the program
/// itself where it writes them, so that a test can check the tasks parprof recorded against
/// them.
pub mod calls {
    use crate::Tally;

    /// `rayon::join` (or `ThreadPool::join`) calls.
    pub static JOINS: Tally = Tally::new();
    /// `Scope::spawn` (or `rayon::spawn`) calls.
    pub static SPAWNS: Tally = Tally::new();
    /// `ThreadPool::install` calls.
    pub static INSTALLS: Tally = Tally::new();

    /// One more call of the kind `counter` counts.
    #[inline]
    pub fn count(counter: &Tally) {
        counter.add();
    }

    /// Prints `joins=<n> spawns=<n> installs=<n>`.
    pub fn print() {
        println!(
            "joins={} spawns={} installs={}",
            JOINS.total(),
            SPAWNS.total(),
            INSTALLS.total()
        );
    }
}

/// The command line of a demo program: `--region` (wrap the top call in `parallel_region!`),
/// other `--` flags, and numbers in order.
pub struct DemoArgs {
    flags: Vec<String>,
    numbers: Vec<usize>,
}

impl DemoArgs {
    pub fn from_env() -> DemoArgs {
        let (flags, numbers): (Vec<String>, Vec<String>) =
            std::env::args().skip(1).partition(|a| a.starts_with("--"));
        DemoArgs {
            flags,
            numbers: numbers
                .iter()
                .map(|a| a.parse().expect("a whole number"))
                .collect(),
        }
    }

    /// Whether the top call runs in a named region.
    pub fn region(&self) -> bool {
        self.flag("--region")
    }

    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    /// The `index`-th number of the command line (from 0), `default` when absent.
    pub fn number(&self, index: usize, default: usize) -> usize {
        self.numbers.get(index).copied().unwrap_or(default)
    }
}
