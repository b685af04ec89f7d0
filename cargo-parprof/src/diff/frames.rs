//! Where the CPU time moved: every box of the CPU flamegraph compared between the sides, by the
//! rule that judges the rows ([`super::paired`]'s pair by pair, else [`super::noise`]'s).
//!
//! A box is a call path, all threads together (work stealing spreads one function over the
//! workers differently in every run: per thread, its samples would move run to run though the
//! code did not). Its figure in a run is its own samples, those whose innermost frame it is
//! (per iteration of a benchmark with criterion's count, as the rows are): a function that got
//! slower moves its own box, not its callers' (whose boxes only hold it) nor its siblings'. Not
//! its share of all samples either: a box's share moves whenever any other box moves, so one
//! function made 3× slower would make every other box look faster.
//!
//! A count of samples scatters by itself: one of about n varies by about √n run to run, ±45% at
//! 5 samples. A few pairs of small counts can agree by chance far more closely than that (an
//! unchanged box measured 5, 6, 5, 3 samples against 7, 7, 6, 4: +27% on four pairs, judged
//! `slower` under the rows' prior alone), so a box's prior noise is the rows' and that counting
//! noise together ([`counting_prior`]).
//!
//! A box present on one side only is `appeared` (HEAD) or `vanished` (BASE) when it is in no run
//! of the other side, in most runs of its own, and holds at least [`MIN_MARKED`] samples a run
//! there: a rare path that a few samples happen to hit is neither. Boxes whose own samples
//! average under [`MIN_TESTED`] a run are not tested: no rule could tell their change from the
//! samples' own scatter, and each would only make the family larger.

use super::compare::{Comparison, Measure, measure_of};
use super::noise::{self, Verdict};
use super::paired;
use super::side::{Run, Side};
use super::stats;
use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The CPU samples' folded stacks of a run.
pub const CPU_FOLDED: &str = "cpu.folded";
/// Fewest own samples a run (both sides' mean) for a box to be tested.
pub const MIN_TESTED: f64 = 5.0;
/// Fewest samples a run (its own and its callees') for a box to be marked appeared or vanished.
pub const MIN_MARKED: f64 = 5.0;

/// One box that moved: judged slower or faster, or present on one side only.
#[derive(Clone, Debug, Serialize)]
pub struct FrameRow {
    /// The call path, outermost first; a benchmark's name first for a bench.
    pub path: Vec<String>,
    pub verdict: Verdict,
    /// Own samples a run, the mean of each side (all samples under it for a box present on one
    /// side only).
    pub base_samples: f64,
    pub head_samples: f64,
    /// The judged change of its own samples, relative (infinite for an appeared box, −1 for a
    /// vanished one).
    pub change: f64,
    /// Of a paired comparison: the change's bounds at the rule's level.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<(f64, f64)>,
    /// Otherwise: the relative standard deviation of its runs, both sides pooled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise: Option<f64>,
}

impl FrameRow {
    /// The path as the folded text writes it.
    pub fn key(&self) -> String {
        self.path.join(";")
    }

    /// Samples a run that moved.
    pub fn moved(&self) -> f64 {
        (self.head_samples - self.base_samples).abs()
    }
}

/// The CPU boxes of a comparison.
#[derive(Clone, Debug, Default)]
pub struct Frames {
    /// The boxes that moved, largest move first.
    pub rows: Vec<FrameRow>,
    /// Boxes tested (the family the rule's false-alarm rate is held over).
    pub tested: usize,
    /// Both sides have two runs or more: changes were judged (appearing and vanishing need
    /// no noise estimate).
    pub judged: bool,
    /// Each side's stacks, all threads together: own samples, the mean a run.
    pub base_shape: BTreeMap<String, f64>,
    pub head_shape: BTreeMap<String, f64>,
}

/// One side's boxes of one benchmark (or of the program).
#[derive(Default)]
struct Profile {
    runs: usize,
    /// path → own samples in each run.
    own: BTreeMap<String, Vec<f64>>,
    /// path → samples in each run, its callees' included.
    total: BTreeMap<String, Vec<f64>>,
    /// Each run's divisor: its measured iterations, or 1.
    per: Vec<f64>,
    /// Runs that have CPU samples.
    sampled: usize,
}

