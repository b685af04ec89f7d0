//! The paired rule of `cargo parprof diff --base REV`: BASE and HEAD run alternated, pair by
//! pair (B H, H B, B H, …: each side first in half the pairs), so that a drift of the machine —
//! another job starting, a slow phase of the host — reaches both runs of a pair alike and
//! cancels in their ratio, where two series recorded one after the other carry it whole into
//! their difference.
//!
//! Each row is tested on its pairs' differences: the logarithm of HEAD's figure over BASE's
//! (changes of time are ratios; their mean is the change, their spread the noise), or, where a
//! figure is 0 in some run, the difference relative to the row's median. A one-sample t-test
//! of those differences, their variance moderated by a prior ([`PAIR_PRIOR_NOISE`] on
//! [`noise::PRIOR_DF`] degrees of freedom, so that a few pairs agreeing by chance do not make a
//! change certain), decides each row at a level that holds the chance of any false verdict in
//! the whole comparison at [`noise::ALPHA`], over every row (Holm) and every look at the pairs
//! ([`MAX_LOOKS`]: the pairs grow until each row is decided, and each look is a chance to be
//! wrong):
//!
//! - `slower` / `faster`: the adjusted p ≤ α ÷ [`MAX_LOOKS`] and the change is at least
//!   [`noise::MIN_EFFECT`];
//! - `within noise`: the change's interval at that level (Bonferroni over the rows) lies within
//!   ± the threshold (`--fail-above`, at least [`noise::MIN_EFFECT`]): too small to matter, and
//!   shown to be;
//! - `noisy`: neither yet; with the pairs that would decide it, were the change and the noise
//!   what they are now.

pub use super::compare::Pairing;
use super::compare::{Comparison, Row, sort_rows};
use super::noise::{self, Verdict};
use super::stats::{self, TTest};

/// Pairs of the first look: two of each order.
pub const MIN_PAIRS: usize = 4;
/// Looks at most (4, 6, 10, 16, 24, 36, 54, 82 pairs): the level of each is α ÷ this.
pub const MAX_LOOKS: usize = 8;
/// The spread of a pair's log ratio assumed before the row's own pairs are seen.
pub const PAIR_PRIOR_NOISE: f64 = 0.03;
/// Pairs beyond which a `noisy` row says "more than".
pub const MAX_PAIRS_ADVISED: usize = 500;

/// Whether BASE runs first in pair `pair` (from 0): B H, H B, B H, …
pub fn base_first(pair: usize) -> bool {
    pair.is_multiple_of(2)
}

/// The pairs of the look after one at `pairs`: half as many again, even, so that each order
/// stays as frequent as the other.
pub fn next_look(pairs: usize) -> usize {
    let more = (pairs * 3).div_ceil(2).max(MIN_PAIRS);
    more + more % 2
}

/// The bound of `within noise` for a gate at `fail_above` (relative).
pub fn threshold(fail_above: Option<f64>) -> f64 {
    fail_above.unwrap_or(0.0).max(noise::MIN_EFFECT)
}

/// The level of one look.
pub fn level() -> f64 {
    noise::ALPHA / MAX_LOOKS as f64
}

/// Each pair's difference, and whether it is a log ratio (else relative to the median).
fn differences(base: &[f64], head: &[f64]) -> (Vec<f64>, bool) {
    if base.iter().chain(head).all(|&x| x > 0.0 && x.is_finite()) {
        let d = base.iter().zip(head).map(|(b, h)| (h / b).ln()).collect();
        return (d, true);
    }
    let all: Vec<f64> = base.iter().chain(head).copied().collect();
    let scale = stats::median(&all).abs().max(f64::MIN_POSITIVE);
    let d = base
        .iter()
        .zip(head)
        .map(|(b, h)| (h - b) / scale)
        .collect();
    (d, false)
}

/// The test of one row's pairs.
struct PairTest {
    t: TTest,
    pairs: usize,
    log_scale: bool,
    /// The spread assumed before the pairs were seen.
    prior: f64,
}

impl PairTest {
    fn se(&self) -> f64 {
        self.t.sd / (self.pairs as f64).sqrt()
    }
}

/// What the rule says of one series of pairs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Judgement {
    pub verdict: Verdict,
    /// The change (relative): the mean log ratio as a ratio, or the mean difference relative to
    /// the median where a figure is 0.
    pub change: f64,
    /// Its bounds at the look's level (Bonferroni over the series).
    pub interval: (f64, f64),
    pub p: f64,
    pub p_adjusted: f64,
    /// The moderated spread of the pairs' differences.
    pub noise: f64,
    /// For a `noisy` series: the pairs that would decide it.
    pub pairs_needed: Option<usize>,
}

/// The rule over a family of series, `(BASE, HEAD)` figures pair by pair: each one's judgement
/// (`None` with fewer than two pairs).
pub fn judge_series(series: &[(&[f64], &[f64])], threshold: f64) -> Vec<Option<Judgement>> {
    let priors = vec![PAIR_PRIOR_NOISE; series.len()];
    judge_series_with_priors(series, &priors, threshold)
}

