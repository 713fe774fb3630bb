//! Comparing two bench results that differ in one declared variable.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::result::BenchResult;
use super::BenchError;
use crate::read::analysis::median;

/// Bootstrap resamples.
pub(crate) const RESAMPLES: usize = 4000;

/// The outcome of [`compare`].
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// The variables declared under test.
    pub vary: Vec<String>,
    /// Their values in A and B (empty if they happen to be equal).
    pub differences: BTreeMap<String, (Value, Value)>,
    /// A's time per sample, µs (median of run medians over the batch).
    pub a_us_per_sample: f64,
    /// B's time per sample, µs.
    pub b_us_per_sample: f64,
    /// B's time over A's (below 1: B is faster).
    pub ratio: f64,
    /// 95% bootstrap interval of the ratio (runs resampled).
    pub interval: (f64, f64),
    /// The larger spread (max − min) of the two sets of run medians, µs
    /// per sample.
    pub spread_us_per_sample: f64,
    /// The smallest relative difference worth claiming.
    pub threshold: f64,
    /// The verdict.
    pub verdict: Verdict,
    /// Final training loss in A and B.
    pub final_loss: (Option<f64>, Option<f64>),
    /// Held-out metric in A and B (name, A, B).
    pub held_out: Option<(String, f64, f64)>,
    /// What to keep in mind (fallbacks, different starting states).
    pub warnings: Vec<String>,
}

/// What the comparison may claim.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Verdict {
    /// The difference is within the noise; the reason says which test held
    /// it back.
    NoMeasurableDifference {
        /// Why.
        reason: String,
    },
    /// B takes less time per sample.
    BFaster {
        /// A / B.
        speedup: f64,
    },
    /// B takes more time per sample.
    BSlower {
        /// B / A.
        slowdown: f64,
    },
}

/// Compares `b` against `a`.
///
/// # Errors
///
/// A refusal, with the reason, when the fingerprints differ in anything
/// other than the variables in `vary`, or when either result fails
/// [`BenchResult::check`] (a newer format, a time that is zero, negative
/// or not finite): no ratio is computed from such figures.
// The refusal, the ratio, its interval and the verdict read best as one
// sequence of guarded steps; each is a few lines.
pub fn compare(a: &BenchResult, b: &BenchResult, vary: &[String], threshold: f64) -> Result<Comparison, BenchError> {
    a.check()?;
    b.check()?;
    let keys: std::collections::BTreeSet<&String> = a.fingerprint.keys().chain(b.fingerprint.keys()).collect();
    let mut differences = BTreeMap::new();
    let mut undeclared = Vec::new();
    for key in keys {
        let (va, vb) = (a.fingerprint.get(key).cloned(), b.fingerprint.get(key).cloned());
        if va == vb {
            continue;
        }
        let (va, vb) = (va.unwrap_or(Value::Null), vb.unwrap_or(Value::Null));
        if vary.iter().any(|v| v == key) {
            differences.insert(key.clone(), (va, vb));
        } else {
            undeclared.push(format!("{key} ({va} vs {vb})"));
        }
    }
    if !undeclared.is_empty() {
        return Err(BenchError::Undeclared {
            differences: undeclared.join(", "),
            declared: if vary.is_empty() { "none declared".to_owned() } else { vary.join(", ") },
        });
    }
    let per_sample = |r: &BenchResult, ms: f64| ms * 1000.0 / r.batch_size.max(1) as f64;
    let medians = |r: &BenchResult| r.runs.iter().map(|run| run.median_ms).collect::<Vec<_>>();
    let (ma, mb) = (medians(a), medians(b));
    let (Some(a_med), Some(b_med)) = (median(&ma), median(&mb)) else {
        return Err(BenchError::NoRun);
    };
    let a_us = per_sample(a, a_med);
    let b_us = per_sample(b, b_med);
    let ratio = b_us / a_us;
    let scale = a.batch_size.max(1) as f64 / b.batch_size.max(1) as f64;
    let interval = ratio_interval(&ma, &mb, scale).ok_or(BenchError::NoRun)?;
    let spread = per_sample(a, range(&ma)).max(per_sample(b, range(&mb)));
    let verdict = rule(
        &Evidence {
            ratio,
            interval,
            difference: (b_us - a_us).abs(),
            spread,
            unit: " µs/sample",
            spread_of: "the run medians",
            too_few: (ma.len() < 2 || mb.len() < 2)
                .then_some("one run per side shows no spread: rerun with --runs 3 or more"),
        },
        threshold,
    );
    let last = |r: &BenchResult| r.runs.last().and_then(|run| run.final_loss);
    let held = |r: &BenchResult| {
        let values: Vec<f64> = r.runs.iter().filter_map(|run| run.held_out.as_ref().map(|h| h.1)).collect();
        let name = r.runs.iter().find_map(|run| run.held_out.as_ref().map(|h| h.0.clone()))?;
        Some((name, median(&values)?))
    };
    let held_out = match (held(a), held(b)) {
        (Some((name, va)), Some((_, vb))) => Some((name, va, vb)),
        _ => None,
    };
    let mut warnings = Vec::new();
    for (side, r) in [("A", a), ("B", b)] {
        if r.fingerprint.get("fallback").and_then(Value::as_bool) == Some(true) {
            warnings.push(format!("{side} ran on a fallback backend: {}", r.backend_label));
        }
        if !r.summary.same_first_loss {
            warnings.push(format!("{side}'s runs did not all start from the same state (first losses differ)"));
        }
    }
    Ok(Comparison {
        vary: vary.to_vec(),
        differences,
        a_us_per_sample: a_us,
        b_us_per_sample: b_us,
        ratio,
        interval,
        spread_us_per_sample: spread,
        threshold,
        verdict,
        final_loss: (last(a), last(b)),
        held_out,
        warnings,
    })
}

