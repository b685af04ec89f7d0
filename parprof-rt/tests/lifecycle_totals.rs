//! The rayon lifecycle counted in the program: threads that run far more tasks than their
//! detail windows hold pause their per-job events, and every task is still counted exactly,
//! once, in events or in the program's totals. The test re-runs its own binary as the recording
//! child, whose threads call the rayon-core hooks as the hooked rayon-core does.

use parprof_rt::rayon_hooks::{Fork, Tag, Task};
use parprof_rt::trace::{
    Chunk, DETAIL_PAUSE, DETAIL_RESUME, EventKind, LifecycleTotals, TaskOrigin, TraceReader,
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
    on_threads(THREADS as usize, || {
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
    });
}

/// Runs `work` on `n` threads at once and waits for them.
fn on_threads(n: usize, work: fn()) {
    let threads: Vec<_> = (0..n).map(|_| std::thread::spawn(work)).collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// The tests of this file one at a time: each child's threads take the CPUs, and timings taken
/// beside another child's would not be its own.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs the test `child` of this binary as a recording child process (with `env` set too), and
/// opens its trace; the folder lives as long as the first value.
fn record_child(
    child: &str,
    env: &[(&str, &str)],
) -> (tempfile::TempDir, TraceReader<std::fs::File>) {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", child, "--ignored", "--test-threads=1"])
        .env("PARPROF_OUT", dir.path())
        .envs(env.iter().copied())
        .status()
        .unwrap();
    assert!(status.success());
    let trace = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "ppt"))
        .expect("a trace");
    let reader = TraceReader::new(std::fs::File::open(&trace).unwrap()).unwrap();
    (dir, reader)
}

#[test]
fn every_task_is_counted_once_under_concurrent_threads() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (_dir, mut reader) = record_child("child_runs_many_tasks_on_several_threads", &[]);
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

/// Joins per thread of [`child_runs_joins`]: every third one's second half is taken as stolen
/// (not run by the joining thread), the others' run as the joining worker's own. Each returns
/// once ([`Fork::resume`]).
const JOINS_PER_THREAD: u64 = 200_000;

