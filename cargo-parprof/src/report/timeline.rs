//! `timeline.json`: the run in Chrome's trace-event format, which the Perfetto UI opens.
//!
//! One track per thread (named by `thread_name` metadata) holds its probe calls (category
//! `probe`) and the times it was switched out: `preempted` (category
//! `switched_out.preempted`, runnable but not running) and `blocked` (category
//! `switched_out.blocked`, waiting). Times are µs since the analysis's timeline origin.
//!
//! Parallel regions get a process of their own, "parallel regions": one track per region with
//! its runs (category `region`), and one track per rayon worker with its states within the
//! regions — spans named `UC`, `LQ`, `GS` and `W` (category `lifecycle`, arg `region`).
//!
//! Counter tracks of the profiled process: each collected counter's increase per ms
//! (`page-faults per ms`, …) and the utilization over time (`executed` and `available`, in CPUs
//! or in the work counter's unit per period).

use crate::analysis::{Analysis, SpanKind, TimelineSpan};
use serde::Serialize;
use serde_json::{Value, json};
use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{BufWriter, Write};

/// A span: a complete ("X") event. Written as a struct of borrowed fields rather than a JSON
/// value: tens of thousands of them make the largest view.
#[derive(Serialize)]
struct CompleteEvent<'a, A> {
    ph: &'static str,
    name: Cow<'a, str>,
    cat: &'static str,
    pid: u32,
    tid: u32,
    ts: f64,
    dur: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<A>,
}

#[derive(Serialize)]
struct RegionArgs<'a> {
    region: Cow<'a, str>,
}

#[derive(Serialize)]
struct ProbeArgs {
    active_us: f64,
    elapsed_us: f64,
}

/// The region tracks' process id is the traced pid with this bit set, and their track ids
/// count up from it: Linux pids and tids stay below 2^22, so neither can be a real one. A
/// process of their own keeps their spans from having to nest with the probe calls of the
/// workers' own tracks.
const REGION_TRACKS: u32 = 1 << 23;

