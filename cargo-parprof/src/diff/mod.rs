//! `cargo parprof diff BASE HEAD`: what changed between two sets of runs, for a pull request.
//!
//! Each side is a run folder (with its `report.json`), a folder of run folders (several runs
//! of one commit), or a criterion bench's folder (`benchmarks.json`, one such folder per
//! benchmark). The comparison reads only those files and the `.folded` flamegraph files:
//!
//! 1. [`load_side`]: every run of a side, validated (a run folder, schema, one program);
//! 2. [`compare`]: per benchmark, per probe (its active time) and per region (its elapsed
//!    time), the median of each side's runs and a verdict by the noise rule of [`noise`]; the
//!    diagnoses that appeared or disappeared. A program's figures are totals; a benchmark's are
//!    per call and per region run, since criterion's profile mode runs each benchmark for a
//!    fixed time (a slower routine runs fewer times, in the same total);
//! 3. [`views`]: `diff.md`, `diff.json`, the differential flamegraphs, the terminal headline —
//!    all made in memory, then written together, so that a failure leaves nothing half-done.

pub mod noise;
pub mod views;

use crate::bench_harness::BenchIndex;
use anyhow::{Context, Result, bail};
use noise::Verdict;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The schema this comparison reads.
const REPORT_SCHEMA: &str = "parprof-report/1";

/// One run of a side: its folder and its report.
pub struct Run {
    pub dir: PathBuf,
    report: Value,
}

/// The runs of one benchmark of a bench, or of a whole program (`name` is `None`).
pub struct Benchmark {
    pub name: Option<String>,
    pub runs: Vec<Run>,
}

/// Every run of one side.
pub struct Side {
    pub path: PathBuf,
    pub program: String,
    /// One entry without a name for a program; one per benchmark for a criterion bench.
    pub benchmarks: Vec<Benchmark>,
}

impl Side {
    /// The `.folded` files with this name of every run, with the benchmark each belongs to.
    pub fn folded(&self, file: &str) -> Vec<(Option<&str>, PathBuf)> {
        self.benchmarks
            .iter()
            .flat_map(|b| {
                b.runs
                    .iter()
                    .map(move |r| (b.name.as_deref(), r.dir.join(file)))
            })
            .filter(|(_, p)| p.is_file())
            .collect()
    }

    /// Runs per benchmark (the fewest, should a benchmark have fewer).
    pub fn runs_per_benchmark(&self) -> usize {
        self.benchmarks
            .iter()
            .map(|b| b.runs.len())
            .min()
            .unwrap_or(0)
    }

    fn is_bench(&self) -> bool {
        self.benchmarks.iter().any(|b| b.name.is_some())
    }
}

/// Reads a run folder, a folder whose sub-folders are run folders, or a bench's folder.
pub fn load_side(path: &Path) -> Result<Side> {
    if !path.is_dir() {
        bail!(
            "{} is not a folder: give a run folder of `cargo parprof` (or a folder of them)",
            path.display()
        );
    }
    let Some(index) = BenchIndex::read(path)? else {
        let runs = load_runs(path)?;
        return Ok(Side {
            path: path.to_path_buf(),
            program: program_of(&runs[0]),
            benchmarks: vec![Benchmark { name: None, runs }],
        });
    };
    let mut benchmarks = Vec::new();
    for entry in &index.benchmarks {
        let runs = load_runs(&path.join(&entry.dir))
            .with_context(|| format!("benchmark `{}`", entry.name))?;
        if let Some(other) = runs.iter().find(|r| program_of(r) != index.program) {
            bail!(
                "{} is a run of `{}`, not of the bench `{}`",
                other.dir.display(),
                program_of(other),
                index.program
            );
        }
        benchmarks.push(Benchmark {
            name: Some(entry.name.clone()),
            runs,
        });
    }
    Ok(Side {
        path: path.to_path_buf(),
        program: index.program,
        benchmarks,
    })
}

/// The run in `path`, or the runs in its sub-folders, all of one program.
fn load_runs(path: &Path) -> Result<Vec<Run>> {
    let dirs: Vec<PathBuf> = if path.join("report.json").exists() {
        vec![path.to_path_buf()]
    } else {
        let mut subs: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("cannot read {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("report.json").exists())
            .collect();
        subs.sort();
        subs
    };
    if dirs.is_empty() {
        bail!(
            "{} is not a run folder: it has no report.json, nor sub-folders that have one",
            path.display()
        );
    }
    let runs = dirs
        .into_iter()
        .map(load_run)
        .collect::<Result<Vec<Run>>>()?;
    let program = program_of(&runs[0]);
    if let Some(other) = runs.iter().find(|r| program_of(r) != program) {
        bail!(
            "{} holds runs of different programs: `{program}` and `{}` ({})",
            path.display(),
            program_of(other),
            other.dir.display()
        );
    }
    Ok(runs)
}

fn load_run(dir: PathBuf) -> Result<Run> {
    let file = dir.join("report.json");
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let report: Value = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is damaged (not JSON); profile that run again",
            file.display()
        )
    })?;
    match report["schema"].as_str() {
        Some(REPORT_SCHEMA) => {}
        Some(other) => bail!(
            "{} has schema `{other}`; this parprof reads `{REPORT_SCHEMA}`",
            file.display()
        ),
        None => bail!("{} is not a parprof report (no schema)", file.display()),
    }
    if !report["probes"].is_array() || !report["regions"].is_array() {
        bail!("{} is damaged: no probes[] or regions[]", file.display());
    }
    Ok(Run { dir, report })
}