/// Not a test: the recording child of the test below (run with `--ignored`).
#[test]
#[ignore = "the recording child of a_join_returns_once_whether_its_second_half_was_local_or_not"]
fn child_runs_joins() {
    let threads: Vec<_> = (0..THREADS as usize)
        .map(|index| {
            std::thread::spawn(move || {
                // A worker of a pool, as the hooked rayon-core announces it.
                parprof_rt::rayon_hooks::worker_started(index, 0x1000);
                parprof_rt::parallel_region!("joins", {
                    for i in 0..JOINS_PER_THREAD {
                        let fork = Fork::here();
                        drop(fork.inline_task());
                        if i % 3 != 0 {
                            drop(fork.local_task());
                        }
                        fork.resume();
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
fn a_join_returns_once_whether_its_second_half_was_local_or_not() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (_dir, mut reader) = record_child("child_runs_joins", &[]);
    let (mut written_resumes, mut written_begins) = (0u64, [0u64; 4]);
    // Threads whose last events opened a detail window (its mark and frames).
    let mut window_opening = std::collections::HashSet::new();
    let mut totals: HashMap<(u32, u32), LifecycleTotals> = HashMap::new();
    while let Some(chunk) = reader.next_chunk().unwrap() {
        match chunk {
            Chunk::Events { tid, events } => {
                for e in events {
                    let opening = window_opening.remove(&tid);
                    match EventKind::from_u8(e.kind) {
                        // A window that opens at a fork's return: the gap it ends is counted.
                        Some(EventKind::TaskResume) if !opening => written_resumes += 1,
                        Some(EventKind::TaskBegin) => written_begins[usize::from(e.flags)] += 1,
                        Some(EventKind::Detail) if e.flags != DETAIL_PAUSE => {
                            window_opening.insert(tid);
                        }
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
    let joins = THREADS * JOINS_PER_THREAD;
    let counted_resumes: u64 = (totals.values())
        .flat_map(|t| &t.resume_gaps)
        .map(|(_, gaps)| gaps.count)
        .sum();
    assert_eq!(written_resumes + counted_resumes, joins);
    let begun = |origin: TaskOrigin| {
        let counted: u64 = totals.values().map(|t| t.tasks[origin as usize]).sum();
        written_begins[origin as usize] + counted
    };
    assert_eq!(begun(TaskOrigin::Inline), joins);
    assert_eq!(
        begun(TaskOrigin::Local),
        joins - THREADS * JOINS_PER_THREAD.div_ceil(3)
    );
    assert!(counted_resumes > written_resumes, "the detail paused");
}

/// Threads of [`child_alternates_known_stretches`]: each alternates tasks of [`TASK_SPIN`]
/// with gaps of [`GAP_SPIN`] before its next (local) task, [`STRETCHES`] times.
const TIMED_THREADS: usize = 2;
/// Long enough that the hooks' own cost (in a debug build, events cost the gaps a few tenths of
/// a microsecond) moves the shares little; short enough that each thread pauses its detail for
/// most of the run (1,700 hooks every 10 ms against windows of 512 events).
const STRETCHES: u32 = 30_000;
const TASK_SPIN: std::time::Duration = std::time::Duration::from_micros(8);
const GAP_SPIN: std::time::Duration = std::time::Duration::from_micros(4);

fn spin(d: std::time::Duration) {
    let end = std::time::Instant::now() + d;
    while std::time::Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// Not a test: the recording child of the test below (run with `--ignored`).
#[test]
#[ignore = "the recording child of state_times_from_the_marks_are_within_their_uncertainty"]
fn child_alternates_known_stretches() {
    on_threads(TIMED_THREADS, || {
        parprof_rt::parallel_region!("known_stretches", {
            for _ in 0..STRETCHES {
                {
                    let _task = Task::begin(Tag::here());
                    spin(TASK_SPIN);
                }
                spin(GAP_SPIN);
            }
        })
    });
}

/// The user code's share of the threads' time, by the program's counts (the marks' clock)
/// and by the events, in one run each way.
fn user_code_share(every_job: bool) -> (f64, LifecycleTotals) {
    let env: &[(&str, &str)] = if every_job {
        &[(parprof_rt::lifecycle_totals::DETAIL_ENV, "all")]
    } else {
        &[]
    };
    let (_dir, mut reader) = record_child("child_alternates_known_stretches", env);
    // From the events: task begin to end is user code, end to the next begin a gap.
    let mut last: HashMap<u32, (EventKind, u64)> = HashMap::new();
    let (mut uc, mut gaps) = (0u64, 0u64);
    let mut sum = LifecycleTotals::default();
    let mut totals: HashMap<(u32, u32), LifecycleTotals> = HashMap::new();
    while let Some(chunk) = reader.next_chunk().unwrap() {
        match chunk {
            Chunk::Events { tid, events } => {
                for e in events {
                    let Some(kind @ (EventKind::TaskBegin | EventKind::TaskEnd)) =
                        EventKind::from_u8(e.kind)
                    else {
                        last.remove(&tid);
                        continue;
                    };
                    match last.insert(tid, (kind, e.ts)) {
                        Some((EventKind::TaskBegin, t)) if kind == EventKind::TaskEnd => {
                            uc += e.ts - t
                        }
                        Some((EventKind::TaskEnd, t)) if kind == EventKind::TaskBegin => {
                            gaps += e.ts - t
                        }
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
    for t in totals.values() {
        sum.user_code_ticks += t.user_code_ticks;
        sum.task_ends += t.task_ends;
        sum.local_gaps.count += t.local_gaps.count;
        sum.local_gaps.ticks += t.local_gaps.ticks;
        sum.mark_spacing_ticks = sum.mark_spacing_ticks.max(t.mark_spacing_ticks);
        sum.task_durations.extend(t.task_durations.iter().copied());
        sum.local_gap_lengths
            .extend(t.local_gap_lengths.iter().copied());
    }
    if every_job {
        (uc as f64 / (uc + gaps) as f64, sum)
    } else {
        let counted = sum.user_code_ticks + sum.local_gaps.ticks;
        (sum.user_code_ticks as f64 / counted as f64, sum)
    }
}

/// The median bucket of a histogram given as `(bucket, count)` pairs.
fn median_bucket(buckets: &[(u16, u64)]) -> u16 {
    let mut sorted = buckets.to_vec();
    sorted.sort();
    let half = sorted.iter().map(|(_, n)| n).sum::<u64>() / 2;
    let mut seen = 0;
    for (bucket, n) in sorted {
        seen += n;
        if seen > half {
            return bucket;
        }
    }
    0
}

#[test]
fn state_times_from_the_marks_are_within_their_uncertainty() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (timed, _) = user_code_share(true);
    let (estimated, counted) = user_code_share(false);
    let truth = TASK_SPIN.as_secs_f64() / (TASK_SPIN + GAP_SPIN).as_secs_f64();
    // Every job an event: the share is measured, to within the spins' overshoot and what
    // writing the events adds to the gaps in a debug build.
    assert!(
        (timed - truth).abs() < 0.12,
        "timed {timed:.3}, truth {truth:.3}"
    );
    // The marks and the timed stretches: the marks alone know the share to ±√(p(1−p)/marks),
    // the two together at least as well.
    assert!(
        counted.mark_spacing_ticks > 0,
        "the marks' clock timed the states"
    );
    let marks = (counted.user_code_ticks + counted.local_gaps.ticks) / counted.mark_spacing_ticks;
    let sigma = (timed * (1.0 - timed) / marks as f64).sqrt();
    eprintln!(
        "user code share: truth {truth:.3}, every job timed {timed:.3}, marks {estimated:.3} ({marks} marks, σ {sigma:.3})"
    );
    assert!(
        (estimated - timed).abs() < 4.0 * sigma + 0.04,
        "estimated {estimated:.3} from {marks} marks (σ {sigma:.3}), every job timed {timed:.3}"
    );
    // Durations and gap lengths come from the timed stretches, scaled to the counts: the
    // tasks' median is about twice the gaps'.
    let task_median = median_bucket(&counted.task_durations);
    let gap_median = median_bucket(&counted.local_gap_lengths);
    let ratio = parprof_rt::trace::duration_bucket_midpoint(task_median.into()) as f64
        / parprof_rt::trace::duration_bucket_midpoint(gap_median.into()) as f64;
    eprintln!("task median / gap median = {ratio:.2}");
    assert!(
        (1.4..3.0).contains(&ratio),
        "task median / gap median = {ratio:.2}"
    );
    // Every task here is a leaf: the sample is scaled to every task that ended counted (how
    // many did depends on how many windows the run's length held, so on the machine's load).
    let leaves: u64 = counted.task_durations.iter().map(|(_, n)| n).sum();
    assert!(
        leaves >= counted.task_ends && counted.task_ends > 0,
        "durations scaled to the tasks: {leaves} durations, {} counted task ends",
        counted.task_ends
    );
}
