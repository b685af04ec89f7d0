//! `cargo parprof` on programs written the way rayon's own demos are (`examples/demo_*.rs`),
//! annotated (`--region`: the top call in `parallel_region!`) and not (no annotation at all),
//! end to end: the region's tasks against the calls each program counts itself, the region's
//! name, its workers, and the diagnoses each program should get.
//!
//! The lifecycle model counts, in the region current where a job is created:
//! - two tasks per `join` (the first half inline, the second popped back or stolen);
//! - one task per spawn;
//! - one task per entry into a pool from a thread outside it (`main` calling `join`, `scope`,
//!   `install` or a parallel iterator, or a worker of another pool calling `install`),
//!   injected.
//!
//! So a region has 2·joins + spawns + entries tasks, `joins` of them inline and `entries`
//! injected. Without annotation, each function that enters the pool from outside gets an
//! implicit region named after it. The global-pool programs run with `RAYON_NUM_THREADS=2`;
//! the others build their own pools.

mod common;

use common::{Run, codes, diagnosis, only_region, regions, task_count};
use serde_json::Value;
use std::ops::RangeInclusive;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Annotation {
    /// `--region`: the top call is in a `parallel_region!` of the given name.
    Region,
    /// No annotation: the region is implicit.
    None,
}

const GLOBAL_POOL_OF_2: &[(&str, &str)] = &[("RAYON_NUM_THREADS", "2")];

/// `cargo parprof --example <example> -- <args> [--region]`.
fn demo(example: &str, args: &[&str], annotation: Annotation) -> Run {
    let mut flags = vec!["--"];
    flags.extend_from_slice(args);
    if annotation == Annotation::Region {
        flags.push("--region");
    }
    common::profile_example(example, &flags, GLOBAL_POOL_OF_2)
}

/// The run's only region: `named` when annotated, else the implicit region of the function
/// that enters the pool, `implicit`.
fn the_region(run: &Run, annotation: Annotation, named: &str, implicit: &str) -> Value {
    let region = only_region(run);
    let expected = match annotation {
        Annotation::Region => named,
        Annotation::None => implicit,
    };
    assert_eq!(function(&region), expected, "{region:#}");
    region
}

/// The region's name without the source location an implicit region's name ends with
/// (`demo_quicksort::quick_sort (examples/demo_quicksort.rs:39)`), which is checked to be in
/// the example itself.
fn function(region: &Value) -> &str {
    let name = region["name"].as_str().expect("a name");
    match name.split_once(" (") {
        Some((function, location)) => {
            assert!(
                location.starts_with("examples/demo_") && location.ends_with(')'),
                "an implicit region's location is the user's call: {name}"
            );
            function
        }
        None => name,
    }
}

/// What a program counted itself: its `join`, spawn and `install` calls.
struct Calls {
    joins: u64,
    spawns: u64,
    installs: u64,
}

fn calls(run: &Run) -> Calls {
    Calls {
        joins: run.printed("joins"),
        spawns: run.printed("spawns"),
        installs: run.printed("installs"),
    }
}

/// The sum of a task count over regions.
fn total(regions: &[Value], field: &str) -> u64 {
    regions.iter().map(|r| task_count(r, field)).sum()
}

/// The regions' tasks are 2·joins + spawns + entries, with joins inline and entries injected.
fn assert_tasks(regions: &[Value], joins: u64, spawns: u64, entries: u64) {
    for region in regions {
        common::assert_origins_add_up(region);
    }
    assert_eq!(
        total(regions, "tasks"),
        2 * joins + spawns + entries,
        "joins {joins}, spawns {spawns}, entries {entries}: {regions:#?}"
    );
    assert_eq!(total(regions, "tasks_inline"), joins, "{regions:#?}");
    assert_eq!(total(regions, "tasks_injected"), entries, "{regions:#?}");
}