/// What [`rule`] weighs: a ratio B/A, its interval, and the difference
/// against the spread of the values it came from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Evidence<'a> {
    /// B over A.
    pub(crate) ratio: f64,
    /// Its 95% bootstrap interval.
    pub(crate) interval: (f64, f64),
    /// |B − A|, in `unit`.
    pub(crate) difference: f64,
    /// The larger spread (max − min) of the two sides' values, in `unit`.
    pub(crate) spread: f64,
    /// The unit of `difference` and `spread` as written after a number
    /// (`" µs/sample"`; empty for ratios).
    pub(crate) unit: &'a str,
    /// What `spread` is the spread of (`"the run medians"`).
    pub(crate) spread_of: &'a str,
    /// Why the values cannot show a spread (a side with fewer than two),
    /// if they cannot.
    pub(crate) too_few: Option<&'a str>,
}

/// The verdict rule of [`compare`], in order: too few values to show a
/// spread, an interval that contains 1, a difference within the spread of
/// the values, or one below `threshold`, each give
/// [`Verdict::NoMeasurableDifference`] with that reason; only then is B
/// called faster or slower.
pub(crate) fn rule(e: &Evidence<'_>, threshold: f64) -> Verdict {
    let (interval, unit) = (e.interval, e.unit);
    if let Some(why) = e.too_few {
        Verdict::NoMeasurableDifference { reason: why.to_owned() }
    } else if interval.0 <= 1.0 && 1.0 <= interval.1 {
        Verdict::NoMeasurableDifference {
            reason: format!("the 95% interval of the ratio, {:.3}–{:.3}, contains 1", interval.0, interval.1),
        }
    } else if e.difference <= e.spread {
        Verdict::NoMeasurableDifference {
            reason: format!(
                "the difference, {:.3}{unit}, is within the spread of {}, {:.3}{unit}",
                e.difference, e.spread_of, e.spread
            ),
        }
    } else if (e.ratio - 1.0).abs() < threshold {
        Verdict::NoMeasurableDifference {
            reason: format!(
                "the difference, {:.2}%, is below the {:.1}% threshold",
                (e.ratio - 1.0).abs() * 100.0,
                threshold * 100.0
            ),
        }
    } else if e.ratio < 1.0 {
        Verdict::BFaster { speedup: 1.0 / e.ratio }
    } else {
        Verdict::BSlower { slowdown: e.ratio }
    }
}

/// Largest minus smallest; 0 for no value.
pub(crate) fn range(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.iter().copied().fold(f64::MIN, f64::max) - v.iter().copied().fold(f64::MAX, f64::min)
}

