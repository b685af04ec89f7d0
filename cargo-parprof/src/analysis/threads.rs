//! Per-thread figures: when each thread was seen, how long it was on a CPU, how often it was
//! switched out.

use super::event_consumer::EventConsumer;
use super::id_map::IdMap;
use super::model::{ThreadSummary, worker_name};
use super::offcpu::OffCpuIndex;
use crate::recording::kernel_records::{KernelRecords, SwitchKind};
use parprof_rt::trace::{Event, NO_WORKER, ThreadRecord, TickConverter};
use std::collections::{BTreeMap, HashMap};

/// First and last sighting of a thread on the tick time line.
#[derive(Clone, Copy, Debug)]
struct Sighting {
    first: u64,
    last: u64,
}

/// Collects when every thread was seen, from trace events and kernel records.
#[derive(Debug, Default)]
pub(crate) struct ThreadActivity {
    seen: IdMap<u32, Sighting>,
    events: IdMap<u32, u64>,
}

impl EventConsumer for ThreadActivity {
    fn on_event(&mut self, tid: u32, event: &Event) {
        self.saw(tid, event.ts);
        *self.events.entry(tid).or_default() += 1;
    }

    fn on_events(&mut self, tid: u32, events: &[Event]) {
        // A thread's events are in time order, so the ends of a chunk bound it.
        if let (Some(first), Some(last)) = (events.first(), events.last()) {
            self.saw(tid, first.ts);
            self.saw(tid, last.ts);
            *self.events.entry(tid).or_default() += events.len() as u64;
        }
    }
}

/// What the per-thread summary is made from, besides the sightings.
pub(crate) struct ThreadSources<'a> {
    pub kernel: &'a KernelRecords,
    pub trace_threads: &'a HashMap<u32, ThreadRecord>,
    pub lost_events: &'a HashMap<u32, u64>,
    pub off_cpu: &'a OffCpuIndex,
    /// Whether context-switch records were collected: without them on-CPU time is unknown.
    pub switches_recorded: bool,
    pub converter: &'a TickConverter,
    pub origin_ns: u64,
    /// The profiled process's id: its main thread has the same tid.
    pub pid: Option<u32>,
}

/// Name of the profiler's trace writer thread in the profiled process.
pub(crate) const WRITER_THREAD: &str = "parprof-writer";

/// What a thread is, for a reader: `main`, `rayon worker 3 (pool 1)` (the global pool is
/// pool 0), else its name or `thread <tid>`.
fn role(tid: u32, pid: Option<u32>, name: Option<&str>, worker: Option<&ThreadRecord>) -> String {
    match (worker, name) {
        _ if pid == Some(tid) => "main".to_owned(),
        (Some(w), _) => format!("rayon worker {} (pool {})", w.rayon_index, w.pool),
        (None, Some(name)) => name.to_owned(),
        (None, None) => format!("thread {tid}"),
    }
}

impl ThreadActivity {
    /// A kernel record or event of `tid` at `ticks`.
    pub(crate) fn saw(&mut self, tid: u32, ticks: u64) {
        self.seen
            .entry(tid)
            .and_modify(|s| {
                s.first = s.first.min(ticks);
                s.last = s.last.max(ticks);
            })
            .or_insert(Sighting {
                first: ticks,
                last: ticks,
            });
    }

    /// Every thread named in `tids` or seen in the trace, by tid, with when it was seen in the
    /// trace, if it was.
    fn every_thread<'a>(
        &self,
        tids: impl Iterator<Item = &'a u32>,
    ) -> BTreeMap<u32, Option<Sighting>> {
        let mut every: BTreeMap<u32, Option<Sighting>> = tids.map(|&tid| (tid, None)).collect();
        for (tid, sighting) in &self.seen {
            every.insert(*tid, Some(*sighting));
        }
        every
    }

    /// One summary per thread seen anywhere, sorted by tid.
    pub(crate) fn summarise(&self, sources: &ThreadSources<'_>) -> Vec<ThreadSummary> {
        let counts = KernelCounts::by_thread(sources.kernel);
        // The last name the kernel reported for a thread is its current one.
        let kernel_names: HashMap<u32, &str> = sources
            .kernel
            .thread_names
            .iter()
            .map(|(tid, name)| (*tid, name.as_str()))
            .collect();
        let tids = self.every_thread(
            sources
                .trace_threads
                .keys()
                .chain(counts.keys())
                .chain(kernel_names.keys()),
        );
        let ns = |ticks: u64| sources.converter.span_ns(ticks).round() as u64;
        let since_origin = |ticks: u64| {
            sources
                .converter
                .to_ns(ticks)
                .saturating_sub(sources.origin_ns)
        };
        tids.into_iter()
            .map(|(tid, sighting)| {
                let record = sources.trace_threads.get(&tid);
                let worker = record.filter(|r| r.rayon_index != NO_WORKER);
                let name = record
                    .map(|r| r.name.as_str())
                    .filter(|n| !n.is_empty())
                    .map(str::to_owned)
                    .or_else(|| worker.map(|w| worker_name(w.rayon_index, w.pool)))
                    .or_else(|| kernel_names.get(&tid).map(|n| n.to_string()));
                let kernel = counts.get(&tid);
                let (first, last) = sighting.map_or((0, 0), |s| (s.first, s.last));
                let switched = sources
                    .switches_recorded
                    .then(|| sources.off_cpu.within(tid, first, last));
                ThreadSummary {
                    tid,
                    role: role(tid, sources.pid, name.as_deref(), worker),
                    name,
                    rayon_index: worker.map(|r| r.rayon_index),
                    rayon_pool: worker.map(|r| r.pool),
                    first_seen_ns: since_origin(first),
                    last_seen_ns: since_origin(last),
                    on_cpu_ns: switched.map(|s| ns((last - first).saturating_sub(s.total()))),
                    off_cpu_preempted_ns: switched.map(|s| ns(s.preempted)),
                    off_cpu_voluntary_ns: switched.map(|s| ns(s.voluntary)),
                    switches_voluntary: sources
                        .switches_recorded
                        .then(|| kernel.map_or(0, |k| k.voluntary)),
                    switches_preempted: sources
                        .switches_recorded
                        .then(|| kernel.map_or(0, |k| k.preempted)),
                    events: self.events.get(&tid).copied().unwrap_or(0),
                    lost_events: sources.lost_events.get(&tid).copied().unwrap_or(0),
                    cpu_samples: kernel.map_or(0, |k| k.samples),
                }
            })
            .collect()
    }
}

/// A thread's context switches out and CPU samples, as the kernel recorded them.
#[derive(Default)]
struct KernelCounts {
    voluntary: u64,
    preempted: u64,
    samples: u64,
}

impl KernelCounts {
    /// The counts of every thread the kernel recorded.
    fn by_thread(kernel: &KernelRecords) -> HashMap<u32, KernelCounts> {
        let mut counts: HashMap<u32, KernelCounts> = HashMap::new();
        for s in kernel.switch_records() {
            let c = counts.entry(s.tid).or_default();
            match s.kind {
                SwitchKind::OutVoluntary => c.voluntary += 1,
                SwitchKind::OutPreempted => c.preempted += 1,
                SwitchKind::In => {}
            }
        }
        for (s, _) in kernel.cpu_samples() {
            counts.entry(s.tid).or_default().samples += 1;
        }
        counts
    }
}
