//! The views of a [`Comparison`]: `diff.md` (a pull-request comment), `diff.json`, the
//! differential flamegraphs, and the terminal headline. Each is made in memory.

use super::noise::{self, Verdict};
use super::{Comparison, DiagnosisChange, Measure, Row, RowKind, Side};
use crate::units::{code_list, human_duration};
use anyhow::{Context, Result};
use serde::Serialize;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;

/// The schema of `diff.json` (documented in `docs/diff-schema.md`).
pub const DIFF_SCHEMA: &str = "parprof-diff/1";
/// Rows in `diff.md` and on the terminal.
const TOP_ROWS: usize = 20;

/// "+98.4%", "−12.0%", "new".
pub fn signed_percent(change: f64) -> String {
    if change.is_infinite() {
        "new".to_owned()
    } else if change >= 0.0 {
        format!("+{:.1}%", change * 100.0)
    } else {
        format!("−{:.1}%", -change * 100.0)
    }
}

fn ns(v: f64) -> String {
    human_duration(v.max(0.0).round() as u64)
}

/// A row's name, with its benchmark for a bench (`parse rows › parse_line`).
pub fn row_name(r: &Row) -> String {
    match &r.benchmark {
        Some(b) => format!("{b} › {}", r.name),
        None => r.name.clone(),
    }
}

fn kind(k: RowKind) -> &'static str {
    match k {
        RowKind::Probe => "probe",
        RowKind::Region => "region",
    }
}

/// The headline: what got slower or faster, by how much.
pub fn headline(c: &Comparison) -> String {
    let changed: Vec<&Row> = c
        .rows
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Slower | Verdict::Faster))
        .collect();
    let runs = format!(
        "{} run{} of BASE, {} of HEAD",
        c.base_runs,
        if c.base_runs == 1 { "" } else { "s" },
        c.head_runs
    );
    if changed.is_empty() {
        return format!(
            "`{}`: no probe or region changed beyond noise ({runs}).",
            c.program
        );
    }
    let parts: Vec<String> = changed
        .iter()
        .take(3)
        .map(|r| {
            format!(
                "{} `{}` {} {} ({} → {})",
                kind(r.kind),
                row_name(r),
                r.verdict.as_str(),
                signed_percent(r.change),
                ns(r.base_median_ns),
                ns(r.head_median_ns)
            )
        })
        .collect();
    let more = changed.len().saturating_sub(3);
    let more = if more > 0 {
        format!(", and {more} more")
    } else {
        String::new()
    };
    format!("`{}`: {}{more} ({runs}).", c.program, parts.join("; "))
}

fn measure_sentence(c: &Comparison) -> &'static str {
    match c.measure {
        Measure::Total => {
            "Probes: active time of all calls (overhead and switched-out time removed); regions: \
             elapsed time of all runs; medians over the runs."
        }
        Measure::PerCall => {
            "Per benchmark (criterion's profile mode runs each for a fixed time): probes' active \
             time per call (overhead and switched-out time removed), regions' elapsed time per run; \
             medians over the runs."
        }
    }
}

fn noise_sentence(c: &Comparison) -> String {
    if c.noise_estimate {
        format!(
            "Verdicts: two-sided Mann–Whitney U test over the runs of each side, p ≤ {:.2} and a change of \
             the medians of at least {:.0}%.",
            noise::MAX_P,
            noise::MIN_EFFECT * 100.0
        )
    } else {
        format!(
            "No noise estimate: one run on a side (`cargo parprof --repeat N` records several); a change \
             of at least {:.0}% is reported as slower or faster.",
            noise::SINGLE_RUN_EFFECT * 100.0
        )
    }
}

/// `diff.md`: short enough for a pull-request comment.
pub fn markdown(c: &Comparison, figures: &[&str]) -> String {
    let mut md = format!("## parprof diff\n\n{}\n\n", headline(c));
    md.push_str("| | name | BASE | HEAD | change | verdict |\n|---|---|---:|---:|---:|---|\n");
    for r in c.rows.iter().take(TOP_ROWS) {
        md.push_str(&format!(
            "| {} | `{}` | {} | {} | {} | {} |\n",
            kind(r.kind),
            row_name(r).replace('|', "\\|"),
            ns(r.base_median_ns),
            ns(r.head_median_ns),
            signed_percent(r.change),
            r.verdict.as_str()
        ));
    }
    if c.rows.len() > TOP_ROWS {
        md.push_str(&format!(
            "\n… and {} more rows in `diff.json`.\n",
            c.rows.len() - TOP_ROWS
        ));
    }
    md.push_str(&format!(
        "\n{} {}\n",
        measure_sentence(c),
        noise_sentence(c)
    ));
    if !c.diagnoses.is_empty() {
        md.push_str("\n### Diagnoses\n\n");
        for DiagnosisChange {
            benchmark,
            region,
            code,
            appeared,
        } in &c.diagnoses
        {
            let what = if *appeared { "appeared" } else { "disappeared" };
            let bench = benchmark
                .as_ref()
                .map(|b| format!(" of benchmark `{b}`"))
                .unwrap_or_default();
            md.push_str(&format!("- `{code}` {what} in region `{region}`{bench}\n"));
        }
    }
    if !figures.is_empty() {
        md.push_str(&format!(
            "\nDifferential flamegraphs (red: grew in HEAD, blue: shrank): {}.\n",
            code_list(figures)
        ));
    }
    md
}