/// 95% percentile interval of `median(mb) / median(ma) × scale`,
/// resampling each side's values with replacement ([`RESAMPLES`] times, a
/// fixed seed: the same inputs give the same interval). `None` when a side
/// is empty.
///
/// [`compare`] gives it run medians (and the batch sizes' ratio as
/// `scale`); `bench --profile interleaved` gives it one process's wait and
/// active step times, and per-process ratios.
pub(crate) fn ratio_interval(ma: &[f64], mb: &[f64], scale: f64) -> Option<(f64, f64)> {
    if ma.is_empty() || mb.is_empty() {
        return None;
    }
    let mut state: u64 = 0x5EED_C0DE;
    let mut next = |n: usize| {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n as u64) as usize
    };
    let mut ratios = Vec::with_capacity(RESAMPLES);
    let mut sa = vec![0.0; ma.len()];
    let mut sb = vec![0.0; mb.len()];
    for _ in 0..RESAMPLES {
        sa.iter_mut().for_each(|x| *x = ma[next(ma.len())]);
        sb.iter_mut().for_each(|x| *x = mb[next(mb.len())]);
        if let (Some(x), Some(y)) = (median(&sa), median(&sb)) {
            ratios.push(y / x * scale);
        }
    }
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| ratios[((q * (ratios.len() - 1) as f64).round() as usize).min(ratios.len() - 1)];
    Some((at(0.025), at(0.975)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::bench::{Fingerprint, RunRecord};
    use serde_json::json;

    fn result(backend: &str, batch: u64, medians: &[f64]) -> BenchResult {
        let mut fp = Fingerprint::new();
        fp.insert("model".into(), json!("mlp"));
        fp.insert("backend".into(), json!(backend));
        fp.insert("batch".into(), json!(batch));
        let runs = medians
            .iter()
            .map(|&m| RunRecord {
                time_to_first_step_ms: 100.0,
                first_step_ms: 50.0,
                cache: "warm".into(),
                step_ms: vec![m * 0.99, m, m * 1.01],
                median_ms: m,
                first_loss: Some(2.3),
                final_loss: Some(0.5),
                held_out: Some(("accuracy".into(), 0.9)),
            })
            .collect();
        BenchResult::new(fp, backend.into(), 2, 3, batch, runs).unwrap()
    }

    #[test]
    fn impossible_times_are_refused_not_compared() {
        let a = result("cuda", 64, &[1.0, 1.1, 1.0]);
        for bad in [-0.84, 0.0, f64::INFINITY] {
            let mut b = result("cuda", 64, &[1.0, 1.1, 1.0]);
            b.runs[0].median_ms = bad;
            let err = compare(&a, &b, &[], 0.01).unwrap_err();
            assert!(matches!(err, BenchError::Invalid { .. }), "{bad}: {err}");
            assert!(compare(&b, &a, &[], 0.01).is_err());
        }
        let mut newer = a.clone();
        newer.format = "steptrace-bench/2".into();
        assert!(matches!(compare(&a, &newer, &[], 0.01), Err(BenchError::NewerFormat { .. })));
    }

    #[test]
    fn other_differences_are_refused_with_their_values() {
        let a = result("cuda", 64, &[1.0, 1.1, 1.0]);
        let b = result("wgpu", 128, &[1.0, 1.1, 1.0]);
        let err = compare(&a, &b, &["backend".into()], 0.01).unwrap_err();
        assert!(err.to_string().contains("batch (64 vs 128)"), "{err}");
        assert!(!err.to_string().contains("backend ("), "{err}");
        let ok = compare(&a, &b, &["backend".into(), "batch".into()], 0.01).unwrap();
        assert_eq!(ok.differences.len(), 2);
    }

    #[test]
    fn identical_configurations_show_no_measurable_difference() {
        let a = result("cuda", 64, &[2.00, 2.10, 1.95, 2.05, 2.02]);
        let b = result("cuda", 64, &[2.03, 1.98, 2.08, 2.01, 2.06]);
        let c = compare(&a, &b, &[], 0.01).unwrap();
        assert!(matches!(c.verdict, Verdict::NoMeasurableDifference { .. }), "{:?}", c.verdict);
        assert!(c.interval.0 <= c.ratio && c.ratio <= c.interval.1);
    }

    #[test]
    fn a_clear_difference_is_claimed_with_its_interval() {
        let a = result("cuda", 64, &[2.00, 2.10, 1.95, 2.05, 2.02]);
        let b = result("wgpu", 64, &[3.00, 3.10, 2.95, 3.05, 3.02]);
        let c = compare(&a, &b, &["backend".into()], 0.01).unwrap();
        match c.verdict {
            Verdict::BSlower { slowdown } => assert!((slowdown - 3.02 / 2.02).abs() < 1e-9),
            v => panic!("{v:?}"),
        }
        assert!(c.interval.0 > 1.0);
        // Time per sample: 2.02 ms / 64 samples.
        assert!((c.a_us_per_sample - 2020.0 / 64.0).abs() < 1e-9);
    }

    #[test]
    fn a_difference_within_the_spread_is_not_claimed() {
        // Medians shifted by 3% while each side spreads over 20%.
        let a = result("cuda", 64, &[2.0, 2.4, 2.0, 2.4, 2.0, 2.4]);
        let b = result("cuda", 64, &[2.06, 2.47, 2.06, 2.47, 2.06, 2.47]);
        let c = compare(&a, &b, &[], 0.01).unwrap();
        assert!(matches!(c.verdict, Verdict::NoMeasurableDifference { .. }), "{c:?}");
        // One run per side cannot show a spread.
        let c = compare(&result("cuda", 64, &[1.0]), &result("cuda", 64, &[2.0]), &[], 0.01).unwrap();
        assert!(matches!(c.verdict, Verdict::NoMeasurableDifference { ref reason } if reason.contains("--runs")));
    }
}
