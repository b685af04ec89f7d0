//! Differential flamegraphs that follow the verdicts, with colour only where a verdict says
//! `slower` (red) or `faster` (blue), as strong as the change (full colour at twice or half the
//! time); every other box is white: a box that grew within noise is not painted as if it had
//! changed.
//!
//! - `diff-active.svg`: HEAD's probe stacks (the mean per run of each benchmark, under a root
//!   frame named after it), each probe's box coloured by its row's verdict;
//! - `diff-cpu.svg` and `diff-cpu-base.svg`: the CPU samples of all threads, in HEAD's shape and
//!   in BASE's, each box coloured by its own verdict ([`super::frames`]); boxes that appeared
//!   (only in HEAD) are green with a dashed outline, those that vanished (only in BASE, hence
//!   drawn in BASE's shape) purple, dashed; each box's tooltip says its verdict.
//!
//! inferno colours a differential line's last frame by the difference of its two counts,
//! relative to the largest difference of the graph. So each judged box gets that difference
//! from its change, an invisible line (zero width) fixes the largest at "twice", and counts are
//! kept in thousandths of the unit so that a marker line of a box that has no samples of its
//! own adds at most one unit to its width. A box's note (its verdict in words, its mark) rides
//! in its name through inferno, after [`NOTE`], and is moved into its tooltip afterwards.

use super::compare::{Comparison, Row};
use super::frames::{FrameRow, Frames, Shape};
use super::noise::Verdict;
use super::side::Side;
use super::views;
use crate::report::flame_labels::{Geometry, relabel};
use anyhow::{Context, Result};
use inferno::flamegraph;
use std::collections::{BTreeMap, HashMap};

/// Counts are drawn in thousandths of their unit.
const SCALE: f64 = 1000.0;
/// The colour difference of a change of twice (or half) the time, and of the scale's anchor.
const FULL: i64 = 1000;
/// The zero-width line that anchors the colour scale.
const ANCHOR: &str = "[colour: full at 2× or ½×]";
/// Separates a box's name from its note while inferno draws it (a private-use character: no
/// symbol has it).
const NOTE: char = '\u{e000}';
/// The fill of appeared and vanished boxes.
const APPEARED_FILL: &str = "rgb(120,200,120)";
const VANISHED_FILL: &str = "rgb(185,145,220)";
/// Their outline: marked by pattern too, not by colour alone.
const MARK_OUTLINE: &str = r#" stroke="rgb(70,70,70)" stroke-dasharray="3,2""#;

/// A judged change's colour difference: + red (slower), − blue (faster), up to [`FULL`];
/// `ratio` is HEAD ÷ BASE.
fn strength(verdict: Verdict, ratio: f64) -> Option<i64> {
    if !(verdict.is_change() && ratio > 0.0 && ratio.is_finite()) {
        return None;
    }
    let log2 = ratio.ln() / std::f64::consts::LN_2;
    let strength = (log2.abs().min(1.0) * FULL as f64).round().max(1.0) as i64;
    Some(if verdict == Verdict::Slower {
        strength
    } else {
        -strength
    })
}

/// A judged row's colour.
fn colour(r: &Row) -> Option<i64> {
    if r.base_median_ns <= 0.0 {
        return None;
    }
    strength(r.verdict, r.head_median_ns / r.base_median_ns)
}

/// HEAD's stacks of `file`: each benchmark's mean per run, under a frame named after it.
fn head_stacks(head: &Side, file: &str) -> Result<BTreeMap<String, f64>> {
    let mut stacks = BTreeMap::new();
    for b in &head.benchmarks {
        let runs = b.runs.len().max(1) as f64;
        for run in &b.runs {
            let path = run.dir.join(file);
            if !path.is_file() {
                continue;
            }
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            for (stack, weight) in text.lines().filter_map(super::frames::folded_line) {
                let key = match &b.name {
                    Some(name) => format!("{};{stack}", name.replace(';', ":")),
                    None => stack.to_owned(),
                };
                *stacks.entry(key).or_insert(0.0) += weight / runs;
            }
        }
    }
    Ok(stacks)
}

