//! The noise rule of `cargo parprof diff`: which rows changed beyond what the runs vary by
//! themselves, with the chance of any false alarm in a whole diff held at [`ALPHA`].
//!
//! Each row is tested on the logarithm of its per-run figures (changes of time are ratios) by
//! a two-sample t-test whose variance is moderated by a prior noise ([`PRIOR_NOISE`], weighted
//! as [`PRIOR_DF`] degrees of freedom: three runs that agree by chance do not make a change
//! certain), and the Holm–Bonferroni adjustment over every tested row of the diff turns the
//! p-values into adjusted ones — a diff of a dozen rows then needs far stronger evidence per
//! row than a diff of one, as it must not to raise an alarm on unchanged code a dozen times as
//! often. A row is `slower` or `faster` when
//!
//! - its adjusted p ≤ [`ALPHA`], and
//! - the change is at least [`MIN_EFFECT`] and at least [`NOISE_FACTOR`] × the row's noise (the
//!   moderated standard deviation of its runs, relative, pooled over both sides).
//!
//! A row that is not, whose change is at least [`MIN_EFFECT`] and would pass both with more
//! runs (same change, same noise of its own, at the strictest level of the family, α ÷ rows
//! tested) is `noisy`, and says how many runs a side would do; so is a row whose medians moved
//! by twice its noise or more though no number of runs would do (an outlier run: "needs over
//! 50 runs"). Any other row is `within noise`.
//! A figure missing in some runs (0) makes the test work on the figures relative to their
//! median instead of their logarithm.
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
/// The run-to-run noise assumed before a row's own runs are seen (relative standard
/// deviation), and the weight of that assumption in degrees of freedom (2 × (runs − 1) for
/// runs a side). On a shared machine a few runs can agree by chance far more closely than the
/// machine varies (a program's first step measured 16.3–16.5 ms in three runs and
/// 18.4–19.3 ms in three others, same code), and a test that believes them sees a change.
pub const PRIOR_NOISE: f64 = 0.08;
pub const PRIOR_DF: f64 = 4.0;

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
    /// The row's noise on that scale: the pooled standard deviation of its runs, moderated by
    /// [`PRIOR_NOISE`].
    pub noise: f64,
    /// The pooled standard deviation of the runs alone.
    pub own_noise: f64,
    /// The moderated t-test's two-sided p-value.
    pub p: f64,
    /// Runs on the larger side.
    pub runs: usize,
}

/// The test of a row's per-run figures; `None` with fewer than two runs on a side.
pub fn row_test(base: &[f64], head: &[f64]) -> Option<RowTest> {
    row_test_with_prior(base, head, PRIOR_NOISE)
}

/// [`row_test`] with the run-to-run noise assumed before the runs are seen, `prior` (at least
/// [`PRIOR_NOISE`] where the figures scatter by themselves, as counts of samples do).
pub fn row_test_with_prior(base: &[f64], head: &[f64], prior: f64) -> Option<RowTest> {
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
    let t = stats::moderated_t(&b, &h, prior, PRIOR_DF)?;
    Some(RowTest {
        effect: t.difference,
        noise: t.sd,
        own_noise: t.sample_sd,
        p: t.p,
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
                judge_tested(t, change, p_adjusted, family)
            }
        })
        .collect()
}

/// `change`: of the medians, relative.
fn judge_tested(t: &RowTest, change: f64, p_adjusted: f64, family: usize) -> Judgement {
    let direction = if t.effect > 0.0 {
        Verdict::Slower
    } else {
        Verdict::Faster
    };
    let median_effect = if change.is_finite() && change > -1.0 {
        change.ln_1p().abs()
    } else {
        f64::INFINITY
    };
    let (verdict, runs_needed) = if large_enough(t.effect, t.noise) && p_adjusted <= ALPHA {
        (direction, None)
    } else if median_effect < MIN_EFFECT.ln_1p() {
        (Verdict::WithinNoise, None)
    } else {
        match runs_needed(t, ALPHA / family as f64) {
            Some(n) => (Verdict::Noisy, Some(n)),
            // No number of runs would do, but the medians moved beyond twice the noise: the
            // row is too noisy to judge, not unchanged (an outlier run does this).
            None if median_effect >= NOISE_FACTOR * t.noise => (Verdict::Noisy, None),
            None => (Verdict::WithinNoise, None),
        }
    };
    Judgement {
        verdict,
        p_adjusted: Some(p_adjusted),
        runs_needed,
    }
}

