//! The run's own facts, beside what the kernel and the trace recorded: the target, how it ended,
//! the harness that ran it, its rayon hooks and the options of its analysis.

use super::address_spaces::SampleAddresses;
use super::counters::CounterRecords;
use super::kernel_records::{CallChain, KernelRecords};
use super::thresholds::Thresholds;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The period of the utilization over time unless `--period` says otherwise, in ns.
pub const DEFAULT_PERIOD_NS: u64 = 1_000_000;

/// Everything a run recorded for the analysis, besides the probes' trace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recording {
    pub run: RunMeta,
    pub kernel: KernelRecords,
    pub counters: CounterRecords,
    /// What symbolising the samples needs: saved with them, so that samples whose stacks were
    /// never saved can be symbolised later. Empty for runs recorded before it was saved.
    pub addresses: SampleAddresses,
}

impl Recording {
    /// Drops what only symbolising needed, once every sample has its stack: the samples' call
    /// chains (a deep recursion's are nearly all distinct: a tenth of a long run's records in
    /// memory) and their processes. The analysis folds the stacks; a sample whose stack has no
    /// frame had an empty call chain.
    pub fn release_call_chains(&mut self) {
        if self.needs_symbols() {
            return;
        }
        let none: CallChain = Arc::from([]);
        let k = &mut self.kernel;
        for sample in k.samples.iter_mut().chain(&mut k.switch_samples) {
            sample.callchain = Arc::clone(&none);
        }
        self.addresses.sample_pids = Vec::new();
        self.addresses.switch_sample_pids = Vec::new();
    }

    /// Whether a list of samples has no stacks yet: the run was saved before its samples
    /// were symbolised, and never after.
    pub fn needs_symbols(&self) -> bool {
        let k = &self.kernel;
        k.sample_stacks.len() != k.samples.len()
            || k.switch_sample_stacks.len() != k.switch_samples.len()
    }
}

/// What the analysis cannot learn from the kernel or the trace: the target, how it was built
/// and how it ended, and the options the run was analysed with (the defaults of `report`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// The version of cargo-parprof that recorded the run.
    pub recorded_by: String,
    pub target: TargetInfo,
    pub harness: Harness,
    pub rayon_hooks: RayonHooks,
    /// Pid of the profiled process: its trace is `trace-<pid>.ppt`.
    pub child_pid: u32,
    pub exit: ExitStatus,
    /// The run was interrupted with Ctrl-C.
    pub interrupted: bool,
    pub options: RecordedOptions,
    /// Exact per-call counters asked for (method 5): the runtime wrote their results beside
    /// the trace. Runs recorded before it existed have none.
    #[serde(default)]
    pub detail: DetailRequest,
}

/// What `--slices` or `--detail full` asked the runtime for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DetailRequest {
    #[default]
    Off,
    Slices,
    Full,
}

impl Default for RunMeta {
    fn default() -> Self {
        RunMeta {
            recorded_by: env!("CARGO_PKG_VERSION").to_owned(),
            target: TargetInfo::default(),
            harness: Harness::Program,
            rayon_hooks: RayonHooks::NoRayon,
            child_pid: 0,
            exit: ExitStatus::default(),
            interrupted: false,
            options: RecordedOptions::default(),
            detail: DetailRequest::Off,
        }
    }
}

/// Whether the build records rayon's lifecycle, and why not (the build prepares the hooks:
/// [`crate::build::rayon_hooks`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RayonHooks {
    /// Built with the hooks in this rayon-core version.
    Hooked { version: String },
    /// The program does not use rayon.
    NoRayon,
    /// Built without hooks; the reason is said in the report.
    Unavailable { reason: String },
}

/// The options of the analysis and the reports that the run was recorded with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedOptions {
    pub thresholds: Thresholds,
    /// Period of the utilization over time, in ns.
    pub utilization_period_ns: u64,
    /// One root for all threads in the flamegraphs.
    pub merge_threads: bool,
}

impl Default for RecordedOptions {
    fn default() -> Self {
        RecordedOptions {
            thresholds: Thresholds::default(),
            utilization_period_ns: DEFAULT_PERIOD_NS,
            merge_threads: false,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetInfo {
    pub name: String,
    /// `bin`, `example`, `bench` or `test`.
    pub kind: String,
    pub args: Vec<String>,
    /// When the run started, in ms since the Unix epoch: `diff` tells how far apart two sides
    /// were recorded. Runs recorded before it was kept have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_unix_ms: Option<u64>,
}

/// Exactly one field is set once the caller knows how the process ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
}

/// What runs a bench's measurements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Harness {
    /// Profiled as one program.
    Program,
    Criterion,
    Divan,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::kernel_records::{CpuSample, Frame, StackTree};

    #[test]
    fn call_chains_are_released_once_every_sample_has_its_stack() {
        let sample = CpuSample {
            time_ns: 1,
            tid: 7,
            cpu: 0,
            callchain: vec![0x10, 0x20].into(),
        };
        let mut recording = Recording::default();
        recording.kernel.samples = vec![sample.clone(), sample];
        recording.addresses.sample_pids = vec![7, 7];
        // Not symbolised yet: the chains are what symbolising needs.
        let unsymbolised = recording.clone();
        recording.release_call_chains();
        assert_eq!(recording, unsymbolised);
        let main = Frame {
            function: "main".into(),
            inlined: false,
        };
        let (stacks, ids) = StackTree::of_stacks(&[vec![main.clone()], vec![main]]);
        (recording.kernel.stacks, recording.kernel.sample_stacks) = (stacks, ids.clone());
        recording.release_call_chains();
        assert!(
            recording
                .kernel
                .samples
                .iter()
                .all(|s| s.callchain.is_empty())
        );
        assert!(recording.addresses.sample_pids.is_empty());
        assert_eq!(recording.kernel.sample_stacks, ids);
        assert!(!recording.needs_symbols());
    }
}