/// The region has `workers` workers (a range where pools are built inside the region: a
/// worker thread that the kernel had not started before the region ended is not one of its
/// workers) in `pools` pools.
fn assert_workers(region: &Value, workers: RangeInclusive<u64>, pools: usize) {
    let count = region["workers"].as_u64().expect("workers");
    assert!(workers.contains(&count), "{workers:?}: {region:#}");
    let mut seen: Vec<u64> = region["per_worker"]
        .as_array()
        .expect("per_worker[]")
        .iter()
        .map(|w| w["pool"].as_u64().expect("a pool"))
        .collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), pools, "{region:#}");
}

/// A recursive sort with `join` in its sort function: the example, its region's name with
/// `--region`, and without it the functions whose joins enter the pool from `main`, each an
/// implicit region entered once.
struct Sort {
    example: &'static str,
    named: &'static str,
    implicit: &'static [&'static str],
}

const QUICKSORT: Sort = Sort {
    example: "demo_quicksort",
    named: "quicksort",
    implicit: &["demo_quicksort::quick_sort"],
};

/// The sort's top join, and then its top merge's.
const MERGESORT: Sort = Sort {
    example: "demo_mergesort",
    named: "mergesort",
    implicit: &["demo_mergesort::merge_sort", "demo_mergesort::merge"],
};

/// The sort of four million integers at `cutoff`: 2·joins + entries tasks.
/// Down to single items, the share of rayon's code in the tasks is told from the CPU samples in
/// them, and 1 M keys (a 54 ms region, 75 samples in its tasks) once read 3 of them there, 4 %
/// against the usual 10–20, under the too-fine gate on a quiet machine. Tuned, 1 M keys made a
/// mergesort region of 2.8 ms (127 tasks, 23 % of its worker time idle) whose few searches,
/// per second of so short a region, passed the slack gate in both runs of the test once in ten
/// quiet runs.
const KEYS: &str = "4000000";

fn sort_regions(sort: &Sort, cutoff: &str, annotation: Annotation) -> Vec<Value> {
    let run = demo(sort.example, &[KEYS, cutoff], annotation);
    let regions = regions(&run);
    let names: Vec<&str> = regions.iter().map(function).collect();
    let expected = match annotation {
        Annotation::Region => vec![sort.named],
        Annotation::None => sort.implicit.to_vec(),
    };
    assert_eq!(names, expected, "{regions:#?}");
    assert_tasks(&regions, calls(&run).joins, 0, sort.implicit.len() as u64);
    for region in &regions {
        assert_workers(region, 2..=2, 1);
        assert_eq!(region["instances"], 1, "{region:#}");
    }
    regions
}

/// The region where the sort's work is: the first (the sort function's).
fn sort_region(sort: &Sort, cutoff: &str, annotation: Annotation) -> Value {
    sort_regions(sort, cutoff, annotation).swap_remove(0)
}

/// A tuned program has no diagnosis in any region. When a run shows one, the program runs
/// again: other programs on the machine (builds beside the tests, the VM's neighbours) stretch
/// one worker's task while another sleeps, which shows as load imbalance until preemption is
/// told apart (issue 9, item 4). A fresh clone's CI run (2026-11-28 22:30 UTC) found
/// `load_imbalance` twice in a row in `par_sort_unstable`'s 12 ms region (11 % and 16 % asleep,
/// the second run preempted 18 % by other programs), where 6 runs of that test on the quiet VM
/// just after found none: a diagnosis found three times in a row fails.
fn assert_no_diagnosis_in_runs(program: &str, run: impl Fn() -> Vec<Value>) {
    for attempt in 1..MAX_RUNS {
        let regions = run();
        if regions.iter().all(|r| common::work_codes(r).is_empty()) {
            return;
        }
        eprintln!("{program}: a diagnosis in run {attempt}, running it again: {regions:#?}");
    }
    for region in run() {
        assert_no_diagnosis(&region);
    }
}

/// Runs of a tuned program, at most, before a diagnosis it shows fails the test.
const MAX_RUNS: usize = 3;

fn assert_tuned(sort: &Sort, cutoff: &str, annotation: Annotation) {
    assert_no_diagnosis_in_runs(sort.example, || sort_regions(sort, cutoff, annotation));
}

