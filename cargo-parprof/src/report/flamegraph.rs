//! Flamegraphs rendered with inferno, and their folded text.
//!
//! - `active.folded` / `active.svg`: self active time per probe call path, in ns;
//! - `cpu.folded` / `cpu.svg`: cpu-clock samples per call stack, in samples, one root per
//!   thread named by its role (`main`, `rayon worker 3 (pool 1)`; all threads under one root
//!   `all threads` with `--merge-threads`). Inlined frames end in `_[i]`. Recursion is folded:
//!   a function appears at most once per stack, the frames between its first appearance and a
//!   deeper repeat are removed, so a recursive call's samples count under its outermost call.
//!   The profiler's own frames are not shown: a sample inside them counts as probe overhead
//!   (the subtitle gives its share), and its wrappers around user code are left out.
//!
//! The output is deterministic: folded lines are sorted, the options are fixed and colours come
//! from a hash of the frame name (inferno's `deterministic`), never from a random generator.

use super::human_duration;
use crate::analysis::{Analysis, OffCpuStacks, SampledStack};
use inferno::flamegraph::color::{MultiPalette, Palette};
use inferno::flamegraph::{self, Options};
use std::collections::BTreeMap;
use std::io::{self, Write};

/// Folded stacks: `frame;frame;frame weight`, sorted, one per distinct stack.
pub type Folded = BTreeMap<String, u64>;

/// The folded format separates frames with `;` and ends a line at a newline: neither may
/// appear inside a frame (Rust types such as `[u8; 4]` contain `;`).
fn frame(name: &str) -> String {
    name.replace(';', ",").replace(['\n', '\r'], " ")
}

fn fold<'a>(stacks: impl Iterator<Item = (&'a [String], u64)>) -> Folded {
    let mut folded = Folded::new();
    for (frames, weight) in stacks.filter(|(frames, weight)| *weight > 0 && !frames.is_empty()) {
        let line = frames
            .iter()
            .map(|f| frame(f))
            .collect::<Vec<_>>()
            .join(";");
        // Two call paths can carry the same names (two probes named alike): add them up.
        *folded.entry(line).or_default() += weight;
    }
    folded
}

/// Self active time (ns) per probe call path.
pub fn active_folded(analysis: &Analysis) -> Folded {
    fold(
        analysis
            .call_paths
            .iter()
            .map(|p| (p.path.as_slice(), p.self_active_ns)),
    )
}

/// Root of a merged flamegraph.
const ALL_THREADS: &str = "all threads";

/// Stacks (cpu-clock samples, or switched-out ns) under their thread's role or, with
/// `merge_threads`, under one root for all threads.
pub fn stacks_folded(stacks: &[SampledStack], merge_threads: bool) -> Folded {
    let stacks: Vec<(Vec<String>, u64)> = stacks
        .iter()
        .map(|s| {
            let root = if merge_threads {
                ALL_THREADS
            } else {
                &s.thread
            };
            let frames = std::iter::once(root.to_owned())
                .chain(s.frames.iter().cloned())
                .collect();
            (frames, s.weight)
        })
        .collect();
    fold(
        stacks
            .iter()
            .map(|(frames, weight)| (frames.as_slice(), *weight)),
    )
}

pub fn write_folded(folded: &Folded, out: &mut dyn Write) -> io::Result<()> {
    for (stack, weight) in folded {
        writeln!(out, "{stack} {weight}")?;
    }
    Ok(())
}

fn options(title: &str, subtitle: String, count_name: &str, name_type: &str) -> Options<'static> {
    let mut options = Options::default();
    options.title = title.to_owned();
    options.subtitle = Some(subtitle);
    options.count_name = count_name.to_owned();
    options.name_type = name_type.to_owned();
    options.colors = Palette::Multi(MultiPalette::Rust);
    options.deterministic = true;
    options
}

