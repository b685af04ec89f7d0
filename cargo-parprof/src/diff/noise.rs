//! The noise rule of `cargo parprof diff`: which rows changed beyond what the runs vary by
//! themselves, with the chance of any false alarm in a whole diff held at [`ALPHA`].
//!
//! Each row is tested on the logarithm of its per-run figures (changes of time are ratios):
//! Welch's t-test gives a p-value per row, and the Holm–Bonferroni adjustment over every tested
//! row of the diff turns them into adjusted p-values — a diff of a dozen rows then needs far
//! stronger evidence per row than a diff of one, as it must not to raise an alarm on unchanged
//! code a dozen times as often. A row is `slower` or `faster` when
//!
//! - its adjusted p ≤ [`ALPHA`], and
//! - the change is at least [`MIN_EFFECT`] and at least [`NOISE_FACTOR`] × the row's noise (the
//!   standard deviation of its runs, relative, pooled over both sides).
//!
//! A row whose change passes the second condition but not the first is `noisy`: the runs are
//! too few to tell such a change from noise, and the row says how many runs a side would
//! (same change, same noise, at the strictest level of the family, α ÷ rows tested). Any other
//! row is `within noise`. A figure missing in some runs (0) makes the test work on the figures
//! relative to their median instead of their logarithm.
//!
//! With one run on a side there is no noise estimate: a change of at least
//! [`SINGLE_RUN_EFFECT`] is reported as such, and the comparison says that it is a single pair
//! of figures.

use super::stats;
use serde::Serialize;

/// The chance of a false `slower` or `faster` anywhere in a diff of unchanged code.
pub const ALPHA: f64 = 0.05;
/// Smallest relative change that counts, with a noise estimate.
pub const MIN_EFFECT: f64 = 0.05;
/// A change counts only when it is at least this many times the row's noise.
pub const NOISE_FACTOR: f64 = 2.0;
/// Smallest relative change that counts without a noise estimate (one run on a side).
pub const SINGLE_RUN_EFFECT: f64 = 0.10;
/// Runs a side beyond which a `noisy` row says "more than".
pub const MAX_RUNS_ADVISED: usize = 50;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Slower,
    Faster,
    /// Present in HEAD only.
    Appeared,
    /// Present in BASE only.
    Vanished,
    /// A change the runs are too few to tell from noise.
    Noisy,
    WithinNoise,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Slower => "slower",
            Verdict::Faster => "faster",
            Verdict::WithinNoise => "within noise",
            Verdict::Noisy => "noisy",
            Verdict::Appeared => "appeared",
            Verdict::Vanished => "vanished",
        }
    }

    /// A change beyond noise, that a gate acts on.
    pub fn is_change(self) -> bool {
        matches!(self, Verdict::Slower | Verdict::Faster)
    }
}

/// One row's test, before the adjustment over the family of rows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowTest {
    /// The change on the tested scale (the difference of the mean logarithms, or of the means
    /// relative to the median): about the relative change for small changes.
    pub effect: f64,
    /// The row's noise on that scale: the pooled standard deviation of the runs.
    pub noise: f64,
    /// Welch's two-sided p-value.
    pub p: f64,
    /// Runs on the larger side.
    pub runs: usize,
}

/// The test of a row's per-run figures; `None` with fewer than two runs on a side.
pub fn row_test(base: &[f64], head: &[f64]) -> Option<RowTest> {
    let all_positive = base.iter().chain(head).all(|&x| x > 0.0 && x.is_finite());
    let (b, h): (Vec<f64>, Vec<f64>) = if all_positive {
        (
            base.iter().map(|x| x.ln()).collect(),
            head.iter().map(|x| x.ln()).collect(),
        )
    } else {
        let all: Vec<f64> = base.iter().chain(head).copied().collect();
        let scale = stats::median(&all).abs().max(f64::MIN_POSITIVE);
        (
            base.iter().map(|x| x / scale).collect(),
            head.iter().map(|x| x / scale).collect(),
        )
    };
    let w = stats::welch(&b, &h)?;
    Some(RowTest {
        effect: w.difference,
        noise: w.pooled_sd,
        p: w.p,
        runs: base.len().max(head.len()),
    })
}