#[derive(Serialize)]
struct DiffJson<'a> {
    schema: &'static str,
    headline: String,
    noise_rule: String,
    #[serde(flatten)]
    comparison: &'a Comparison,
}

/// `diff.json`.
pub fn json(c: &Comparison) -> Result<String> {
    Ok(serde_json::to_string_pretty(&DiffJson {
        schema: DIFF_SCHEMA,
        headline: headline(c),
        noise_rule: noise_sentence(c),
        comparison: c,
    })?)
}

/// The terminal: the headline and the top rows.
pub fn terminal(c: &Comparison) -> String {
    let mut out = format!("{}\n", headline(c));
    for r in c.rows.iter().take(10) {
        out.push_str(&format!(
            "  {:>6} {:>10} → {:>10} {:>9}  {:<12} {}\n",
            kind(r.kind),
            ns(r.base_median_ns),
            ns(r.head_median_ns),
            signed_percent(r.change),
            r.verdict.as_str(),
            row_name(r)
        ));
    }
    out.push_str(&format!("{}\n", noise_sentence(c)));
    out
}

/// A differential flamegraph of the `.folded` files named `file` on both sides (every run of
/// a side summed, BASE normalised to HEAD's total), or `None` when neither side has stacks.
pub fn differential_svg(
    base: &Side,
    head: &Side,
    file: &str,
    title: &str,
) -> Result<Option<Vec<u8>>> {
    let (before, after) = (
        concatenated(&base.folded(file))?,
        concatenated(&head.folded(file))?,
    );
    if before.trim().is_empty() && after.trim().is_empty() {
        return Ok(None);
    }
    let mut diff = Vec::new();
    let opts = inferno::differential::Options {
        normalize: true,
        strip_hex: false,
    };
    inferno::differential::from_readers(opts, before.as_bytes(), after.as_bytes(), &mut diff)
        .with_context(|| format!("cannot compare the {file} files"))?;
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_owned();
    options.subtitle = Some(
        "red: grew from BASE to HEAD, blue: shrank (BASE normalised to HEAD's total)".to_owned(),
    );
    let mut svg = Vec::new();
    let text = String::from_utf8_lossy(&diff);
    inferno::flamegraph::from_lines(&mut options, text.lines(), &mut svg)
        .with_context(|| format!("cannot draw the differential flamegraph of {file}"))?;
    Ok(Some(svg))
}

/// The stack lines of every file (comment lines dropped), one after the other; a benchmark's
/// stacks under a root frame named after it, so the figure shows which benchmark changed.
fn concatenated(files: &[(Option<&str>, PathBuf)]) -> Result<String> {
    let mut all = String::new();
    for (benchmark, path) in files {
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| BufReader::new(f).read_to_string(&mut text))
            .with_context(|| format!("cannot read {}", path.display()))?;
        for line in text.as_bytes().lines() {
            let line = line?;
            if !line.starts_with('#') && !line.trim().is_empty() {
                if let Some(b) = benchmark {
                    all.push_str(&b.replace(';', ":"));
                    all.push(';');
                }
                all.push_str(&line);
                all.push('\n');
            }
        }
    }
    Ok(all)
}

/// The spread of each probe and region over the runs of one side (`--repeat`): median, min
/// and max, largest first.
pub fn spread(side: &Side) -> String {
    let comparison = super::compare(side, side).expect("a side compared with itself");
    let mut out = format!(
        "Spread over {} runs (median, min – max):\n",
        side.runs_per_benchmark()
    );
    for r in comparison.rows.iter().take(TOP_ROWS) {
        let (min, max) = r
            .base_ns
            .iter()
            .fold((f64::INFINITY, 0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        let spread = if r.base_median_ns > 0.0 {
            format!(" (±{:.1}%)", (max - min) / 2.0 / r.base_median_ns * 100.0)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "  {:>6} {:>10}  {} – {}{spread}  {}\n",
            kind(r.kind),
            ns(r.base_median_ns),
            ns(min),
            ns(max),
            row_name(r)
        ));
    }
    out
}
