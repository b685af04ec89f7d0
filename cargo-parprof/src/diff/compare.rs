//! The comparison of two sides: its rows, their verdicts by the noise rule, the diagnoses that
//! changed (step 2 of [`super`]'s list).

use super::moved_regions;
use super::noise::{self, RowTest, Verdict};
use super::side::{Run, Side};
use super::stats;
use anyhow::{Result, bail};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Sides recorded further apart than this (the middles of their runs' start times, in
/// seconds) are said to be: the noise estimate comes from each side's own runs, so it holds the
/// machine's drift over the minute or so that a side's runs take, not over the time between
/// the sides. Two recordings of one commit made about 4 minutes apart on a CI runner gave 9
/// false verdicts in 132 rows (load 4–7), while sides recorded a minute apart on a steady
/// machine are sound: two minutes lies between.
pub const FAR_APART_S: f64 = 120.0;

/// A call count differs between the sides when their runs' counts do not overlap and the
/// medians differ by at least this much, relatively.
pub const CALLS_CHANGE: f64 = 0.10;

/// What the figures of the rows are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// Sums over the whole run: a probe's active time of all calls, a region's elapsed time of
    /// all its runs.
    Total,
    /// Means: a probe's active time per call, a region's elapsed time per run (benchmarks
    /// without criterion's iteration count).
    PerCall,
    /// Per iteration of the benchmarked routine, as criterion counted its measured batch: a
    /// probe's active time and calls, a region's elapsed time and runs, each ÷ iterations.
    PerIteration,
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
    /// Calls of a probe, runs of a region, per run: the median of each side.
    pub base_calls: f64,
    pub head_calls: f64,
    /// The count changed beyond its own spread ([`CALLS_CHANGE`]): a finding of its own.
    pub calls_changed: bool,
    pub verdict: Verdict,
    /// The moderated t-test's two-sided p-value over the runs; `None` without a noise estimate.
    pub p_value: Option<f64>,
    /// That p-value adjusted (Holm) over all rows of the diff.
    pub p_adjusted: Option<f64>,
    /// The row's noise: the standard deviation of its runs, relative, both sides pooled.
    pub noise: Option<f64>,
    /// For a `noisy` row, the runs a side that would tell its change from noise; `None` when
    /// more than [`noise::MAX_RUNS_ADVISED`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs_needed: Option<usize>,
    /// Of a paired comparison: the bounds of the change (relative) at the rule's level.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<(f64, f64)>,
}

impl Row {
    pub fn delta_ns(&self) -> f64 {
        self.head_median_ns - self.base_median_ns
    }