/// What the rule says of a row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Judgement {
    pub verdict: Verdict,
    /// The Holm-adjusted p-value; `None` without a test.
    pub p_adjusted: Option<f64>,
    /// For a `noisy` row: the runs a side that would tell its change from noise (`None`: more
    /// than [`MAX_RUNS_ADVISED`]).
    pub runs_needed: Option<usize>,
}

/// The verdicts of a family of rows: `tests[i]` and `changes[i]` (the relative change of the
/// medians) of row i. Rows without a test are judged by [`SINGLE_RUN_EFFECT`].
pub fn judge(tests: &[Option<RowTest>], changes: &[f64]) -> Vec<Judgement> {
    let tested: Vec<f64> = tests.iter().flatten().map(|t| t.p).collect();
    let family = tested.len().max(1);
    let mut adjusted = stats::holm_adjusted(&tested).into_iter();
    tests
        .iter()
        .zip(changes)
        .map(|(test, &change)| match test {
            None => single_pair(change),
            Some(t) => {
                let p_adjusted = adjusted.next().unwrap_or(1.0);
                judge_tested(t, p_adjusted, family)
            }
        })
        .collect()
}

fn judge_tested(t: &RowTest, p_adjusted: f64, family: usize) -> Judgement {
    let large_enough =
        t.effect.abs() >= MIN_EFFECT.ln_1p() && t.effect.abs() >= NOISE_FACTOR * t.noise;
    let (verdict, runs_needed) = if !large_enough {
        (Verdict::WithinNoise, None)
    } else if p_adjusted <= ALPHA {
        let v = if t.effect > 0.0 {
            Verdict::Slower
        } else {
            Verdict::Faster
        };
        (v, None)
    } else {
        (Verdict::Noisy, runs_needed(t, ALPHA / family as f64))
    };
    Judgement {
        verdict,
        p_adjusted: Some(p_adjusted),
        runs_needed,
    }
}

/// The fewest runs a side (more than now) at which a change of `t.effect` with noise
/// `t.noise` reaches p ≤ `level` by the t-test.
fn runs_needed(t: &RowTest, level: f64) -> Option<usize> {
    (t.runs + 1..=MAX_RUNS_ADVISED).find(|&n| {
        let se = t.noise * (2.0 / n as f64).sqrt();
        se <= 0.0 || stats::two_sided_t_p(t.effect / se, 2.0 * n as f64 - 2.0) <= level
    })
}

fn single_pair(change: f64) -> Judgement {
    let verdict = if change.abs() < SINGLE_RUN_EFFECT {
        Verdict::WithinNoise
    } else if change > 0.0 {
        Verdict::Slower
    } else {
        Verdict::Faster
    };
    Judgement {
        verdict,
        p_adjusted: None,
        runs_needed: None,
    }
}

