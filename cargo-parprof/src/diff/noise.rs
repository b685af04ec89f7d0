//! The noise rule of `cargo parprof diff`: is a change between two sets of runs beyond what
//! the runs vary by themselves?
//!
//! With at least two runs on each side, a two-sided Mann–Whitney U test on the per-run
//! figures (exact for up to 20 runs in all without ties, normal approximation otherwise): a
//! change is `slower` or `faster` when p ≤ [`MAX_P`] and the medians differ by at least
//! [`MIN_EFFECT`]. Three runs a side reach p = 0.10 only when every run of one side is above
//! every run of the other. With one run on a side there is no noise estimate: a change of at
//! least [`SINGLE_RUN_EFFECT`] is reported as such, and the comparison says that it is a
//! single pair of figures.

use serde::Serialize;

/// Largest two-sided p-value of a change beyond noise.
pub const MAX_P: f64 = 0.10;
/// Smallest relative change of the medians that counts, with a noise estimate.
pub const MIN_EFFECT: f64 = 0.05;
/// Smallest relative change that counts without a noise estimate (one run on a side).
pub const SINGLE_RUN_EFFECT: f64 = 0.10;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Slower,
    Faster,
    WithinNoise,
    /// Present on one side only.
    Appeared,
    Vanished,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Slower => "slower",
            Verdict::Faster => "faster",
            Verdict::WithinNoise => "within noise",
            Verdict::Appeared => "appeared",
            Verdict::Vanished => "vanished",
        }
    }
}

/// The verdict on per-run figures `base` and `head` (both non-empty), with the p-value when
/// there is a noise estimate.
pub fn verdict(base: &[f64], head: &[f64]) -> (Verdict, Option<f64>) {
    let (b, h) = (median(base), median(head));
    let change = relative_change(b, h);
    let direction = if h > b {
        Verdict::Slower
    } else {
        Verdict::Faster
    };
    if base.len() < 2 || head.len() < 2 {
        let v = if change.abs() >= SINGLE_RUN_EFFECT {
            direction
        } else {
            Verdict::WithinNoise
        };
        return (v, None);
    }
    let p = mann_whitney_p(base, head);
    let v = if p <= MAX_P && change.abs() >= MIN_EFFECT {
        direction
    } else {
        Verdict::WithinNoise
    };
    (v, Some(p))
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
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

/// Two-sided p-value of the Mann–Whitney U test.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let (n, m) = (a.len(), b.len());
    // U of `a`: pairs where a is above b, ties counting a half.
    let mut u: f64 = 0.0;
    let mut ties = false;
    for x in a {
        for y in b {
            if x > y {
                u += 1.0;
            } else if x == y {
                u += 0.5;
                ties = true;
            }
        }
    }
    let u = u.min((n * m) as f64 - u);
    if !ties && n + m <= 20 {
        exact_p(n, m, u as usize)
    } else {
        normal_p(n, m, u)
    }
}

/// P(U ≤ u) × 2 under the null hypothesis, by counting rank arrangements.
fn exact_p(n: usize, m: usize, u: usize) -> f64 {
    // ways[i][j][k]: arrangements of i a's and j b's with U = k.
    let max_u = n * m;
    let mut ways = vec![vec![vec![0f64; max_u + 1]; m + 1]; n + 1];
    for (i, row) in ways.iter_mut().enumerate() {
        for (j, cell) in row.iter_mut().enumerate() {
            if i == 0 || j == 0 {
                cell[0] = 1.0;
            }
        }
    }
    for i in 1..=n {
        for j in 1..=m {
            for k in 0..=i * j {
                // The largest value is an a (it is above all j b's) or a b.
                let with_a = if k >= j { ways[i - 1][j][k - j] } else { 0.0 };
                ways[i][j][k] = with_a + ways[i][j - 1][k];
            }
        }
    }
    let total: f64 = ways[n][m].iter().sum();
    let at_most: f64 = ways[n][m][..=u.min(max_u)].iter().sum();
    (2.0 * at_most / total).min(1.0)
}

fn normal_p(n: usize, m: usize, u: f64) -> f64 {
    let (n, m) = (n as f64, m as f64);
    let mean = n * m / 2.0;
    let sd = (n * m * (n + m + 1.0) / 12.0).sqrt();
    if sd == 0.0 {
        return 1.0;
    }
    // Continuity correction toward the mean.
    let z = ((u - mean).abs() - 0.5).max(0.0) / sd;
    (2.0 * (1.0 - standard_normal_cdf(z))).min(1.0)
}

/// Φ(z), by the Abramowitz–Stegun 7.1.26 approximation of erf (error below 1.5e-7).
fn standard_normal_cdf(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    let erf = if x >= 0.0 { erf } else { -erf };
    0.5 * (1.0 + erf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_separation_of_three_runs_a_side_is_p_one_tenth() {
        let p = mann_whitney_p(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]);
        assert!((p - 0.1).abs() < 1e-12, "{p}");
        // One overlap: U = 1, P(U ≤ 1) = 2/20, two-sided 0.2.
        let p = mann_whitney_p(&[1.0, 2.0, 4.5], &[4.0, 5.0, 6.0]);
        assert!((p - 0.2).abs() < 1e-12, "{p}");
        // Five a side, separated: 2/252.
        let p = mann_whitney_p(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]);
        assert!((p - 2.0 / 252.0).abs() < 1e-12, "{p}");
    }

    #[test]
    fn the_normal_approximation_agrees_roughly_with_the_exact_count() {
        // 7.5, 8.5, … 16.5 against 0 … 9: three pairs where `a` is above, U = 3.
        let a: Vec<f64> = (0..10).map(f64::from).collect();
        let b: Vec<f64> = (7..17).map(|x| f64::from(x) + 0.5).collect();
        assert_eq!(mann_whitney_p(&a, &b), exact_p(10, 10, 3));
        for u in [3, 20, 35, 50] {
            let (exact, approx) = (exact_p(10, 10, u), normal_p(10, 10, u as f64));
            assert!(
                (exact - approx).abs() < 0.01,
                "U = {u}: {exact} vs {approx}"
            );
        }
    }

    #[test]
    fn verdicts_need_both_significance_and_effect() {
        let base = [100.0, 101.0, 102.0];
        assert_eq!(verdict(&base, &[200.0, 201.0, 199.0]).0, Verdict::Slower);
        assert_eq!(verdict(&base, &[50.0, 51.0, 49.0]).0, Verdict::Faster);
        // Separated but by under 5 %: within noise.
        assert_eq!(
            verdict(&base, &[103.0, 104.0, 103.5]).0,
            Verdict::WithinNoise
        );
        // Large but overlapping: within noise.
        assert_eq!(
            verdict(&base, &[90.0, 150.0, 101.5]).0,
            Verdict::WithinNoise
        );
        // One run a side: no p-value, 10 % decides.
        assert_eq!(verdict(&[100.0], &[111.0]), (Verdict::Slower, None));
        assert_eq!(verdict(&[100.0], &[105.0]), (Verdict::WithinNoise, None));
    }
}
