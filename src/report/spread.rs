//! The spread of a figure measured once per repeat: mean, coefficient of variation and the 95 %
//! confidence interval of the mean (Student's t), and the tie rule built on it.
//!
//! Why the mean and t: a default run has 3 repeats, too few for a distribution-free interval of
//! the median (with 3 values, [min, max] covers the median only 75 % of the time). The t interval
//! assumes roughly normal repeats; the CV beside it shows when that is a stretch.

/// Mean, spread and 95 % interval of one figure over its repeats.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Repeats measured.
    pub n: usize,
    /// Their mean.
    pub mean: f64,
    /// Sample standard deviation over the mean, with two or more repeats.
    pub cv: Option<f64>,
    /// 95 % confidence interval of the mean, with two or more repeats.
    pub ci95: Option<(f64, f64)>,
}

/// Two-sided 95 % quantiles of Student's t for 1 to 30 degrees of freedom.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074,
    2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/// The t quantile for `df` degrees of freedom (beyond 30, a close approximation of it).
fn t_975(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T_975[df - 1],
        // Cornish–Fisher to two terms: within 0.001 of the table's values from 30 on.
        _ => {
            let (z, d) = (1.959_964_f64, df as f64);
            z + (z.powi(3) + z) / (4.0 * d) + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * d * d)
        }
    }
}

impl Spread {
    /// The spread of `values` (empty: None).
    pub fn of(values: &[f64]) -> Option<Spread> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        if n < 2 {
            return Some(Spread { n, mean, cv: None, ci95: None });
        }
        let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
        let half = t_975(n - 1) * sd / (n as f64).sqrt();
        Some(Spread { n, mean, cv: (mean > 0.0).then(|| sd / mean), ci95: Some((mean - half, mean + half)) })
    }
}

/// How a winner stands against the runner-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The winner's interval lies wholly above the runner-up's: the margin is beyond the spread.
    Clear,
    /// The intervals overlap: the margin is inside the spread.
    Tie,
    /// One of them was measured once: there is no spread to judge by.
    Unjudged,
}

impl Verdict {
    /// The name in report.json.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Clear => "clear",
            Verdict::Tie => "tie",
            Verdict::Unjudged => "unjudged",
        }
    }
}

/// Judges `best` (the higher mean) against `second`.
pub fn verdict(best: &Spread, second: &Spread) -> Verdict {
    match (best.ci95, second.ci95) {
        (Some((best_low, _)), Some((_, second_high))) if best_low > second_high => Verdict::Clear,
        (Some(_), Some(_)) => Verdict::Tie,
        _ => Verdict::Unjudged,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_of_three_repeats_uses_t_with_two_degrees_of_freedom() {
        // mean 10, sd 1: half-width 4.303 · 1 / √3 = 2.4843.
        let s = Spread::of(&[9.0, 10.0, 11.0]).unwrap();
        assert_eq!((s.n, s.mean), (3, 10.0));
        assert!((s.cv.unwrap() - 0.1).abs() < 1e-12);
        let (low, high) = s.ci95.unwrap();
        assert!((low - 7.5157).abs() < 1e-4 && (high - 12.4843).abs() < 1e-4, "{low} {high}");
        assert_eq!(Spread::of(&[5.0]).unwrap().ci95, None);
        assert_eq!(Spread::of(&[]), None);
    }

    #[test]
    fn the_t_quantile_beyond_the_table_continues_it() {
        assert!((t_975(30) - 2.042).abs() < 1e-9);
        assert!((t_975(31) - 2.0395).abs() < 0.001 && (t_975(120) - 1.9799).abs() < 0.001 && t_975(10_000) > 1.96);
    }

    #[test]
    fn a_margin_inside_the_spread_is_a_tie() {
        let a = Spread::of(&[100.0, 104.0, 96.0]).unwrap();
        let b = Spread::of(&[95.0, 99.0, 91.0]).unwrap();
        assert_eq!(verdict(&a, &b), Verdict::Tie, "5 % apart with ±4 % repeats");
        let c = Spread::of(&[50.0, 52.0, 48.0]).unwrap();
        assert_eq!(verdict(&a, &c), Verdict::Clear);
        assert_eq!(verdict(&a, &Spread::of(&[50.0]).unwrap()), Verdict::Unjudged);
    }
}
