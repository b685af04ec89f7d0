//! Method 4 of the specification: parallelism over time.
//!
//! For every period of the run (default 1 ms) and every CPU the program used:
//! - **executed**: the program's work on that CPU in the period. Without a work counter this
//!   is the time a thread of the program was switched in on the CPU (from the kernel's switch
//!   records), in ns. With a counter (instructions where hardware counters exist), each
//!   counter delta read on a CPU ([`CpuWork`]) is spread over the time the program's threads
//!   were switched in on that CPU within the delta's interval, so a CPU shared with other
//!   programs is pro-rated to the program's part.
//! - **available**: executed plus the idle **holes** attributable to the program.
//!
//! How holes are attributed with the data an unprivileged user has: the kernel reports the
//! program's own context switches (`PERF_RECORD_SWITCH`: thread, CPU, and whether a
//! switch-out was a preemption) but not what else ran on a CPU (that needs the `sched`
//! tracepoints, i.e. root). So, on each CPU the program ran on at any time during the run:
//! - after a **preempted** switch-out, the CPU is taken by someone else (another runnable
//!   thread took it) until a thread of the program is switched in there again: not a hole;
//! - after a **voluntary** switch-out (the thread blocked: sleep, lock, a rayon worker going
//!   to sleep), and before the first record on the CPU, the CPU counts as a hole until a
//!   thread of the program is switched in there: the program left the slot unused, whether
//!   the CPU then idled or ran another process cannot be seen without root;
//! - CPUs the program never ran on are not counted (it was not given them, e.g. by affinity,
//!   or never needed them).
//!
//! With a work counter, a hole's length is converted into work at the program's mean rate on
//! that CPU over the run (work per switched-in ns; on a CPU with no work, the mean over all
//! CPUs).

use super::note::{MissingNote, Note, ResolutionNote};
use crate::recording::counters::{CounterRecords, CounterSeries};
use crate::recording::kernel_records::{Capability, SwitchKind, SwitchWalk};
use serde::Serialize;
use std::collections::BTreeMap;

/// Most periods in a report (about 100 s at 1 ms): a longer run gets periods that are a
/// multiple of the one asked for, so that the report and the plot stay small.
pub const MAX_PERIODS: u64 = 100_000;
/// The work counter where the machine has it; on-CPU time otherwise.
pub const WORK_COUNTER: &str = "instructions";

/// An amount of work (a counter delta) done by the program on `cpu` within
/// `[start_ns, end_ns]`, e.g. from two consecutive reads of a per-CPU counter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuWork {
    pub cpu: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub amount: f64,
}

/// The work `series` counted on each CPU between consecutive readings.
pub fn cpu_work(series: &CounterSeries) -> Vec<CpuWork> {
    let mut last: BTreeMap<u32, (u64, f64)> = BTreeMap::new();
    let mut out = Vec::new();
    for s in series.samples() {
        if let Some((t, v)) = last.insert(s.cpu, (s.time_ns, s.value))
            && s.time_ns > t
        {
            out.push(CpuWork {
                cpu: s.cpu,
                start_ns: t,
                end_ns: s.time_ns,
                amount: (s.value - v).max(0.0),
            });
        }
    }
    out
}

/// A work counter and its deltas.
#[derive(Clone, Copy, Debug)]
pub struct WorkCounter<'a> {
    /// The counter's name, e.g. `instructions`: the unit of the result.
    pub name: &'a str,
    pub deltas: &'a [CpuWork],
}

#[derive(Clone, Debug)]
pub struct UtilizationInput<'a> {
    /// The program's switch records, sorted by time.
    pub switches: &'a dyn SwitchWalk,
    /// The run, on `CLOCK_MONOTONIC` ns: periods start at `start_ns`.
    pub start_ns: u64,
    pub end_ns: u64,
    pub period_ns: u64,
    /// `None`: work is switched-in time (ns).
    pub work: Option<WorkCounter<'a>>,
}

