//! What a diagnosis of a region says: its cause, the figures behind it, what fixing it would
//! gain. [`super::diagnoses`] makes them from a region's lifecycle.

use serde::Serialize;

/// The cause of a region's parallel overhead (the spec's six).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Code {
    TooFineGranularity,
    ExcessiveStealing,
    InsufficientParallelSlack,
    LoadImbalance,
    Oversubscription,
    BlockingInTasks,
}

impl Code {
    /// The code as `report.json` writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::TooFineGranularity => "too_fine_granularity",
            Code::ExcessiveStealing => "excessive_stealing",
            Code::InsufficientParallelSlack => "insufficient_parallel_slack",
            Code::LoadImbalance => "load_imbalance",
            Code::Oversubscription => "oversubscription",
            Code::BlockingInTasks => "blocking_in_tasks",
        }
    }
}

/// The measured figures behind a diagnosis.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evidence {
    /// What the diagnosis compares with its threshold, e.g. `tasks_per_worker_per_s`.
    pub metric: &'static str,
    pub value: f64,
    /// The overhead that opened this pair of causes (`active_overhead_share` or
    /// `inactive_overhead_share`), its value and its threshold.
    pub overhead: &'static str,
    pub overhead_share: f64,
    pub overhead_threshold: f64,
    /// The figures in words.
    pub summary: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Impact {
    /// The explained overhead ÷ workers: wall-clock time the region loses.
    pub time_lost_ns: u64,
    /// The explained overhead ÷ worker time.
    pub share_of_worker_time: f64,
    /// elapsed ÷ (elapsed − time lost), at most 1 ÷ [`UNBOUNDED_ABOVE`].
    pub speedup_if_fixed: f64,
    /// The speedup with the overhead at the low end of its measurement's uncertainty (one
    /// standard error: the states' marks, the CPU samples).
    pub speedup_low: f64,
    /// The same at the high end; `None` when that end leaves the region less than
    /// [`UNBOUNDED_ABOVE`] of its time (or the samples were too few to tell rayon's code in
    /// the tasks, which the overhead then leaves out): a share near all of it makes the
    /// speedup run away, and no such figure is promised.
    pub speedup_high: Option<f64>,
}

/// Below this share of its time left, a predicted speedup has no upper bound worth stating:
/// more than 1 ÷ this (20×) is never promised.
pub const UNBOUNDED_ABOVE: f64 = 0.05;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diagnosis {
    pub code: Code,
    pub evidence: Evidence,
    /// The threshold `evidence.value` exceeded (for `load_imbalance`: the search/wait
    /// frequency it stayed under).
    pub threshold: f64,
    pub impact: Impact,
    pub advice: String,
    /// Diagnoses that this one causes, folded under it: raised on their own they would name
    /// a symptom (`excessive_stealing` of a region whose runs make fewer tasks than it has
    /// workers: each task is stolen because idle workers wait for every one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub symptoms: Vec<Diagnosis>,
}
