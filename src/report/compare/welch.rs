//! Welch's t-test (two-sided) on the repeats of two runs, and the Student t distribution it needs,
//! through the regularized incomplete beta function (continued fraction, as in Numerical Recipes
//! §6.4). Written here rather than taken from a crate: about fifty lines, tested against closed
//! forms and published values below.

use serde::{Deserialize, Serialize};

/// The outcome of Welch's test of "both samples have the same mean".
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Welch {
    /// The t statistic, (mean of b − mean of a) / standard error; `None` when neither sample
    /// varies but their means differ (the statistic is infinite; `p` is then 0).
    pub t: Option<f64>,
    /// Degrees of freedom (Welch–Satterthwaite); n_a + n_b − 2 when neither sample varies.
    pub df: f64,
    /// Two-sided p-value: how likely a difference at least this large is if the means are equal.
    pub p: f64,
}

/// Welch's test of samples `a` and `b`; `None` with fewer than two values on either side (no
/// spread to judge a difference by).
pub fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (mean_a, var_a) = mean_and_variance(a);
    let (mean_b, var_b) = mean_and_variance(b);
    let (se2_a, se2_b) = (var_a / a.len() as f64, var_b / b.len() as f64);
    let se2 = se2_a + se2_b;
    if se2 == 0.0 {
        let df = (a.len() + b.len() - 2) as f64;
        return Some(if mean_a == mean_b { Welch { t: Some(0.0), df, p: 1.0 } } else { Welch { t: None, df, p: 0.0 } });
    }
    let t = (mean_b - mean_a) / se2.sqrt();
    let df = se2 * se2 / (se2_a * se2_a / (a.len() - 1) as f64 + se2_b * se2_b / (b.len() - 1) as f64);
    Some(Welch { t: Some(t), df, p: t_two_sided_p(t, df) })
}

/// Mean and sample variance (n − 1 in the denominator).
pub fn mean_and_variance(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = if values.len() < 2 { 0.0 } else { values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0) };
    (mean, variance)
}

/// P(|T| ≥ |t|) for Student's t with `df` degrees of freedom: I_{df/(df+t²)}(df/2, 1/2).
pub fn t_two_sided_p(t: f64, df: f64) -> f64 {
    incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
}

/// The regularized incomplete beta function I_x(a, b), for a, b > 0 and 0 ≤ x ≤ 1.
pub fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front = (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    // The continued fraction converges fast only below this point; above it, use the symmetry
    // I_x(a, b) = 1 − I_{1−x}(b, a).
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_continued_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_continued_fraction(b, a, 1.0 - x) / b
    }
}

