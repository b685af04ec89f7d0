//! Differential flamegraphs that follow the verdicts: HEAD's stacks (the mean per run of each
//! benchmark, under a root frame named after it), with colour only on the frames whose probe or
//! region the noise rule judged `slower` (red) or `faster` (blue), as strong as the table's
//! change (full colour at twice or half the time). Every other frame is white: a frame that
//! grew within noise is not painted as if it had changed.
//!
//! inferno colours a differential line's last frame by the difference of its two counts,
//! relative to the largest difference of the graph. So each judged frame gets that difference
//! from its row's change, an invisible line (zero width) fixes the largest at "twice", and
//! counts are kept in thousandths of the unit so that a marker line of a frame that has no
//! time of its own adds at most one unit to its width.

use super::compare::{Comparison, Row};
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

/// A judged row's colour: + red, − blue, up to [`FULL`].
fn colour(r: &Row) -> Option<i64> {
    if !r.verdict.is_change() || r.base_median_ns <= 0.0 || r.head_median_ns <= 0.0 {
        return None;
    }
    let ratio = (r.head_median_ns / r.base_median_ns).ln() / std::f64::consts::LN_2;
    let strength = (ratio.abs().min(1.0) * FULL as f64).round().max(1.0) as i64;
    Some(if r.verdict == Verdict::Slower {
        strength
    } else {
        -strength
    })
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
            for (stack, weight) in text.lines().filter_map(folded_line) {
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

/// `stack weight`, or `None` for a comment, an empty or a malformed line.
fn folded_line(line: &str) -> Option<(&str, f64)> {
    let line = line.trim();
    if line.starts_with('#') {
        return None;
    }
    let (stack, weight) = line.rsplit_once(' ')?;
    let weight: f64 = weight.parse().ok()?;
    (!stack.is_empty() && weight.is_finite() && weight >= 0.0).then_some((stack, weight))
}

/// The differential lines: `stack original new`, HEAD's counts as `new`, each judged frame's
/// colour as the difference (on its own line, or a zero-width one ending at it).
fn lines(stacks: &BTreeMap<String, f64>, c: &Comparison, bench: bool) -> Vec<String> {
    let judged: HashMap<(Option<&str>, &str), i64> = c
        .rows
        .iter()
        .filter_map(|r| Some(((r.benchmark.as_deref(), r.name.as_str()), colour(r)?)))
        .collect();
    let mut marked: BTreeMap<String, (u64, i64)> = stacks
        .iter()
        .map(|(s, w)| (s.clone(), ((w * SCALE).round() as u64, 0)))
        .collect();
    for stack in stacks.keys() {
        let frames: Vec<&str> = stack.split(';').collect();
        let benchmark = bench.then(|| frames[0]);
        for depth in usize::from(bench)..frames.len() {
            if let Some(&delta) = judged.get(&(benchmark, frames[depth])) {
                let prefix = frames[..=depth].join(";");
                marked.entry(prefix).or_insert((0, 0)).1 = delta;
            }
        }
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

/// The differential flamegraph of the `.folded` files named `file`, or `None` when HEAD has
/// no stacks.
pub fn differential_svg(
    head: &Side,
    c: &Comparison,
    file: &str,
    title: &str,
    unit: &str,
) -> Result<Option<Vec<u8>>> {
    let stacks = head_stacks(head, file)?;
    if stacks.values().all(|w| *w <= 0.0) {
        return Ok(None);
    }
    let lines = lines(&stacks, c, head.is_bench());
    let mut options = flamegraph::Options::default();
    options.title = title.to_owned();
    options.subtitle = Some(subtitle(c, head));
    options.count_name = unit.to_owned();
    options.factor = 1.0 / SCALE;
    let mut svg = Vec::new();
    flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut svg)
        .with_context(|| format!("cannot draw the differential flamegraph of {file}"))?;
    // Labels lose their middle, not the function's own name, as cpu.svg's.
    let geometry = Geometry {
        image_width: options.image_width.map_or(1200.0, |w| w as f64),
        font_size: options.font_size as f64,
        font_width: options.font_width,
    };
    Ok(Some(
        relabel(&String::from_utf8_lossy(&svg), geometry).into_bytes(),
    ))
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
        let lines = lines(&stacks, &c, false);
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
                    report: serde_json::Value::Null,
                }],
            }],
        };
        let svg = differential_svg(&head, &c, "active.folded", "Active", "ns")
            .unwrap()
            .unwrap();
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
}