fn render(
    folded: &Folded,
    options: &mut Options<'_>,
    empty_message: &str,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    if folded.is_empty() {
        // inferno refuses an empty input; say why there is nothing instead.
        write!(
            out,
            concat!(
                r#"<?xml version="1.0" standalone="no"?>"#,
                r#"<svg version="1.1" width="1200" height="60" xmlns="http://www.w3.org/2000/svg">"#,
                r#"<text x="600" y="35" text-anchor="middle" font-family="Verdana" font-size="14">{}</text></svg>"#,
                "\n"
            ),
            empty_message
        )?;
        return Ok(());
    }
    let lines: Vec<String> = folded
        .iter()
        .map(|(stack, weight)| format!("{stack} {weight}"))
        .collect();
    flamegraph::from_lines(options, lines.iter().map(String::as_str), out)?;
    Ok(())
}

pub fn write_active_svg(
    analysis: &Analysis,
    folded: &Folded,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let total = &analysis.outermost_calls;
    let subtitle = format!(
        "self active time per probe call path, corrected for probe overhead and switched-out time; \
         outermost calls: {} active of {} elapsed",
        human_duration(total.active_ns),
        human_duration(total.elapsed_ns)
    );
    let mut options = options("Active time", subtitle, "ns", "Probe:");
    render(folded, &mut options, "No probe calls were recorded.", out)
}

pub fn write_cpu_svg(
    analysis: &Analysis,
    folded: &Folded,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let samples = &analysis.cpu_samples;
    let subtitle = format!(
        "cpu-clock samples every {}, one root per thread; recursion folded; inlined frames end in _[i]; \
         {} of {} samples in the profiler's probes and writer thread, left out",
        human_duration(samples.period_ns),
        samples.profiler,
        samples.total,
    );
    let mut options = options("CPU samples", subtitle, "samples", "Function:");
    let message = match &analysis.capabilities.cpu_samples.reason {
        Some(reason) if !analysis.capabilities.cpu_samples.available => {
            format!("No cpu samples were recorded: {}", xml_text(reason))
        }
        _ => "No cpu samples were recorded.".to_owned(),
    };
    render(folded, &mut options, &message, out)
}

pub fn write_offcpu_svg(
    offcpu: &OffCpuStacks,
    folded: &Folded,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let unmatched = if offcpu.unmatched_ns > 0 {
        format!(", {} without a stack", human_duration(offcpu.unmatched_ns))
    } else {
        String::new()
    };
    let subtitle = format!(
        "{} switched out, by the stack where each thread stopped: [blocked] or [preempted]; the \
         profiler's own waits ({}) left out{unmatched}",
        human_duration(offcpu.total_ns),
        human_duration(offcpu.profiler_ns),
    );
    let mut options = options(
        "Off-CPU time (switched-out time, ns)",
        subtitle,
        "ns",
        "Function:",
    );
    render(folded, &mut options, "No thread was switched out.", out)
}

fn xml_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::CpuSamples;

    #[test]
    fn folded_lines_are_sorted_merged_and_escaped() {
        let stacks: Vec<(Vec<String>, u64)> = vec![
            (vec!["main".into(), "f<[u8; 4]>".into()], 5),
            (vec!["a".into()], 3),
            (vec!["main".into(), "f<[u8; 4]>".into()], 2),
            (vec!["zero".into()], 0),
        ];
        let folded = fold(stacks.iter().map(|(f, w)| (f.as_slice(), *w)));
        let mut out = Vec::new();
        write_folded(&folded, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "a 3\nmain;f<[u8, 4]> 7\n");
    }

    #[test]
    fn cpu_stacks_are_rooted_at_their_thread_or_merged() {
        let mut cpu = CpuSamples::default();
        for (thread, samples) in [("main", 2), ("rayon worker 1 (pool 0)", 3)] {
            cpu.stacks.push(crate::analysis::SampledStack {
                thread: thread.to_owned(),
                frames: vec!["f".to_owned()],
                weight: samples,
            });
        }
        let lines = |merge| {
            let mut out = Vec::new();
            write_folded(&stacks_folded(&cpu.stacks, merge), &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(lines(false), "main;f 2\nrayon worker 1 (pool 0);f 3\n");
        assert_eq!(lines(true), "all threads;f 5\n");
    }
}
