//! `timeline.json`: the run in Chrome's trace-event format, which the Perfetto UI opens.
//!
//! One track per thread (named by `thread_name` metadata) holds its probe calls (category
//! `probe`) and the times it was switched out: `preempted` (category
//! `switched_out.preempted`, runnable but not running) and `blocked` (category
//! `switched_out.blocked`, waiting). Times are µs since the analysis's timeline origin.

use crate::analysis::{Analysis, SpanKind, TimelineSpan};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::Write;

/// A span: a complete ("X") event.
#[derive(Serialize)]
struct CompleteEvent {
    ph: &'static str,
    name: String,
    cat: &'static str,
    pid: u32,
    tid: u32,
    ts: f64,
    dur: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<ProbeArgs>,
}

#[derive(Serialize)]
struct ProbeArgs {
    active_us: f64,
    elapsed_us: f64,
}

fn micros(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Process id shown: the traced process, else the smallest tid (a process's main thread has
/// the process's id, and is its first thread).
fn process_id(analysis: &Analysis) -> u32 {
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

pub fn write(analysis: &Analysis, out: &mut dyn Write) -> anyhow::Result<()> {
    let pid = process_id(analysis);
    let names: HashMap<u32, &str> = analysis
        .probes
        .iter()
        .map(|p| (p.site, p.name.as_str()))
        .collect();
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

    let mut header = serde_json::to_string(&json!({
        "displayTimeUnit": "ns",
        "otherData": {
            "generator": "cargo-parprof",
            "origin_monotonic_ns": analysis.timeline.origin_monotonic_ns,
            "spans_kept": analysis.timeline.spans.len(),
            "left_out_probe_spans": analysis.timeline.left_out_probe_spans,
            "left_out_switched_out_spans": analysis.timeline.left_out_switched_out_spans,
        },
    }))?;
    // Open the object again to stream the events into it instead of building them all.
    header.pop();
    writeln!(out, "{header},\"traceEvents\":[")?;
    for (i, event) in events.iter().enumerate() {
        if i > 0 {
            out.write_all(b",\n")?;
        }
        serde_json::to_writer(&mut *out, event)?;
    }
    for (span, duration_ns) in nested(&analysis.timeline.spans) {
        let (name, cat, args) = match span.kind {
            SpanKind::Probe { site, active_ns } => (
                names
                    .get(&site)
                    .map_or_else(|| format!("site #{site}"), |n| (*n).to_owned()),
                "probe",
                Some(ProbeArgs {
                    active_us: micros(active_ns),
                    elapsed_us: micros(span.duration_ns),
                }),
            ),
            SpanKind::Preempted => ("preempted".to_owned(), "switched_out.preempted", None),
            SpanKind::Blocked => ("blocked".to_owned(), "switched_out.blocked", None),
        };
        out.write_all(b",\n")?;
        serde_json::to_writer(
            &mut *out,
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
    out.write_all(b"\n]}\n")?;
    Ok(())
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