/// Unit of the figures when no work counter is used.
pub const ON_CPU_UNIT: &str = "ns";

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Utilization {
    pub period_ns: u64,
    /// `ns` of on-CPU time, or the name of the work counter.
    pub unit: String,
    /// `CLOCK_MONOTONIC` ns of `t_ns = 0`, the start of the run.
    pub origin_ns: u64,
    /// The CPUs the program ran on, in the order of every `Period::per_cpu`.
    pub cpus: Vec<u32>,
    pub periods: Vec<Period>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Period {
    /// Start of the period, relative to `origin_ns`.
    pub t_ns: u64,
    pub executed: f64,
    pub available: f64,
    /// Per CPU, in the order of `Utilization::cpus`; left out of JSON to keep the report
    /// small (periods × CPUs).
    #[serde(skip)]
    pub per_cpu: Vec<CpuPeriod>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CpuPeriod {
    pub executed: f64,
    pub available: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CpuState {
    /// A thread of the program is switched in.
    Program,
    /// Taken by another thread after preempting the program's.
    Taken,
    /// Left by the program: a hole.
    Hole,
}

/// Per CPU, the program's switched-in intervals and the holes, both sorted.
#[derive(Default, Debug)]
struct CpuTimeline {
    on: Vec<(u64, u64)>,
    holes: Vec<(u64, u64)>,
}

impl CpuTimeline {
    fn on_ns(&self) -> u64 {
        self.on.iter().map(|(a, b)| b - a).sum()
    }
}

fn timelines(switches: &dyn SwitchWalk, start: u64, end: u64) -> BTreeMap<u32, CpuTimeline> {
    // Per CPU: the current state and since when; `None` until the CPU's first record.
    let mut state: BTreeMap<u32, Option<(CpuState, u64)>> = BTreeMap::new();
    let mut out: BTreeMap<u32, CpuTimeline> = BTreeMap::new();
    let close = |out: &mut BTreeMap<u32, CpuTimeline>, cpu: u32, s: CpuState, a: u64, b: u64| {
        let (a, b) = (a.clamp(start, end), b.clamp(start, end));
        if b <= a {
            return;
        }
        let tl = out.entry(cpu).or_default();
        match s {
            CpuState::Program => tl.on.push((a, b)),
            CpuState::Hole => tl.holes.push((a, b)),
            CpuState::Taken => {}
        }
    };
    for s in switches.walk() {
        let current = state.entry(s.cpu).or_insert(None);
        let (previous, since) = match *current {
            Some(p) => p,
            // The first record tells what the CPU did before it: a switch-out means one of
            // our threads was running since the start, a switch-in that none was.
            None if s.kind == SwitchKind::In => (CpuState::Hole, start),
            None => (CpuState::Program, start),
        };
        let next = match s.kind {
            SwitchKind::In => CpuState::Program,
            SwitchKind::OutPreempted => CpuState::Taken,
            SwitchKind::OutVoluntary => CpuState::Hole,
        };
        // Two switch-ins in a row (a lost switch-out) just continue the program's interval.
        if previous == next && next == CpuState::Program {
            *current = Some((previous, since));
            continue;
        }
        *current = Some((next, s.time_ns.max(since)));
        close(&mut out, s.cpu, previous, since, s.time_ns);
    }
    for (cpu, st) in state {
        if let Some((s, since)) = st {
            close(&mut out, cpu, s, since, end);
        }
    }
    // A CPU the program never ran on is not one it used.
    out.retain(|_, tl| !tl.on.is_empty());
    out
}

/// Adds `amount` spread evenly over `[a, b)` to the periods it overlaps.
fn add_spread(bins: &mut [f64], origin: u64, period: u64, a: u64, b: u64, amount: f64) {
    if b <= a {
        return;
    }
    let per_ns = amount / (b - a) as f64;
    // Only the part within the bins counts: the loop is bounded by them, however far a
    // corrupt time lies.
    let bins_end = origin.saturating_add((bins.len() as u64).saturating_mul(period));
    let (a, b) = (a.max(origin), b.min(bins_end));
    let mut t = a;
    while t < b {
        let index = ((t - origin) / period) as usize;
        let bin_end = origin + (index as u64 + 1) * period;
        let upto = bin_end.min(b);
        if let Some(bin) = bins.get_mut(index) {
            *bin += (upto - t) as f64 * per_ns;
        }
        t = upto;
    }
}

#[cfg(test)]
mod spread_tests {
    use super::add_spread;

    #[test]
    fn a_spread_is_cut_to_the_bins_however_far_its_end() {
        let mut bins = vec![0.0; 4];
        // 1 per ns from 5 to u64::MAX: only [10, 50) is in the bins (origin 10, period 10).
        add_spread(&mut bins, 10, 10, 5, u64::MAX, (u64::MAX - 5) as f64);
        assert!(bins.iter().all(|&b| (b - 10.0).abs() < 1e-6), "{bins:?}");
        let mut bins = vec![0.0; 2];
        add_spread(&mut bins, 10, 10, 12, 18, 6.0);
        assert_eq!(bins, vec![6.0, 0.0]);
    }
}

/// Length of the overlap of `[a, b)` with each of `intervals` (sorted, disjoint), summed.
fn overlap_ns(intervals: &[(u64, u64)], a: u64, b: u64) -> u64 {
    let first = intervals.partition_point(|&(_, e)| e <= a);
    intervals[first..]
        .iter()
        .take_while(|&&(s, _)| s < b)
        .map(|&(s, e)| e.min(b).saturating_sub(s.max(a)))
        .sum()
}

/// What the utilization of a whole run is computed from.
pub struct RunRecords<'a> {
    /// The program's switch records, sorted by time.
    pub switches: &'a dyn SwitchWalk,
    /// Whether the switch records were collected, and if not why.
    pub switch_records: &'a Capability,
    pub counters: &'a CounterRecords,
    /// The run on `CLOCK_MONOTONIC` ns.
    pub start_ns: u64,
    pub end_ns: u64,
    /// The period asked for.
    pub period_ns: u64,
}

/// The utilization of a run: `instructions` as the work where it was collected, on-CPU time
/// otherwise. `None` (with the reason in `notes`) without switch records, which tell when the
/// program ran where.
pub fn of_run(run: &RunRecords<'_>, notes: &mut Vec<Note>) -> Option<Utilization> {
    if !run.switch_records.available {
        notes.push(Note::Missing(MissingNote::Utilization {
            reason: run.switch_records.reason.clone(),
        }));
        return None;
    }
    if run.end_ns <= run.start_ns || run.switches.walk().next().is_none() {
        return None;
    }
    let asked = run.period_ns.max(1);
    let periods = (run.end_ns - run.start_ns).div_ceil(asked);
    let period_ns = if periods > MAX_PERIODS {
        let period_ns = asked.saturating_mul(periods.div_ceil(MAX_PERIODS));
        notes.push(Note::Resolution(ResolutionNote::UtilizationPeriodWidened {
            period_ns,
            asked_ns: asked,
            max_periods: MAX_PERIODS,
        }));
        period_ns
    } else {
        asked
    };
    let deltas = run.counters.counter(WORK_COUNTER).map(cpu_work);
    Some(utilization(&UtilizationInput {
        switches: run.switches,
        start_ns: run.start_ns,
        end_ns: run.end_ns,
        period_ns,
        work: deltas.as_deref().map(|deltas| WorkCounter {
            name: WORK_COUNTER,
            deltas,
        }),
    }))
}

pub fn utilization(input: &UtilizationInput<'_>) -> Utilization {
    let period = input.period_ns.max(1);
    let (start, end) = (input.start_ns, input.end_ns.max(input.start_ns));
    let n_periods = (end - start).div_ceil(period) as usize;
    let cpus = timelines(input.switches, start, end);

    // Per CPU: executed work and holes (in ns) per period.
    let mut executed: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    let mut hole_ns: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for (&cpu, tl) in &cpus {
        let h = hole_ns.entry(cpu).or_insert_with(|| vec![0.0; n_periods]);
        for &(a, b) in &tl.holes {
            add_spread(h, start, period, a, b, (b - a) as f64);
        }
        let e = executed.entry(cpu).or_insert_with(|| vec![0.0; n_periods]);
        if input.work.is_none() {
            for &(a, b) in &tl.on {
                add_spread(e, start, period, a, b, (b - a) as f64);
            }
        }
    }

    // Work per switched-in ns, per CPU, to convert holes into work (1 without a counter).
    let hole_rate = match input.work {
        Some(work) => spread_work(&work, &cpus, &mut executed, (start, end), period),
        None => BTreeMap::new(),
    };

    let periods = (0..n_periods)
        .map(|i| {
            let per_cpu: Vec<CpuPeriod> = cpus
                .keys()
                .map(|cpu| {
                    let done = executed.get(cpu).map_or(0.0, |v| v[i]);
                    let holes = hole_ns.get(cpu).map_or(0.0, |v| v[i]);
                    CpuPeriod {
                        executed: done,
                        available: done + holes * hole_rate.get(cpu).copied().unwrap_or(1.0),
                    }
                })
                .collect();
            Period {
                t_ns: i as u64 * period,
                executed: per_cpu.iter().map(|c| c.executed).sum(),
                available: per_cpu.iter().map(|c| c.available).sum(),
                per_cpu,
            }
        })
        .collect();
    Utilization {
        period_ns: period,
        unit: input.work.map_or(ON_CPU_UNIT, |w| w.name).to_string(),
        origin_ns: start,
        cpus: cpus.keys().copied().collect(),
        periods,
    }
}

/// Spreads the work counter's deltas over the periods of each CPU's switched-in time, into
/// `executed`; returns each CPU's work per switched-in ns (the mean where a CPU has none).
fn spread_work(
    work: &WorkCounter<'_>,
    cpus: &BTreeMap<u32, CpuTimeline>,
    executed: &mut BTreeMap<u32, Vec<f64>>,
    (start, end): (u64, u64),
    period: u64,
) -> BTreeMap<u32, f64> {
    let mut total_work: BTreeMap<u32, f64> = BTreeMap::new();
    for w in work.deltas {
        let (Some(tl), Some(bins)) = (cpus.get(&w.cpu), executed.get_mut(&w.cpu)) else {
            continue;
        };
        let (a, b) = (w.start_ns.max(start), w.end_ns.min(end));
        let whole = w.end_ns.saturating_sub(w.start_ns);
        if b <= a || whole == 0 {
            continue;
        }
        // The part of the delta inside the run, if the delta sticks out of it.
        let amount = w.amount * (b - a) as f64 / whole as f64;
        *total_work.entry(w.cpu).or_default() += amount;
        let on = overlap_ns(&tl.on, a, b);
        if on == 0 {
            // No switch record says when: spread it evenly.
            add_spread(bins, start, period, a, b, amount);
            continue;
        }
        let first = tl.on.partition_point(|&(_, e)| e <= a);
        for &(s, e) in tl.on[first..].iter().take_while(|&&(s, _)| s < b) {
            let (s, e) = (s.max(a), e.min(b));
            add_spread(
                bins,
                start,
                period,
                s,
                e,
                amount * (e - s) as f64 / on as f64,
            );
        }
    }
    let all_on: u64 = cpus.values().map(CpuTimeline::on_ns).sum();
    let all_work: f64 = total_work.values().sum();
    let mean = if all_on > 0 {
        all_work / all_on as f64
    } else {
        0.0
    };
    cpus.iter()
        .map(|(&cpu, tl)| {
            let on = tl.on_ns();
            let rate = match total_work.get(&cpu) {
                Some(&w) if w > 0.0 && on > 0 => w / on as f64,
                _ => mean,
            };
            (cpu, rate)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::kernel_records::SwitchRecord;

    #[test]
    fn cpu_work_is_the_delta_between_a_cpus_consecutive_readings() {
        let series = crate::recording::counters::tests::two_cpu_series();
        let work = |cpu, start_ns, end_ns, amount| CpuWork {
            cpu,
            start_ns,
            end_ns,
            amount,
        };
        assert_eq!(
            cpu_work(&series),
            [
                work(0, 1000, 2000, 600.0),
                work(1, 1000, 2000, 100.0),
                work(0, 2000, 3000, 100.0)
            ]
        );
    }

    /// A switch record, for tests.
    fn sw(time_ns: u64, cpu: u32, tid: u32, kind: SwitchKind) -> SwitchRecord {
        SwitchRecord {
            time_ns,
            tid,
            cpu,
            kind,
        }
    }

    /// CPU 0: thread 1 runs 0..1500, blocks, runs 2000..2500, is preempted.
    /// CPU 1: thread 2 runs 500..1000, then blocks. CPU 2 is never used.
    fn switches() -> Vec<SwitchRecord> {
        use SwitchKind::*;
        vec![
            sw(0, 0, 1, In),
            sw(500, 1, 2, In),
            sw(1000, 1, 2, OutVoluntary),
            sw(1500, 0, 1, OutVoluntary),
            sw(2000, 0, 1, In),
            sw(2500, 0, 1, OutPreempted),
        ]
    }

    fn figures(u: &Utilization) -> Vec<(u64, f64, f64)> {
        u.periods
            .iter()
            .map(|p| (p.t_ns, p.executed, p.available))
            .collect()
    }

    #[test]
    fn on_cpu_time_and_holes_per_period() {
        let s = switches();
        let u = utilization(&UtilizationInput {
            switches: &s,
            start_ns: 0,
            end_ns: 3000,
            period_ns: 1000,
            work: None,
        });
        assert_eq!((u.unit.as_str(), u.cpus.as_slice()), ("ns", &[0, 1][..]));
        // Period 0: CPU 0 busy 1000, CPU 1 a hole for 500 then busy 500.
        // Period 1: CPU 0 busy 500 then a hole (blocked); CPU 1 a hole.
        // Period 2: CPU 0 busy 500 then taken by another program (preempted); CPU 1 a hole.
        assert_eq!(
            figures(&u),
            [
                (0, 1500.0, 2000.0),
                (1000, 500.0, 2000.0),
                (2000, 500.0, 1500.0)
            ]
        );
        assert_eq!(
            u.periods[2].per_cpu,
            [
                CpuPeriod {
                    executed: 500.0,
                    available: 500.0
                },
                CpuPeriod {
                    executed: 0.0,
                    available: 1000.0
                }
            ]
        );
    }

    #[test]
    fn a_thread_running_before_the_first_record_and_a_partial_last_period() {
        use SwitchKind::*;
        // The first record of CPU 0 is a switch-out: thread 1 ran from the start.
        let s = vec![sw(700, 0, 1, OutVoluntary), sw(1200, 0, 1, In)];
        let u = utilization(&UtilizationInput {
            switches: &s,
            start_ns: 100,
            end_ns: 1600,
            period_ns: 1000,
            work: None,
        });
        // Periods start at the run's start: 100..1100 and 1100..1600 (partial).
        assert_eq!(figures(&u), [(0, 600.0, 1000.0), (1000, 400.0, 500.0)]);
    }

    #[test]
    fn counter_work_is_pro_rated_to_switched_in_time() {
        let s = switches();
        let deltas = [
            // 3000 instructions while thread 1 was on CPU 0 for 1500 of these 2000 ns.
            CpuWork {
                cpu: 0,
                start_ns: 0,
                end_ns: 2000,
                amount: 3000.0,
            },
            CpuWork {
                cpu: 0,
                start_ns: 2000,
                end_ns: 3000,
                amount: 500.0,
            },
            CpuWork {
                cpu: 1,
                start_ns: 0,
                end_ns: 3000,
                amount: 1000.0,
            },
            // A CPU the program never ran on: ignored.
            CpuWork {
                cpu: 2,
                start_ns: 0,
                end_ns: 3000,
                amount: 99.0,
            },
        ];
        let u = utilization(&UtilizationInput {
            switches: &s,
            start_ns: 0,
            end_ns: 3000,
            period_ns: 1000,
            work: Some(WorkCounter {
                name: "instructions",
                deltas: &deltas,
            }),
        });
        assert_eq!(u.unit, "instructions");
        // Rates: CPU 0 3500 / 2000 ns = 1.75 per ns, CPU 1 1000 / 500 ns = 2 per ns.
        // Period 0: executed 2000 (CPU 0) + 1000 (CPU 1); hole 500 ns on CPU 1 = 1000.
        // Period 1: executed 1000; holes 500 ns on CPU 0 (875) and 1000 ns on CPU 1 (2000).
        // Period 2: executed 500; CPU 0 is taken, CPU 1 a hole of 1000 ns (2000).
        assert_eq!(
            figures(&u),
            [
                (0, 3000.0, 4000.0),
                (1000, 1000.0, 3875.0),
                (2000, 500.0, 2500.0)
            ]
        );
    }

    #[test]
    fn json_has_the_documented_shape() {
        let s = switches();
        let u = utilization(&UtilizationInput {
            switches: &s,
            start_ns: 0,
            end_ns: 1000,
            period_ns: 1000,
            work: None,
        });
        let v = serde_json::to_value(&u).unwrap();
        assert_eq!(v["period_ns"], 1000);
        assert_eq!(v["unit"], "ns");
        assert_eq!(
            v["periods"][0],
            serde_json::json!({"t_ns": 0, "executed": 1500.0, "available": 2000.0})
        );
    }

    #[test]
    fn no_records_no_periods_of_work() {
        let u = utilization(&UtilizationInput {
            switches: &Vec::new(),
            start_ns: 10,
            end_ns: 10,
            period_ns: 0,
            work: None,
        });
        assert!(u.periods.is_empty() && u.cpus.is_empty());
    }
}
