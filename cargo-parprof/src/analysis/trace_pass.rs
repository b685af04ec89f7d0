//! The one pass over the run's trace: every chunk of events to every per-event analysis, on
//! two threads, and what the pass gathers besides (sites, threads, losses, the lifecycle's
//! totals counted in the program, the hooks' costs); then the analyses that need nothing else
//! are finished.

use super::active_time::{ActiveTime, ActiveTimeResult};
use super::attributed_counters::SpanCollector;
use super::bench_phases;
use super::event_consumer::EventConsumer;
use super::hook_time;
use super::lifecycle::{Lifecycle, LifecycleBuilder};
use super::model::TraceCompleteness;
use super::offcpu::OffCpuIndex;
use super::threads::ThreadActivity;
use super::trace_source::{OpenTrace, TraceSource};
use crate::recording::counters::CounterRecords;
use crate::recording::kernel_records::KernelRecords;
use parprof_rt::trace::{
    Chunk, Completeness, End, Event, HookCosts, LifecycleTotals, SiteRecord, ThreadRecord,
};
use std::collections::HashMap;
use std::sync::Arc;

/// What the reading loop gathered besides what the consumers keep.
pub(super) struct TraceContents {
    pub(super) sites: HashMap<u32, SiteRecord>,
    pub(super) threads: HashMap<u32, ThreadRecord>,
    pub(super) lost_by_thread: HashMap<u32, u64>,
    /// The last snapshot of each (thread, region)'s lifecycle counted in the program.
    pub(super) lifecycle_totals: HashMap<(u32, u32), LifecycleTotals>,
    /// What the rayon-core hooks cost, measured at start-up (absent from older traces).
    pub(super) hook_costs: Option<HookCosts>,
    pub(super) events: u64,
    pub(super) completeness: TraceCompleteness,
}

impl TraceContents {
    /// Events the runtime lost: counted per thread, or in the End chunk, whichever says more.
    pub(super) fn lost_events(&self, end: Option<&End>) -> u64 {
        (self.lost_by_thread.values().sum::<u64>()).max(end.map_or(0, |e| e.events_lost))
    }

    pub(super) fn absent() -> TraceContents {
        TraceContents {
            sites: HashMap::new(),
            threads: HashMap::new(),
            lost_by_thread: HashMap::new(),
            lifecycle_totals: HashMap::new(),
            hook_costs: None,
            events: 0,
            completeness: TraceCompleteness::Absent,
        }
    }
}

/// What the pass over the trace produced.
pub(super) struct Streamed {
    pub(super) active: ActiveTimeResult,
    pub(super) activity: ThreadActivity,
    pub(super) lifecycle: Lifecycle,
    pub(super) counter_spans: SpanCollector,
    pub(super) contents: TraceContents,
}

/// Feeds the trace to every per-event analysis, then finishes those that need nothing else.
pub(super) fn stream_trace(
    source: &mut TraceSource,
    kernel: &KernelRecords,
    counters: &CounterRecords,
    off_cpu: &Arc<OffCpuIndex>,
    max_timeline_spans: usize,
    calls: Option<&mut bench_phases::CallWindow>,
) -> Streamed {
    let mut active = ActiveTime::new(off_cpu, &source.header.calibration, max_timeline_spans);
    let mut activity = ThreadActivity::default();
    let mut lifecycle = LifecycleBuilder::new(lifecycle_span_cap(max_timeline_spans))
        .with_switched_out(Arc::clone(off_cpu));
    lifecycle.set_profiler_threads(
        kernel
            .thread_names
            .iter()
            .filter(|(_, name)| name == parprof_rt::trace::WRITER_THREAD_NAME)
            .map(|(tid, _)| *tid),
    );
    let mut counter_spans =
        SpanCollector::new(!counters.counters.is_empty(), Arc::clone(&source.spill));
    let contents = match source.opened.as_mut() {
        // The active time does about as much work as decoding and the others together.
        Some(trace) => read_chunks(
            trace,
            calls,
            &mut [&mut activity, &mut lifecycle, &mut counter_spans],
            &mut [&mut active],
        ),
        None => TraceContents::absent(),
    };
    for (tid, ns) in (kernel.switch_records().map(|s| (s.tid, s.time_ns)))
        .chain(kernel.cpu_samples().map(|(s, _)| (s.tid, s.time_ns)))
    {
        activity.saw(tid, source.ticks(ns));
    }
    for site in contents.sites.values() {
        lifecycle.on_site(site);
    }
    for thread in contents.threads.values() {
        lifecycle.on_thread(thread);
    }
    for totals in contents.lifecycle_totals.values() {
        lifecycle.on_totals(totals.clone());
    }
    let mut lifecycle = lifecycle.finish(off_cpu, source.converter.ns_per_tick());
    if let Some(costs) = &contents.hook_costs {
        hook_time::remove(
            &mut lifecycle.regions,
            costs,
            source.converter.ns_per_tick(),
        );
    }
    Streamed {
        active: active.finish(),
        activity,
        lifecycle,
        counter_spans,
        contents,
    }
}

