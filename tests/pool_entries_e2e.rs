//! Every way into a rayon pool from outside it is a region, named where the program makes the
//! call: `spawn` of trials from a plain function on the main thread (fire and forget),
//! `spawn_fifo`, `scope` and `in_place_scope` from outside, `install` on a built pool,
//! `broadcast` and `spawn_broadcast` — each an implicit region at its call site, with its kind
//! and its tasks exact against what the program counted (`examples/spawn_trials.rs`,
//! `examples/pool_entries.rs`). And a region entered from `main` has no caller in its name.

mod common;

use common::{Run, assert_origins_add_up, codes, only_region, task_count};
use serde_json::Value;

const GLOBAL_POOL_OF_2: &[(&str, &str)] = &[("RAYON_NUM_THREADS", "2")];

/// The line of the example's source that contains `call`, which must be on one line only.
fn line_of(example: &str, call: &str) -> u64 {
    let path = common::repo_root().join(format!("examples/{example}.rs"));
    let text = std::fs::read_to_string(&path).expect("the example's source");
    let lines: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(call))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(lines.len(), 1, "`{call}` in {}: {lines:?}", path.display());
    lines[0] as u64
}

/// The region is the implicit one of `kind` at `call` in `function` of the example.
fn assert_call_site(region: &Value, example: &str, function: &str, call: &str, kind: &str) {
    let site = &region["call_site"];
    assert_eq!(
        site["function"],
        format!("{example}::{function}"),
        "{region:#}"
    );
    assert_eq!(site["file"], format!("examples/{example}.rs"), "{region:#}");
    assert_eq!(site["line"], line_of(example, call), "{region:#}");
    assert_eq!(region["kind"], kind, "{region:#}");
    assert_eq!(region["implicit"], true, "{region:#}");
    let name = region["name"].as_str().expect("a name");
    assert_eq!(
        name,
        format!(
            "{example}::{function} (examples/{example}.rs:{})",
            site["line"]
        ),
        "named by its call site, with no caller from `main`"
    );
}

/// The idle worker of `spawn_trials` is seen when it falls asleep: on a machine whose cores
/// other programs keep busy, it may yield instead for a while (see `rayon_e2e`'s
/// `profile_load_sensitive`), so a run that misses the idle time runs once more.
fn spawn_trials() -> (Run, Value) {
    let run = common::profile_example("spawn_trials", &[], GLOBAL_POOL_OF_2);
    let region = only_region(&run);
    if idle_worker_seen(&region) {
        return (run, region);
    }
    eprintln!("spawn_trials: no idle worker seen (machine busy?), running it again: {region:#}");
    let run = common::profile_example("spawn_trials", &[], GLOBAL_POOL_OF_2);
    let region = only_region(&run);
    (run, region)
}

fn idle_worker_seen(region: &Value) -> bool {
    codes(region)
        .iter()
        .any(|c| c == "load_imbalance" || c == "insufficient_parallel_slack")
}

#[test]
fn trials_spawned_from_main_are_one_region_at_the_spawn() {
    let (run, region) = spawn_trials();
    assert_call_site(
        &region,
        "spawn_trials",
        "start_trial",
        "rayon::spawn(",
        "spawn",
    );
    assert_origins_add_up(&region);
    let (trials, leaves) = (run.printed("trials"), run.printed("leaves"));
    let joins = leaves - trials;
    assert_eq!(
        task_count(&region, "tasks"),
        2 * joins + trials,
        "{region:#}"
    );
    assert_eq!(task_count(&region, "tasks_inline"), joins, "{region:#}");
    assert_eq!(task_count(&region, "tasks_injected"), trials, "{region:#}");
    assert_eq!(
        region["instances"], trials,
        "each spawned job is a run: {region:#}"
    );
    assert!(
        idle_worker_seen(&region),
        "the heavy trial left a worker idle: {region:#}"
    );
}

/// `pool_entries MODE`: its only region, checked at its call site, and its tasks.
fn entry(mode: &str, call: &str, kind: &str) -> (Run, Value) {
    let run = common::profile_example("pool_entries", &["--", mode], GLOBAL_POOL_OF_2);
    let region = only_region(&run);
    assert_call_site(&region, "pool_entries", mode, call, kind);
    assert_origins_add_up(&region);
    (run, region)
}

#[test]
fn spawn_fifo_from_outside_is_a_region_of_its_jobs() {
    let (run, region) = entry("spawn_fifo", "rayon::spawn_fifo(", "spawn");
    let pieces = run.printed("pieces");
    assert_eq!(task_count(&region, "tasks"), pieces, "{region:#}");
    assert_eq!(task_count(&region, "tasks_injected"), pieces, "{region:#}");
    assert_eq!(region["instances"], pieces, "{region:#}");
}

#[test]
fn scope_from_outside_is_a_region() {
    let (run, region) = entry("scope", "rayon::scope(", "scope");
    let pieces = run.printed("pieces");
    assert_eq!(task_count(&region, "tasks"), pieces + 1, "{region:#}");
    assert_eq!(task_count(&region, "tasks_injected"), 1, "{region:#}");
}

#[test]
fn in_place_scope_from_outside_is_a_region() {
    let (run, region) = entry("in_place_scope", "rayon::in_place_scope(", "scope");
    let pieces = run.printed("pieces");
    assert_eq!(task_count(&region, "tasks"), pieces, "{region:#}");
    assert_eq!(task_count(&region, "tasks_injected"), pieces, "{region:#}");
}

#[test]
fn install_on_a_built_pool_is_a_region() {
    let (run, region) = entry("install", "pool.install(|| {", "install");
    let joins = run.printed("pieces") - 1;
    assert_eq!(task_count(&region, "tasks"), 2 * joins + 1, "{region:#}");
    assert_eq!(task_count(&region, "tasks_inline"), joins, "{region:#}");
    assert_eq!(task_count(&region, "tasks_injected"), 1, "{region:#}");
}

#[test]
fn broadcast_is_a_region_of_one_task_per_thread() {
    let (run, region) = entry("broadcast", "rayon::broadcast(", "broadcast");
    let threads = run.printed("threads");
    assert_eq!(run.printed("pieces"), threads);
    assert_eq!(task_count(&region, "tasks"), threads, "{region:#}");
    assert_eq!(task_count(&region, "tasks_injected"), threads, "{region:#}");
}

#[test]
fn spawn_broadcast_is_a_region_of_one_run_per_thread() {
    let (run, region) = entry("spawn_broadcast", "rayon::spawn_broadcast(", "broadcast");
    let threads = run.printed("threads");
    assert_eq!(task_count(&region, "tasks"), threads, "{region:#}");
    assert_eq!(task_count(&region, "tasks_injected"), threads, "{region:#}");
    assert_eq!(region["instances"], threads, "{region:#}");
}

#[test]
fn a_region_entered_in_main_has_no_caller() {
    let run = common::profile_example("pool_entries", &["--", "install_in_main"], GLOBAL_POOL_OF_2);
    let region = only_region(&run);
    let line = line_of("pool_entries", "pool.install(|| rayon::join(spin_piece");
    assert_eq!(
        region["name"],
        format!("pool_entries::main (examples/pool_entries.rs:{line})"),
        "no `from call_once`: {region:#}"
    );
    assert_eq!(region["call_site"]["caller"], Value::Null, "{region:#}");
    assert_eq!(region["kind"], "install", "{region:#}");
    // The entry, and a join's two halves.
    assert_eq!(task_count(&region, "tasks"), 3, "{region:#}");
    assert_eq!(task_count(&region, "tasks_injected"), 1, "{region:#}");
}