fn micros(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Process id shown: the traced process, else the smallest tid (a process's main thread has
/// the process's id, and is its first thread).
pub(super) fn process_id(analysis: &Analysis) -> u32 {
    analysis
        .trace
        .pid
        .or_else(|| analysis.threads.iter().map(|t| t.tid).min())
        .unwrap_or(0)
}

/// Perfetto requires the complete events of one track to nest. Probe calls nest by
/// construction, and a thread cannot enter or leave a probe while switched out, but the
/// alignment error between trace and kernel clocks can make a switched-out span and a probe
/// call overlap without one enclosing the other, by up to that error: the span that starts
/// later is then shortened to end with the span its start lies in.
fn nested(spans: &[TimelineSpan]) -> Vec<(TimelineSpan, u64)> {
    let mut out = Vec::with_capacity(spans.len());
    // Ends of the spans enclosing the current one, on the current thread.
    let mut open_ends: Vec<u64> = Vec::new();
    let mut thread = None;
    for span in spans {
        if thread != Some(span.tid) {
            thread = Some(span.tid);
            open_ends.clear();
        }
        while open_ends.last().is_some_and(|&end| end <= span.start_ns) {
            open_ends.pop();
        }
        let end = span.start_ns + span.duration_ns;
        let end = open_ends
            .last()
            .map_or(end, |&enclosing| end.min(enclosing));
        open_ends.push(end);
        out.push((span.clone(), end - span.start_ns));
    }
    out
}

/// Writes `timeline.json`: the header, then the events of the profiled process's threads, of
/// the parallel regions and of the counters, streamed one by one.
pub fn write(analysis: &Analysis, out: &mut dyn Write) -> anyhow::Result<()> {
    // Buffered here, in a writer of a known type, so that each of the event's many small writes
    // is a copy into the buffer: through the `dyn Write`, each was a call, and writing the 65 k
    // events of a 16 M-job sort's timeline took 41 ms of CPU.
    let out = &mut BufWriter::with_capacity(1 << 16, out);
    let pid = process_id(analysis);
    write_header(analysis, out)?;
    for (i, event) in process_metadata(analysis, pid).iter().enumerate() {
        if i > 0 {
            out.write_all(b",\n")?;
        }
        serde_json::to_writer(&mut *out, event)?;
    }
    write_thread_spans(analysis, pid, out)?;
    write_region_tracks(analysis, pid, out)?;
    write_counter_tracks(analysis, pid, out)?;
    out.write_all(b"\n]}\n")?;
    out.flush()?;
    Ok(())
}

/// Writes one more event of the `traceEvents` list, after the first.
fn write_event(out: &mut impl Write, event: &impl Serialize) -> anyhow::Result<()> {
    out.write_all(b",\n")?;
    serde_json::to_writer(&mut *out, event)?;
    Ok(())
}

/// The document's opening, up to the start of its `traceEvents` list: the time unit and what
/// the timeline kept and left out.
fn write_header(analysis: &Analysis, out: &mut impl Write) -> anyhow::Result<()> {
    let mut header = serde_json::to_string(&json!({
        "displayTimeUnit": "ns",
        "otherData": {
            "generator": "cargo-parprof",
            "origin_monotonic_ns": analysis.timeline.origin_monotonic_ns,
            "spans_kept": analysis.timeline.spans.len(),
            "left_out_probe_spans": analysis.timeline.left_out_probe_spans,
            "left_out_switched_out_spans": analysis.timeline.left_out_switched_out_spans,
            "worker_state_spans": analysis.timeline.worker_states.len(),
            "region_runs": analysis.timeline.region_runs.len(),
            "left_out_lifecycle_spans": analysis.timeline.left_out_lifecycle_spans,
        },
    }))?;
    // Open the object again to stream the events into it instead of building them all.
    header.pop();
    writeln!(out, "{header},\"traceEvents\":[")?;
    Ok(())
}

/// The metadata ("M" events) of the profiled process: its name, and each thread's name and
/// place in the order of the threads.
fn process_metadata(analysis: &Analysis, pid: u32) -> Vec<Value> {
    let process_name = [
        analysis.target.name.as_str(),
        analysis.trace.program.as_deref().unwrap_or(""),
    ]
    .into_iter()
    .find(|n| !n.is_empty())
    .unwrap_or("profiled program");
    let mut events: Vec<Value> = vec![json!({
        "ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": { "name": process_name }
    })];
    for (index, thread) in analysis.threads.iter().enumerate() {
        let name = match (&thread.name, thread.rayon_index) {
            (Some(name), _) => name.clone(),
            (None, Some(worker)) => format!("rayon worker {worker}"),
            (None, None) => format!("thread {}", thread.tid),
        };
        events.push(json!({ "ph": "M", "name": "thread_name", "pid": pid, "tid": thread.tid, "args": { "name": name } }));
        events.push(json!({
            "ph": "M", "name": "thread_sort_index", "pid": pid, "tid": thread.tid, "args": { "sort_index": index }
        }));
    }
    events
}

/// The threads' tracks: their probe calls and the times they were switched out, nested.
fn write_thread_spans(analysis: &Analysis, pid: u32, out: &mut impl Write) -> anyhow::Result<()> {
    let names: HashMap<u32, &str> = analysis
        .probes
        .iter()
        .map(|p| (p.site, p.name.as_str()))
        .collect();
    for (span, duration_ns) in nested(&analysis.timeline.spans) {
        let (name, cat, args) = match span.kind {
            SpanKind::Probe { site, active_ns } => (
                names.get(&site).map_or_else(
                    || Cow::Owned(format!("site #{site}")),
                    |n| Cow::Borrowed(*n),
                ),
                "probe",
                Some(ProbeArgs {
                    active_us: micros(active_ns),
                    elapsed_us: micros(span.duration_ns),
                }),
            ),
            SpanKind::Preempted => (Cow::Borrowed("preempted"), "switched_out.preempted", None),
            SpanKind::Blocked => (Cow::Borrowed("blocked"), "switched_out.blocked", None),
        };
        write_event(
            out,
            &CompleteEvent {
                ph: "X",
                name,
                cat,
                pid,
                tid: span.tid,
                ts: micros(span.start_ns),
                dur: micros(duration_ns),
                args,
            },
        )?;
    }
    Ok(())
}

/// Counter tracks ("C" events) of the profiled process: each counter's increase per ms, and
/// the utilization's work executed and slots available per period.
fn write_counter_tracks(analysis: &Analysis, pid: u32, out: &mut impl Write) -> anyhow::Result<()> {
    let mut counter = |name: &str, ts_ns: u64, args: Value| {
        write_event(
            out,
            &json!({ "ph": "C", "name": name, "pid": pid, "ts": micros(ts_ns), "args": args }),
        )
    };
    for track in analysis.counters.iter().flat_map(|c| &c.tracks) {
        let name = format!("{} per ms", track.name);
        for &(t_ns, per_ms) in &track.points {
            counter(&name, t_ns, json!({ "value": per_ms }))?;
        }
    }
    if let Some(u) = &analysis.utilization {
        let on_cpu = u.unit == crate::analysis::utilization::ON_CPU_UNIT;
        let name = if on_cpu {
            "utilization (CPUs)".to_owned()
        } else {
            format!("utilization ({} per period)", u.unit)
        };
        // On-CPU time per period reads best as a number of CPUs.
        let scale = if on_cpu {
            1.0 / u.period_ns.max(1) as f64
        } else {
            1.0
        };
        let shift = u
            .origin_ns
            .saturating_sub(analysis.timeline.origin_monotonic_ns);
        for p in &u.periods {
            counter(
                &name,
                shift + p.t_ns,
                json!({ "executed": p.executed * scale, "available": p.available * scale }),
            )?;
        }
        if let Some(last) = u.periods.last() {
            let end = shift + last.t_ns + u.period_ns;
            counter(&name, end, json!({ "executed": 0.0, "available": 0.0 }))?;
        }
    }
    Ok(())
}

/// The "parallel regions" process: a track of runs per region, a track of states per worker.
/// Each track's spans are disjoint, so nothing needs to nest.
fn write_region_tracks(analysis: &Analysis, pid: u32, out: &mut impl Write) -> anyhow::Result<()> {
    let timeline = &analysis.timeline;
    if analysis.regions.is_empty() {
        return Ok(());
    }
    let region_pid = pid | REGION_TRACKS;
    let tracks = RegionTracks::of(analysis);
    for event in &tracks.metadata(analysis, region_pid) {
        write_event(out, event)?;
    }
    for run in &timeline.region_runs {
        write_event(
            out,
            &CompleteEvent::<()> {
                ph: "X",
                name: tracks.region_name(run.region),
                cat: "region",
                pid: region_pid,
                tid: tracks.region_track(run.region),
                ts: micros(run.start_ns),
                dur: micros(run.duration_ns),
                args: None,
            },
        )?;
    }
    for span in &timeline.worker_states {
        write_event(
            out,
            &CompleteEvent {
                ph: "X",
                name: Cow::Borrowed(span.state.abbreviation()),
                cat: "lifecycle",
                pid: region_pid,
                tid: tracks.worker_track(span.tid),
                ts: micros(span.start_ns),
                dur: micros(span.duration_ns),
                args: Some(RegionArgs {
                    region: tracks.region_name(span.region),
                }),
            },
        )?;
    }
    Ok(())
}

/// The tracks of the "parallel regions" process: one per region, by site, then one per worker
/// with states in the timeline, by tid; their ids count up from [`REGION_TRACKS`].
struct RegionTracks<'a> {
    /// (site, name), sorted by site.
    regions: Vec<(u32, &'a str)>,
    /// Each worker once, sorted (the timeline's states are sorted by thread).
    workers: Vec<u32>,
}

impl<'a> RegionTracks<'a> {
    fn of(analysis: &'a Analysis) -> Self {
        let mut regions: Vec<(u32, &str)> = analysis
            .regions
            .iter()
            .map(|r| (r.site, r.name.as_str()))
            .collect();
        regions.sort_unstable();
        let mut workers: Vec<u32> = analysis
            .timeline
            .worker_states
            .iter()
            .map(|s| s.tid)
            .collect();
        workers.dedup();
        RegionTracks { regions, workers }
    }

    fn region_name(&self, site: u32) -> Cow<'a, str> {
        self.regions
            .binary_search_by_key(&site, |(s, _)| *s)
            .map_or_else(
                |_| Cow::Owned(format!("region #{site}")),
                |i| Cow::Borrowed(self.regions[i].1),
            )
    }

    fn region_track(&self, site: u32) -> u32 {
        REGION_TRACKS
            + self
                .regions
                .binary_search_by_key(&site, |(s, _)| *s)
                .unwrap_or(0) as u32
    }

    fn worker_track(&self, tid: u32) -> u32 {
        REGION_TRACKS + (self.regions.len() + self.workers.binary_search(&tid).unwrap_or(0)) as u32
    }

    /// The process's name, and each track's name and place in the order of the tracks.
    fn metadata(&self, analysis: &Analysis, region_pid: u32) -> Vec<Value> {
        let mut metadata = vec![json!({
            "ph": "M", "name": "process_name", "pid": region_pid, "tid": 0, "args": { "name": "parallel regions" }
        })];
        let tracks = self
            .regions
            .iter()
            .map(|&(site, name)| (self.region_track(site), format!("region {name}")))
            .chain(self.workers.iter().map(|&tid| {
                let label = worker_label(analysis, tid);
                (
                    self.worker_track(tid),
                    format!("{label} (tid {tid}): states"),
                )
            }));
        for (index, (track, name)) in tracks.enumerate() {
            metadata.push(json!({ "ph": "M", "name": "thread_name", "pid": region_pid, "tid": track, "args": { "name": name } }));
            metadata.push(json!({
                "ph": "M", "name": "thread_sort_index", "pid": region_pid, "tid": track, "args": { "sort_index": index }
            }));
        }
        metadata
    }
}

/// A worker's name on its states' track: workers often keep the program's name, so their
/// rayon index says more.
fn worker_label(analysis: &Analysis, tid: u32) -> String {
    let thread = analysis.threads.iter().find(|t| t.tid == tid);
    match (
        thread.and_then(|t| t.rayon_index),
        thread.and_then(|t| t.name.as_deref()),
    ) {
        (Some(index), _) => format!("rayon worker {index}"),
        (None, Some(name)) => name.to_owned(),
        (None, None) => format!("thread {tid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(tid: u32, start_ns: u64, duration_ns: u64, kind: SpanKind) -> TimelineSpan {
        TimelineSpan {
            tid,
            start_ns,
            duration_ns,
            kind,
        }
    }

    #[test]
    fn spans_sticking_out_of_their_enclosing_span_are_shortened() {
        let probe = SpanKind::Probe {
            site: 1,
            active_ns: 0,
        };
        let spans = [
            span(1, 0, 100, probe),
            span(1, 90, 20, SpanKind::Preempted), // sticks out of the probe call by 10 ns
            span(1, 150, 10, SpanKind::Blocked),
            span(2, 0, 50, SpanKind::Blocked),
        ];
        let durations: Vec<u64> = nested(&spans).into_iter().map(|(_, d)| d).collect();
        assert_eq!(durations, [100, 10, 10, 50]);
    }
}
