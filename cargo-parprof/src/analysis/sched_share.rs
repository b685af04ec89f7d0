//! rayon's scheduling work measured where it runs: the part of a region's user-code time (UC)
//! in which the workers ran the scheduler's code on the tasks' behalf.
//!
//! Between a task's begin and end the worker runs the task's closure, and also rayon's own
//! work for it: creating and pushing the jobs of a `join`, splitting producers, setting
//! latches, waking sleepers, the reduce plumbing of an iterator. The lifecycle counts all of it
//! as UC. Each CPU sample of a worker taken during a region's runs is classified by the code it
//! hit, from the innermost frame out (inlined frames included, each by its crate path):
//!
//! - frames of the standard library (`std`, `core`, `alloc`, libc) count for the crate that
//!   called them: they are skipped;
//! - a frame of the profiler's own code (`parprof_rt`, its hooks) makes the sample the
//!   profiler's, never the program's;
//! - a frame of rayon, rayon-core (and its hooked copy, which keeps the crate's name) or
//!   crossbeam-deque/epoch is the scheduler's — unless, going out from it through the
//!   scheduler's and the library's frames, a frame of the search is reached (popping its own
//!   deque, stealing, the idle loop and sleep) before the start of a job or the program's code:
//!   then the worker was between tasks (LQ, GS, W), which the lifecycle counts already;
//! - any other frame is the task's own code.
//!
//! The scheduler's share of UC is sched ÷ (sched + own) samples, known to ± its binomial
//! standard deviation (the "plus four" estimate, honest at few samples); under [`MIN_SAMPLES`] it is "too few samples to tell". The profiler's
//! samples are counted and reported, not used to size the hooks' time (see
//! [`super::hook_time`]: they over-count a dearer hook's spin against the states).

use super::cpu_stacks::{is_profiler_frame, is_runtime_library_frame, type_path};
use super::lifecycle::RegionReport;
use super::model::SchedShare;
use crate::recording::kernel_records::{CpuSample, Frame, StackId, StackTree};
use std::collections::HashMap;

/// Samples in UC under which a region's share is not told. Ten give a share to ±16 points
/// at worst (said with it): a short region of tiny tasks (25 ms on 2 workers, 10 samples in
/// its tasks) is mostly the scheduler's, and leaving it out would hide the cause.
pub const MIN_SAMPLES: u64 = 10;

/// The crates whose code is the scheduler's.
const SCHEDULER_CRATES: &[&str] = &[
    "rayon::",
    "rayon_core::",
    "crossbeam_deque::",
    "crossbeam_epoch::",
];

/// rayon-core functions of a worker between tasks: its own deque's pop (LQ), stealing (GS), the
/// idle loop and sleep (GS, W).
const SEARCH_FUNCTIONS: &[&str] = &[
    "take_local_job",
    "wait_until",
    "find_work",
    "WorkerThread::steal",
    "Stealer::steal",
    "Injector::steal",
    "steal_batch",
    "main_loop",
    "Sleep::sleep",
    "no_work_found",
    "work_found",
    "start_looking",
];

/// Frames where a job starts running: above them, the search that found it is over.
const JOB_STARTS: &[&str] = &["::execute", "run_inline", "call_a", "call_b"];

/// What a sample hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hit {
    /// The task's own code (UC).
    Own,
    /// The scheduler's work on the task's behalf (UC).
    Sched,
    /// The profiler's code.
    Profiler,
    /// The search between tasks (LQ, GS, W): not UC.
    Search,
    /// No symbolised frame to tell.
    Unknown,
}

fn is_scheduler(function: &str) -> bool {
    let path = type_path(function);
    // `<A as B>::f` is A's code when A is a path (a type of that crate), B's otherwise.
    let path = match path.split_once(" as ") {
        Some((ty, trait_path)) if !ty.contains("::") => type_path(trait_path),
        _ => path,
    };
    SCHEDULER_CRATES.iter().any(|c| path.starts_with(c))
}