/// `stack weight`, or `None` for a comment, an empty or a malformed line.
pub(super) fn folded_line(line: &str) -> Option<(&str, f64)> {
    let line = line.trim();
    if line.starts_with('#') {
        return None;
    }
    let (stack, weight) = line.rsplit_once(' ')?;
    let weight: f64 = weight.parse().ok()?;
    (!stack.is_empty() && weight.is_finite() && weight >= 0.0).then_some((stack, weight))
}

impl Profile {
    fn read(runs: &[Run], benchmark: Option<&str>, measure: Measure) -> Result<Profile> {
        let mut p = Profile {
            runs: runs.len(),
            ..Profile::default()
        };
        for (i, run) in runs.iter().enumerate() {
            let per = match run.measured_iterations() {
                Some(n) if measure == Measure::PerIteration => n,
                _ => 1.0,
            };
            p.per.push(per);
            let path = run.dir.join(CPU_FOLDED);
            if !path.is_file() {
                continue;
            }
            p.sampled += 1;
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            for (stack, weight) in text.lines().filter_map(folded_line) {
                // The thread's root goes: all threads together.
                let Some((_, frames)) = stack.split_once(';') else {
                    continue;
                };
                let key = match benchmark {
                    Some(name) => format!("{};{frames}", name.replace(';', ":")),
                    None => frames.to_owned(),
                };
                p.add(&key, i, weight);
            }
        }
        Ok(p)
    }

    fn add(&mut self, key: &str, run: usize, weight: f64) {
        let runs = self.runs;
        self.own
            .entry(key.to_owned())
            .or_insert_with(|| vec![0.0; runs])[run] += weight;
        let mut end = 0;
        while end < key.len() {
            end = key[end..].find(';').map_or(key.len(), |at| end + at);
            let prefix = &key[..end];
            (self.total.entry(prefix.to_owned())).or_insert_with(|| vec![0.0; runs])[run] += weight;
            end += 1;
        }
    }

    fn own_of(&self, key: &str) -> Vec<f64> {
        self.own
            .get(key)
            .cloned()
            .unwrap_or_else(|| vec![0.0; self.runs])
    }

    fn total_of(&self, key: &str) -> Vec<f64> {
        self.total
            .get(key)
            .cloned()
            .unwrap_or_else(|| vec![0.0; self.runs])
    }

    /// Own samples a run, per iteration where the rows are.
    fn figures(&self, key: &str) -> Vec<f64> {
        (self.own_of(key).iter().zip(&self.per))
            .map(|(s, per)| s / per)
            .collect()
    }