/// The colour of each box of `stacks` whose frame is a judged row's probe or region.
fn row_colours(stacks: &BTreeMap<String, f64>, c: &Comparison, bench: bool) -> Colours {
    let judged: HashMap<(Option<&str>, &str), i64> = c
        .rows
        .iter()
        .filter_map(|r| Some(((r.benchmark.as_deref(), r.name.as_str()), colour(r)?)))
        .collect();
    let mut colours = Colours::new();
    for stack in stacks.keys() {
        let frames: Vec<&str> = stack.split(';').collect();
        let benchmark = bench.then(|| frames[0]);
        for depth in usize::from(bench)..frames.len() {
            if let Some(&delta) = judged.get(&(benchmark, frames[depth])) {
                colours.insert(frames[..=depth].join(";"), delta);
            }
        }
    }
    colours
}

/// Box (its path) → colour difference.
type Colours = BTreeMap<String, i64>;

/// The differential lines: `stack original new`, the shape's counts as `new`, each coloured
/// box's difference on its own line (or a zero-width one ending at it).
fn lines(stacks: &BTreeMap<String, f64>, colours: &Colours) -> Vec<String> {
    let mut marked: BTreeMap<String, (u64, i64)> = stacks
        .iter()
        .map(|(s, w)| (s.clone(), ((w * SCALE).round() as u64, 0)))
        .collect();
    for (prefix, &delta) in colours {
        marked.entry(prefix.clone()).or_insert((0, 0)).1 = delta;
    }
    marked.insert(ANCHOR.to_owned(), (0, -FULL));
    marked
        .into_iter()
        .map(|(stack, (new, delta))| {
            let new = if delta > 0 {
                new.max(delta as u64)
            } else {
                new
            };
            let original = (new as i64 - delta).max(0);
            format!("{stack} {original} {new}")
        })
        .collect()
}

/// The judged rows, in words: "slower: solve +100.0% (noise ±2.0%)".
fn judged_rows(c: &Comparison) -> String {
    let judged: Vec<String> = c
        .rows
        .iter()
        .filter(|r| colour(r).is_some())
        .take(3)
        .map(|r| {
            format!(
                "{}: {} {} (noise {})",
                r.verdict.as_str(),
                views::row_name(r),
                views::signed_percent(r.change),
                r.noise
                    .map_or_else(|| "unknown".to_owned(), |n| format!("±{:.1}%", n * 100.0))
            )
        })
        .collect();
    if judged.is_empty() {
        "nothing judged changed".to_owned()
    } else {
        judged.join("; ")
    }
}

/// What the figure shows: benchmarks, runs, noise.
fn subtitle(c: &Comparison, head: &Side) -> String {
    let benchmarks: Vec<&str> = head
        .benchmarks
        .iter()
        .filter_map(|b| b.name.as_deref())
        .collect();
    let mut noise: Vec<f64> = c.rows.iter().filter_map(|r| r.noise).collect();
    noise.sort_by(f64::total_cmp);
    let noise = match (noise.first(), noise.last()) {
        (Some(lo), Some(hi)) => format!(
            "rows' noise ±{:.1}% … ±{:.1}% (median ±{:.1}%)",
            lo * 100.0,
            hi * 100.0,
            super::stats::median(&noise) * 100.0
        ),
        _ => "no noise estimate (one run on a side)".to_owned(),
    };
    let what = if benchmarks.is_empty() {
        format!("`{}`", c.program)
    } else {
        format!("benchmarks {}", benchmarks.join(", "))
    };
    format!(
        "HEAD per run; {what}; {} runs of BASE, {} of HEAD; {noise}. {}. Red/blue: only what \
         the verdicts call slower/faster, full at 2×; white: not judged changed",
        c.base_runs,
        c.head_runs,
        judged_rows(c)
    )
}

/// The differential flamegraph of HEAD's probe stacks (`active.folded`), coloured by the rows,
/// or `None` when HEAD has no stacks.
pub fn differential_svg(head: &Side, c: &Comparison) -> Result<Option<Vec<u8>>> {
    let stacks = head_stacks(head, "active.folded")?;
    if stacks.values().all(|w| *w <= 0.0) {
        return Ok(None);
    }
    let colours = row_colours(&stacks, c, head.is_bench());
    let figure = Figure {
        title: "Active time: BASE → HEAD",
        subtitle: subtitle(c, head),
        unit: "ns",
    };
    figure.draw(&lines(&stacks, &colours)).map(Some)
}

/// A CPU box's note: "slower +201.0%, −3.0…+8.0% at the rule's level".
fn frame_note(r: &FrameRow) -> String {
    match r.verdict {
        Verdict::Appeared => "appeared: in HEAD only".to_owned(),
        Verdict::Vanished => "vanished: in BASE only".to_owned(),
        v => format!(
            "{} {}, {} a run of its own",
            v.as_str(),
            views::signed_percent(r.change),
            views::samples_moved(r)
        ),
    }
}

