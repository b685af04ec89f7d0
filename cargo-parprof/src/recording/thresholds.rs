//! The thresholds of the diagnoses: options of the analysis, recorded with the run so that
//! `cargo parprof report` diagnoses it as it was diagnosed.

use serde::{Deserialize, Serialize};

/// Thresholds of the diagnoses; every field is configurable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// LQ + GS as a share of worker time above which causes 1 and 2 are looked for. Default
    /// 0.10: a well-tuned region spends a few percent finding its tasks.
    pub active_overhead: f64,
    /// W (while the region runs) as a share of worker time above which causes 3 and 4 are
    /// looked for. Default 0.10: the tail of a region, where the last tasks run, is usually
    /// well under a tenth of it.
    pub inactive_overhead: f64,
    /// Local + stolen tasks per worker per second. Default 400,000 (the spec's: a task shorter
    /// than ~5,000 cycles at 2 GHz costs more to schedule than it gains).
    pub tasks_per_worker_per_s: f64,
    /// Stolen tasks per local task. Default 1 (the spec's: more stolen than local).
    pub stolen_per_local: f64,
    /// GS→GS + GS→W transitions per worker per second. Default 5,000. A worker that sleeps
    /// once at the end of its share makes 34 of them (rayon's 33 failed rounds, then the
    /// sleep); 5,000 per second means it cycles through search and sleep more than ~150 times
    /// a second, i.e. it keeps being woken up for work that is gone.
    pub search_wait_per_worker_per_s: f64,
    /// Time switched out while runnable in UC, LQ or GS, as a share of worker time, above
    /// which a region is `oversubscription`. Default 0.10: on a machine with a CPU per worker
    /// a worker waits for a CPU only in short moments.
    pub preempted: f64,
    /// UC time blocked (switched out voluntarily: a lock, a channel, I/O, a sleep), as a share
    /// of worker time, above which a region is `blocking_in_tasks`. Default 0.10, as for
    /// preemption: time a worker holds a task it cannot run.
    #[serde(default = "default_blocked")]
    pub blocked: f64,
    /// Regions that ran for less than this in all (ns) are not diagnosed: a worker that
    /// starts a few hundred microseconds late is most of such a region, and there is
    /// nothing to win. Default 1 ms.
    pub min_elapsed_ns: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            active_overhead: 0.10,
            inactive_overhead: 0.10,
            tasks_per_worker_per_s: 400_000.0,
            stolen_per_local: 1.0,
            search_wait_per_worker_per_s: 5_000.0,
            preempted: 0.10,
            blocked: default_blocked(),
            min_elapsed_ns: 1_000_000,
        }
    }
}

fn default_blocked() -> f64 {
    0.10
}
