//! Work of the pool that no region holds: rayon workers running the program's code while no
//! region of the run was open. Every entry into a pool from outside it is a region, so this is
//! what the hooks could not tie to one (a rayon-core the build could not hook, work started
//! inside a region that outlived it): left unsaid, a reader would take the regions' figures
//! for all the work there was.
//!
//! Measured from the cpu-clock samples of the workers taken outside every region's runs, whose
//! stack holds a frame of the program's own (a worker spinning or asleep in rayon's idle loop
//! is not busy).

use super::blocked_where::is_program_frame;
use crate::recording::kernel_records::Frame;
use std::collections::HashSet;

/// What the workers ran outside every region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OutsideRegions {
    /// cpu-clock samples × their period.
    pub busy_ns: u64,
    pub samples: u64,
    /// Workers with at least one such sample.
    pub workers: usize,
}

/// A worker's cpu-clock sample: its thread, its time on the trace's tick time line, and its
/// symbolised stack (its frames in any order) when there is one.
pub(crate) struct WorkerSample<F> {
    pub tid: u32,
    pub tick: u64,
    pub stack: Option<F>,
}

/// The samples of `workers` outside `runs` (the union of every region's runs: sorted, disjoint
/// tick intervals) in the program's own code; `None` when there are none.
pub(crate) fn program_time_outside_regions<'f, F: IntoIterator<Item = &'f Frame>>(
    samples: impl IntoIterator<Item = WorkerSample<F>>,
    workers: &HashSet<u32>,
    runs: &[(u64, u64)],
    period_ns: u64,
) -> Option<OutsideRegions> {
    let mut count = 0u64;
    let mut busy_workers = HashSet::new();
    for s in samples {
        if !workers.contains(&s.tid) || in_runs(runs, s.tick) {
            continue;
        }
        let in_program = s
            .stack
            .is_some_and(|frames| frames.into_iter().any(|f| is_program_frame(&f.function)));
        if in_program {
            count += 1;
            busy_workers.insert(s.tid);
        }
    }
    (count > 0).then(|| OutsideRegions {
        busy_ns: count * period_ns,
        samples: count,
        workers: busy_workers.len(),
    })
}

/// Whether `tick` lies in one of the sorted, disjoint `runs` (ends included).
fn in_runs(runs: &[(u64, u64)], tick: u64) -> bool {
    let after = runs.partition_point(|&(start, _)| start <= tick);
    after > 0 && tick <= runs[after - 1].1
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn stack(functions: &[&str]) -> Vec<Frame> {
        functions
            .iter()
            .map(|f| Frame {
                function: Arc::from(*f),
                inlined: false,
            })
            .collect()
    }

    #[test]
    fn workers_busy_in_the_program_outside_every_region_are_counted() {
        let program = stack(&[
            "rayon_core::registry::main_loop",
            "app::trial::{{closure}}",
            "app::evaluate",
        ]);
        let idle = stack(&[
            "rayon_core::registry::main_loop",
            "rayon_core::sleep::Sleep::sleep",
        ]);
        let workers: HashSet<u32> = [11, 12].into();
        // One region's runs: ticks 100–200 and 300–400.
        let runs = [(100, 200), (300, 400)];
        let samples = [
            // Inside a run: the region's.
            (11, 150, &program),
            (12, 400, &program),
            // Outside: the program's code on both workers, 3 samples…
            (11, 50, &program),
            (11, 250, &program),
            (12, 401, &program),
            // …rayon's idle loop, and a thread that is not a worker (main).
            (12, 260, &idle),
            (1, 270, &program),
        ];
        let found = program_time_outside_regions(
            samples.iter().map(|&(tid, tick, stack)| WorkerSample {
                tid,
                tick,
                stack: Some(stack),
            }),
            &workers,
            &runs,
            1_000_000,
        );
        assert_eq!(
            found,
            Some(OutsideRegions {
                busy_ns: 3_000_000,
                samples: 3,
                workers: 2,
            })
        );
    }

    #[test]
    fn workers_that_only_idled_outside_the_regions_are_not_busy() {
        let idle = stack(&["rayon_core::registry::main_loop", "std::thread::yield_now"]);
        let found = program_time_outside_regions(
            [WorkerSample {
                tid: 11,
                tick: 10,
                stack: Some(&idle),
            }],
            &[11].into(),
            &[],
            1_000_000,
        );
        assert_eq!(found, None);
    }
}