/// The differential flamegraph of the CPU samples in `shape`'s shape, or `None` when that side
/// has no samples.
pub fn cpu_svg(frames: &Frames, c: &Comparison, shape: Shape) -> Result<Option<Vec<u8>>> {
    let stacks = match shape {
        Shape::Base => &frames.base_shape,
        Shape::Head => &frames.head_shape,
    };
    if stacks.values().all(|w| *w <= 0.0) {
        return Ok(None);
    }
    let shown = |r: &&FrameRow| match r.verdict {
        Verdict::Appeared => shape == Shape::Head,
        Verdict::Vanished => shape == Shape::Base,
        _ => true,
    };
    let mut colours = Colours::new();
    let mut notes: HashMap<String, (char, String)> = HashMap::new();
    for r in frames.rows.iter().filter(shown) {
        let code = match r.verdict {
            Verdict::Appeared => 'a',
            Verdict::Vanished => 'v',
            _ => 'j',
        };
        if let Some(delta) = strength(r.verdict, 1.0 + r.change) {
            colours.insert(r.key(), delta);
        }
        notes.insert(r.key(), (code, frame_note(r)));
    }
    let annotate = |key: &str| annotated(key, &notes);
    let stacks: BTreeMap<String, f64> = (stacks.iter()).map(|(k, w)| (annotate(k), *w)).collect();
    let colours: Colours = colours.iter().map(|(k, d)| (annotate(k), *d)).collect();
    let figure = Figure {
        title: match shape {
            Shape::Head => "CPU samples: BASE → HEAD, in HEAD's shape",
            Shape::Base => "CPU samples: BASE → HEAD, in BASE's shape",
        },
        subtitle: views::cpu_figure_sentence(frames, c, shape),
        unit: "samples",
    };
    figure.draw(&lines(&stacks, &colours)).map(Some)
}

/// `key` with each of its boxes that has a note named `name NOTE code text`.
fn annotated(key: &str, notes: &HashMap<String, (char, String)>) -> String {
    let mut prefix = String::new();
    let mut out = String::with_capacity(key.len());
    for (i, frame) in key.split(';').enumerate() {
        if i > 0 {
            prefix.push(';');
            out.push(';');
        }
        prefix.push_str(frame);
        out.push_str(frame);
        if let Some((code, text)) = notes.get(&prefix) {
            out.push(NOTE);
            out.push(*code);
            out.push_str(text);
        }
    }
    out
}

/// A figure's words.
struct Figure {
    title: &'static str,
    subtitle: String,
    unit: &'static str,
}

impl Figure {
    fn draw(&self, lines: &[String]) -> Result<Vec<u8>> {
        let mut options = flamegraph::Options::default();
        options.title = self.title.to_owned();
        options.subtitle = Some(self.subtitle.clone());
        options.count_name = self.unit.to_owned();
        options.factor = 1.0 / SCALE;
        let mut svg = Vec::new();
        flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut svg)
            .with_context(|| format!("cannot draw the flamegraph `{}`", self.title))?;
        let svg = with_notes(&String::from_utf8_lossy(&svg));
        // Labels lose their middle, not the function's own name, as cpu.svg's.
        let geometry = Geometry {
            image_width: options.image_width.map_or(1200.0, |w| w as f64),
            font_size: options.font_size as f64,
            font_width: options.font_width,
        };
        Ok(relabel(&svg, geometry).into_bytes())
    }
}

/// inferno's SVG with each box's note moved from its name into its tooltip, the marked boxes
/// filled and outlined, and inferno's own difference (the colour code, not a change) left out
/// of every tooltip.
fn with_notes(svg: &str) -> String {
    let mut out = String::with_capacity(svg.len());
    let mut rest = svg;
    while let Some(at) = rest.find("<g><title>") {
        let start = at + "<g><title>".len();
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        let (Some(title_end), Some(g_end)) = (rest.find("</title>"), rest.find("</g>")) else {
            break;
        };
        if title_end > g_end {
            continue;
        }
        let (title, mark) = noted_title(&rest[..title_end]);
        out.push_str(&title);
        let body = &rest[title_end..g_end];
        match mark {
            Some(fill) => out.push_str(&refill(body, fill)),
            None => out.push_str(body),
        }
        rest = &rest[g_end..];
    }
    out.push_str(rest);
    out
}