fn program_of(run: &Run) -> String {
    run.report["target"]["name"]
        .as_str()
        .unwrap_or("?")
        .to_owned()
}

/// What the figures of the rows are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// Sums over the whole run: a probe's active time of all calls, a region's elapsed time of
    /// all its runs.
    Total,
    /// Means: a probe's active time per call, a region's elapsed time per run (benchmarks).
    PerCall,
}

/// What a row measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RowKind {
    /// A probe's active time (overhead and switched-out time removed), all calls.
    Probe,
    /// A region's elapsed time.
    Region,
}

/// One probe or region, BASE against HEAD.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The benchmark of a bench; absent for a program.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub benchmark: Option<String>,
    pub kind: RowKind,
    pub name: String,
    /// Per run, in ns (absent runs count 0).
    pub base_ns: Vec<f64>,
    pub head_ns: Vec<f64>,
    pub base_median_ns: f64,
    pub head_median_ns: f64,
    /// (head − base) ÷ base of the medians.
    pub change: f64,
    pub verdict: Verdict,
    /// Two-sided Mann–Whitney p-value; `None` without a noise estimate.
    pub p_value: Option<f64>,
}

impl Row {
    pub fn delta_ns(&self) -> f64 {
        self.head_median_ns - self.base_median_ns
    }
}

/// A diagnosis present on one side only.
#[derive(Clone, Debug, Serialize)]
pub struct DiagnosisChange {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub benchmark: Option<String>,
    pub region: String,
    pub code: String,
    /// True: in HEAD, not in BASE.
    pub appeared: bool,
}

/// Everything `diff` reports.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub program: String,
    /// Runs per benchmark (per side for a program).
    pub base_runs: usize,
    pub head_runs: usize,
    pub measure: Measure,
    /// Both sides have at least two runs: verdicts come from the noise rule.
    pub noise_estimate: bool,
    /// Sorted by absolute time changed, largest first.
    pub rows: Vec<Row>,
    pub diagnoses: Vec<DiagnosisChange>,
}

/// Compares two sides of runs of the same program, benchmark by benchmark.
pub fn compare(base: &Side, head: &Side) -> Result<Comparison> {
    if base.program != head.program {
        bail!(
            "BASE and HEAD are runs of different programs: `{}` ({}) and `{}` ({})",
            base.program,
            base.path.display(),
            head.program,
            head.path.display()
        );
    }
    if base.is_bench() != head.is_bench() {
        bail!(
            "one side is a criterion bench profiled per benchmark, the other is not: profile both \
             the same way ({} and {})",
            base.path.display(),
            head.path.display()
        );
    }
    let measure = if base.is_bench() {
        Measure::PerCall
    } else {
        Measure::Total
    };
    let names: BTreeSet<Option<&str>> = base
        .benchmarks
        .iter()
        .chain(&head.benchmarks)
        .map(|b| b.name.as_deref())
        .collect();
    let mut rows = Vec::new();
    let mut diagnoses = Vec::new();
    for name in names {
        let (b, h) = (runs_of(base, name), runs_of(head, name));
        rows.extend(compare_runs(b, h, measure).map(|mut row| {
            row.benchmark = name.map(str::to_owned);
            row
        }));
        diagnoses.extend(diagnosis_changes(b, h).map(|mut d| {
            d.benchmark = name.map(str::to_owned);
            d
        }));
    }
    rows.sort_by(|a, b| {
        b.delta_ns()
            .abs()
            .total_cmp(&a.delta_ns().abs())
            .then_with(|| (&a.benchmark, a.kind, &a.name).cmp(&(&b.benchmark, b.kind, &b.name)))
    });
    let (base_runs, head_runs) = (base.runs_per_benchmark(), head.runs_per_benchmark());
    Ok(Comparison {
        program: base.program.clone(),
        base_runs,
        head_runs,
        measure,
        noise_estimate: base_runs >= 2 && head_runs >= 2,
        rows,
        diagnoses,
    })
}

/// The runs of benchmark `name` on a side (none if the side does not have it).
fn runs_of<'a>(side: &'a Side, name: Option<&str>) -> &'a [Run] {
    side.benchmarks
        .iter()
        .find(|b| b.name.as_deref() == name)
        .map_or(&[], |b| b.runs.as_slice())
}