    /// The order of `diff.md`: changes first, then new and gone rows, changed counts, rows
    /// too noisy to judge, and last the rows within noise.
    fn rank(&self) -> u8 {
        match self.verdict {
            Verdict::Slower => 0,
            Verdict::Faster => 1,
            Verdict::Appeared => 2,
            Verdict::Vanished => 3,
            _ if self.calls_changed => 4,
            Verdict::Noisy => 5,
            Verdict::WithinNoise => 6,
        }
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

/// How a paired comparison was run.
#[derive(Clone, Debug, Serialize)]
pub struct Pairing {
    /// Pairs run (each a run of BASE and one of HEAD, in alternating order).
    pub pairs: usize,
    /// Times the rule was applied to the pairs so far.
    pub looks: usize,
    /// Seconds the runs could take, and took (builds not counted).
    pub budget_s: f64,
    pub elapsed_s: f64,
    /// The bound of `within noise`, relative.
    pub threshold: f64,
    /// The level each look tests at: α ÷ [`super::paired::MAX_LOOKS`].
    pub level: f64,
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
    /// Rows with a test: the family the false-alarm rate is held over.
    pub rows_tested: usize,
    /// Ordered by verdict (slower, faster, appeared, vanished, calls changed, noisy, within
    /// noise), then by the absolute time changed, largest first.
    pub rows: Vec<Row>,
    pub diagnoses: Vec<DiagnosisChange>,
    /// Present when BASE and HEAD were run alternated, pair by pair ([`super::paired`]): the
    /// verdicts are then the paired rule's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pairing: Option<Pairing>,
    /// Seconds between the middles of the sides' recordings; `None` when a run does not say
    /// when it started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded_apart_s: Option<f64>,
}

impl Comparison {
    /// The sides were recorded one after the other, further apart than [`FAR_APART_S`].
    pub fn far_apart(&self) -> Option<f64> {
        self.recorded_apart_s
            .filter(|&s| self.pairing.is_none() && s > FAR_APART_S)
    }
}

/// Compares two sides of runs of the same program, benchmark by benchmark.
pub fn compare(base: &Side, head: &Side) -> Result<Comparison> {
    let measure = check_comparable(base, head)?;
    let names: BTreeSet<Option<&str>> = base
        .benchmarks
        .iter()
        .chain(&head.benchmarks)
        .map(|b| b.name.as_deref())
        .collect();
    let mut rows = Vec::new();
    let mut tests = Vec::new();
    let mut diagnoses = Vec::new();
    for name in names {
        let (b, h) = (base.runs_of(name), head.runs_of(name));
        // BASE's regions under HEAD's names where only their line moved.
        let moved = moved_regions::base_to_head(b, h);
        for (mut row, test) in compare_runs(b, h, measure, &moved) {
            row.benchmark = name.map(str::to_owned);
            rows.push(row);
            tests.push(test);
        }
        diagnoses.extend(diagnosis_changes(b, h, &moved).map(|mut d| {
            d.benchmark = name.map(str::to_owned);
            d
        }));
    }
    let rows_tested = judge(&mut rows, &tests);
    sort_rows(&mut rows);
    let (base_runs, head_runs) = (base.runs_per_benchmark(), head.runs_per_benchmark());
    Ok(Comparison {
        program: base.program.clone(),
        base_runs,
        head_runs,
        measure,
        noise_estimate: base_runs >= 2 && head_runs >= 2,
        rows_tested,
        rows,
        diagnoses,
        pairing: None,
        recorded_apart_s: (base.middle_start_ms())
            .zip(head.middle_start_ms())
            .map(|(b, h)| (h - b).abs() / 1000.0),
    })
}

/// The order of `diff.md`: by verdict ([`Row::rank`]), then the absolute time changed, largest
/// first.
pub(super) fn sort_rows(rows: &mut [Row]) {
    rows.sort_by(|a, b| {
        a.rank()
            .cmp(&b.rank())
            .then_with(|| b.delta_ns().abs().total_cmp(&a.delta_ns().abs()))
            .then_with(|| (&a.benchmark, a.kind, &a.name).cmp(&(&b.benchmark, b.kind, &b.name)))
    });
}

/// The sides are of one program, profiled the same way; what their figures measure.
fn check_comparable(base: &Side, head: &Side) -> Result<Measure> {
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
    Ok(match (measure_of(base), measure_of(head)) {
        (Measure::PerIteration, Measure::PerIteration) => Measure::PerIteration,
        (Measure::Total, _) => Measure::Total,
        _ => Measure::PerCall,
    })
}

/// What the rows of `side` measure: totals for a program; for a bench, per iteration of the
/// benchmarked routine when every run carries criterion's count of its measured batch (the
/// hooked profile mode), per call otherwise.
pub(super) fn measure_of(side: &Side) -> Measure {
    if !side.is_bench() {
        Measure::Total
    } else if side.counts_iterations() {
        Measure::PerIteration
    } else {
        Measure::PerCall
    }
}

/// Applies the noise rule to all rows at once (rows present on one side only are not tested);
/// returns how many rows were tested.
fn judge(rows: &mut [Row], tests: &[Option<RowTest>]) -> usize {
    let one_sided = |r: &Row| matches!(r.verdict, Verdict::Appeared | Verdict::Vanished);
    let tests: Vec<Option<RowTest>> = rows
        .iter()
        .zip(tests)
        .map(|(r, t)| if one_sided(r) { None } else { *t })
        .collect();
    let changes: Vec<f64> = rows.iter().map(|r| r.change).collect();
    let judgements = noise::judge(&tests, &changes);
    for ((row, test), j) in rows.iter_mut().zip(&tests).zip(judgements) {
        if one_sided(row) {
            continue;
        }
        row.verdict = j.verdict;
        row.p_value = test.map(|t| t.p);
        row.p_adjusted = j.p_adjusted;
        row.noise = test.map(|t| t.noise);
        row.runs_needed = j.runs_needed;
    }
    tests.iter().flatten().count()
}

/// A row's sums in one run: the figure (ns) and the count (calls, or region runs).
type Sums = Option<(f64, f64)>;

/// The rows of the probes and regions of two sets of runs of one program or benchmark, each
/// with its test (verdicts are given later, over all rows); `moved` names BASE's regions whose
/// line moved by HEAD's names ([`moved_regions`]).
pub(super) fn compare_runs(
    base: &[Run],
    head: &[Run],
    measure: Measure,
    moved: &HashMap<String, String>,
) -> Vec<(Row, Option<RowTest>)> {
    let mut rows = Vec::new();
    let unchanged = HashMap::new();
    let items: [(RowKind, ItemsOf, _); 2] = [
        (RowKind::Probe, probe_items, &unchanged),
        (RowKind::Region, region_items, moved),
    ];
    for (kind, items, renamed) in items {
        let per_iteration = measure == Measure::PerIteration;
        let b = per_run(base, kind, items, renamed, per_iteration);
        let h = per_run(head, kind, items, &unchanged, per_iteration);
        let names: BTreeSet<&String> = b.keys().chain(h.keys()).collect();
        let none = |n: usize| vec![None; n];
        for name in names {
            let bs = b.get(name).cloned().unwrap_or_else(|| none(base.len()));
            let hs = h.get(name).cloned().unwrap_or_else(|| none(head.len()));
            rows.push(row(kind, name, &bs, &hs, measure));
        }
    }
    rows
}

/// The iterations a kind of row's figures cover (see [`Run::whole_run_iterations`]).
fn iterations_of(run: &Run, kind: RowKind) -> Option<f64> {
    match kind {
        RowKind::Probe => run.measured_iterations(),
        RowKind::Region => run.whole_run_iterations(),
    }
}

/// A run's items of one kind, each as its name, its figure (ns) and its count (calls, or
/// region runs).
type ItemsOf = fn(&Run) -> Vec<(&str, f64, f64)>;

fn probe_items(run: &Run) -> Vec<(&str, f64, f64)> {
    (run.report.probes.iter())
        .map(|p| (p.name.as_str(), p.active_ns, p.calls))
        .collect()
}

/// The regions cover the whole run, warm-up included (`bench.whole_run_views`).
fn region_items(run: &Run) -> Vec<(&str, f64, f64)> {
    (run.report.regions.iter())
        .map(|r| (r.name.as_str(), r.elapsed_ns, r.instances))
        .collect()
}

/// name → its sums in each run (`None` where the run does not have it), summed over the items
/// of that name, and divided by the run's measured iterations when `per_iteration`; an item
/// whose name `renamed` holds goes under the new one.
fn per_run(
    runs: &[Run],
    kind: RowKind,
    items: ItemsOf,
    renamed: &HashMap<String, String>,
    per_iteration: bool,
) -> BTreeMap<String, Vec<Sums>> {
    let mut sums: BTreeMap<String, Vec<Sums>> = BTreeMap::new();
    for (i, run) in runs.iter().enumerate() {
        let iterations = match iterations_of(run, kind) {
            Some(n) if per_iteration => n,
            _ => 1.0,
        };
        for (name, value, n) in items(run) {
            let name = renamed.get(name).map_or(name, String::as_str);
            let value = value / iterations;
            let n = n / iterations;
            let slot = &mut sums
                .entry(name.to_owned())
                .or_insert_with(|| vec![None; runs.len()])[i];
            let (v0, n0) = slot.unwrap_or((0.0, 0.0));
            *slot = Some((v0 + value, n0 + n));
        }
    }
    sums
}

/// The figure of each run: the sum (a total), or the sum per call (0 in a run without it).
fn figures(sums: &[Sums], measure: Measure) -> Vec<f64> {
    sums.iter()
        .map(|s| match (s, measure) {
            (None, _) => 0.0,
            (Some((value, _)), Measure::Total | Measure::PerIteration) => *value,
            (Some((value, n)), Measure::PerCall) if *n > 0.0 => value / n,
            (Some(_), Measure::PerCall) => 0.0,
        })
        .collect()
}

fn counts(sums: &[Sums]) -> Vec<f64> {
    sums.iter().map(|s| s.map_or(0.0, |(_, n)| n)).collect()
}

/// The counts of the runs of the two sides do not overlap and their medians differ by at
/// least [`CALLS_CHANGE`].
fn calls_changed(base: &[f64], head: &[f64]) -> bool {
    let range = |v: &[f64]| {
        v.iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            })
    };
    let ((blo, bhi), (hlo, hhi)) = (range(base), range(head));
    let apart = bhi < hlo || hhi < blo;
    let change = noise::relative_change(stats::median(base), stats::median(head));
    apart && change.abs() >= CALLS_CHANGE
}