    /// Mean own samples a run of each path.
    fn shape(&self) -> impl Iterator<Item = (String, f64)> + '_ {
        let runs = self.runs.max(1) as f64;
        (self.own.iter()).map(move |(k, v)| (k.clone(), v.iter().sum::<f64>() / runs))
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// A box present on `own`'s side only: in no run of `other`, in most runs of `own`, and at
/// least [`MIN_MARKED`] samples a run there (`own` and `other`: its samples in each run).
fn one_sided(own: &[f64], other: &[f64]) -> bool {
    let present = own.iter().filter(|&&s| s > 0.0).count();
    other.iter().all(|&s| s == 0.0) && 2 * present > own.len() && mean(own) >= MIN_MARKED
}

/// The box `key` as appeared or vanished, if it is, from its samples in each run of each side.
fn marked(key: &str, base: &[f64], head: &[f64]) -> Option<FrameRow> {
    let (verdict, base_samples, head_samples, change) = if one_sided(head, base) {
        (Verdict::Appeared, 0.0, mean(head), f64::INFINITY)
    } else if one_sided(base, head) {
        (Verdict::Vanished, mean(base), 0.0, -1.0)
    } else {
        return None;
    };
    Some(FrameRow {
        path: key.split(';').map(str::to_owned).collect(),
        verdict,
        base_samples,
        head_samples,
        change,
        interval: None,
        noise: None,
    })
}

/// The noise assumed of a box before its runs are seen: `rows_prior` and the scatter of counts of
/// about `base` and `head` samples a run, on the scale of the test (the log ratio of a pair, or
/// one run's logarithm: `per_run`).
fn counting_prior(rows_prior: f64, base: f64, head: f64, per_run: bool) -> f64 {
    let (b, h) = (base.max(0.5), head.max(0.5));
    let counting = if per_run {
        (1.0 / b + 1.0 / h) / 2.0
    } else {
        1.0 / b + 1.0 / h
    };
    (rows_prior.powi(2) + counting).sqrt()
}

/// A box to test: its path and its figures on each side.
struct Candidate {
    key: String,
    base: Vec<f64>,
    head: Vec<f64>,
    base_samples: f64,
    head_samples: f64,
}

/// Compares the CPU boxes of `base` and `head`, judged by the rule that judged `c`.
pub fn compare_frames(base: &Side, head: &Side, c: &Comparison) -> Result<Frames> {
    let measure = measure_of(head);
    let names: BTreeSet<Option<&str>> = (base.benchmarks.iter().chain(&head.benchmarks))
        .map(|b| b.name.as_deref())
        .collect();
    let mut frames = Frames {
        judged: base.runs_per_benchmark() >= 2 && head.runs_per_benchmark() >= 2,
        ..Frames::default()
    };
    let mut candidates = Vec::new();
    for name in names {
        let (b, h) = (
            Profile::read(base.runs_of(name), name, measure)?,
            Profile::read(head.runs_of(name), name, measure)?,
        );
        frames.base_shape.extend(b.shape());
        frames.head_shape.extend(h.shape());
        // A side without CPU samples (not recorded) has no boxes to compare with.
        if b.sampled == 0 || h.sampled == 0 {
            continue;
        }
        let paths: BTreeSet<&String> = b.total.keys().chain(h.total.keys()).collect();
        for key in paths {
            if let Some(row) = marked(key, &b.total_of(key), &h.total_of(key)) {
                frames.rows.push(row);
                continue;
            }
            let (base_samples, head_samples) = (mean(&b.own_of(key)), mean(&h.own_of(key)));
            if frames.judged && (base_samples + head_samples) / 2.0 >= MIN_TESTED {
                candidates.push(Candidate {
                    key: key.clone(),
                    base: b.figures(key),
                    head: h.figures(key),
                    base_samples,
                    head_samples,
                });
            }
        }
    }
    frames.tested = candidates.len();
    frames.rows.extend(judge(&candidates, c));
    frames
        .rows
        .sort_by(|a, b| b.moved().total_cmp(&a.moved()).then(a.path.cmp(&b.path)));
    Ok(frames)
}

/// The candidates judged changed, by the paired rule when `c` was paired, else by the noise
/// rule over the runs of each side.
fn judge(candidates: &[Candidate], c: &Comparison) -> Vec<FrameRow> {
    let row = |k: &Candidate, verdict, change, interval, noise| FrameRow {
        path: k.key.split(';').map(str::to_owned).collect(),
        verdict,
        base_samples: k.base_samples,
        head_samples: k.head_samples,
        change,
        interval,
        noise,
    };
    if let Some(pairing) = &c.pairing {
        let series: Vec<(&[f64], &[f64])> = (candidates.iter())
            .map(|k| (k.base.as_slice(), k.head.as_slice()))
            .collect();
        let priors: Vec<f64> = (candidates.iter())
            .map(|k| {
                counting_prior(
                    paired::PAIR_PRIOR_NOISE,
                    k.base_samples,
                    k.head_samples,
                    false,
                )
            })
            .collect();
        let judgements = paired::judge_series_with_priors(&series, &priors, pairing.threshold);
        return (candidates.iter().zip(judgements))
            .filter_map(|(k, j)| {
                let j = j.filter(|j| j.verdict.is_change())?;
                Some(row(k, j.verdict, j.change, Some(j.interval), None))
            })
            .collect();
    }
    let tests: Vec<Option<noise::RowTest>> = (candidates.iter())
        .map(|k| {
            let prior = counting_prior(noise::PRIOR_NOISE, k.base_samples, k.head_samples, true);
            noise::row_test_with_prior(&k.base, &k.head, prior)
        })
        .collect();
    let changes: Vec<f64> = (candidates.iter())
        .map(|k| noise::relative_change(stats::median(&k.base), stats::median(&k.head)))
        .collect();
    let judgements = noise::judge(&tests, &changes);
    (candidates.iter().zip(&tests).zip(changes).zip(judgements))
        .filter(|(_, j)| j.verdict.is_change())
        .map(|(((k, t), change), j)| row(k, j.verdict, change, None, t.map(|t| t.noise)))
        .collect()
}

impl Frames {
    /// The rows to name: the judged ones, and of a subtree that appeared or vanished its
    /// outermost box only (the boxes under it are new or gone with it).
    pub fn named(&self) -> impl Iterator<Item = &FrameRow> {
        let marked: BTreeSet<String> = (self.rows.iter())
            .filter(|r| !r.verdict.is_change())
            .map(FrameRow::key)
            .collect();
        self.rows.iter().filter(move |r| {
            r.verdict.is_change()
                || r.path.len() < 2
                || !marked.contains(&r.path[..r.path.len() - 1].join(";"))
        })
    }
}

/// Which side's shape a CPU figure is drawn in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Base,
    Head,
}

