//! The spread of `--repeat`'s runs: per probe and region, the median over the runs, the
//! smallest and largest, and the noise the diff's rule uses (the relative standard deviation of
//! the runs). Saved at the top of the runs' folder as `report.json` (schema
//! `parprof-repeat/1`) and `report.md`, and printed.

use super::compare::{Measure, RowKind, compare_runs, measure_of};
use super::side::{REPEAT_SCHEMA, Side, load_side};
use super::{stats, views};
use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;

/// One probe or region over the runs of one side.
#[derive(Clone, Debug, Serialize)]
pub struct SpreadRow {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub benchmark: Option<String>,
    pub kind: RowKind,
    pub name: String,
    /// The figure of each run, in ns (0 where the run does not have it).
    pub runs_ns: Vec<f64>,
    pub median_ns: f64,
    pub min_ns: f64,
    pub max_ns: f64,
    /// The standard deviation of the logarithm of the figures: about the relative standard
    /// deviation. `None` with fewer than two runs or a run without the figure.
    pub relative_sd: Option<f64>,
    /// Calls of a probe, runs of a region, per run (median).
    pub calls: f64,
}

/// The spread of every row of a side.
#[derive(Clone, Debug, Serialize)]
pub struct Spread {
    /// First, so that a reader can tell this file from a run's report by its opening bytes.
    pub schema: &'static str,
    pub program: String,
    /// Runs per benchmark (the fewest).
    pub runs: usize,
    pub measure: Measure,
    /// Largest median first.
    pub rows: Vec<SpreadRow>,
}

/// The spread of the runs of `side`.
pub fn spread(side: &Side) -> Spread {
    let measure = measure_of(side);
    let mut rows = Vec::new();
    for b in &side.benchmarks {
        for (row, _) in compare_runs(&b.runs, &[], measure, &HashMap::new()) {
            let runs_ns = row.base_ns;
            let (min_ns, max_ns) = runs_ns
                .iter()
                .fold((f64::INFINITY, 0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
            let relative_sd = (runs_ns.len() >= 2 && runs_ns.iter().all(|&v| v > 0.0)).then(|| {
                let logs: Vec<f64> = runs_ns.iter().map(|v| v.ln()).collect();
                stats::mean_variance(&logs).1.sqrt()
            });
            rows.push(SpreadRow {
                benchmark: b.name.clone(),
                kind: row.kind,
                name: row.name,
                median_ns: row.base_median_ns,
                min_ns: if min_ns.is_finite() { min_ns } else { 0.0 },
                max_ns,
                relative_sd,
                calls: row.base_calls,
                runs_ns,
            });
        }
    }
    rows.sort_by(|a, b| b.median_ns.total_cmp(&a.median_ns));
    Spread {
        schema: REPEAT_SCHEMA,
        program: side.program.clone(),
        runs: side.runs_per_benchmark(),
        measure,
        rows,
    }
}

fn name(r: &SpreadRow) -> String {
    match &r.benchmark {
        Some(b) => format!("{b} › {}", r.name),
        None => r.name.clone(),
    }
}

fn plus_minus(sd: Option<f64>) -> String {
    sd.map_or_else(|| "–".to_owned(), |s| format!("±{:.1}%", s * 100.0))
}

/// What the `±` is, for `report.md`.
pub const EXPLANATION: &str = "`±` is the relative standard deviation of the runs (the \
standard deviation of the logarithm of the figure): a typical run lies within about that much of \
the others. It is the row's noise for `cargo parprof diff`, which reports a change only when it \
is at least twice that (moderated by a prior noise of 8%) and 5%, and a t-test over the runs, \
adjusted for all rows of the diff (Holm), finds it beyond noise.";

/// `report.md` at the top of the runs' folder.
pub fn markdown(s: &Spread) -> String {
    let what = match s.measure {
        Measure::Total => "probes: active time of all calls; regions: elapsed time of all runs",
        Measure::PerCall => "probes: active time per call; regions: elapsed time per run",
        Measure::PerIteration => {
            "per iteration of the benchmarked routine (criterion's count): probes' active time, \
             regions' elapsed time"
        }
    };
    let mut md = format!(
        "# parprof: spread over {} runs of `{}`\n\nEach run's own report is in its folder \
         (`run-1`, …). Per row, {what}: the median over the runs, the smallest and largest.\n\n\
         {EXPLANATION}\n\n| | name | median | min | max | ± | calls per run |\n\
         |---|---|---:|---:|---:|---:|---:|\n",
        s.runs, s.program
    );
    for r in &s.rows {
        md.push_str(&format!(
            "| {} | `{}` | {} | {} | {} | {} | {} |\n",
            views::kind(r.kind),
            name(r).replace('|', "\\|"),
            views::ns(r.median_ns),
            views::ns(r.min_ns),
            views::ns(r.max_ns),
            plus_minus(r.relative_sd),
            views::count(r.calls)
        ));
    }
    md
}

/// The terminal's summary: the top rows.
pub fn terminal(s: &Spread) -> String {
    let mut out = format!(
        "Spread over {} runs (median, min – max, ± relative standard deviation):\n",
        s.runs
    );
    for r in s.rows.iter().take(20) {
        out.push_str(&format!(
            "  {:>6} {:>10}  {} – {}  {:>7}  {}\n",
            views::kind(r.kind),
            views::ns(r.median_ns),
            views::ns(r.min_ns),
            views::ns(r.max_ns),
            plus_minus(r.relative_sd),
            name(r)
        ));
    }
    out
}

/// Reads the runs in `dir`, writes their spread there (`report.json`, `report.md`) and returns
/// the terminal's summary.
pub fn write_summary(dir: &Path) -> Result<String> {
    let s = spread(&load_side(dir)?);
    for (file, text) in [
        ("report.json", serde_json::to_string_pretty(&s)? + "\n"),
        ("report.md", markdown(&s)),
    ] {
        let path = dir.join(file);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(terminal(&s))
}