fn row(
    kind: RowKind,
    name: &str,
    base: &[Sums],
    head: &[Sums],
    measure: Measure,
) -> (Row, Option<RowTest>) {
    let (base_ns, head_ns) = (figures(base, measure), figures(head, measure));
    let (base_median_ns, head_median_ns) = (stats::median(&base_ns), stats::median(&head_ns));
    let (in_base, in_head) = (
        base.iter().any(Option::is_some),
        head.iter().any(Option::is_some),
    );
    let verdict = match (in_base, in_head) {
        (false, true) => Verdict::Appeared,
        (true, false) => Verdict::Vanished,
        _ => Verdict::WithinNoise,
    };
    let (base_calls, head_calls) = (counts(base), counts(head));
    let test = noise::row_test(&base_ns, &head_ns);
    let row = Row {
        benchmark: None,
        kind,
        name: name.to_owned(),
        change: noise::relative_change(base_median_ns, head_median_ns),
        base_median_ns,
        head_median_ns,
        base_ns,
        head_ns,
        calls_changed: in_base && in_head && calls_changed(&base_calls, &head_calls),
        base_calls: stats::median(&base_calls),
        head_calls: stats::median(&head_calls),
        verdict,
        p_value: None,
        p_adjusted: None,
        noise: None,
        runs_needed: None,
        interval: None,
    };
    (row, test)
}

