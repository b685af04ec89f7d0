//! The cpu flamegraph of a recursive rayon program, end to end: one root per thread named by
//! its role, recursion folded, none of the profiler's frames; complete call chains through
//! code without frame pointers; off-CPU stacks; probes nested under regions and tasks.

mod common;

use common::parprof;
use std::collections::BTreeSet;

#[test]
fn recursive_rayon_stacks_are_folded_per_thread_without_profiler_frames() {
    let run = parprof(&["--example", "rayon_quicksort"], &[]);
    assert!(run.output.status.success(), "stderr:\n{}", run.stderr());
    let report = run.report();
    let roles: BTreeSet<String> = report["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .filter_map(|t| t["role"].as_str().map(str::to_owned))
        .collect();
    let folded = std::fs::read_to_string(run.path("cpu.folded")).expect("cpu.folded");
    let stacks: Vec<(Vec<&str>, u64)> = folded
        .lines()
        .map(|line| {
            let (stack, weight) = line.rsplit_once(' ').expect("`stack weight`");
            (stack.split(';').collect(), weight.parse().expect("weight"))
        })
        .collect();
    let total: u64 = stacks.iter().map(|(_, w)| w).sum();
    assert!(total >= 50, "too few samples to judge: {total}\n{folded}");

    for (frames, _) in &stacks {
        let root = frames[0];
        assert!(
            roles.contains(root) && root != "parprof-writer",
            "stack does not start with a thread's role ({roles:?}): {frames:?}"
        );
        // Unfolded, the recursion makes stacks hundreds of frames deep; folded, and without
        // std's thread start, what is left is the worker loop and one level of each function.
        assert!(frames.len() <= 40, "{} frames: {frames:?}", frames.len());
        for frame in frames {
            let path = frame.trim_start_matches('<');
            assert!(
                !path.starts_with("parprof_rt::") && !frame.contains("_rdtsc"),
                "profiler frame {frame} in {frames:?}"
            );
        }
        // A folded run of rayon's frames (`[rayon: 3 frames]`) may stand between several
        // pairs of the program's frames; every function appears once.
        let functions: Vec<&&str> = frames[1..]
            .iter()
            .filter(|f| !f.starts_with("[rayon: ") && !f.starts_with("[std: "))
            .collect();
        let distinct: BTreeSet<&&&str> = functions.iter().collect();
        assert_eq!(
            distinct.len(),
            functions.len(),
            "recursion left: {frames:?}"
        );
    }
    let in_quicksort: u64 = stacks
        .iter()
        .filter(|(frames, _)| {
            frames
                .iter()
                .any(|f| f.contains("rayon_quicksort::quicksort"))
        })
        .map(|(_, w)| w)
        .sum();
    assert!(
        in_quicksort * 2 > total,
        "{in_quicksort} of {total} samples under quicksort\n{folded}"
    );
    assert!(
        stacks
            .iter()
            .any(|(frames, _)| frames[0].starts_with("rayon worker ")),
        "no rayon worker root\n{folded}"
    );
}

/// The quick start's `hot_kernel` runs in rayon tasks on the workers: in the active
/// flamegraph it sits under the probe that entered the region, the region and the task.
#[test]
fn probes_in_tasks_are_nested_under_their_region_and_task() {
    let run = parprof(&["--example", "quickstart"], &[]);
    assert!(run.output.status.success(), "stderr:\n{}", run.stderr());
    let folded = std::fs::read_to_string(run.path("active.folded")).expect("active.folded");
    let nested: u64 = folded
        .lines()
        .filter(|l| {
            l.starts_with(
                "quickstart::sum_wide_rows;sum_wide_rows;[rayon task];quickstart::hot_kernel ",
            )
        })
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    let total: u64 = folded
        .lines()
        .filter(|l| l.contains("hot_kernel"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert!(
        total > 0 && nested * 2 > total,
        "hot_kernel under sum_wide_rows › region › task: {nested} of {total}\n{folded}"
    );

    // Every call is counted under the region it ran in, sampled or not, paused rayon detail
    // or not: 2,000 wide rows and 100,000 narrow rows, three times each.
    let report = run.report();
    let calls_under = |region: &str| -> Vec<u64> {
        report["call_paths"]
            .as_array()
            .expect("call_paths")
            .iter()
            .filter(|p| p["path"][0] == region && p["path"][3] == "quickstart::hot_kernel")
            .map(|p| p["calls"].as_u64().expect("calls"))
            .collect()
    };
    assert_eq!(calls_under("quickstart::sum_wide_rows"), [6_000]);
    assert_eq!(calls_under("quickstart::sum_narrow_rows"), [300_000]);

    // The same run as an interactive profile: the workers' samples have `hot_kernel` in
    // their stacks, and its calls are markers on them.
    let gz = std::fs::File::open(run.path("profile.json.gz")).expect("profile.json.gz");
    let profile: serde_json::Value =
        serde_json::from_reader(flate2::read::GzDecoder::new(gz)).expect("gzip JSON");
    let threads = profile["threads"].as_array().expect("threads");
    let workers: Vec<&serde_json::Value> = threads
        .iter()
        .filter(|t| {
            t["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("rayon worker "))
        })
        .collect();
    assert_eq!(
        workers.len(),
        2,
        "{:?}",
        threads.iter().map(|t| &t["name"]).collect::<Vec<_>>()
    );
    assert!(
        threads.iter().any(|t| t["name"] == "main"),
        "the main thread keeps its role: {:?}",
        threads.iter().map(|t| &t["name"]).collect::<Vec<_>>()
    );
    for w in workers {
        assert!(w["samples"]["length"].as_u64() > Some(0), "{}", w["name"]);
        let strings = w["stringArray"].to_string();
        assert!(strings.contains("quickstart::hot_kernel"), "{}", w["name"]);
        assert!(w["markers"]["length"].as_u64() > Some(100), "{}", w["name"]);
    }
}

/// Switched-out time under `function` in `offcpu.folded`, in ns.
fn offcpu_ns_under(folded: &str, function: &str) -> u64 {
    folded
        .lines()
        .filter(|l| l.contains(function))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum()
}

/// A thread that sleeps 20 × 10 ms in `wait_for_input` and one that waits about 100 ms on a
/// condition variable in `wait_for_signal`: the off-CPU flamegraph has them blocked there.
/// Where the kernel refuses context-switch samples (not root and `perf_event_paranoid` 2),
/// the report says so instead.
#[test]
fn blocked_threads_are_in_the_offcpu_flamegraph_under_the_function_that_waited() {
    let run = parprof(&["--example", "offcpu_waits"], &[]);
    assert!(run.output.status.success(), "stderr:\n{}", run.stderr());
    let report = run.report();
    if report["capabilities"]["switch_stacks"]["available"] != true {
        let notes = report["notes"].to_string();
        assert!(notes.contains("off-CPU flamegraph"), "{notes}");
        assert!(!run.path("offcpu.folded").exists());
        eprintln!("context-switch samples refused here: {notes}");
        return;
    }
    let folded = std::fs::read_to_string(run.path("offcpu.folded")).expect("offcpu.folded");
    let input = offcpu_ns_under(&folded, "offcpu_waits::wait_for_input");
    assert!(
        (180_000_000..=400_000_000).contains(&input),
        "about 200 ms blocked in wait_for_input: {input} ns\n{folded}"
    );
    let signal = offcpu_ns_under(&folded, "offcpu_waits::wait_for_signal");
    assert!(
        (80_000_000..=300_000_000).contains(&signal),
        "about 100 ms blocked in wait_for_signal: {signal} ns\n{folded}"
    );
    // A sleep blocks; on a busy machine the thread is also switched out while runnable in it,
    // as it goes to sleep or wakes (a fresh-clone CI run: 46 µs `[preempted]` under
    // `clock_nanosleep` beside its 200 ms blocked): that is the thread's state there too.
    let mut blocked = 0;
    for line in folded.lines().filter(|l| l.contains("wait_for_input")) {
        let (stack, ns) = line.rsplit_once(' ').unwrap();
        assert!(stack.starts_with("poller;"), "under its thread: {line}");
        assert!(
            stack.ends_with(";[blocked]") || stack.ends_with(";[preempted]"),
            "switched out in a sleep: {line}"
        );
        if stack.ends_with(";[blocked]") {
            blocked += ns.parse::<u64>().unwrap();
        }
    }
    assert!(
        blocked >= 180_000_000,
        "a sleep blocks: {blocked} ns blocked in wait_for_input\n{folded}"
    );
}

/// std's sort calls the program's comparison: the samples in `costly_compare` have the whole
/// chain, `main` → `sort_unstable_by` → … → `costly_compare` (with `--all-frames`).
#[test]
fn a_user_callback_called_by_std_keeps_its_callers() {
    // Every frame: by default std's frames between `main` and the comparison fold into one.
    let run = parprof(&["--example", "sort_costly_compare", "--all-frames"], &[]);
    assert!(run.output.status.success(), "stderr:\n{}", run.stderr());
    let folded = std::fs::read_to_string(run.path("cpu.folded")).expect("cpu.folded");
    let (mut complete, mut total) = (0, 0);
    for line in folded.lines() {
        let (stack, weight) = line.rsplit_once(' ').unwrap();
        let weight: u64 = weight.parse().unwrap();
        if !stack.contains("sort_costly_compare::costly_compare") {
            continue;
        }
        total += weight;
        let main = stack.find("sort_costly_compare::main");
        let sort = stack.find("sort_unstable_by");
        let compare = stack.find("sort_costly_compare::costly_compare");
        if main < sort && sort < compare && main.is_some() {
            complete += weight;
        }
    }
    assert!(
        total >= 20,
        "too few samples in costly_compare: {total}\n{folded}"
    );
    assert!(
        complete * 10 >= total * 9,
        "{complete} of {total} samples reach main through the sort\n{folded}"
    );
}

/// `utf8_check` profiled with `extra` arguments: its cpu flamegraph, the run's `call_chains`,
/// and the weight of the samples inside `str::from_utf8`, with and without `count_valid` and
/// `main` above it.
fn utf8_check_samples(extra: &[&str]) -> (String, serde_json::Value, u64, u64) {
    let args: Vec<&str> = ["--example", "utf8_check"]
        .iter()
        .chain(extra)
        .copied()
        .collect();
    let run = parprof(&args, &[]);
    assert!(run.output.status.success(), "stderr:\n{}", run.stderr());
    let folded = std::fs::read_to_string(run.path("cpu.folded")).expect("cpu.folded");
    let (mut with_caller, mut total) = (0, 0);
    for line in folded.lines() {
        let (stack, weight) = line.rsplit_once(' ').expect("`stack weight`");
        let weight: u64 = weight.parse().expect("weight");
        let frames: Vec<&str> = stack.split(';').collect();
        let Some(at) = frames
            .iter()
            .position(|f| f.starts_with("core::str::converts::from_utf8"))
        else {
            continue;
        };
        total += weight;
        let above = &frames[..at];
        if above
            .iter()
            .any(|f| f.starts_with("utf8_check::count_valid"))
            && above.iter().any(|f| f.starts_with("utf8_check::main"))
        {
            with_caller += weight;
        }
    }
    (
        folded,
        run.report()["call_chains"].clone(),
        with_caller,
        total,
    )
}

/// `str::from_utf8` comes precompiled without frame pointers: the kernel's frame-pointer walk
/// from inside it skips its caller, the unwound stack copy does not.
#[test]
fn a_hot_std_function_without_frame_pointers_keeps_its_caller() {
    let (folded, chains, with_caller, total) = utf8_check_samples(&[]);
    assert!(
        total >= 50,
        "too few samples in from_utf8: {total}\n{folded}"
    );
    assert!(
        with_caller * 10 >= total * 9,
        "{with_caller} of {total} samples in from_utf8 reach count_valid and main\n{folded}"
    );
    assert!(
        chains["to_the_root"].as_u64().unwrap() * 10 >= total * 9,
        "{chains}"
    );

    // The frame-pointer walk alone loses the caller: what the test above relies on.
    let (folded, _, with_caller, total) = utf8_check_samples(&["--call-graph", "fp"]);
    assert!(
        with_caller * 2 < total,
        "frame pointers alone reached count_valid in {with_caller} of {total} samples: does this \
         toolchain's std keep frame pointers? Then this example no longer shows the difference\n{folded}"
    );
}