/// At least [`MIN_EFFECT`] and [`NOISE_FACTOR`] × `noise`.
fn large_enough(effect: f64, noise: f64) -> bool {
    effect.abs() >= MIN_EFFECT.ln_1p() && effect.abs() >= NOISE_FACTOR * noise
}

/// The fewest runs a side (more than now, at most [`MAX_RUNS_ADVISED`]) at which a change of
/// `t.effect`, with the runs' own noise `t.own_noise`, would pass the rule at `level`.
fn runs_needed(t: &RowTest, level: f64) -> Option<usize> {
    (t.runs + 1..=MAX_RUNS_ADVISED).find(|&n| {
        let own_df = 2.0 * (n as f64 - 1.0);
        let df = own_df + PRIOR_DF;
        let var = (own_df * t.own_noise.powi(2) + PRIOR_DF * PRIOR_NOISE.powi(2)) / df;
        let se = (var * 2.0 / n as f64).sqrt();
        large_enough(t.effect, var.sqrt())
            && (se <= 0.0 || stats::two_sided_t_p(t.effect / se, df) <= level)
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
    fn a_change_below_five_percent_is_within_noise_however_steady() {
        let j = one(&[100.0, 100.1, 100.2], &[103.0, 103.1, 103.2]);
        assert_eq!(j.verdict, Verdict::WithinNoise);
        assert_eq!(j.runs_needed, None);
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
    fn runs_needed_is_the_first_count_whose_test_passes() {
        // Effect 0.2 with the prior's own noise: the moderated sd stays PRIOR_NOISE, the degrees
        // of freedom are 2(n − 1) + PRIOR_DF.
        let t = RowTest {
            effect: 0.2,
            noise: PRIOR_NOISE,
            own_noise: PRIOR_NOISE,
            p: 0.5,
            runs: 2,
        };
        let level = 0.02;
        let p_at = |n: usize| {
            let se = PRIOR_NOISE * (2.0 / n as f64).sqrt();
            stats::two_sided_t_p(0.2 / se, 2.0 * (n as f64 - 1.0) + PRIOR_DF)
        };
        let n = runs_needed(&t, level).unwrap();
        assert!(p_at(n) <= level && p_at(n - 1) > level, "n = {n}");
        let hopeless = RowTest {
            own_noise: 10.0,
            ..t
        };
        assert_eq!(runs_needed(&hopeless, level), None);
    }

    #[test]
    fn many_rows_need_stronger_evidence_than_one() {
        // Logarithms 0, 0.1, 0.2 against 0.25, 0.35, 0.45: slower alone; among 12 rows (its p
        // adjusted ×12) noisy.
        let base = [0.0, 0.1, 0.2].map(f64::exp);
        let head = [0.25, 0.35, 0.45].map(f64::exp);
        let t = row_test(&base, &head).unwrap();
        assert!((t.own_noise - 0.1).abs() < 1e-12, "{t:?}");
        let sd = ((4.0 * 0.01 + PRIOR_DF * PRIOR_NOISE * PRIOR_NOISE) / (4.0 + PRIOR_DF)).sqrt();
        assert!((t.noise - sd).abs() < 1e-12, "{t:?}");
        let expected_p = stats::two_sided_t_p(0.25 / (sd * (2.0f64 / 3.0).sqrt()), 4.0 + PRIOR_DF);
        assert!((t.p - expected_p).abs() < 1e-12, "{t:?}");
        let quiet = row_test(&[1.0, 1.1, 0.9], &[1.0, 0.9, 1.1]);
        let mut tests = vec![Some(t)];
        tests.extend(std::iter::repeat_n(quiet, 11));
        let changes = vec![0.28; 12];
        let alone = judge(&tests[..1], &changes[..1]);
        assert_eq!(alone[0].verdict, Verdict::Slower);
        let together = judge(&tests, &changes);
        assert_eq!(together[0].verdict, Verdict::Noisy, "{together:?}");
        assert!((together[0].p_adjusted.unwrap() - 12.0 * t.p).abs() < 1e-12);
    }

    #[test]
    fn an_outlier_run_makes_a_row_too_noisy_to_judge_not_unchanged() {
        // Measured: one run of three at 2.2× the others (a loaded VM), against a doubled step.
        let j = one(&[16.26, 17.1, 37.46], &[33.36, 35.05, 33.52]);
        assert_eq!((j.verdict, j.runs_needed), (Verdict::Noisy, None), "{j:?}");
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