/// Cut down to single items (the textbook recursion): tasks of a few tens of nanoseconds.
/// The mergesort's region sits near the diagnosis' gate: its scheduling share (LQ + GS +
/// sched) read 10 % in one of ten quiet runs (the LQ share's run-to-run spread, 0.0 to a few
/// points of its worker time), so a run that misses the diagnosis runs once more; missed twice
/// in a row fails.
fn assert_too_fine_in_two_runs(sort: &Sort, annotation: Annotation) {
    let region = sort_region(sort, "1", annotation);
    if codes(&region).contains(&"too_fine_granularity".to_owned()) {
        return assert_too_fine(&region);
    }
    eprintln!(
        "{}: too_fine_granularity missed in the first run, running it again: {region:#}",
        sort.example
    );
    assert_too_fine(&sort_region(sort, "1", annotation));
}

fn assert_too_fine(region: &Value) {
    let d = diagnosis(region, "too_fine_granularity");
    common::assert_beyond_threshold(&d);
    assert!(
        !codes(region).contains(&"excessive_stealing".to_owned()),
        "the halves are popped back by the worker that forked them: {region:#}"
    );
}

fn assert_no_diagnosis(region: &Value) {
    assert_eq!(
        common::work_codes(region),
        Vec::<String>::new(),
        "{region:#}"
    );
}

#[test]
fn quicksort_to_single_items_is_too_fine() {
    assert_too_fine_in_two_runs(&QUICKSORT, Annotation::None);
}

#[test]
fn quicksort_to_single_items_in_a_region_is_too_fine() {
    assert_too_fine_in_two_runs(&QUICKSORT, Annotation::Region);
}

#[test]
fn quicksort_with_a_tuned_cutoff_has_no_diagnosis() {
    assert_tuned(&QUICKSORT, "5000", Annotation::None);
}

#[test]
fn quicksort_with_a_tuned_cutoff_in_a_region_has_no_diagnosis() {
    assert_tuned(&QUICKSORT, "5000", Annotation::Region);
}

#[test]
fn mergesort_to_single_items_is_too_fine() {
    assert_too_fine_in_two_runs(&MERGESORT, Annotation::None);
}

#[test]
fn mergesort_to_single_items_in_a_region_is_too_fine() {
    assert_too_fine_in_two_runs(&MERGESORT, Annotation::Region);
}

#[test]
fn mergesort_with_a_tuned_cutoff_has_no_diagnosis() {
    assert_tuned(&MERGESORT, "16384", Annotation::None);
}

#[test]
fn mergesort_with_a_tuned_cutoff_in_a_region_has_no_diagnosis() {
    assert_tuned(&MERGESORT, "16384", Annotation::Region);
}

const SORTED: u64 = 1_000_000;

/// `par_sort` or `par_sort_unstable` of [`SORTED`] integers: the program makes no call of its
/// own, every join is rayon's. Returns the run's regions: one when annotated, the implicit
/// ones of rayon's entries from `main` otherwise.
fn par_sort(unstable: bool, annotation: Annotation) -> (Run, Vec<Value>) {
    let len = SORTED.to_string();
    let mut args = vec![len.as_str()];
    if unstable {
        args.push("--unstable");
    }
    let run = demo("demo_par_sort", &args, annotation);
    assert_eq!(run.printed("len"), SORTED);
    assert_eq!(run.printed("joins"), 0);
    let regions = regions(&run);
    if annotation == Annotation::Region {
        assert_eq!(regions.len(), 1, "{regions:#?}");
        assert_eq!(regions[0]["name"], "par_sort", "{regions:#?}");
    }
    (run, regions)
}

/// Tasks = 2·joins + entries, every join with one inline half; returns the joins.
fn assert_join_tasks(regions: &[Value], entries: u64) -> u64 {
    let joins = total(regions, "tasks_inline");
    assert_tasks(regions, joins, 0, entries);
    joins
}