fn is_search(function: &str) -> bool {
    SEARCH_FUNCTIONS.iter().any(|f| function.contains(f))
}

fn is_job_start(function: &str) -> bool {
    JOB_STARTS.iter().any(|f| function.contains(f))
}

/// Classifies a symbolised stack, given innermost frame first, by the code that frame hit.
pub fn classify<'f>(leaf_first: impl Iterator<Item = &'f Frame>) -> Hit {
    let mut frames = leaf_first.map(|f| &*f.function);
    let innermost = loop {
        let Some(function) = frames.next() else {
            return Hit::Unknown;
        };
        if is_profiler_frame(function) {
            return Hit::Profiler;
        }
        if !is_runtime_library_frame(function) {
            break function;
        }
    };
    if !is_scheduler(innermost) {
        return Hit::Own;
    }
    let mut scheduler_frames = std::iter::once(innermost)
        .chain(frames.take_while(|f| is_scheduler(f) || is_runtime_library_frame(f)));
    // Out from the innermost frame to the start of a job or the program's code.
    match scheduler_frames.find(|f| is_job_start(f) || is_search(f)) {
        Some(f) if is_search(f) => Hit::Search,
        _ => Hit::Sched,
    }
}

/// Counts of a region's samples by what they hit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    own: u64,
    sched: u64,
    profiler: u64,
    /// Every sample, the search's and the unknown ones included.
    all: u64,
}

impl Counts {
    fn add(&mut self, hit: Hit) {
        self.all += 1;
        match hit {
            Hit::Own => self.own += 1,
            Hit::Sched => self.sched += 1,
            Hit::Profiler => self.profiler += 1,
            Hit::Search | Hit::Unknown => {}
        }
    }
}

/// The scheduler's share of UC from the counts, applied to `running_uc_ns` (UC time on the
/// CPU, where samples are taken).
pub fn share(own: u64, sched: u64, profiler: u64, running_uc_ns: u64) -> SchedShare {
    let n = own + sched;
    let mut out = SchedShare {
        own_samples: own,
        sched_samples: sched,
        profiler_samples: profiler,
        ..SchedShare::default()
    };
    if n < MIN_SAMPLES {
        return out;
    }
    let p = sched as f64 / n as f64;
    out.share_of_uc = Some(p);
    out.share_uncertainty = binomial_uncertainty(sched, n);
    out.sched_ns = (p * running_uc_ns as f64).round() as u64;
    out.sched_uncertainty_ns = (out.share_uncertainty * running_uc_ns as f64).round() as u64;
    out
}

/// The standard deviation of a share measured as `hits` of `n` samples, by the "plus four"
/// (Agresti–Coull) estimate: two hits and two misses added. The plain binomial deviation of
/// the observed share claims certainty at 0 of `n`, and it did so where it mattered: a 400 k-key
/// quicksort's region had 30–40 samples in its tasks, and the share read 0 of 29 in one run
/// (±2.4 points by a half sample each side) and 5 of 33 in the next.
fn binomial_uncertainty(hits: u64, n: u64) -> f64 {
    let n = n as f64 + 4.0;
    let p = (hits as f64 + 2.0) / n;
    (p * (1.0 - p) / n).sqrt()
}

/// The regions' runs in ticks, by site: each sorted and disjoint.
pub type RegionRuns = HashMap<u32, Vec<(u64, u64)>>;

