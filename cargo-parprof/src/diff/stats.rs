//! The statistics the noise rule rests on: a moderated two-sample t-test (with Student's t
//! distribution), the Holm–Bonferroni adjustment over many tests, medians and variances.

/// The median of `v` (0 for an empty slice).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// Mean and sample variance (n − 1 in the denominator; 0 for fewer than two values).
pub fn mean_variance(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let ss: f64 = v.iter().map(|x| (x - mean) * (x - mean)).sum();
    (mean, ss / (n - 1.0))
}

/// A two-sample t-test whose variance is moderated by a prior (Smyth's moderated t, with the
/// prior given): the samples' pooled variance, on n + m − 2 degrees of freedom, and
/// `prior_sd`² on `prior_df` more, averaged by their degrees of freedom. Three runs a side that
/// happen to agree closely then no longer make any difference between them look certain; as
/// the runs grow, their own variance outweighs the prior. With `prior_df` = 0 it is Student's
/// pooled t-test.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TTest {
    /// mean(b) − mean(a).
    pub difference: f64,
    /// The samples' own pooled standard deviation.
    pub sample_sd: f64,
    /// The moderated standard deviation the test used.
    pub sd: f64,
    /// Degrees of freedom: n + m − 2 + `prior_df`.
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// The moderated t-test of `a` against `b`; `None` with fewer than two values on a side.
pub fn moderated_t(a: &[f64], b: &[f64], prior_sd: f64, prior_df: f64) -> Option<TTest> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (n, m) = (a.len() as f64, b.len() as f64);
    let ((ma, va), (mb, vb)) = (mean_variance(a), mean_variance(b));
    let own_df = n + m - 2.0;
    let sample_var = ((n - 1.0) * va + (m - 1.0) * vb) / own_df;
    let df = own_df + prior_df;
    let var = (own_df * sample_var + prior_df * prior_sd * prior_sd) / df;
    let (difference, sd) = (mb - ma, var.sqrt());
    let se = sd * (1.0 / n + 1.0 / m).sqrt();
    let p = p_of(difference, se, df);
    Some(TTest {
        difference,
        sample_sd: sample_var.sqrt(),
        sd,
        df,
        p,
    })
}

/// The two-sided p of an estimate with standard error `se` on `df` degrees of freedom. With no
/// variation at all (and no prior), any difference is certain, none is not.
fn p_of(estimate: f64, se: f64, df: f64) -> f64 {
    if se > 0.0 && se.is_finite() {
        two_sided_t_p(estimate / se, df)
    } else if estimate == 0.0 {
        1.0
    } else {
        0.0
    }
}

/// P(|T| ≥ |t|) for Student's t distribution with `df` degrees of freedom:
/// I_{df/(df+t²)}(df/2, 1/2).
pub fn two_sided_t_p(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return 0.0;
    }
    let x = df / (df + t * t);
    regularized_incomplete_beta(x, df / 2.0, 0.5).clamp(0.0, 1.0)
}

/// A one-sample t-test of paired differences against 0, its variance moderated by a prior as
/// [`moderated_t`]'s is: `(n − 1) s² + prior_df × prior_sd²` over `n − 1 + prior_df` degrees of
/// freedom. `difference` is the mean of `d`; `None` with fewer than two differences.
pub fn moderated_paired_t(d: &[f64], prior_sd: f64, prior_df: f64) -> Option<TTest> {
    if d.len() < 2 {
        return None;
    }
    let n = d.len() as f64;
    let (mean, sample_var) = mean_variance(d);
    let df = n - 1.0 + prior_df;
    let sd = (((n - 1.0) * sample_var + prior_df * prior_sd * prior_sd) / df).sqrt();
    let se = sd / n.sqrt();
    let p = p_of(mean, se, df);
    Some(TTest {
        difference: mean,
        sample_sd: sample_var.sqrt(),
        sd,
        df,
        p,
    })
}

/// The t with P(|T| ≥ t) = `level` on `df` degrees of freedom (bisection of
/// [`two_sided_t_p`], which falls as t grows).
pub fn t_quantile(level: f64, df: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1e4f64);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if two_sided_t_p(mid, df) > level {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// Holm–Bonferroni adjusted p-values, in the order given: the adjusted p of the i-th smallest
/// of m p-values is max over j ≤ i of min(1, (m − j + 1) × p_(j)). A family of tests keeps its
/// chance of any false alarm at α when each adjusted p is compared with α.
pub fn holm_adjusted(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut adjusted = vec![1.0; m];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * p[i]).min(1.0));
        adjusted[i] = running;
    }
    adjusted
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms; relative error below 1e-13).
fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 − x) = π / sin(πx).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut sum = C[0];
    for (i, c) in C.iter().enumerate().skip(1) {
        sum += c / (x + i as f64);
    }
    let t = x + G + 0.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

/// I_x(a, b), the regularized incomplete beta function, by its continued fraction (modified
/// Lentz), on the side where it converges fast.
fn regularized_incomplete_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_continued_fraction(x, a, b) / a
    } else {
        1.0 - front * beta_continued_fraction(1.0 - x, b, a) / b
    }
}