/// The (region, diagnosis) pairs of `runs`, regions renamed as `renamed` says, with the number
/// of runs that have each.
fn diagnosis_codes(
    runs: &[Run],
    renamed: &HashMap<String, String>,
) -> BTreeMap<(String, String), usize> {
    let mut runs_with = BTreeMap::new();
    for run in runs {
        let pairs: BTreeSet<(String, String)> = (run.report.regions.iter())
            .flat_map(|region| {
                let name = region.name.as_str();
                let name = renamed.get(name).map_or(name, String::as_str);
                (region.diagnoses.iter()).map(move |d| (name.to_owned(), d.code.clone()))
            })
            .collect();
        for pair in pairs {
            *runs_with.entry(pair).or_insert(0) += 1;
        }
    }
    runs_with
}

/// The diagnoses that appeared (in most of HEAD's runs, in none of BASE's) or vanished (the
/// other way round): one that comes and goes among the runs of a side is that side's noise,
/// not a change.
fn diagnosis_changes(
    base: &[Run],
    head: &[Run],
    moved: &HashMap<String, String>,
) -> impl Iterator<Item = DiagnosisChange> {
    let (b, h) = (
        diagnosis_codes(base, moved),
        diagnosis_codes(head, &HashMap::new()),
    );
    let change = |(region, code): &(String, String), appeared| DiagnosisChange {
        benchmark: None,
        region: region.clone(),
        code: code.clone(),
        appeared,
    };
    let in_most = |n: usize, runs: usize| 2 * n > runs;
    let appeared = (h.iter())
        .filter(|&(d, &n)| in_most(n, head.len()) && !b.contains_key(d))
        .map(|(d, _)| change(d, true));
    let vanished = (b.iter())
        .filter(|&(d, &n)| in_most(n, base.len()) && !h.contains_key(d))
        .map(|(d, _)| change(d, false));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::side::{Benchmark, REPEAT_SCHEMA, load_side};
    use crate::diff::{spread, views};
    use serde_json::{Value, json};
    use std::path::PathBuf;

    /// A run's report with probes `(name, active ns, calls)`.
    fn report(probes: &[(&str, f64, f64)]) -> Value {
        let probes: Vec<Value> = probes
            .iter()
            .map(|(name, ns, calls)| json!({"name": name, "active_ns": ns, "calls": calls}))
            .collect();
        json!({
            "schema": "parprof-report/1",
            "target": {"name": "prog"},
            "probes": probes,
            "regions": [],
        })
    }

    fn side(runs: Vec<Value>) -> Side {
        Side {
            path: PathBuf::from("side"),
            program: "prog".into(),
            benchmarks: vec![Benchmark {
                name: None,
                runs: runs
                    .into_iter()
                    .map(|report| Run {
                        dir: PathBuf::from("run"),
                        report: serde_json::from_value(report).unwrap(),
                    })
                    .collect(),
            }],
        }
    }

    #[test]
    fn rows_carry_call_counts_and_a_changed_count_is_a_finding() {
        let base = side(
            [100.0, 101.0, 102.0]
                .map(|ns| report(&[("leaf", ns, 4096.0), ("step", 50.0, 10.0)]))
                .to_vec(),
        );
        let head = side(
            [100.5, 101.5, 99.5]
                .map(|ns| report(&[("leaf", ns, 131_072.0), ("step", 50.0, 10.0)]))
                .to_vec(),
        );
        let c = compare(&base, &head).unwrap();
        let leaf = c.rows.iter().find(|r| r.name == "leaf").unwrap();
        assert_eq!((leaf.base_calls, leaf.head_calls), (4096.0, 131_072.0));
        assert!(leaf.calls_changed);
        assert_eq!(leaf.verdict, Verdict::WithinNoise);
        assert_eq!(views::calls_text(leaf), "4 096 → 131 072 calls");
        let step = c.rows.iter().find(|r| r.name == "step").unwrap();
        assert!(!step.calls_changed);
        assert_eq!(views::calls_text(step), "10 calls");
        // The changed count ranks before a row with nothing to report.
        assert_eq!(c.rows[0].name, "leaf");
        let md = views::markdown(&c, &Default::default(), &[]);
        assert!(md.contains("### Call counts changed"), "{md}");
        assert!(md.contains("1 call count changed"), "{md}");
    }

    /// A benchmark's runs carry criterion's count of the measured batch: rows are per
    /// iteration, so a run that fitted fewer iterations under load keeps its figures and its
    /// counts, and finer leaves read as more time per iteration, not as faster calls.
    #[test]
    fn benchmarks_with_criterions_count_are_compared_per_iteration() {
        let bench = |runs: Vec<(f64, f64, f64)>| Side {
            path: PathBuf::from("side"),
            program: "prog".into(),
            benchmarks: vec![Benchmark {
                name: Some("sort".into()),
                runs: (runs.into_iter())
                    .map(|(iterations, ns, calls)| {
                        let mut report = report(&[("leaf", ns, calls)]);
                        report["bench"] = json!({ "measured_iterations": iterations });
                        Run {
                            dir: PathBuf::from("run"),
                            report: serde_json::from_value(report).unwrap(),
                        }
                    })
                    .collect(),
            }],
        };
        // 1 ms and 8 calls an iteration on both sides; HEAD's runs fitted half the iterations.
        let base = bench(vec![(1000.0, 1e9, 8000.0), (1010.0, 1.01e9, 8080.0)]);
        let head = bench(vec![(500.0, 0.5e9, 4000.0), (505.0, 0.505e9, 4040.0)]);
        let c = compare(&base, &head).unwrap();
        assert_eq!(c.measure, Measure::PerIteration);
        let leaf = &c.rows[0];
        assert_eq!((leaf.base_median_ns, leaf.head_median_ns), (1e6, 1e6));
        assert_eq!((leaf.base_calls, leaf.head_calls), (8.0, 8.0));
        assert!(!leaf.calls_changed);
        // Finer leaves: 32 calls an iteration, each a third as long, 1.33 ms in all.
        let finer = bench(vec![(400.0, 0.533e9, 12_800.0), (404.0, 0.538e9, 12_928.0)]);
        let c = compare(&base, &finer).unwrap();
        let leaf = &c.rows[0];
        assert!(leaf.change > 0.3, "{leaf:?}");
        assert!(leaf.calls_changed);
        assert_eq!(views::calls_text(leaf), "8 → 32 calls");
        // Without the count (criterion not hooked), per call as before.
        let mut unhooked = bench(vec![(1000.0, 1e9, 8000.0)]);
        unhooked.benchmarks[0].runs[0].report.bench = None;
        assert_eq!(compare(&unhooked, &head).unwrap().measure, Measure::PerCall);
    }

    #[test]
    fn rows_are_ordered_by_verdict_then_size() {
        // `big` moves most but within its noise; `small` is a clear change.
        let base = side(
            [(1000.0, 10.0), (1500.0, 10.1), (800.0, 10.2)]
                .map(|(big, small)| report(&[("big", big, 1.0), ("small", small, 1.0)]))
                .to_vec(),
        );
        let head = side(
            [(1300.0, 20.0), (900.0, 20.1), (1600.0, 20.2)]
                .map(|(big, small)| report(&[("big", big, 1.0), ("small", small, 1.0)]))
                .to_vec(),
        );
        let c = compare(&base, &head).unwrap();
        assert_eq!(c.rows_tested, 2);
        let order: Vec<(&str, Verdict)> = c
            .rows
            .iter()
            .map(|r| (r.name.as_str(), r.verdict))
            .collect();
        assert_eq!(
            order,
            [("small", Verdict::Slower), ("big", Verdict::WithinNoise)]
        );
        let opts = DiffOptions {
            fail_above_percent: Some(50.0),
        };
        assert_eq!(failing(&c, &opts).len(), 1);
    }

    #[test]
    fn the_spread_of_repeated_runs_is_saved_and_the_side_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        for (i, ns) in [100.0, 110.0, 121.0].into_iter().enumerate() {
            let run = dir.path().join(format!("run-{}", i + 1));
            std::fs::create_dir_all(&run).unwrap();
            let text = report(&[("step", ns, 2.0)]).to_string();
            std::fs::write(run.join("report.json"), text).unwrap();
        }
        let printed = spread::write_summary(dir.path()).unwrap();
        assert!(printed.contains("±9.5%"), "{printed}");
        let saved: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap())
                .unwrap();
        assert_eq!(saved["schema"], REPEAT_SCHEMA);
        let row = &saved["rows"][0];
        assert_eq!(
            (
                &row["median_ns"],
                &row["min_ns"],
                &row["max_ns"],
                &row["calls"]
            ),
            (&json!(110.0), &json!(100.0), &json!(121.0), &json!(2.0))
        );
        // ln 100, ln 110, ln 121: steps of ln 1.1, standard deviation ln 1.1.
        let sd = row["relative_sd"].as_f64().unwrap();
        assert!((sd - 1.1f64.ln()).abs() < 1e-12, "{row:#}");
        let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
        assert!(md.contains("relative standard deviation"), "{md}");
        // The summary is not taken for a run.
        assert_eq!(load_side(dir.path()).unwrap().runs_per_benchmark(), 3);
    }

    /// Sides whose runs started at `base_s` and `head_s` (seconds).
    fn recorded_at(base_s: &[f64], head_s: &[f64]) -> Comparison {
        let runs = |starts: &[f64]| {
            side(
                (starts.iter())
                    .map(|s| {
                        let mut r = report(&[("step", 100.0, 1.0)]);
                        r["target"]["started_unix_ms"] = json!(1.8e12 + s * 1000.0);
                        r
                    })
                    .collect(),
            )
        };
        compare(&runs(base_s), &runs(head_s)).unwrap()
    }

    #[test]
    fn sides_recorded_far_apart_are_said_to_be_once() {
        // Three runs a side, 20 s each; HEAD's middle 5 minutes after BASE's.
        let c = recorded_at(&[0.0, 20.0, 40.0], &[300.0, 320.0, 340.0]);
        assert_eq!(c.recorded_apart_s, Some(300.0));
        let md = views::markdown(&c, &Default::default(), &[]);
        assert_eq!(md.matches("Recorded far apart").count(), 1, "{md}");
        assert!(md.contains("recorded 5.0 minutes apart"), "{md}");
        assert!(md.contains("`cargo parprof diff --base REV"), "{md}");
        let terminal = views::terminal(&c, &Default::default());
        assert_eq!(terminal.matches("recorded 5.0 minutes apart").count(), 1);
        // A minute apart: nothing to say.
        let c = recorded_at(&[0.0, 20.0, 40.0], &[60.0, 80.0, 100.0]);
        assert_eq!(c.far_apart(), None);
        assert!(!views::markdown(&c, &Default::default(), &[]).contains("far apart"));
        // Runs that do not say when they started: nothing known, nothing said.
        let c = compare(&side(vec![report(&[])]), &side(vec![report(&[])])).unwrap();
        assert_eq!(c.recorded_apart_s, None);
    }
}
