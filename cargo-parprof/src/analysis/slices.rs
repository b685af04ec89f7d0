//! Method 5 of the spec: the reduction of the slices' results (or of `--detail full`'s) into
//! exact per-call counter values per probe, set beside method 3's attributed estimates.
//!
//! The runtime measured each probe call it saw in a slice exactly (counters read at its entry
//! and exit); what is estimated here is only how far the slices' calls stand for all calls: the
//! mean per call is scaled to the run by the probe's exact call count from the trace.

use super::attributed_counters::{CountersAnalysis, ItemKind};
use super::model::{ProbeSummary, ThreadSummary};
use parprof_rt::slice_results::{DetailMode, Slice, SliceEnd, SliceResults};
use serde::Serialize;
use std::collections::BTreeMap;

/// What the slices measured, merged per probe.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SlicesAnalysis {
    pub mode: SliceMode,
    pub config: SliceSettings,
    /// Slices forked and how many of them ended before their length.
    pub taken: u64,
    pub ended_early: EndedEarly,
    /// The system calls that ended slices, most frequent first.
    pub forbidden_syscalls: Vec<ForbiddenSyscall>,
    /// Checkpoints the first-stage timer armed, and what became of them.
    pub checkpoints: CheckpointCounts,
    /// CPU time run in slices (or, with `full`, by the program's measured threads).
    pub cpu_ns: u64,
    /// `cpu_ns` ÷ the program's CPU time over the run (`None`: the latter was not measured).
    pub coverage: Option<f64>,
    /// The counters read in the slices, in column order; those that could not be opened.
    pub counters: Vec<String>,
    pub unavailable: Vec<UnavailableDetail>,
    /// One entry per probe seen in a slice, the most observed first.
    pub probes: Vec<SliceProbe>,
    /// The kernel followed the slices' processes with the program's (a kernel without
    /// `inherit_thread`): the program-wide counters of method 3 include the slices' work.
    pub counted_with_program: bool,
}

/// How the calls were measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SliceMode {
    /// In forked slices of the run (`--slices`).
    Slices,
    /// Every call of the run, in the program itself (`--detail full`).
    Full,
}