/// The continued fraction of the incomplete beta function, by the modified Lentz method.
fn beta_continued_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    const EPSILON: f64 = 1e-15;
    let mut c = 1.0;
    let mut d = 1.0 - (a + b) * x / (a + 1.0);
    d = 1.0 / if d.abs() < TINY { TINY } else { d };
    let mut h = d;
    for m in 1..=500 {
        let m = m as f64;
        let even = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        let odd = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
        for coefficient in [even, odd] {
            d = 1.0 + coefficient * d;
            d = 1.0 / if d.abs() < TINY { TINY } else { d };
            c = 1.0 + coefficient / c;
            c = if c.abs() < TINY { TINY } else { c };
            h *= d * c;
        }
        if (d * c - 1.0).abs() < EPSILON {
            break;
        }
    }
    h
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, nine coefficients: about 15 significant digits).
fn ln_gamma(x: f64) -> f64 {
    const COEFFICIENTS: [f64; 9] = [
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
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut sum = COEFFICIENTS[0];
    for (i, c) in COEFFICIENTS.iter().enumerate().skip(1) {
        sum += c / (x + i as f64);
    }
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(actual: f64, expected: f64, tolerance: f64) {
        assert!((actual - expected).abs() <= tolerance, "{actual} is not within {tolerance} of {expected}");
    }

    #[test]
    fn ln_gamma_matches_factorials_and_the_half() {
        close(ln_gamma(1.0), 0.0, 1e-14);
        close(ln_gamma(5.0), 24f64.ln(), 1e-13);
        close(ln_gamma(0.5), std::f64::consts::PI.sqrt().ln(), 1e-14);
        close(ln_gamma(0.25), 3.625_609_908_221_908_f64.ln(), 1e-13);
    }

    #[test]
    fn incomplete_beta_matches_closed_forms() {
        // I_0.5(2, 3) = Σ_{j=2..4} C(4, j) / 16 = 11/16.
        close(incomplete_beta(2.0, 3.0, 0.5), 11.0 / 16.0, 1e-14);
        // I_x(1, 1) = x, and I_x(a, 1) = x^a.
        close(incomplete_beta(1.0, 1.0, 0.3), 0.3, 1e-14);
        close(incomplete_beta(3.5, 1.0, 0.8), 0.8f64.powf(3.5), 1e-14);
        close(incomplete_beta(2.0, 3.0, 0.0), 0.0, 0.0);
        close(incomplete_beta(2.0, 3.0, 1.0), 1.0, 0.0);
    }

    #[test]
    fn t_distribution_matches_closed_forms_and_tables() {
        // df = 1 is the Cauchy distribution: P(|T| ≥ t) = 1 − (2/π) atan(t).
        close(t_two_sided_p(1.0, 1.0), 0.5, 1e-14);
        close(t_two_sided_p(3.0, 1.0), 1.0 - 2.0 / std::f64::consts::PI * 3f64.atan(), 1e-14);
        // df = 2: P(|T| ≥ t) = 1 − t / √(2 + t²).
        close(t_two_sided_p(2.0, 2.0), 1.0 - 2.0 / 6f64.sqrt(), 1e-14);
        // Critical values of t tables at 95 % two-sided: df 10 → 2.228139, df 30 → 2.042272.
        close(t_two_sided_p(2.228_139, 10.0), 0.05, 1e-6);
        close(t_two_sided_p(2.042_272, 30.0), 0.05, 1e-6);
        // A huge df approaches the normal distribution: 1.959964 → 0.05.
        close(t_two_sided_p(1.959_964, 1e7), 0.05, 1e-6);
        close(t_two_sided_p(0.0, 5.0), 1.0, 1e-14);
    }

    #[test]
    fn welch_matches_a_hand_computed_example() {
        // a: mean 12, variance 4; b: mean 23, variance 20/3. se² = 4/3 + 5/3 = 3, t = 11/√3;
        // df = 3² / ((4/3)²/2 + (5/3)²/3) = 9 / (8/9 + 25/27) = 243/49.
        let result = welch(&[10.0, 12.0, 14.0], &[20.0, 22.0, 24.0, 26.0]).unwrap();
        close(result.t.unwrap(), 11.0 / 3f64.sqrt(), 1e-12);
        close(result.df, 243.0 / 49.0, 1e-12);
        // p from mpmath at 50 digits: betainc(df/2, 1/2, 0, df/(df+t²), regularized=True).
        close(result.p, 0.001_473_299_919_907, 1e-12);
        // The sign says which side is larger; p does not.
        let reversed = welch(&[20.0, 22.0, 24.0, 26.0], &[10.0, 12.0, 14.0]).unwrap();
        close(reversed.t.unwrap(), -11.0 / 3f64.sqrt(), 1e-12);
        close(reversed.p, result.p, 1e-15);
    }

    #[test]
    fn welch_needs_two_values_a_side_and_handles_no_spread() {
        assert_eq!(welch(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(welch(&[1.0, 2.0], &[]), None);
        assert_eq!(welch(&[5.0, 5.0], &[5.0, 5.0, 5.0]), Some(Welch { t: Some(0.0), df: 3.0, p: 1.0 }));
        assert_eq!(welch(&[5.0, 5.0], &[6.0, 6.0]), Some(Welch { t: None, df: 2.0, p: 0.0 }));
        // One side without spread: df falls back to the other side's n − 1.
        close(welch(&[5.0, 5.0, 5.0], &[6.0, 7.0, 8.0]).unwrap().df, 2.0, 1e-12);
    }
}