/// The rows of the probes and regions of two sets of runs of one program or benchmark.
fn compare_runs(base: &[Run], head: &[Run], measure: Measure) -> impl Iterator<Item = Row> {
    let mut rows = Vec::new();
    for (kind, list, figure, count) in [
        (RowKind::Probe, "probes", "active_ns", "calls"),
        (RowKind::Region, "regions", "elapsed_ns", "instances"),
    ] {
        let count = (measure == Measure::PerCall).then_some(count);
        let b = per_run(base, list, figure, count);
        let h = per_run(head, list, figure, count);
        let names: BTreeSet<&String> = b.keys().chain(h.keys()).collect();
        for name in names {
            rows.push(row(
                kind,
                name,
                filled(b.get(name), base.len()),
                filled(h.get(name), head.len()),
                b.contains_key(name),
                h.contains_key(name),
            ));
        }
    }
    rows.into_iter()
}

/// name → the figure in each run (`None` where the run does not have it): the sum of `figure`
/// over the items of that name, divided by the sum of `count` if given.
fn per_run(
    runs: &[Run],
    list: &str,
    figure: &str,
    count: Option<&str>,
) -> BTreeMap<String, Vec<Option<f64>>> {
    let mut sums: BTreeMap<String, Vec<Option<(f64, f64)>>> = BTreeMap::new();
    for (i, run) in runs.iter().enumerate() {
        for item in run.report[list].as_array().into_iter().flatten() {
            let (Some(name), Some(value)) = (item["name"].as_str(), item[figure].as_f64()) else {
                continue;
            };
            let n = count.map_or(Some(1.0), |c| item[c].as_f64());
            let Some(n) = n else { continue };
            let slot = &mut sums
                .entry(name.to_owned())
                .or_insert_with(|| vec![None; runs.len()])[i];
            let (v0, n0) = slot.unwrap_or((0.0, 0.0));
            *slot = Some((v0 + value, n0 + n));
        }
    }
    sums.into_iter()
        .map(|(name, per_run)| {
            let figures = per_run
                .into_iter()
                .map(|s| {
                    s.map(|(value, n)| match count {
                        None => value,
                        Some(_) if n > 0.0 => value / n,
                        Some(_) => 0.0,
                    })
                })
                .collect();
            (name, figures)
        })
        .collect()
}

fn filled(values: Option<&Vec<Option<f64>>>, runs: usize) -> Vec<f64> {
    values.map_or_else(
        || vec![0.0; runs],
        |v| v.iter().map(|x| x.unwrap_or(0.0)).collect(),
    )
}

fn row(
    kind: RowKind,
    name: &str,
    base_ns: Vec<f64>,
    head_ns: Vec<f64>,
    in_base: bool,
    in_head: bool,
) -> Row {
    let (base_median_ns, head_median_ns) = (noise::median(&base_ns), noise::median(&head_ns));
    let (verdict, p_value) = match (in_base, in_head) {
        (false, true) => (Verdict::Appeared, None),
        (true, false) => (Verdict::Vanished, None),
        _ => noise::verdict(&base_ns, &head_ns),
    };
    Row {
        benchmark: None,
        kind,
        name: name.to_owned(),
        change: noise::relative_change(base_median_ns, head_median_ns),
        base_median_ns,
        head_median_ns,
        base_ns,
        head_ns,
        verdict,
        p_value,
    }
}

fn diagnosis_codes(runs: &[Run]) -> BTreeSet<(String, String)> {
    runs.iter()
        .flat_map(|r| r.report["regions"].as_array().into_iter().flatten())
        .flat_map(|region| {
            let name = region["name"].as_str().unwrap_or("?").to_owned();
            region["diagnoses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(move |d| Some((name.clone(), d["code"].as_str()?.to_owned())))
        })
        .collect()
}

fn diagnosis_changes(base: &[Run], head: &[Run]) -> impl Iterator<Item = DiagnosisChange> {
    let (b, h) = (diagnosis_codes(base), diagnosis_codes(head));
    let change = |(region, code): &(String, String), appeared| DiagnosisChange {
        benchmark: None,
        region: region.clone(),
        code: code.clone(),
        appeared,
    };
    let appeared = h.difference(&b).map(|d| change(d, true));
    let vanished = b.difference(&h).map(|d| change(d, false));
    appeared.chain(vanished).collect::<Vec<_>>().into_iter()
}

/// Options of `cargo parprof diff`.
#[derive(Clone, Debug, Default)]
pub struct DiffOptions {
    /// Fail (exit code 1) when a probe or region got slower, beyond noise, by more than this
    /// many percent.
    pub fail_above_percent: Option<f64>,
}

/// The rows that fail `--fail-above`.
pub fn failing<'a>(c: &'a Comparison, opts: &DiffOptions) -> Vec<&'a Row> {
    let Some(limit) = opts.fail_above_percent else {
        return Vec::new();
    };
    c.rows
        .iter()
        .filter(|r| r.verdict == Verdict::Slower && r.change * 100.0 > limit)
        .collect()
}