/// Chunks decoded and not yet analysed by the second thread: a few, so that memory stays
/// bounded (a chunk holds at most a runtime ring, 2 MiB decoded) while a slower chunk on one
/// side does not stall the other.
const CHUNKS_IN_FLIGHT: usize = 4;

/// The one pass over the trace: every chunk of events goes to every consumer, in the order of
/// the file. It is decoded once and fed to the consumers of `here` on this thread, then to
/// those of `there` on a second one while this thread decodes the next: two cores on one
/// pass, and each consumer sees the same events in the same order as with one.
pub(super) fn read_chunks(
    trace: &mut OpenTrace,
    mut calls: Option<&mut bench_phases::CallWindow>,
    here: &mut [&mut dyn EventConsumer],
    there: &mut [&mut (dyn EventConsumer + Send)],
) -> TraceContents {
    std::thread::scope(|scope| {
        let (to_there, chunks) =
            std::sync::mpsc::sync_channel::<(u32, Vec<Event>)>(CHUNKS_IN_FLIGHT);
        let second = scope.spawn(move || {
            for (tid, events) in chunks {
                for consumer in there.iter_mut() {
                    consumer.on_events(tid, &events);
                }
            }
        });
        let contents = read_events(trace, |tid, events| {
            let events = match calls.as_deref_mut() {
                Some(window) => window.keep(tid, events),
                None => events,
            };
            for consumer in here.iter_mut() {
                consumer.on_events(tid, &events);
            }
            // Fails only when the second thread panicked, which its join passes on.
            let _ = to_there.send((tid, events));
        });
        drop(to_there);
        if let Err(panic) = second.join() {
            std::panic::resume_unwind(panic);
        }
        contents
    })
}

/// Reads the trace to its end, or to what cuts it short, handing each chunk of events to
/// `on_events`.
pub(super) fn read_events(
    trace: &mut OpenTrace,
    mut on_events: impl FnMut(u32, Vec<Event>),
) -> TraceContents {
    let mut contents = TraceContents {
        completeness: TraceCompleteness::Complete,
        ..TraceContents::absent()
    };
    let failure = loop {
        match trace.reader.next_chunk() {
            Ok(Some(Chunk::Events { tid, events })) => {
                contents.events += events.len() as u64;
                on_events(tid, events);
            }
            Ok(Some(Chunk::Site(site))) => {
                contents.sites.insert(site.id, site);
            }
            // A later record of a thread knows more (e.g. its rayon index): the last one wins.
            Ok(Some(Chunk::Thread(thread))) => {
                contents.threads.insert(thread.tid, thread);
            }
            Ok(Some(Chunk::Lost { tid, count })) => {
                *contents.lost_by_thread.entry(tid).or_default() += count
            }
            Ok(Some(Chunk::LifecycleTotals(totals))) => {
                contents
                    .lifecycle_totals
                    .insert((totals.tid, totals.region), totals);
            }
            Ok(Some(Chunk::HookCosts(costs))) => contents.hook_costs = Some(costs),
            // Read before the pass (`bench_phases`).
            Ok(Some(Chunk::Header(_) | Chunk::End(_) | Chunk::BenchPhase(_))) => {}
            Ok(None) => break None,
            Err(error) => break Some(error),
        }
    };
    contents.completeness = match (failure, trace.reader.completeness()) {
        (Some(error), _) => TraceCompleteness::Corrupt {
            error: format!("{}: {error}", trace.path.display()),
        },
        (
            None,
            Some(Completeness::Cut {
                after_byte,
                tail_bytes,
            }),
        ) => TraceCompleteness::Cut {
            after_byte: *after_byte,
            tail_bytes: *tail_bytes,
        },
        (None, _) => TraceCompleteness::Complete,
    };
    contents
}

/// The worker-state spans the timeline keeps: a quarter of its spans. They come from the
/// detail windows, a sample already; at 170 bytes each in timeline.json, 200,000 of them made
/// 34 MB of a 44 MB run folder (a 12 M-key quicksort recursing to single elements).
pub(super) fn lifecycle_span_cap(max_timeline_spans: usize) -> usize {
    max_timeline_spans / 4
}
