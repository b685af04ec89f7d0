//! The rayon lifecycle counted in the program: threads that run far more tasks than their
//! detail windows hold pause their per-job events, and every task is still counted exactly,
//! once, in events or in the program's totals. The test re-runs its own binary as the recording
//! child, whose threads call the rayon-core hooks as the hooked rayon-core does.

use parprof_rt::rayon_hooks::{Tag, Task};
use parprof_rt::trace::{
    Chunk, DETAIL_PAUSE, DETAIL_RESUME, EventKind, LifecycleTotals, TraceReader,
};
use std::collections::HashMap;
use std::process::Command;

const THREADS: u64 = 4;
const TASKS_PER_THREAD: u64 = 300_000;
/// Every 1000th task on a thread runs 2 ms, so that detail windows reopen along the run.
const SLOW_EVERY: u64 = 1000;

/// Not a test: the child process of the test below (run with `--ignored`).
#[test]
#[ignore = "the recording child of every_task_is_counted_once_under_concurrent_threads"]
fn child_runs_many_tasks_on_several_threads() {
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            std::thread::spawn(|| {
                parprof_rt::parallel_region!("many_tasks", {
                    for i in 0..TASKS_PER_THREAD {
                        // Created and run on this thread: a local task.
                        let _task = Task::begin(Tag::here());
                        if i % SLOW_EVERY == 0 {
                            std::thread::sleep(std::time::Duration::from_micros(200));
                        }
                        std::hint::black_box(i);
                    }
                })
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn every_task_is_counted_once_under_concurrent_threads() {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_runs_many_tasks_on_several_threads",
            "--ignored",
            "--test-threads=1",
        ])
        .env("PARPROF_OUT", dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    let trace = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "ppt"))
        .expect("a trace");
    let mut reader = TraceReader::new(std::fs::File::open(&trace).unwrap()).unwrap();
    let mut begins: HashMap<u32, u64> = HashMap::new();
    let mut pauses = 0;
    let mut resumes = 0;
    let mut totals: HashMap<(u32, u32), LifecycleTotals> = HashMap::new();
    while let Some(chunk) = reader.next_chunk().unwrap() {
        match chunk {
            Chunk::Events { tid, events } => {
                for e in events {
                    match EventKind::from_u8(e.kind) {
                        Some(EventKind::TaskBegin) => *begins.entry(tid).or_default() += 1,
                        Some(EventKind::Detail) if e.flags == DETAIL_PAUSE => pauses += 1,
                        Some(EventKind::Detail) if e.flags == DETAIL_RESUME => resumes += 1,
                        _ => {}
                    }
                }
            }
            Chunk::LifecycleTotals(t) => {
                totals.insert((t.tid, t.region), t);
            }
            _ => {}
        }
    }
    let written: u64 = begins.values().sum();
    let counted: u64 = totals.values().map(|t| t.tasks.iter().sum::<u64>()).sum();
    assert_eq!(
        written + counted,
        THREADS * TASKS_PER_THREAD,
        "{written} tasks written, {counted} counted in the program"
    );
    // The detail is bounded: most tasks were counted, and windows reopened along the run.
    assert!(counted > written, "{written} written, {counted} counted");
    assert!(
        pauses >= THREADS && resumes >= THREADS,
        "{pauses} pauses, {resumes} resumes"
    );
    // Every task that ended while counted has a duration (and so do those that began before
    // a window opened: the analysis sees no begin for them). A task ends while counted if it
    // began while counted, or just before a pause.
    for t in totals.values() {
        let durations: u64 = t.task_durations.iter().map(|(_, n)| n).sum();
        let begun: u64 = t.tasks.iter().sum();
        assert!(t.task_ends.abs_diff(begun) <= pauses + resumes, "{t:?}");
        assert!(durations >= t.task_ends, "{t:?}");
        assert!(t.max_task_ticks >= t.min_task_ticks);
    }
}