fn beta_continued_fraction(x: f64, a: f64, b: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let mut c = 1.0;
    let mut d = 1.0 - (a + b) * x / (a + 1.0);
    d = 1.0 / if d.abs() < TINY { TINY } else { d };
    let mut h = d;
    for m in 1..=300 {
        let m = f64::from(m);
        for numerator in [
            m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)),
        ] {
            d = 1.0 + numerator * d;
            d = 1.0 / if d.abs() < TINY { TINY } else { d };
            c = 1.0 + numerator / c;
            if c.abs() < TINY {
                c = TINY;
            }
            h *= d * c;
        }
        if (d * c - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    #[test]
    fn t_p_values_match_the_closed_forms() {
        for t in [0.0, 0.3, 1.0, 2.5, 12.0] {
            // One degree of freedom (Cauchy): 1 − 2/π atan|t|.
            let cauchy = 1.0 - 2.0 / std::f64::consts::PI * f64::atan(t);
            assert!(close(two_sided_t_p(t, 1.0), cauchy, 1e-12), "t = {t}");
            // Two: 1 − |t| / √(2 + t²).
            let two = 1.0 - t / (2.0 + t * t).sqrt();
            assert!(close(two_sided_t_p(t, 2.0), two, 1e-12), "t = {t}");
            // Four: with θ = t/√(4 + t²), 1 − θ(3 − θ²)/2.
            let th = t / (4.0 + t * t).sqrt();
            let four = 1.0 - th * (3.0 - th * th) / 2.0;
            assert!(close(two_sided_t_p(t, 4.0), four, 1e-12), "t = {t}");
        }
        // Many degrees of freedom: the normal's 1.96 → 0.05.
        assert!(close(two_sided_t_p(1.959_964, 1e7), 0.05, 1e-5));
    }

    #[test]
    fn without_a_prior_it_is_students_t() {
        // Means 2 and 5, variances 1 and 1, n = 3 a side: t = 3/√(2/3) = 3.674, df = 4.
        let w = moderated_t(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0], 0.0, 0.0).unwrap();
        assert_eq!(w.difference, 3.0);
        assert_eq!((w.df, w.sd, w.sample_sd), (4.0, 1.0, 1.0));
        let t: f64 = 3.0 / (2.0f64 / 3.0).sqrt();
        let th = t / (4.0 + t * t).sqrt();
        assert!(close(w.p, 1.0 - th * (3.0 - th * th) / 2.0, 1e-12), "{w:?}");
        assert!(close(w.p, 0.021_311, 1e-6), "{w:?}");
    }

    #[test]
    fn a_prior_moderates_the_variance_by_degrees_of_freedom() {
        // Own variance 1 on 4 df, prior 3² on 4 df: (4 × 1 + 4 × 9) / 8 = 5; df 8.
        let w = moderated_t(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0], 3.0, 4.0).unwrap();
        assert_eq!((w.df, w.sample_sd), (8.0, 1.0));
        assert!(close(w.sd, 5f64.sqrt(), 1e-12), "{w:?}");
        let t = 3.0 / (5.0f64 * 2.0 / 3.0).sqrt();
        assert!(close(w.p, two_sided_t_p(t, 8.0), 1e-15), "{w:?}");
        assert!(w.p > 0.021_311, "{w:?}");
    }

    #[test]
    fn without_variation_or_prior_a_difference_is_certain_or_nothing() {
        let same = moderated_t(&[2.0, 2.0], &[2.0, 2.0], 0.0, 0.0).unwrap();
        assert_eq!(same.p, 1.0);
        let shifted = moderated_t(&[2.0, 2.0], &[3.0, 3.0], 0.0, 0.0).unwrap();
        assert_eq!(shifted.p, 0.0);
        assert!(moderated_t(&[1.0], &[1.0, 2.0], 0.1, 4.0).is_none());
    }

    #[test]
    fn holm_multiplies_the_smallest_by_m_and_keeps_order() {
        let adjusted = holm_adjusted(&[0.01, 0.04, 0.03, 0.5]);
        // Sorted: 0.01 ×4 = 0.04; 0.03 ×3 = 0.09; 0.04 ×2 = 0.08 → 0.09 (monotone); 0.5 ×1.
        let expected = [0.04, 0.09, 0.09, 0.5];
        for (a, e) in adjusted.iter().zip(expected) {
            assert!(close(*a, e, 1e-12), "{adjusted:?}");
        }
        assert_eq!(holm_adjusted(&[0.6, 0.7]), [1.0, 1.0]);
        assert!(holm_adjusted(&[]).is_empty());
    }

    #[test]
    fn a_paired_test_is_a_one_sample_test_of_the_differences() {
        // Differences 1, 2, 3: mean 2, sd 1, se 1/√3, t = 2√3 on 2 df; no prior.
        let w = moderated_paired_t(&[1.0, 2.0, 3.0], 0.0, 0.0).unwrap();
        assert_eq!((w.difference, w.sample_sd, w.df), (2.0, 1.0, 2.0));
        assert!(
            close(w.p, two_sided_t_p(2.0 * 3f64.sqrt(), 2.0), 1e-15),
            "{w:?}"
        );
        // A prior of sd 3 on 2 df: (2 × 1 + 2 × 9) / 4 = 5.
        let m = moderated_paired_t(&[1.0, 2.0, 3.0], 3.0, 2.0).unwrap();
        assert!(close(m.sd, 5f64.sqrt(), 1e-12) && m.df == 4.0, "{m:?}");
        assert!(moderated_paired_t(&[1.0], 0.1, 4.0).is_none());
    }

    #[test]
    fn the_t_quantile_inverts_the_p_value() {
        // t = 2.776 leaves 5% on 4 degrees of freedom; 1.96 on many.
        assert!(close(t_quantile(0.05, 4.0), 2.776_445, 1e-5));
        assert!(close(t_quantile(0.05, 1e6), 1.959_964, 1e-4));
    }

    #[test]
    fn medians_and_variances() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(mean_variance(&[1.0, 2.0, 3.0]), (2.0, 1.0));
        assert_eq!(mean_variance(&[5.0]), (5.0, 0.0));
    }
}
