//! Flamegraphs rendered with inferno, and their folded text.
//!
//! - `active.folded` / `active.svg`: self active time per probe call path, in ns, recursion
//!   folded as in `cpu.folded`;
//! - `cpu.folded` / `cpu.svg`: cpu-clock samples per call stack, in samples, one root per
//!   thread named by its role (`main`, `rayon worker 3 (pool 1)`; all threads under one root
//!   `all threads` with `--merge-threads`). Inlined frames end in `_[i]`. Recursion is folded:
//!   a function appears at most once per stack, the frames between its first appearance and a
//!   deeper repeat are removed, so a recursive call's samples count under its outermost call.
//!   The profiler's own frames are not shown: a sample inside them counts as probe overhead
//!   (the subtitle gives its share), and its wrappers around user code are left out. Frames
//!   are named without generic arguments, and rayon's and std's frames between two frames of
//!   the program are folded into one (`[rayon: 14 frames]`); `--full-names` and
//!   `--all-frames` keep the symbols' names and every frame. The program's frames are drawn
//!   in warm colours, the libraries' in grey-blue. A label too long for its box loses its
//!   middle, not the function's own name (`flame_labels`); the tooltip keeps the whole name.
//!
//! The output is deterministic: folded lines are sorted, the options are fixed and colours come
//! from a hash of the frame name (inferno's `deterministic`), never from a random generator.

use super::flame_labels::{Geometry, relabel};
use super::frame_names::display_name;
use super::options::{FrameView, ReportOptions};
use super::plumbing::{fold_plumbing, plumbing_of};
use crate::analysis::{Analysis, OffCpuStacks, SampledStack, fold_recursion};
use crate::units::human_duration;
use inferno::flamegraph::color::{Color, MultiPalette, Palette, PaletteMap};
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

/// Self active time (ns) per probe call path, probe recursion folded as the cpu flamegraph
/// folds it: a `join` quicksort's `quicksort → [rayon task] → quicksort → …` tower is one
/// `quicksort`, holding the time of its recursive calls (`report.json` keeps every path).
pub fn active_folded(analysis: &Analysis) -> Folded {
    let paths: Vec<(Vec<String>, u64)> = analysis
        .call_paths
        .iter()
        .map(|p| (fold_recursion(p.path.clone()), p.self_active_ns))
        .collect();
    fold(paths.iter().map(|(path, ns)| (path.as_slice(), *ns)))
}

/// Root of a merged flamegraph.
const ALL_THREADS: &str = "all threads";

