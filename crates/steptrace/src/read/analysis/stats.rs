//! Order statistics and spread, for step times and run medians.

use serde::{Deserialize, Serialize};

/// Order statistics and spread of a list of values.
///
/// Quantiles other than the median use the nearest-rank method, so every
/// figure is a value that was really measured (the median of an even count
/// is the mean of the two middle values, as usual).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Number of values.
    pub n: usize,
    /// Smallest.
    pub min: f64,
    /// Median.
    pub median: f64,
    /// 90th percentile (nearest rank).
    pub p90: f64,
    /// Largest.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 for a single value.
    pub std: f64,
    /// Interquartile range: 75th minus 25th percentile (nearest rank).
    pub iqr: f64,
}

impl Stats {
    /// Statistics of `values`; `None` if empty or if any value is not
    /// finite.
    ///
    /// # Examples
    ///
    /// ```
    /// use steptrace::analysis::Stats;
    ///
    /// let s = Stats::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
    /// assert_eq!((s.min, s.median, s.max), (1.0, 2.5, 4.0));
    /// assert_eq!(s.iqr, 3.0 - 1.0);
    /// assert!(Stats::of(&[]).is_none());
    /// ```
    #[must_use]
    pub fn of(values: &[f64]) -> Option<Stats> {
        if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let std = if n > 1 { (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt() } else { 0.0 };
        Some(Stats {
            n,
            min: v[0],
            median: median_sorted(&v),
            p90: rank(&v, 0.9),
            max: v[n - 1],
            mean,
            std,
            iqr: rank(&v, 0.75) - rank(&v, 0.25),
        })
    }
}

/// The median of sorted values (mean of the middle two for an even count).
pub(crate) fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The median of unsorted values; `None` if empty.
#[must_use]
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    Some(median_sorted(&v))
}

/// Nearest-rank quantile of sorted values.
fn rank(v: &[f64], q: f64) -> f64 {
    v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_statistics_match_hand_computed_values() {
        let s = Stats::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!((s.n, s.min, s.median, s.p90, s.max, s.mean), (5, 1.0, 3.0, 5.0, 5.0, 3.0));
        // Sample variance of 1..5 is 2.5.
        assert!((s.std - 2.5f64.sqrt()).abs() < 1e-12);
        // Nearest rank: q1 = 2nd value (2), q3 = 4th value (4).
        assert_eq!(s.iqr, 2.0);

        let s = Stats::of(&[10.0; 1]).unwrap();
        assert_eq!((s.std, s.iqr, s.p90), (0.0, 0.0, 10.0));

        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        let s = Stats::of(&ten).unwrap();
        assert_eq!((s.median, s.p90), (5.5, 9.0));
    }

    #[test]
    fn non_finite_values_give_no_statistics() {
        assert!(Stats::of(&[1.0, f64::NAN]).is_none());
        assert!(Stats::of(&[f64::INFINITY]).is_none());
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[]), None);
    }
}