/// (head − base) ÷ base; infinite when base is 0 and head is not.
pub fn relative_change(base: f64, head: f64) -> f64 {
    if base == 0.0 {
        if head == 0.0 { 0.0 } else { f64::INFINITY }
    } else {
        (head - base) / base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(base: &[f64], head: &[f64]) -> Judgement {
        let t = row_test(base, head);
        let change = relative_change(stats::median(base), stats::median(head));
        judge(&[t], &[change])[0]
    }

    #[test]
    fn a_clear_change_is_slower_or_faster() {
        let base = [100.0, 101.0, 102.0];
        assert_eq!(one(&base, &[200.0, 201.0, 199.0]).verdict, Verdict::Slower);
        assert_eq!(one(&base, &[50.0, 51.0, 49.0]).verdict, Verdict::Faster);
    }

    #[test]
    fn a_change_below_five_percent_is_within_noise_however_certain() {
        let j = one(&[100.0, 100.1, 100.2], &[103.0, 103.1, 103.2]);
        assert_eq!(j.verdict, Verdict::WithinNoise);
        assert!(j.p_adjusted.unwrap() < 1e-4, "{j:?}");
    }

    #[test]
    fn a_change_within_twice_the_noise_is_within_noise() {
        // ±20 % runs, medians 10 % apart.
        let j = one(&[80.0, 100.0, 120.0], &[90.0, 110.0, 130.0]);
        assert_eq!(j.verdict, Verdict::WithinNoise, "{j:?}");
    }

    #[test]
    fn three_separated_runs_among_a_dozen_rows_are_noisy() {
        // Every HEAD run above every BASE run (a rank test's smallest p, 0.10), +22 % with
        // ±8 % runs: slower alone, noisy among 12 rows, with a number of runs that would do.
        let (base, head) = ([92.0, 100.0, 108.0], [114.0, 122.0, 130.0]);
        let t = row_test(&base, &head);
        assert_eq!(one(&base, &head).verdict, Verdict::Slower);
        let quiet = row_test(&[1.0, 1.1, 0.9], &[1.0, 0.9, 1.1]);
        let mut tests = vec![t];
        tests.extend(std::iter::repeat_n(quiet, 11));
        let j = judge(&tests, &[0.22; 12])[0];
        assert_eq!(j.verdict, Verdict::Noisy, "{j:?}");
        let n = j.runs_needed.expect("a number of runs");
        assert!(n > 3 && n <= 10, "{j:?}");
    }

    #[test]
    fn runs_needed_is_the_first_count_whose_t_test_passes() {
        // Effect 0.2, noise 0.08 (t = 0.2 / (0.08 √(2/n))), level 0.05.
        let t = RowTest {
            effect: 0.2,
            noise: 0.08,
            p: 0.5,
            runs: 2,
        };
        let n = runs_needed(&t, 0.05).unwrap();
        let p_at = |n: usize| {
            stats::two_sided_t_p(0.2 / (0.08 * (2.0 / n as f64).sqrt()), 2.0 * n as f64 - 2.0)
        };
        assert!(p_at(n) <= 0.05 && p_at(n - 1) > 0.05, "n = {n}");
        assert_eq!(n, 3);
        let hopeless = RowTest { noise: 10.0, ..t };
        assert_eq!(runs_needed(&hopeless, 0.05), None);
    }

    #[test]
    fn many_rows_need_stronger_evidence_than_one() {
        // p ≈ 0.021 alone passes α = 0.05; among 12 rows (adjusted ×12) it does not.
        let base = [1.0, 2.0, 3.0].map(f64::exp);
        let head = [4.0, 5.0, 6.0].map(f64::exp);
        let t = row_test(&base, &head).unwrap();
        assert!((t.p - 0.021_311).abs() < 1e-6, "{t:?}");
        let quiet = row_test(&[1.0, 1.1, 0.9], &[1.0, 0.9, 1.1]);
        let mut tests = vec![Some(t)];
        tests.extend(std::iter::repeat_n(quiet, 11));
        let changes = vec![19.0; 12];
        let alone = judge(&tests[..1], &changes[..1]);
        assert_eq!(alone[0].verdict, Verdict::Slower);
        let together = judge(&tests, &changes);
        assert_eq!(together[0].verdict, Verdict::Noisy, "{together:?}");
        assert!((together[0].p_adjusted.unwrap() - 12.0 * t.p).abs() < 1e-9);
    }

    #[test]
    fn a_figure_missing_in_a_run_is_tested_on_the_relative_scale() {
        let t = row_test(&[0.0, 10.0, 10.0], &[10.0, 10.0, 10.0]).unwrap();
        // Relative to the median (10): base 0, 1, 1; head 1, 1, 1.
        assert!((t.effect - 1.0 / 3.0).abs() < 1e-12, "{t:?}");
    }

    #[test]
    fn one_run_a_side_is_judged_by_the_size_of_the_change() {
        assert_eq!(one(&[100.0], &[111.0]).verdict, Verdict::Slower);
        assert_eq!(one(&[100.0], &[105.0]).verdict, Verdict::WithinNoise);
        assert_eq!(one(&[100.0], &[105.0]).p_adjusted, None);
    }
}
