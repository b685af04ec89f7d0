//! Where a region's tasks blocked: the program's frame under which rayon workers were switched
//! out blocked, from the off-CPU stacks, named in the `blocking_in_tasks` diagnosis.
//!
//! A worker's blocked stacks are its tasks' waits, except the ones inside rayon's own idle
//! loop (`rayon_core::sleep`: asleep, waiting for work) and the profiler's. The program's
//! frame is the innermost one outside the standard library, libc, rayon, lock and channel
//! crates, and the profiler: the code that took the lock or waited.

use super::diagnosis::Code;
use super::lifecycle::RegionReport;
use super::model::OffCpuStacks;
use std::collections::HashMap;

/// Crates (frame name prefixes) whose frames are the waiting machinery, not the code that
/// waited.
const MACHINERY: &[&str] = &[
    "std::",
    "core::",
    "alloc::",
    "rayon::",
    "rayon_core::",
    "parking_lot",
    "crossbeam",
    "lock_api::",
    "futex",
    "parprof_rt::",
    "syscall",
    "__",
    "[",
    "<",
];

/// Appends to each `blocking_in_tasks` diagnosis where the workers' tasks blocked most.
pub(super) fn name_where_tasks_blocked(regions: &mut [RegionReport], stacks: &OffCpuStacks) {
    if !regions
        .iter()
        .any(|r| r.diagnoses.iter().any(|d| d.code == Code::BlockingInTasks))
    {
        return;
    }
    let Some((frame, ns, lock)) = heaviest_task_wait(stacks) else {
        return;
    };
    let what = if lock {
        "waiting for a lock"
    } else {
        "blocked"
    };
    for d in regions
        .iter_mut()
        .flat_map(|r| r.diagnoses.iter_mut())
        .filter(|d| d.code == Code::BlockingInTasks)
    {
        d.evidence.summary.push_str(&format!(
            " Most of the workers' blocked time ({:.1} ms) was in `{frame}`, {what}.",
            ns as f64 / 1e6
        ));
    }
}

/// The program frame under which rayon workers blocked longest, with that time and whether
/// the wait was for a lock.
fn heaviest_task_wait(stacks: &OffCpuStacks) -> Option<(String, u64, bool)> {
    let mut by_frame: HashMap<&str, (u64, bool)> = HashMap::new();
    for s in &stacks.stacks {
        let blocked = s.frames.last().is_some_and(|f| f == "[blocked]");
        let idle = s.frames.iter().any(|f| f.starts_with("rayon_core::sleep"));
        if !blocked || idle || !s.thread.starts_with("rayon worker") {
            continue;
        }
        let Some(frame) = s.frames.iter().rev().find(|f| is_program_frame(f)) else {
            continue;
        };
        let lock = s
            .frames
            .iter()
            .any(|f| f.contains("mutex") || f.contains("rwlock"));
        let entry = by_frame.entry(frame).or_default();
        entry.0 += s.weight;
        entry.1 |= lock;
    }
    by_frame
        .into_iter()
        .max_by_key(|(frame, (ns, _))| (*ns, std::cmp::Reverse(*frame)))
        .map(|(frame, (ns, lock))| (display_name(frame), ns, lock))
}

/// Whether a frame (a function's name) is the program's own: not the standard library's,
/// rayon's, a lock's or the profiler's.
pub(crate) fn is_program_frame(frame: &str) -> bool {
    !MACHINERY.iter().any(|m| frame.starts_with(m))
}

/// A frame's name without its generic arguments and inlining mark.
fn display_name(frame: &str) -> String {
    let frame = frame.strip_suffix("_[i]").unwrap_or(frame);
    let mut out = String::new();
    let mut depth = 0;
    for c in frame.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::model::SampledStack;

    fn stack(thread: &str, frames: &[&str], weight: u64) -> SampledStack {
        SampledStack {
            thread: thread.into(),
            frames: frames.iter().map(|f| f.to_string()).collect(),
            weight,
        }
    }

    #[test]
    fn the_heaviest_program_frame_of_the_workers_blocked_stacks_is_named() {
        let stacks = OffCpuStacks {
            stacks: vec![
                stack(
                    "rayon worker 0 (pool 0)",
                    &[
                        "rayon_core::registry::main_loop",
                        "app::histogram::add<u32>",
                        "std::sync::poison::mutex::Mutex<T>::lock_[i]",
                        "std::sys::sync::mutex::futex::Mutex::lock_contended",
                        "syscall",
                        "[blocked]",
                    ],
                    7_000_000,
                ),
                // Asleep in rayon's idle loop: not a task's wait.
                stack(
                    "rayon worker 1 (pool 0)",
                    &["rayon_core::sleep::Sleep::sleep", "app::never", "[blocked]"],
                    90_000_000,
                ),
                // Preempted, or on the main thread: not counted.
                stack(
                    "rayon worker 1 (pool 0)",
                    &["app::other", "[preempted]"],
                    50_000_000,
                ),
                stack("main", &["app::main", "[blocked]"], 60_000_000),
                stack(
                    "rayon worker 1 (pool 0)",
                    &["app::io::read", "[blocked]"],
                    2_000_000,
                ),
            ],
            ..OffCpuStacks::default()
        };
        assert_eq!(
            heaviest_task_wait(&stacks),
            Some(("app::histogram::add".to_owned(), 7_000_000, true))
        );
    }
}