/// A tooltip `NAME[NOTE code text] (N samples, x%; ±y%)` as `NAME (text; N samples, x%)`, and
/// the fill of its mark.
fn noted_title(title: &str) -> (String, Option<&'static str>) {
    let (head, counts) = match title.rfind(" (") {
        Some(at) => (&title[..at], title[at + 2..].trim_end_matches(')')),
        None => (title, ""),
    };
    // inferno's difference follows a `;`: the colour code, not a change.
    let counts = counts.split(';').next().unwrap_or("");
    let Some((name, note)) = head.split_once(NOTE) else {
        return (format!("{head} ({counts})"), None);
    };
    let mut chars = note.chars();
    let fill = match chars.next() {
        Some('a') => Some(APPEARED_FILL),
        Some('v') => Some(VANISHED_FILL),
        _ => None,
    };
    let text = chars.as_str();
    (format!("{} ({text}; {counts})", deannotate(name)), fill)
}

/// A name without inferno's annotation (`_[i]`, inlined; `_[k]`, `_[j]`, `_[w]`), which inferno
/// leaves out of the tooltip when it ends the name.
fn deannotate(name: &str) -> &str {
    match name.rfind("_[") {
        Some(at) if name.len() == at + 4 && name.ends_with(']') => {
            let kind = &name[at + 2..at + 3];
            if "ijkw".contains(kind) {
                &name[..at]
            } else {
                name
            }
        }
        _ => name,
    }
}

/// A box's rest (`</title><rect … fill="…" …/><text…`) with `fill` and the mark's outline.
fn refill(body: &str, fill: &str) -> String {
    let Some(at) = body.find(" fill=\"") else {
        return body.to_owned();
    };
    let value = at + " fill=\"".len();
    let Some(end) = body[value..].find('"') else {
        return body.to_owned();
    };
    format!(
        "{} fill=\"{fill}\"{MARK_OUTLINE}{}",
        &body[..at],
        &body[value + end + 1..]
    )
}

#[cfg(test)]
mod tests {
    use super::super::{Measure, RowKind};
    use super::*;

    fn row(name: &str, base: f64, head: f64, verdict: Verdict) -> Row {
        Row {
            benchmark: None,
            kind: RowKind::Probe,
            name: name.to_owned(),
            base_ns: vec![base; 3],
            head_ns: vec![head; 3],
            base_median_ns: base,
            head_median_ns: head,
            change: head / base - 1.0,
            base_calls: 1.0,
            head_calls: 1.0,
            calls_changed: false,
            verdict,
            p_value: Some(0.001),
            p_adjusted: Some(0.002),
            noise: Some(0.02),
            runs_needed: None,
            interval: None,
        }
    }

    fn comparison(rows: Vec<Row>) -> Comparison {
        Comparison {
            program: "p".into(),
            base_runs: 3,
            head_runs: 3,
            measure: Measure::Total,
            noise_estimate: true,
            rows_tested: rows.len(),
            rows,
            diagnoses: Vec::new(),
            pairing: None,
            recorded_apart_s: None,
        }
    }

    #[test]
    fn only_judged_frames_get_a_colour_scaled_to_the_change() {
        let c = comparison(vec![
            row("solve", 10.0, 20.0, Verdict::Slower),
            row("parse", 10.0, 30.0, Verdict::Noisy),
            row("fast", 40.0, 28.284_271_247, Verdict::Faster),
        ]);
        let stacks: BTreeMap<String, f64> = [
            ("main;parse".to_owned(), 5.0),
            ("main;solve;work".to_owned(), 7.0),
            ("main;fast".to_owned(), 2.0),
        ]
        .into_iter()
        .collect();
        let lines = lines(&stacks, &row_colours(&stacks, &c, false));
        assert_eq!(
            lines,
            [
                "[colour: full at 2× or ½×] 1000 0",
                // Half the time of a doubling: half the colour, blue.
                "main;fast 2500 2000",
                // Grew ×3, but not judged changed: no difference, white.
                "main;parse 5000 5000",
                // Twice: full red, on a zero-width-as-can-be line ending at `solve`.
                "main;solve 0 1000",
                "main;solve;work 7000 7000",
            ]
        );
    }