/// [`judge_series`] with the spread assumed of each series' pairs before they are seen,
/// `priors[i]` (at least [`PAIR_PRIOR_NOISE`] where the figures scatter by themselves, as
/// counts of samples do).
pub fn judge_series_with_priors(
    series: &[(&[f64], &[f64])],
    priors: &[f64],
    threshold: f64,
) -> Vec<Option<Judgement>> {
    let tests: Vec<Option<PairTest>> = (series.iter().zip(priors))
        .map(|((base, head), &prior)| {
            let (d, log_scale) = differences(base, head);
            let t = stats::moderated_paired_t(&d, prior, noise::PRIOR_DF)?;
            Some(PairTest {
                t,
                pairs: d.len(),
                log_scale,
                prior,
            })
        })
        .collect();
    let p: Vec<f64> = tests.iter().flatten().map(|t| t.t.p).collect();
    let family = p.len().max(1);
    let mut adjusted = stats::holm_adjusted(&p).into_iter();
    (tests.iter())
        .map(|test| {
            let test = test.as_ref()?;
            let p_adjusted = adjusted.next().unwrap_or(1.0);
            let (verdict, pairs_needed) = decide(test, p_adjusted, family, threshold);
            let half = stats::t_quantile(level() / family as f64, test.t.df) * test.se();
            let effect = test.t.difference;
            let relative = |x: f64| if test.log_scale { x.exp_m1() } else { x };
            Some(Judgement {
                verdict,
                change: relative(effect),
                interval: (relative(effect - half), relative(effect + half)),
                p: test.t.p,
                p_adjusted,
                noise: test.t.sd,
                pairs_needed,
            })
        })
        .collect()
}

/// Applies the paired rule to the rows of `c`, whose sides' runs are pairs in order (run i of
/// BASE and of HEAD make pair i); rows present on one side only keep their verdict. Returns
/// how many tested rows are still `noisy`.
pub fn judge(c: &mut Comparison, threshold: f64) -> usize {
    let one_sided = |r: &Row| matches!(r.verdict, Verdict::Appeared | Verdict::Vanished);
    let tested: Vec<&mut Row> = c.rows.iter_mut().filter(|r| !one_sided(r)).collect();
    let series: Vec<(&[f64], &[f64])> = (tested.iter())
        .map(|r| (r.base_ns.as_slice(), r.head_ns.as_slice()))
        .collect();
    let judgements = judge_series(&series, threshold);
    c.rows_tested = judgements.iter().flatten().count();
    let mut noisy = 0;
    for (row, j) in tested.into_iter().zip(judgements) {
        let Some(j) = j else { continue };
        noisy += usize::from(j.verdict == Verdict::Noisy);
        // On the log scale, the change is the pairs'; else the medians' stays.
        if row.base_ns.iter().chain(&row.head_ns).all(|&x| x > 0.0) {
            row.change = j.change;
        }
        row.interval = Some(j.interval);
        row.verdict = j.verdict;
        row.p_value = Some(j.p);
        row.p_adjusted = Some(j.p_adjusted);
        row.noise = Some(j.noise);
        row.runs_needed = j.pairs_needed;
    }
    c.noise_estimate = true;
    sort_rows(&mut c.rows);
    noisy
}

/// A row's verdict, and for a `noisy` one the pairs that would decide it.
fn decide(
    test: &PairTest,
    p_adjusted: f64,
    family: usize,
    threshold: f64,
) -> (Verdict, Option<usize>) {
    let effect = test.t.difference;
    if changed(effect, p_adjusted) {
        let direction = if effect > 0.0 {
            Verdict::Slower
        } else {
            Verdict::Faster
        };
        return (direction, None);
    }
    if unchanged(effect, test.se(), test.t.df, family, threshold) {
        return (Verdict::WithinNoise, None);
    }
    (Verdict::Noisy, pairs_needed(test, family, threshold))
}

/// A change beyond noise: significant at the look's level, and at least the smallest that
/// counts.
fn changed(effect: f64, p_adjusted: f64) -> bool {
    p_adjusted <= level() && effect.abs() >= noise::MIN_EFFECT.ln_1p()
}

/// The change's interval at the look's level (Bonferroni over `family` rows) lies within
/// ± `threshold`.
fn unchanged(effect: f64, se: f64, df: f64, family: usize, threshold: f64) -> bool {
    let margin = threshold.ln_1p() - effect.abs();
    margin > 0.0 && (se <= 0.0 || stats::two_sided_t_p(margin / se, df) <= level() / family as f64)
}