/// rayon's `par_sort` (stable): its chunks of 2,000 items are sorted by a parallel iterator
/// split down to one chunk per leaf (chunks − 1 joins), merged back by a recursion of
/// chunks − 1 joins, and each merge of at least 5,000 items is split by joins down to merges of
/// fewer (at least the top one; at most one join per 2,500 items per merge level, the merges
/// of random data splitting about in half). `main` enters the pool three times: the
/// iterator, the merge recursion, and the top merge.
fn check_stable_par_sort(annotation: Annotation) {
    assert_no_diagnosis_in_runs("par_sort", || {
        let (_, regions) = par_sort(false, annotation);
        let joins = assert_join_tasks(&regions, 3);
        let chunks = SORTED.div_ceil(2_000);
        let merge_levels = u64::from(chunks.next_power_of_two().trailing_zeros());
        let (low, high) = (
            2 * (chunks - 1) + 1,
            2 * (chunks - 1) + merge_levels * SORTED / 2_500,
        );
        assert!(
            (low..=high).contains(&joins),
            "{joins} joins, expected {low}..={high}: {regions:#?}"
        );
        regions
    });
}

/// rayon's `par_sort_unstable`: a quicksort that forks with `join` while either side of a
/// partition has more than 2,000 items, entered once from `main`. Each piece sorted without a
/// join has at most 4,001 items, so there are at least (len − 4,001) / 4,002 joins; each join
/// leaves a side of more than 2,000 items, and with sampled pivots on random data both about
/// as large: at most one join per 1,000 items.
fn check_unstable_par_sort(annotation: Annotation) {
    assert_no_diagnosis_in_runs("par_sort_unstable", || {
        let (_, regions) = par_sort(true, annotation);
        let joins = assert_join_tasks(&regions, 1);
        let (low, high) = ((SORTED - 4_001) / 4_002, SORTED / 1_000);
        assert!(
            (low..=high).contains(&joins),
            "{joins} joins, expected {low}..={high}: {regions:#?}"
        );
        regions
    });
}

#[test]
fn par_sort_tasks_follow_from_its_length() {
    check_stable_par_sort(Annotation::None);
}

#[test]
fn par_sort_in_a_region_tasks_follow_from_its_length() {
    check_stable_par_sort(Annotation::Region);
}

#[test]
fn par_sort_unstable_tasks_follow_from_its_length() {
    check_unstable_par_sort(Annotation::None);
}

#[test]
fn par_sort_unstable_in_a_region_tasks_follow_from_its_length() {
    check_unstable_par_sort(Annotation::Region);
}

/// An unannotated `par_sort` gets one implicit region named after the function that calls it,
/// though rayon enters the pool from its own code, several times per sort.
#[test]
fn an_unannotated_par_sort_is_named_after_its_caller() {
    for unstable in [false, true] {
        let (run, _) = par_sort(unstable, Annotation::None);
        let region = only_region(&run);
        assert_eq!(function(&region), "demo_par_sort::sort", "{region:#}");
    }
}

/// Two loops over one element type in two functions (rayon-demo's nbody `tick_par` and
/// `tick_par_reduce`), one of them with no closure of the program's (`for_each(drift)`): two
/// regions, each named after its function, each run once per step.
#[test]
fn two_loops_over_one_element_type_are_two_regions_named_after_their_functions() {
    let run = demo("demo_nbody_steps", &["2000", "6"], Annotation::None);
    assert_eq!(run.printed("steps"), 6);
    let regions = regions(&run);
    let mut named: Vec<(&str, u64)> = regions
        .iter()
        .map(|r| (function(r), r["instances"].as_u64().unwrap()))
        .collect();
    named.sort();
    assert_eq!(
        named,
        [
            ("demo_nbody_steps::tick_par", 6),
            ("demo_nbody_steps::tick_par_reduce", 6)
        ],
        "{regions:#?}"
    );
}

