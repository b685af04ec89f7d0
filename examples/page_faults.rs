//! Known page-fault counts, for checking counter attribution (`cargo parprof --counters
//! page-faults`).
//!
//! Four probed functions run on four threads at the same time, each touching a different
//! number of fresh pages (2000, 500, 1000, 250: one minor fault each). The calls start
//! together after a barrier and end together after another one; while one touches its pages
//! the others touch theirs or wait. Then a parallel region touches 300 pages in each of 8
//! rayon tasks.
//!
//! The program-wide counter is read every 10 ms (by default) and interpolated linearly in between,
//! so a boundary is placed exactly only where the count is flat from the read before it to
//! the read after it: every probed call, task and the region sleep [`QUIET`] after they begin
//! and before they end, and nothing faults just outside them either.
//!
//! Each figure is measured by the thread that caused it (`getrusage(RUSAGE_THREAD)` around
//! the probed call or the task) and printed as `faults_<probe>=<n>` and
//! `faults_region_tasks=<n>`.

use parprof_rt::{parallel_region, probe};
use parprof_suite::{thread_minor_faults, touch_fresh_pages};
use rayon::prelude::*;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::sleep;
use std::time::Duration;

/// Longer than two reads of the counters (10 ms apart by default).
const QUIET: Duration = Duration::from_millis(25);

/// The body of every probed call: touch the pages, then wait for the other calls to finish
/// theirs. Returns the faults of this thread during the call.
fn touch_then_wait(pages: usize, done: &Barrier) -> u64 {
    let before = thread_minor_faults();
    sleep(QUIET);
    touch_fresh_pages(pages);
    done.wait();
    sleep(QUIET);
    thread_minor_faults() - before
}

#[probe]
fn touch_2000_pages(done: &Barrier) -> u64 {
    touch_then_wait(2000, done)
}

#[probe]
fn touch_500_pages(done: &Barrier) -> u64 {
    touch_then_wait(500, done)
}

#[probe]
fn touch_1000_pages(done: &Barrier) -> u64 {
    touch_then_wait(1000, done)
}

#[probe]
fn touch_250_pages(done: &Barrier) -> u64 {
    touch_then_wait(250, done)
}

/// The recorder sets a thread up at its first event, touching the thread's 2 MiB event
/// buffer: 512 page faults that must not fall into the measured calls.
#[probe]
fn first_event_of_thread() {}

type Probed = fn(&Barrier) -> u64;

fn main() {
    let calls: [(&str, Probed); 4] = [
        ("touch_2000_pages", touch_2000_pages),
        ("touch_500_pages", touch_500_pages),
        ("touch_1000_pages", touch_1000_pages),
        ("touch_250_pages", touch_250_pages),
    ];
    let start = Barrier::new(calls.len());
    let done = Barrier::new(calls.len());
    let faults: Vec<(&str, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = calls
            .iter()
            .map(|&(name, call)| {
                let (start, done) = (&start, &done);
                s.spawn(move || {
                    // The threads' own start-up faults (stack, thread-locals, the recorder's
                    // buffer) happen before.
                    first_event_of_thread();
                    sleep(QUIET);
                    start.wait();
                    (name, call(done))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a probed thread panicked"))
            .collect()
    });
    sleep(QUIET);
    for (name, n) in faults {
        println!("faults_{name}={n}");
    }

    // Start the pool's workers before the region, so that their start-up faults stay outside.
    rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build_global()
        .expect("the global pool");
    rayon::broadcast(|_| first_event_of_thread());
    let task_faults = AtomicU64::new(0);
    sleep(QUIET);
    parallel_region!("touch_in_tasks", {
        sleep(QUIET);
        (0..8).into_par_iter().with_max_len(1).for_each(|_| {
            let before = thread_minor_faults();
            sleep(QUIET);
            touch_fresh_pages(300);
            sleep(QUIET);
            task_faults.fetch_add(thread_minor_faults() - before, Ordering::Relaxed);
        });
        sleep(QUIET);
    });
    sleep(QUIET);
    println!(
        "faults_region_tasks={}",
        task_faults.load(Ordering::Relaxed)
    );
}
