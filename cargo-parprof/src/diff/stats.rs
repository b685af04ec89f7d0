//! The statistics the noise rule rests on: Welch's t-test (with Student's t distribution), the
//! Holm–Bonferroni adjustment over many tests, medians and the spread of a set of runs.

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

/// Welch's two-sample t-test of `a` against `b` (each at least two values).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Welch {
    /// mean(b) − mean(a).
    pub difference: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// Pooled standard deviation of the two samples.
    pub pooled_sd: f64,
}

/// Welch's t-test; `None` with fewer than two values on a side.
pub fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (n, m) = (a.len() as f64, b.len() as f64);
    let ((ma, va), (mb, vb)) = (mean_variance(a), mean_variance(b));
    let difference = mb - ma;
    let pooled_sd = (((n - 1.0) * va + (m - 1.0) * vb) / (n + m - 2.0)).sqrt();
    let (ea, eb) = (va / n, vb / m);
    let se2 = ea + eb;
    if se2 <= 0.0 || !se2.is_finite() {
        // No variation on either side: any difference is certain, none is none.
        let p = if difference == 0.0 { 1.0 } else { 0.0 };
        return Some(Welch {
            difference,
            df: n + m - 2.0,
            p,
            pooled_sd,
        });
    }
    let df = se2 * se2 / (ea * ea / (n - 1.0) + eb * eb / (m - 1.0));
    let t = difference / se2.sqrt();
    Some(Welch {
        difference,
        df,
        p: two_sided_t_p(t, df),
        pooled_sd,
    })
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
    fn welch_on_equal_variances_is_students_t() {
        // Means 2 and 5, variances 1 and 1, n = 3 a side: t = 3/√(2/3) = 3.674, df = 4.
        let w = welch(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert_eq!(w.difference, 3.0);
        assert!(close(w.df, 4.0, 1e-12), "{w:?}");
        assert!(close(w.pooled_sd, 1.0, 1e-12), "{w:?}");
        let t: f64 = 3.0 / (2.0f64 / 3.0).sqrt();
        let th = t / (4.0 + t * t).sqrt();
        assert!(close(w.p, 1.0 - th * (3.0 - th * th) / 2.0, 1e-12), "{w:?}");
        assert!(close(w.p, 0.021_311, 1e-6), "{w:?}");
    }

    #[test]
    fn welch_without_variation_is_certain_or_nothing() {
        let same = welch(&[2.0, 2.0], &[2.0, 2.0]).unwrap();
        assert_eq!(same.p, 1.0);
        let shifted = welch(&[2.0, 2.0], &[3.0, 3.0]).unwrap();
        assert_eq!(shifted.p, 0.0);
        assert!(welch(&[1.0], &[1.0, 2.0]).is_none());
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
    fn medians_and_variances() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(mean_variance(&[1.0, 2.0, 3.0]), (2.0, 1.0));
        assert_eq!(mean_variance(&[5.0]), (5.0, 0.0));
    }
}