/// Measures each region's scheduler share from the CPU samples with their stacks (called only
/// when they are symbolised) taken on its workers during its runs. A sample in the
/// runs of several regions (nested ones) counts for the shortest. `to_ticks` places a
/// sample's time on the runs' time line.
pub fn measure(
    regions: &mut [RegionReport],
    runs: &RegionRuns,
    samples: impl IntoIterator<Item = (CpuSample, StackId)>,
    tree: &StackTree,
    to_ticks: impl Fn(u64) -> u64,
) {
    let mut counts = vec![Counts::default(); regions.len()];
    let mut by_stack: HashMap<StackId, Hit> = HashMap::new();
    for (sample, stack) in samples {
        let Some(at) = region_of(regions, runs, sample.tid, to_ticks(sample.time_ns)) else {
            continue;
        };
        let hit = *by_stack
            .entry(stack)
            .or_insert_with(|| classify(tree.leaf_first(stack)));
        counts[at].add(hit);
    }
    for (region, c) in regions.iter_mut().zip(counts) {
        let running_uc = region
            .state_ns
            .uc
            .saturating_sub(region.preempted_ns.uc + region.blocked_ns.uc);
        region.sched = share(c.own, c.sched, c.profiler, running_uc);
        region.sched.samples = c.all;
        region.active_overhead_ns = region.state_ns.lq + region.state_ns.gs + region.sched.sched_ns;
    }
}