/// Stacks (cpu-clock samples, or switched-out ns) under their thread's role or, with
/// `merge_threads`, under one root for all threads; frames as [`shown_frames`] draws them.
pub fn stacks_folded(stacks: &[SampledStack], options: &ReportOptions) -> Folded {
    let stacks: Vec<(Vec<String>, u64)> = stacks
        .iter()
        .map(|s| {
            let root = if options.merge_threads {
                ALL_THREADS
            } else {
                &s.thread
            };
            let frames = std::iter::once(root.to_owned())
                .chain(shown_frames(&s.frames, options.frames))
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

/// A stack's frames as drawn: display names unless `full_names`, plumbing folded unless
/// `all_frames`. Recursion is folded again on display names: two instances of one generic
/// function, distinct symbols, are one function once their generic arguments are gone.
fn shown_frames(frames: &[String], view: FrameView) -> Vec<String> {
    let named = if view.full_names {
        frames.to_vec()
    } else {
        fold_recursion(frames.iter().map(|f| display_name(f)).collect())
    };
    if view.all_frames {
        named
    } else {
        fold_plumbing(&named)
    }
}

/// Colours of the drawn frames: the program's warm, the libraries' (std, rayon, and their
/// folded runs) grey-blue, as samply and the Firefox Profiler tell them apart; other frames
/// (libc, unknown) keep the palette's. Shades vary with the name, the same in every run.
fn frame_colours(folded: &Folded) -> PaletteMap {
    let mut colours = PaletteMap::default();
    for stack in folded.keys() {
        for frame in stack.split(';') {
            let shade = (frame
                .bytes()
                .fold(0u32, |h, b| h.wrapping_mul(31) ^ u32::from(b))
                % 40) as u8;
            let library = frame.starts_with("[rayon: ")
                || frame.starts_with("[std: ")
                || plumbing_of(frame).is_some();
            let colour = if library {
                Color {
                    r: 150 + shade / 2,
                    g: 165 + shade / 2,
                    b: 200 + shade / 2,
                }
            } else if frame.contains("::") {
                Color {
                    r: 215 + shade,
                    g: 95 + shade * 2,
                    b: 45 + shade,
                }
            } else {
                continue;
            };
            colours.insert(frame, colour);
        }
    }
    colours
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
    options: Options<'static>,
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
    let mut colours = frame_colours(folded);
    // `Options` borrows the palette: shortened to this call's lifetime to hold it.
    let mut options: Options<'_> = options;
    options.palette_map = Some(&mut colours);
    let mut svg = Vec::new();
    flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut svg)?;
    // Labels lose their middle, not the function's own name (inferno cuts one side).
    let geometry = Geometry {
        image_width: options.image_width.map_or(1200.0, |w| w as f64),
        font_size: options.font_size as f64,
        font_width: options.font_width,
    };
    out.write_all(relabel(&String::from_utf8_lossy(&svg), geometry).as_bytes())?;
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
    let options = options("Active time", subtitle, "ns", "Probe:");
    render(folded, options, "No probe calls were recorded.", out)
}

pub fn write_cpu_svg(
    analysis: &Analysis,
    folded: &Folded,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let samples = &analysis.cpu_samples;
    let subtitle = format!(
        // At most about 160 characters: inferno centres the subtitle on one line, and cuts
        // what is wider than the drawing at both ends.
        "cpu-clock samples every {}, a root per thread; recursion folded; inlined frames end in _[i]; \
         {} of {} samples in the profiler left out",
        human_duration(samples.period_ns),
        samples.profiler,
        samples.total,
    );
    let options = options("CPU samples", subtitle, "samples", "Function:");
    let message = match &analysis.capabilities.cpu_samples.reason {
        Some(reason) if !analysis.capabilities.cpu_samples.available => {
            format!("No cpu samples were recorded: {}", xml_text(reason))
        }
        _ => "No cpu samples were recorded.".to_owned(),
    };
    render(folded, options, &message, out)
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
    let options = options(
        "Off-CPU time (switched-out time, ns)",
        subtitle,
        "ns",
        "Function:",
    );
    render(folded, options, "No thread was switched out.", out)
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
    fn frames_are_shown_short_with_plumbing_folded_unless_asked() {
        let frames: Vec<String> = [
            "demo::run",
            "rayon::iter::plumbing::bridge_producer_consumer::helper<A>",
            "rayon_core::join::join_context<B>",
            "rayon::iter::plumbing::bridge_producer_consumer::helper<C>",
            "demo::run::{{closure}}",
        ]
        .map(str::to_owned)
        .to_vec();
        let shown = |all_frames, full_names| {
            shown_frames(
                &frames,
                FrameView {
                    all_frames,
                    full_names,
                },
            )
            .join(";")
        };
        // The two instances of `helper` are one function: its recursion folds, and one
        // plumbing frame is left, not worth a `[rayon: …]` frame.
        assert_eq!(
            shown(false, false),
            "demo::run;rayon::iter::plumbing::bridge_producer_consumer::helper;demo::run::{closure}"
        );
        assert_eq!(shown(true, true), frames.join(";"));
        assert_eq!(
            shown(false, true),
            "demo::run;[rayon: 3 frames];demo::run::{{closure}}"
        );
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
            let options = ReportOptions {
                merge_threads: merge,
                ..ReportOptions::default()
            };
            write_folded(&stacks_folded(&cpu.stacks, &options), &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(lines(false), "main;f 2\nrayon worker 1 (pool 0);f 3\n");
        assert_eq!(lines(true), "all threads;f 5\n");
    }
}