/// `checksum_all` joins two halves on the global pool; each calls a library function that
/// builds a pool of 2 and `install`s a recursive join there, from a worker of the global pool
/// (an entry from outside that pool). Entries: `main`'s and the installs.
fn nested_pool_region(annotation: Annotation) -> Value {
    // 64 M integers: the library pools' 4 workers compete for the 2 CPUs for about 20 ms.
    // Shorter regions are mostly pool start-up, and their preempted share falls below the
    // threshold now and then: with the default 2 M (9 ms) in one run of several, with 16 M
    // (7 to 8 ms of checksums) once in CI, at 8 % (15 to 40 % in other runs); 64 M gave
    // 19 to 39 % in four runs.
    let run = demo("demo_nested_pool", &["64000000"], annotation);
    let region = the_region(
        &run,
        annotation,
        "nested_pool",
        "demo_nested_pool::checksum_all",
    );
    let calls = calls(&run);
    assert_eq!(calls.installs, 2);
    assert_tasks(
        std::slice::from_ref(&region),
        calls.joins,
        0,
        1 + calls.installs,
    );
    // The global pool's 2 workers and the library pools' 2 each, which start on their own
    // schedule: in four runs, 6, 5, 6 and 6 of them had started before the region ended.
    assert_workers(&region, 3..=6, 3);
    region
}

#[test]
fn a_nested_pool_counts_in_the_calling_region() {
    nested_pool_region(Annotation::None);
}

#[test]
fn a_nested_pool_in_a_region_counts_in_it() {
    nested_pool_region(Annotation::Region);
}

/// A pool of 8 workers on a 2-core machine, entered with `install` from `main`.
fn big_pool_region(annotation: Annotation) -> Value {
    // 64 M integers, for the reason given at `nested_pool_region`: with the default 4 M the
    // region lasted 8 ms and its preempted share fell below the threshold once; with 16 M
    // (8 to 10 ms) once in CI, at 8.8 % with the workers asleep 41 % of the region (21 to
    // 56 % in six other runs); 64 M gave 18 to 21 ms and 48 to 70 % in six runs.
    let run = demo("demo_big_pool", &["8", "64000000"], annotation);
    let region = the_region(&run, annotation, "big_pool", "demo_big_pool::sum_in_pool");
    let calls = calls(&run);
    assert_eq!(calls.installs, 1);
    assert_tasks(std::slice::from_ref(&region), calls.joins, 0, 1);
    // Built inside the region: its workers start on their own schedule while the sum runs.
    assert_workers(&region, 1..=8, 1);
    region
}

#[test]
fn a_pool_larger_than_the_cpus_counts_every_task() {
    big_pool_region(Annotation::None);
}

#[test]
fn a_pool_larger_than_the_cpus_in_a_region_counts_every_task() {
    big_pool_region(Annotation::Region);
}

fn assert_oversubscribed(region: &Value) {
    let d = diagnosis(region, "oversubscription");
    assert!(
        d["advice"].as_str().unwrap().contains("num_threads"),
        "{d:#}"
    );
}

#[test]
fn a_pool_larger_than_the_cpus_is_oversubscription() {
    for annotation in [Annotation::None, Annotation::Region] {
        assert_oversubscribed(&big_pool_region(annotation));
    }
}

#[test]
fn nested_pools_are_oversubscription() {
    for annotation in [Annotation::None, Annotation::Region] {
        assert_oversubscribed(&nested_pool_region(annotation));
    }
}

/// `process_all` spawns one task per item in a `for` loop inside a `scope` entered from
/// `main`: spawns + 1 tasks.
fn spawn_loop_region(annotation: Annotation) -> Value {
    let run = demo("demo_spawn_loop", &[], annotation);
    let region = the_region(
        &run,
        annotation,
        "spawn_loop",
        "demo_spawn_loop::process_all",
    );
    let calls = calls(&run);
    assert_tasks(std::slice::from_ref(&region), 0, calls.spawns, 1);
    assert_workers(&region, 2..=2, 1);
    region
}

/// The spawn loop's region, run again once when the first run has no `excessive_stealing`
/// but its report says other programs took the CPUs (`oversubscription`): the thieves are
/// then switched out instead of searching, and their search can fall under the active
/// threshold (seen in CI: preempted for 17 % of worker time, search 9.8 % for a 10 %
/// threshold). A miss in the second run fails.
fn linear_spawn_region(annotation: Annotation) -> Value {
    let region = spawn_loop_region(annotation);
    let found = codes(&region);
    if found.iter().any(|c| c == "excessive_stealing")
        || !found.iter().any(|c| c == "oversubscription")
    {
        return region;
    }
    eprintln!(
        "demo_spawn_loop: the machine was busy in the first run, running it again: {region:#}"
    );
    spawn_loop_region(annotation)
}