/// The region (index) whose runs hold tick `ts` and whose workers include `tid`; the shortest
/// of several.
fn region_of(regions: &[RegionReport], runs: &RegionRuns, tid: u32, ts: u64) -> Option<usize> {
    regions
        .iter()
        .enumerate()
        .filter(|(_, r)| r.per_worker.iter().any(|w| w.tid == tid))
        .filter(|(_, r)| {
            runs.get(&r.site).is_some_and(|wins| {
                let i = wins.partition_point(|w| w.1 < ts);
                wins.get(i).is_some_and(|w| w.0 <= ts)
            })
        })
        .min_by_key(|(_, r)| r.elapsed_ns)
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(functions: &[(&str, bool)]) -> Vec<Frame> {
        functions
            .iter()
            .map(|&(f, inlined)| Frame {
                function: f.into(),
                inlined,
            })
            .collect()
    }

    const WORKER: (&str, bool) = ("rayon_core::registry::WorkerThread::wait_until_cold", false);
    const EXECUTE: (&str, bool) = ("rayon_core::job::JobRef::execute", false);

    #[test]
    fn rayon_frames_inlined_into_user_code_are_the_schedulers() {
        // The producer's split, inlined into the user's function that drives the iterator.
        let split = stack(&[
            WORKER,
            EXECUTE,
            ("app::sum_rows", false),
            (
                "rayon::iter::plumbing::bridge_producer_consumer::helper",
                true,
            ),
            ("rayon::iter::len::MaxLenProducer::split_at", true),
        ]);
        assert_eq!(classify(split.iter().rev()), Hit::Sched);
        // The user's closure inlined into rayon's helper is the task's own code.
        let closure = stack(&[
            WORKER,
            EXECUTE,
            (
                "rayon::iter::plumbing::bridge_producer_consumer::helper",
                false,
            ),
            ("app::main::{closure}", true),
        ]);
        assert_eq!(classify(closure.iter().rev()), Hit::Own);
        // A trait method of a user type is the user's; rayon's type implementing a std trait
        // is rayon's.
        let user_impl = stack(&[
            EXECUTE,
            ("<app::Tree as rayon::iter::Producer>::split_at", false),
        ]);
        assert_eq!(classify(user_impl.iter().rev()), Hit::Own);
        let rayon_impl = stack(&[
            EXECUTE,
            (
                "<rayon::iter::map::MapFolder as rayon::iter::plumbing::Folder>::consume",
                false,
            ),
        ]);
        assert_eq!(classify(rayon_impl.iter().rev()), Hit::Sched);
    }

    #[test]
    fn std_frames_count_for_the_crate_that_called_them() {
        let by_rayon = stack(&[
            ("app::main::{closure}", false),
            ("rayon_core::join::join_context::{closure}", false),
            ("rayon_core::job::StackJob::new", true),
            ("core::option::Option::unwrap", true),
            ("alloc::sync::Arc::deref", true),
        ]);
        assert_eq!(classify(by_rayon.iter().rev()), Hit::Sched);
        let by_user = stack(&[
            EXECUTE,
            ("app::hash_row", false),
            ("core::slice::iter::Iter::next", true),
            ("[libc.so.6]", false),
        ]);
        assert_eq!(classify(by_user.iter().rev()), Hit::Own);
        // Crossbeam's deque, pushed to by a join in a task: the scheduler's.
        let push = stack(&[
            ("app::quicksort", false),
            ("rayon_core::registry::WorkerThread::push", true),
            ("crossbeam_deque::deque::Worker::push", true),
            ("core::sync::atomic::atomic_load", true),
        ]);
        assert_eq!(classify(push.iter().rev()), Hit::Sched);
    }

    #[test]
    fn the_search_between_tasks_is_not_user_code() {
        // Popping the join's second half back (LQ), stealing, sleeping.
        let pop = stack(&[
            ("app::quicksort", false),
            ("rayon_core::join::join_context::{closure}", false),
            ("rayon_core::registry::WorkerThread::take_local_job", true),
            ("crossbeam_deque::deque::Worker::pop", false),
        ]);
        assert_eq!(classify(pop.iter().rev()), Hit::Search);
        let steal = stack(&[
            WORKER,
            ("rayon_core::registry::WorkerThread::find_work", true),
            ("crossbeam_deque::deque::Stealer::steal", false),
            ("core::sync::atomic::atomic_load", true),
        ]);
        assert_eq!(classify(steal.iter().rev()), Hit::Search);
        let asleep = stack(&[
            WORKER,
            ("rayon_core::sleep::Sleep::sleep", false),
            ("[libc.so.6]", false),
        ]);
        assert_eq!(classify(asleep.iter().rev()), Hit::Search);
        // A job stolen and run from the wait loop: its rayon frames are the scheduler's.
        let stolen = stack(&[
            WORKER,
            EXECUTE,
            (
                "rayon::iter::plumbing::bridge_producer_consumer::helper",
                false,
            ),
        ]);
        assert_eq!(classify(stolen.iter().rev()), Hit::Sched);
    }

    #[test]
    fn the_profilers_frames_are_the_profilers() {
        let hook = stack(&[
            EXECUTE,
            (
                "rayon::iter::plumbing::bridge_producer_consumer::helper",
                false,
            ),
            ("parprof_rt::lifecycle_totals::Tracker::on_hook", true),
            ("core::core_arch::x86::rdtsc::_rdtsc", true),
        ]);
        assert_eq!(classify(hook.iter().rev()), Hit::Profiler);
        let drop = stack(&[
            ("app::main", false),
            (
                "core::ptr::drop_in_place<parprof_rt::rayon_hooks::Task>",
                true,
            ),
        ]);
        assert_eq!(classify(drop.iter().rev()), Hit::Profiler);
        assert_eq!(
            classify(stack(&[("[libc.so.6]", false)]).iter().rev()),
            Hit::Unknown
        );
    }

    #[test]
    fn the_share_carries_its_uncertainty_or_says_too_few() {
        // 40 of 100 samples in UC hit rayon: 40 % of 50 ms running UC, ±√(42/104 × 62/104 ÷ 104)
        // = ±4.81 points.
        let s = share(60, 40, 7, 50_000_000);
        assert_eq!(s.share_of_uc, Some(0.4));
        assert_eq!(s.sched_ns, 20_000_000);
        assert!(
            (s.share_uncertainty - 0.04811).abs() < 0.00001,
            "{}",
            s.share_uncertainty
        );
        assert_eq!(s.profiler_samples, 7);
        assert_eq!(s.sched_uncertainty_ns, 2_405_695);
        // None of 30 samples: a share of 0, not known to better than ±√(2/34 × 32/34 ÷ 34) = ±4.0 points.
        let none = share(30, 0, 0, 50_000_000);
        assert_eq!(none.share_of_uc, Some(0.0));
        assert!((none.share_uncertainty - 0.0404).abs() < 0.0001, "{none:?}");
        // 9 samples: too few to tell, nothing counted.
        let few = share(5, 4, 0, 50_000_000);
        assert_eq!((few.share_of_uc, few.sched_ns), (None, 0));
    }
}