impl Shape {
    /// The figure's file.
    pub fn file(self) -> &'static str {
        match self {
            Shape::Base => "diff-cpu-base.svg",
            Shape::Head => "diff-cpu.svg",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::compare::Pairing;
    use crate::diff::side::Benchmark;
    use std::path::Path;

    /// A side of runs whose `cpu.folded` are `texts`.
    fn side(dir: &Path, texts: &[String]) -> Side {
        let runs = (texts.iter().enumerate())
            .map(|(i, text)| {
                let run = dir.join(format!("run-{}", i + 1));
                std::fs::create_dir_all(&run).unwrap();
                std::fs::write(run.join(CPU_FOLDED), text).unwrap();
                Run {
                    dir: run,
                    report: Default::default(),
                }
            })
            .collect();
        Side {
            path: dir.to_path_buf(),
            program: "p".into(),
            benchmarks: vec![Benchmark { name: None, runs }],
        }
    }

    fn comparison(pairs: usize) -> Comparison {
        Comparison {
            program: "p".into(),
            base_runs: pairs,
            head_runs: pairs,
            measure: Measure::Total,
            noise_estimate: true,
            rows_tested: 0,
            rows: Vec::new(),
            diagnoses: Vec::new(),
            pairing: Some(Pairing {
                pairs,
                looks: 1,
                budget_s: 60.0,
                elapsed_s: 1.0,
                threshold: 0.1,
                level: paired::level(),
            }),
            recorded_apart_s: None,
        }
    }

    /// Six pairs: `slow` 3× its samples in HEAD, `old` renamed `new`, the rest as they were
    /// (a few samples of scatter), on two threads whose shares differ run to run.
    #[test]
    fn a_slower_box_is_judged_and_a_renamed_one_vanishes_and_appears() {
        let run = |slow: u32, hot: &str, scatter: u32, split: u32| {
            format!(
                "worker 1;w;region;slow {}\nworker 2;w;region;slow {}\n\
                 worker 1;w;region;steady {}\nworker 2;w;region;steady {}\n\
                 worker 1;w;region;{hot};leaf 60\nmain;m {}\nworker 2;w;rare 1\n",
                slow * split / 4,
                slow - slow * split / 4,
                50 + scatter,
                52 - scatter / 2,
                3 + scatter % 2,
            )
        };
        let dir = tempfile::tempdir().unwrap();
        let base: Vec<String> = (0..6)
            .map(|i| run(40 + i % 3, "old", i % 4, 1 + i % 3))
            .collect();
        let head: Vec<String> = (0..6)
            .map(|i| run(120 + (i + 1) % 3, "new", (i + 2) % 4, 3 - i % 3))
            .collect();
        let (base, head) = (
            side(&dir.path().join("base"), &base),
            side(&dir.path().join("head"), &head),
        );
        let frames = compare_frames(&base, &head, &comparison(6)).unwrap();
        let found: Vec<(String, Verdict)> =
            (frames.rows.iter()).map(|r| (r.key(), r.verdict)).collect();
        // Threads together: `w;region;slow` is one box of about 40 → 120 samples.
        assert!(
            found.contains(&("w;region;slow".into(), Verdict::Slower)),
            "{found:?}"
        );
        for (key, verdict) in [
            ("w;region;new", Verdict::Appeared),
            ("w;region;new;leaf", Verdict::Appeared),
            ("w;region;old", Verdict::Vanished),
            ("w;region;old;leaf", Verdict::Vanished),
        ] {
            assert!(found.contains(&(key.into(), verdict)), "{found:?}");
        }
        // Nothing else moved: `steady` is tested and within noise; `rare` (one sample a run)
        // and `m` (3–4) are not tested.
        assert_eq!(found.len(), 5, "{found:?}");
        assert_eq!(frames.tested, 2, "{found:?}");
        let slow = &frames
            .rows
            .iter()
            .find(|r| r.key() == "w;region;slow")
            .unwrap();
        assert!((slow.change - 2.0).abs() < 0.1, "{slow:?}");
        // The subtrees are named by their outermost box.
        let named: Vec<String> = frames.named().map(FrameRow::key).collect();
        assert_eq!(named.len(), 3, "{named:?}");
        assert_eq!(frames.head_shape["w;region;new;leaf"], 60.0);
        assert!(!frames.head_shape.contains_key("w;region;old;leaf"));
    }

    #[test]
    fn without_two_runs_a_side_only_presence_is_marked() {
        let dir = tempfile::tempdir().unwrap();
        let base = side(&dir.path().join("b"), &["t;a 10\nt;b 10\n".into()]);
        let head = side(&dir.path().join("h"), &["t;a 40\nt;c 10\n".into()]);
        let mut c = comparison(1);
        c.pairing = None;
        let frames = compare_frames(&base, &head, &c).unwrap();
        assert!(!frames.judged);
        let found: Vec<(String, Verdict)> =
            (frames.rows.iter()).map(|r| (r.key(), r.verdict)).collect();
        assert_eq!(
            found,
            [
                ("b".to_owned(), Verdict::Vanished),
                ("c".to_owned(), Verdict::Appeared)
            ]
        );
        // A side without CPU samples: nothing to compare, nothing vanished.
        std::fs::remove_file(head.benchmarks[0].runs[0].dir.join(CPU_FOLDED)).unwrap();
        let frames = compare_frames(&base, &head, &c).unwrap();
        assert!(frames.rows.is_empty(), "{:?}", frames.rows);
    }

    /// Measured: an unchanged box's own samples in four pairs, 5, 6, 5, 3 against 7, 7, 6, 4.
    /// The rows' prior alone calls it slower; with the counting noise it is not judged.
    #[test]
    fn small_counts_that_agree_by_chance_are_not_a_change() {
        let folded = |n: u32| format!("t;f;small {n}\nt;f;big 200\n");
        let dir = tempfile::tempdir().unwrap();
        let base: Vec<String> = [5, 6, 5, 3].map(folded).to_vec();
        let head: Vec<String> = [7, 7, 6, 4].map(folded).to_vec();
        let (base, head) = (
            side(&dir.path().join("b"), &base),
            side(&dir.path().join("h"), &head),
        );
        let series = [(&[5.0, 6.0, 5.0, 3.0][..], &[7.0, 7.0, 6.0, 4.0][..])];
        let rows_rule = paired::judge_series(&series, 0.1);
        assert_eq!(rows_rule[0].unwrap().verdict, Verdict::Slower);
        let frames = compare_frames(&base, &head, &comparison(4)).unwrap();
        assert_eq!(frames.tested, 2);
        assert!(frames.rows.is_empty(), "{:?}", frames.rows);
    }
}