fn assert_linear_spawn(region: &Value) {
    let d = diagnosis(region, "excessive_stealing");
    assert!(
        task_count(region, "tasks_stolen") > task_count(region, "tasks_local"),
        "{region:#}"
    );
    assert!(d["advice"].as_str().unwrap().contains("par_iter"), "{d:#}");
    assert!(
        !codes(region).contains(&"too_fine_granularity".to_owned()),
        "fewer than 400,000 tasks per second per worker: {region:#}"
    );
}

#[test]
fn a_spawn_loop_is_excessive_stealing() {
    assert_linear_spawn(&linear_spawn_region(Annotation::None));
}

#[test]
fn a_spawn_loop_in_a_region_is_excessive_stealing() {
    assert_linear_spawn(&linear_spawn_region(Annotation::Region));
}

/// `serve` calls `pool.join` of two 2 µs closures 3,000 times from `main` on a pool of 8:
/// each call enters the pool (one task) and runs two, 3·joins tasks. Unannotated, each call
/// is one run of the implicit region.
fn join_loop_region(annotation: Annotation) -> Value {
    let run = demo("demo_join_loop", &[], annotation);
    let region = the_region(&run, annotation, "join_loop", "demo_join_loop::serve");
    let calls = calls(&run);
    assert_tasks(std::slice::from_ref(&region), calls.joins, 0, calls.joins);
    assert_workers(&region, 8..=8, 1);
    let runs = match annotation {
        Annotation::Region => 1,
        Annotation::None => calls.joins,
    };
    assert_eq!(region["instances"], runs, "{region:#}");
    region
}

#[test]
fn a_join_loop_on_a_large_pool_counts_every_call() {
    join_loop_region(Annotation::None);
}

#[test]
fn a_join_loop_on_a_large_pool_in_a_region_counts_every_call() {
    join_loop_region(Annotation::Region);
}

/// Two tasks per run for 8 workers: six of them wake, search, find nothing and go back to
/// idling, thousands of times a second.
#[test]
fn a_join_loop_on_a_large_pool_is_insufficient_parallel_slack() {
    for annotation in [Annotation::None, Annotation::Region] {
        let region = join_loop_region(annotation);
        let d = diagnosis(&region, "insufficient_parallel_slack");
        common::assert_beyond_threshold(&d);
    }
}

/// Rayon workers are named in the report (`rayon worker <index>` and their pool), not by the
/// program's name.
#[test]
fn workers_are_named() {
    let run = demo("demo_nested_pool", &[], Annotation::None);
    let report = run.report();
    let workers: Vec<&Value> = report["threads"]
        .as_array()
        .expect("threads[]")
        .iter()
        .filter(|t| !t["rayon_index"].is_null())
        .collect();
    // Three pools of 2 workers. A worker of a library pool that the kernel had not started
    // before the pool was dropped never runs, and is rightly absent; every pool has at least
    // the worker that ran its `install` (or, for the global pool, `main`'s join).
    let mut per_pool = std::collections::BTreeMap::new();
    for w in &workers {
        *per_pool
            .entry(w["rayon_pool"].as_u64().expect("a pool"))
            .or_insert(0) += 1;
    }
    assert_eq!(per_pool.len(), 3, "{workers:#?}");
    assert!(
        per_pool.values().all(|n| (1..=2).contains(n)),
        "{workers:#?}"
    );
    for w in workers {
        let name = w["name"].as_str().expect("a name");
        let index = w["rayon_index"].as_u64().unwrap();
        assert!(name.contains(&format!("rayon worker {index}")), "{w:#}");
    }
    for w in only_region(&run)["per_worker"].as_array().unwrap() {
        let index = w["rayon_index"].as_u64().unwrap();
        assert!(
            w["name"]
                .as_str()
                .unwrap()
                .contains(&format!("rayon worker {index}")),
            "{w:#}"
        );
    }
}