/// The fewest pairs (more than now, at most [`MAX_PAIRS_ADVISED`]) at which the row, with its
/// change and its own spread as they are, would be decided either way.
fn pairs_needed(test: &PairTest, family: usize, threshold: f64) -> Option<usize> {
    let effect = test.t.difference;
    let prior_var = noise::PRIOR_DF * test.prior.powi(2);
    (test.pairs + 1..=MAX_PAIRS_ADVISED).find(|&n| {
        let own_df = n as f64 - 1.0;
        let df = own_df + noise::PRIOR_DF;
        let se = ((own_df * test.t.sample_sd.powi(2) + prior_var) / df / n as f64).sqrt();
        let p = if se > 0.0 {
            stats::two_sided_t_p(effect / se, df)
        } else {
            0.0
        };
        // Holm's strictest factor: the whole family.
        changed(effect, (p * family as f64).min(1.0))
            || unchanged(effect, se, df, family, threshold)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::compare::{Measure, Row, RowKind};

    fn row(name: &str, base: &[f64], head: &[f64]) -> Row {
        Row {
            benchmark: None,
            kind: RowKind::Probe,
            name: name.into(),
            base_ns: base.to_vec(),
            head_ns: head.to_vec(),
            base_median_ns: stats::median(base),
            head_median_ns: stats::median(head),
            change: noise::relative_change(stats::median(base), stats::median(head)),
            base_calls: 1.0,
            head_calls: 1.0,
            calls_changed: false,
            verdict: Verdict::WithinNoise,
            p_value: None,
            p_adjusted: None,
            noise: None,
            runs_needed: None,
            interval: None,
        }
    }

    fn comparison(rows: Vec<Row>) -> Comparison {
        Comparison {
            program: "prog".into(),
            base_runs: rows[0].base_ns.len(),
            head_runs: rows[0].head_ns.len(),
            measure: Measure::Total,
            noise_estimate: false,
            rows_tested: 0,
            rows,
            diagnoses: Vec::new(),
            pairing: None,
            recorded_apart_s: None,
        }
    }

    /// A machine drifting by ±30 % over the runs, both sides alike: two series would see
    /// nothing but noise; the pairs see +25 % in `a`, nothing in `b`.
    #[test]
    fn drift_cancels_in_the_pairs() {
        let drift = [1.0, 1.3, 0.7, 1.2, 0.8, 1.1, 0.9, 1.25, 0.75, 1.05];
        let jitter = [1.0, 1.01, 0.99, 1.005, 0.995, 1.0, 1.01, 0.99, 1.0, 1.005];
        let base: Vec<f64> = drift.iter().map(|d| 100.0 * d).collect();
        let slower: Vec<f64> = (drift.iter().zip(jitter))
            .map(|(d, j)| 125.0 * d * j)
            .collect();
        let same: Vec<f64> = (drift.iter().zip(jitter))
            .map(|(d, j)| 100.0 * d * j)
            .collect();
        let mut c = comparison(vec![row("a", &base, &slower), row("b", &base, &same)]);
        assert_eq!(judge(&mut c, threshold(Some(10.0 / 100.0))), 0);
        let a = c.rows.iter().find(|r| r.name == "a").unwrap();
        assert_eq!(a.verdict, Verdict::Slower, "{a:?}");
        assert!((a.change - 0.25).abs() < 0.01, "{a:?}");
        let (lo, hi) = a.interval.unwrap();
        assert!(lo < 0.25 && 0.25 < hi && hi - lo < 0.1, "{a:?}");
        let b = c.rows.iter().find(|r| r.name == "b").unwrap();
        assert_eq!(b.verdict, Verdict::WithinNoise, "{b:?}");
        assert_eq!(c.rows_tested, 2);
        // Two unpaired series of the same figures: the drift hides the change.
        let change = noise::relative_change(stats::median(&base), stats::median(&slower));
        let unpaired = noise::judge(&[noise::row_test(&base, &slower)], &[change]);
        assert_ne!(unpaired[0].verdict, Verdict::Slower, "{unpaired:?}");
    }

    #[test]
    fn too_few_pairs_are_noisy_with_the_pairs_that_would_decide() {
        // ±8 % pair to pair, +6 % on average: four pairs decide nothing.
        let base = [100.0; 4];
        let head = [114.0, 98.0, 112.0, 100.0];
        let mut c = comparison(vec![row("a", &base, &head)]);
        assert_eq!(judge(&mut c, threshold(None)), 1);
        let a = &c.rows[0];
        assert_eq!(a.verdict, Verdict::Noisy, "{a:?}");
        let needed = a.runs_needed.expect("a number of pairs");
        assert!(needed > 4, "{a:?}");
        // That many pairs, the same change and spread: decided.
        let base = vec![100.0; needed];
        let head: Vec<f64> = (0..needed).map(|i| head[i % 4]).collect();
        let mut c = comparison(vec![row("a", &base, &head)]);
        assert_eq!(judge(&mut c, threshold(None)), 0, "{:?}", c.rows[0]);
    }

    #[test]
    fn looks_grow_by_half_keeping_both_orders_even() {
        let mut looks = vec![MIN_PAIRS];
        while looks.len() < MAX_LOOKS {
            looks.push(next_look(*looks.last().unwrap()));
        }
        assert_eq!(looks, [4, 6, 10, 16, 24, 36, 54, 82]);
        let order: Vec<bool> = (0..4).map(base_first).collect();
        assert_eq!(order, [true, false, true, false]);
    }
}