impl SliceMode {
    pub fn label(self) -> &'static str {
        match self {
            SliceMode::Slices => "slices",
            SliceMode::Full => "full",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SliceSettings {
    pub load_threshold: f64,
    pub slice_threshold: u32,
    pub slice_length_ns: u64,
    pub period_ns: u64,
    pub usable_cpus: u32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EndedEarly {
    /// Ran out of wall time while using its CPU time: the machine was busy.
    pub timeout: u64,
    /// Waited instead of running (a lock held by a thread the slice does not have, a `join`
    /// whose other half was stolen, a read that would wait).
    pub blocked: u64,
    /// Made a system call that could have an effect outside it (open, send, kill, spawn…).
    pub forbidden_syscall: u64,
    /// Wrote memory the program shares (held read-only in a slice, so nothing was written).
    pub shared_write: u64,
    /// Ended by a signal before writing its results (its calls so far are kept).
    pub killed: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ForbiddenSyscall {
    pub syscall: i64,
    pub name: String,
    pub slices: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CheckpointCounts {
    pub armed: u64,
    pub forked: u64,
    /// Skipped because running program threads ÷ CPUs was at the load threshold.
    pub skipped_load: u64,
    /// Skipped because the slice threshold was reached.
    pub skipped_slices: u64,
    pub fork_failed: u64,
    /// Wall time the program's threads spent in checkpoints (removed from probe times).
    pub cost_ns: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UnavailableDetail {
    pub counter: String,
    pub reason: String,
}

/// A probe's exact per-call values from the slices.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SliceProbe {
    pub site: u32,
    pub name: String,
    /// Calls measured whole in slices (entry and exit both inside one slice).
    pub calls_observed: u64,
    /// Calls of the probe in the whole run (from the trace; `None`: not in the trace).
    pub calls_total: Option<u64>,
    /// Mean per call, by counter name.
    pub counters: BTreeMap<String, f64>,
    /// Standard deviation per call, by counter name.
    pub spread: BTreeMap<String, f64>,
    /// Mean × the run's calls: the estimated total over the run, by counter name.
    pub estimated_total: BTreeMap<String, f64>,
    /// Method 3's attribution of the same counters to the same probe, per call, with its error
    /// bound, where both measured the counter.
    pub attributed: BTreeMap<String, AttributedPerCall>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AttributedPerCall {
    pub value: f64,
    /// The part of the shared deltas that went to other work, per call: the attributed value
    /// can be off by up to this much.
    pub error: f64,
}

/// Merges slices into per-site figures: the seam for other detailed measurements (a reduction
/// sees every slice once, in the order the runtime wrote them).
pub trait Reduction {
    type Output;
    fn add(&mut self, slice: &Slice);
    fn finish(self) -> Self::Output;
}

/// Per-site sums of calls, counter values and their squares: means and spreads per call.
#[derive(Clone, Debug, Default)]
pub struct PerCallMoments {
    columns: usize,
    sites: BTreeMap<u32, SiteMoments>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiteMoments {
    pub calls: u64,
    pub sums: Vec<f64>,
    pub sums_of_squares: Vec<f64>,
}

impl SiteMoments {
    /// Mean and standard deviation per call of column `i` (`None` without calls).
    pub fn mean_and_spread(&self, i: usize) -> Option<(f64, f64)> {
        if self.calls == 0 {
            return None;
        }
        let n = self.calls as f64;
        let mean = self.sums.get(i)? / n;
        let variance = (self.sums_of_squares.get(i)? / n - mean * mean).max(0.0);
        Some((mean, variance.sqrt()))
    }
}

impl PerCallMoments {
    pub fn new(columns: usize) -> Self {
        PerCallMoments {
            columns,
            sites: BTreeMap::new(),
        }
    }
}

impl Reduction for PerCallMoments {
    type Output = BTreeMap<u32, SiteMoments>;

    fn add(&mut self, slice: &Slice) {
        for stats in &slice.sites {
            let site = self.sites.entry(stats.site).or_insert_with(|| SiteMoments {
                calls: 0,
                sums: vec![0.0; self.columns],
                sums_of_squares: vec![0.0; self.columns],
            });
            site.calls += stats.calls;
            // A file with fewer columns than it declares adds what it has.
            for (sum, value) in site.sums.iter_mut().zip(&stats.sums) {
                *sum += value;
            }
            for (sum, value) in site.sums_of_squares.iter_mut().zip(&stats.sums_of_squares) {
                *sum += value;
            }
        }
    }

    fn finish(self) -> Self::Output {
        self.sites
    }
}

/// Reduces `results` with the figures of the other methods: probe names and call counts,
/// method 3's attributed counters, and the threads' CPU time for the coverage.
pub fn analyse(
    results: &SliceResults,
    probes: &[ProbeSummary],
    threads: &[ThreadSummary],
    counters: Option<&CountersAnalysis>,
) -> SlicesAnalysis {
    let mut moments = PerCallMoments::new(results.counters.len());
    for slice in &results.slices {
        moments.add(slice);
    }
    let columns: Vec<String> = results.counters.iter().map(|c| c.name.clone()).collect();
    let mut slice_probes: Vec<SliceProbe> = moments
        .finish()
        .into_iter()
        .filter(|(_, m)| m.calls > 0)
        .map(|(site, m)| slice_probe(site, &m, &columns, probes, counters))
        .collect();
    slice_probes.sort_by(|a, b| {
        b.calls_observed
            .cmp(&a.calls_observed)
            .then(a.name.cmp(&b.name))
    });
    let cpu_ns: u64 = results.slices.iter().map(|s| s.cpu_ns).sum();
    SlicesAnalysis {
        mode: match results.mode {
            DetailMode::Slices => SliceMode::Slices,
            DetailMode::Full => SliceMode::Full,
        },
        config: SliceSettings {
            load_threshold: results.config.load_threshold,
            slice_threshold: results.config.slice_threshold,
            slice_length_ns: results.config.length_ns,
            period_ns: results.config.period_ns,
            usable_cpus: results.config.usable_cpus,
        },
        taken: results
            .slices
            .iter()
            .filter(|s| s.end != SliceEnd::Full)
            .count() as u64,
        ended_early: ended_early(&results.slices),
        forbidden_syscalls: forbidden_syscalls(&results.slices),
        checkpoints: CheckpointCounts {
            armed: results.checkpoints.armed,
            forked: results.checkpoints.forked,
            skipped_load: results.checkpoints.skipped_load,
            skipped_slices: results.checkpoints.skipped_slices,
            fork_failed: results.checkpoints.fork_failed,
            cost_ns: results.checkpoints.cost_ns,
        },
        cpu_ns,
        coverage: program_cpu_ns(threads, counters)
            .filter(|&total| total > 0)
            .map(|total| (cpu_ns as f64 / total as f64).min(1.0)),
        counters: columns,
        unavailable: results
            .unavailable
            .iter()
            .map(|u| UnavailableDetail {
                counter: u.name.clone(),
                reason: u.reason.clone(),
            })
            .collect(),
        probes: slice_probes,
        counted_with_program: false,
    }
}

fn slice_probe(
    site: u32,
    moments: &SiteMoments,
    columns: &[String],
    probes: &[ProbeSummary],
    counters: Option<&CountersAnalysis>,
) -> SliceProbe {
    let probe = probes.iter().find(|p| p.site == site);
    let calls_total = probe.map(|p| p.calls);
    let mut out = SliceProbe {
        site,
        name: probe.map_or_else(|| format!("site {site}"), |p| p.name.clone()),
        calls_observed: moments.calls,
        calls_total,
        counters: BTreeMap::new(),
        spread: BTreeMap::new(),
        estimated_total: BTreeMap::new(),
        attributed: BTreeMap::new(),
    };
    for (i, name) in columns.iter().enumerate() {
        let Some((mean, spread)) = moments.mean_and_spread(i) else {
            continue;
        };
        out.counters.insert(name.clone(), mean);
        out.spread.insert(name.clone(), spread);
        if let Some(calls) = calls_total {
            out.estimated_total
                .insert(name.clone(), mean * calls as f64);
        }
        if let Some(attributed) = attributed_per_call(counters, site, name) {
            out.attributed.insert(name.clone(), attributed);
        }
    }
    out
}

/// Method 3's value of `counter` for probe `site`, per call it was spread over.
fn attributed_per_call(
    counters: Option<&CountersAnalysis>,
    site: u32,
    counter: &str,
) -> Option<AttributedPerCall> {
    let item = counters?
        .items
        .iter()
        .find(|i| i.kind == ItemKind::Probe && i.site == site)?;
    let x = item.counters.iter().find(|c| c.counter == counter)?;
    (item.spans > 0).then(|| AttributedPerCall {
        value: x.value / item.spans as f64,
        error: x.error / item.spans as f64,
    })
}

fn ended_early(slices: &[Slice]) -> EndedEarly {
    let mut ended = EndedEarly::default();
    for slice in slices {
        match slice.end {
            SliceEnd::Completed | SliceEnd::Full => {}
            SliceEnd::Timeout => ended.timeout += 1,
            SliceEnd::Blocked => ended.blocked += 1,
            SliceEnd::ForbiddenSyscall { .. } => ended.forbidden_syscall += 1,
            SliceEnd::SharedWrite => ended.shared_write += 1,
            SliceEnd::Killed => ended.killed += 1,
        }
    }
    ended
}

fn forbidden_syscalls(slices: &[Slice]) -> Vec<ForbiddenSyscall> {
    let mut by_number: BTreeMap<i64, u64> = BTreeMap::new();
    for slice in slices {
        if let SliceEnd::ForbiddenSyscall { syscall } = slice.end {
            *by_number.entry(syscall).or_default() += 1;
        }
    }
    let mut list: Vec<ForbiddenSyscall> = by_number
        .into_iter()
        .map(|(syscall, slices)| ForbiddenSyscall {
            syscall,
            name: syscall_name(syscall),
            slices,
        })
        .collect();
    list.sort_by(|a, b| b.slices.cmp(&a.slices).then(a.syscall.cmp(&b.syscall)));
    list
}

/// The system call's name on this machine's architecture (the run folder is analysed where
/// it was recorded, or on a machine of the same kind).
fn syscall_name(number: i64) -> String {
    usize::try_from(number)
        .ok()
        .and_then(syscalls::Sysno::new)
        .map_or_else(|| format!("syscall {number}"), |s| s.name().to_owned())
}

/// The program's CPU time over the run: its threads' on-CPU time (from the switch records),
/// else the task-clock counter of method 3.
fn program_cpu_ns(threads: &[ThreadSummary], counters: Option<&CountersAnalysis>) -> Option<u64> {
    let program: Vec<&ThreadSummary> = threads
        .iter()
        .filter(|t| t.role != parprof_rt::trace::WRITER_THREAD_NAME)
        .collect();
    if !program.is_empty() && program.iter().all(|t| t.on_cpu_ns.is_some()) {
        return Some(program.iter().filter_map(|t| t.on_cpu_ns).sum());
    }
    counters?
        .collected
        .iter()
        .find(|c| c.name == "task-clock")
        .map(|c| c.total as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use parprof_rt::slice_results::SiteStats;

    fn slice(end: SliceEnd, sites: Vec<SiteStats>) -> Slice {
        Slice {
            tid: 1,
            pid: Some(2),
            cpu: Some(1),
            start_ts: 0,
            cpu_ns: 10_000_000,
            wall_ns: 11_000_000,
            end,
            sites,
        }
    }

    fn stats(site: u32, calls: u64, values: &[f64]) -> SiteStats {
        SiteStats {
            site,
            calls,
            sums: values.iter().map(|v| v * calls as f64).collect(),
            sums_of_squares: values.iter().map(|v| v * v * calls as f64).collect(),
        }
    }

    #[test]
    fn moments_merge_slices_into_means_and_spreads() {
        let mut m = PerCallMoments::new(2);
        m.add(&slice(
            SliceEnd::Completed,
            vec![stats(3, 10, &[100.0, 4.0])],
        ));
        m.add(&slice(SliceEnd::Blocked, vec![stats(3, 30, &[200.0, 4.0])]));
        let sites = m.finish();
        let site = &sites[&3];
        assert_eq!(site.calls, 40);
        let (mean, spread) = site.mean_and_spread(0).unwrap();
        assert!((mean - 175.0).abs() < 1e-9, "{mean}");
        // 10 calls at 100 and 30 at 200: standard deviation sqrt(0.25·0.75)·100.
        assert!((spread - 43.30127).abs() < 1e-4, "{spread}");
        assert_eq!(site.mean_and_spread(1), Some((4.0, 0.0)));
        assert_eq!(site.mean_and_spread(2), None);
    }

    #[test]
    fn ends_are_counted_by_reason_and_syscalls_named() {
        let slices = vec![
            slice(SliceEnd::Completed, vec![]),
            slice(SliceEnd::Timeout, vec![]),
            slice(SliceEnd::Blocked, vec![]),
            slice(SliceEnd::Blocked, vec![]),
            slice(SliceEnd::ForbiddenSyscall { syscall: 257 }, vec![]),
            slice(SliceEnd::ForbiddenSyscall { syscall: 257 }, vec![]),
            slice(SliceEnd::ForbiddenSyscall { syscall: 62 }, vec![]),
            slice(SliceEnd::SharedWrite, vec![]),
            slice(SliceEnd::Killed, vec![]),
        ];
        assert_eq!(
            ended_early(&slices),
            EndedEarly {
                timeout: 1,
                blocked: 2,
                forbidden_syscall: 3,
                shared_write: 1,
                killed: 1
            }
        );
        let syscalls = forbidden_syscalls(&slices);
        assert_eq!(syscalls[0].slices, 2);
        assert_eq!(syscalls[0].syscall, 257);
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!(syscalls[0].name, "openat");
            assert_eq!(syscalls[1].name, "kill");
        }
        assert_eq!(syscall_name(-1), "syscall -1");
    }
}
