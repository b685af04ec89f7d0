//! The counters of a run as the run folder holds them: what `--counters` collected
//! ([`crate::record::counters`] reads them from the kernel) and what the analysis attributes
//! ([`crate::analysis::attributed_counters`], [`crate::analysis::utilization`]).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where a counter's values come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CounterSource {
    /// A hardware PMU event (absent in most virtual machines).
    Hardware,
    /// A kernel software event.
    Software,
    /// Counted from the threads' context-switch records.
    SwitchRecords,
}

/// A requested counter that could not be collected, and why (shown to the user as is).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnavailableCounter {
    pub name: String,
    pub reason: String,
}

/// One reading of a cumulative counter: the count of all threads of the program on `cpu`.
/// Packed (20 bytes, not 24): a counter derived from switch records has one per switch.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[repr(C, packed)]
pub struct CounterSample {
    pub time_ns: u64,
    pub cpu: u32,
    /// Scaled for multiplexing (see [`Scaling`]).
    pub value: f64,
}

/// How much of the time it should have counted a counter did count: `time_enabled_ns` is the
/// CPU time of the program's threads while the counter was enabled, `time_running_ns` the
/// time it counted, summed over the CPUs. Hardware counter values are scaled up by their
/// ratio (per interval between reads) when the PMU multiplexed them (`scaled`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scaling {
    pub time_enabled_ns: u64,
    pub time_running_ns: u64,
    pub scaled: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CounterSeries {
    pub name: String,
    pub source: CounterSource,
    /// Per CPU: the count of all threads of the program on that CPU, sorted by time. Read by
    /// the collector every `read_interval_ns`, or at every switch for counters derived from
    /// switch records.
    pub cpu_samples: Vec<CounterSample>,
    pub scaling: Scaling,
    /// Where `cpu_samples` are when they are not held (empty): read again from the run
    /// folder's records each time they are walked ([`Self::samples`]).
    #[serde(skip)]
    pub stored: Option<StoredSeries>,
}

impl CounterSeries {
    /// The readings, held or read again, in time order.
    pub fn samples(&self) -> Box<dyn Iterator<Item = CounterSample> + '_> {
        match &self.stored {
            Some(stored) if self.cpu_samples.is_empty() => {
                stored.source.series_samples(stored.index)
            }
            _ => Box::new(self.cpu_samples.iter().copied()),
        }
    }

    /// The program's total count: the latest reading of every CPU, summed.
    pub fn total(&self) -> f64 {
        let mut last: BTreeMap<u32, f64> = BTreeMap::new();
        for s in self.samples() {
            last.insert(s.cpu, s.value);
        }
        last.values().sum()
    }
}

/// Counter series kept outside memory (in the run folder's records), read again, in the order
/// written, each time they are walked.
pub trait SeriesSource: std::fmt::Debug + Send + Sync {
    /// The readings of the `index`-th series.
    fn series_samples(&self, index: usize) -> Box<dyn Iterator<Item = CounterSample> + '_>;
}

/// A series in a [`SeriesSource`]: equal when the same one.
#[derive(Clone, Debug)]
pub struct StoredSeries {
    pub source: Arc<dyn SeriesSource>,
    pub index: usize,
}

impl PartialEq for StoredSeries {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.source, &other.source) && self.index == other.index
    }
}

/// Cost of the collector's periodic reads, measured on the collector thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadCost {
    /// Read passes (one `read()` per CPU each).
    pub passes: u64,
    /// Wall time of all passes together.
    pub total_ns: u64,
}

/// Everything collected for `--counters`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CounterRecords {
    pub counters: Vec<CounterSeries>,
    pub unavailable: Vec<UnavailableCounter>,
    pub read_interval_ns: u64,
    pub read_cost: ReadCost,
}

impl CounterRecords {
    pub fn counter(&self, name: &str) -> Option<&CounterSeries> {
        self.counters.iter().find(|c| c.name == name)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Instructions read on CPUs 0 and 1 at 1000 and 2000 ns, then on CPU 0 alone.
    pub(crate) fn two_cpu_series() -> CounterSeries {
        let at = |time_ns, cpu, value| CounterSample {
            time_ns,
            cpu,
            value,
        };
        CounterSeries {
            name: "instructions".into(),
            source: CounterSource::Hardware,
            cpu_samples: vec![
                at(1000, 0, 2000.0),
                at(1000, 1, 1000.0),
                at(2000, 0, 2600.0),
                at(2000, 1, 1100.0),
                at(3000, 0, 2700.0),
            ],
            scaling: Scaling {
                time_enabled_ns: 300,
                time_running_ns: 250,
                scaled: true,
            },
            stored: None,
        }
    }

    #[test]
    fn the_total_sums_each_cpus_latest_reading() {
        assert_eq!(two_cpu_series().total(), 2700.0 + 1100.0);
    }
}