    #[test]
    fn the_svg_says_what_it_shows() {
        let c = comparison(vec![row("solve", 10.0, 20.0, Verdict::Slower)]);
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(
            run.join("active.folded"),
            "main;solve 7000\nmain;other 100\nmain;hashing::simd::avx2::kernels::add_lanes 900\n",
        )
        .unwrap();
        let head = Side {
            path: dir.path().to_path_buf(),
            program: "p".into(),
            benchmarks: vec![super::super::Benchmark {
                name: None,
                runs: vec![super::super::Run {
                    dir: run,
                    report: Default::default(),
                }],
            }],
        };
        let svg = differential_svg(&head, &c).unwrap().unwrap();
        let text = String::from_utf8(svg).unwrap();
        assert!(text.contains("3 runs of BASE, 3 of HEAD"), "{text}");
        assert!(text.contains("noise ±2.0%"), "{text}");
        assert!(
            text.contains("slower: solve +100.0% (noise ±2.0%)"),
            "{text}"
        );
        // `solve` full red; `other` white.
        assert!(text.contains("rgb(255,100,100)"), "{text}");
        assert!(text.contains("rgb(250,250,250)"), "{text}");
        // Labels keep the function's own name, as cpu.svg's: the middle goes.
        assert!(text.contains(">…::add_lanes</text>"), "{text}");
    }

    fn frame(path: &str, verdict: Verdict, base: f64, head: f64) -> FrameRow {
        FrameRow {
            path: path.split(';').map(str::to_owned).collect(),
            verdict,
            base_samples: base,
            head_samples: head,
            change: head / base - 1.0,
            interval: Some((1.8, 2.2)),
            noise: None,
        }
    }

    #[test]
    fn cpu_boxes_are_coloured_by_their_own_verdicts_and_marked_when_new_or_gone() {
        let shape = |entries: &[(&str, f64)]| -> BTreeMap<String, f64> {
            entries.iter().map(|(k, w)| (k.to_string(), *w)).collect()
        };
        let frames = Frames {
            rows: vec![
                frame("main;region;slow_kernel_[i]", Verdict::Slower, 20.0, 60.0),
                frame(
                    "main;region;hashing::simd::avx2::new_lanes",
                    Verdict::Appeared,
                    0.0,
                    30.0,
                ),
                frame(
                    "main;region;hashing::simd::sse2::old_lanes",
                    Verdict::Vanished,
                    30.0,
                    0.0,
                ),
            ],
            tested: 3,
            judged: true,
            base_shape: shape(&[
                ("main;region;slow_kernel_[i]", 20.0),
                ("main;region;hashing::simd::sse2::old_lanes", 30.0),
                ("main;steady", 30.0),
            ]),
            head_shape: shape(&[
                ("main;region;slow_kernel_[i]", 60.0),
                ("main;region;hashing::simd::avx2::new_lanes", 30.0),
                ("main;steady", 30.0),
            ]),
        };
        let c = comparison(Vec::new());
        let svg = |s| String::from_utf8(cpu_svg(&frames, &c, s).unwrap().unwrap()).unwrap();
        let head = svg(Shape::Head);
        // 3×: full red; the note in the tooltip, `_[i]` left out as inferno does; the
        // colour code not said.
        assert!(
            head.contains(
                "<title>slow_kernel (slower +200.0%, 20 → 60 samples a run of its own; 60 \
                 samples, 50.00%)</title><rect"
            ),
            "{head}"
        );
        assert!(head.contains("fill=\"rgb(255,100,100)\""), "{head}");
        // Not judged: white, its tooltip as cpu.svg's.
        assert!(
            head.contains(
                "<title>steady (30 samples, 25.00%)</title><rect x=\"75.0000%\" y=\"77\" \
                 width=\"25.0000%\" height=\"15\" fill=\"rgb(250,250,250)\""
            ),
            "{head}"
        );
        assert!(
            head.contains(&format!(
                "<title>hashing::simd::avx2::new_lanes (appeared: in HEAD only; 30 samples, \
                 25.00%)</title><rect x=\"0.0000%\" y=\"61\" width=\"25.0000%\" height=\"15\" \
                 fill=\"{APPEARED_FILL}\"{MARK_OUTLINE}"
            )),
            "{head}"
        );
        assert!(!head.contains("old_lanes"), "{head}");
        assert!(!head.contains(NOTE), "{head}");
        // The label is the name alone, the note kept to the tooltip.
        assert!(
            head.contains(">hashing::simd::avx2::new_lanes</text>"),
            "{head}"
        );
        let base = svg(Shape::Base);
        assert!(
            base.contains(
                "<title>hashing::simd::sse2::old_lanes (vanished: in BASE only; 30 samples"
            ),
            "{base}"
        );
        assert!(
            base.contains(&format!("fill=\"{VANISHED_FILL}\"{MARK_OUTLINE}")),
            "{base}"
        );
        assert!(!base.contains("new_lanes"), "{base}");
    }
}
