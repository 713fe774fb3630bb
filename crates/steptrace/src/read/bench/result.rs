//! What `steptrace bench` records.

use super::BenchError;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::kernels::KernelRecord;
use crate::read::analysis::Stats;

/// Everything that defines a workload, as `key → value`. Two results are
/// comparable when their fingerprints differ only in the variable under
/// test.
pub type Fingerprint = BTreeMap<String, Value>;

/// One run: a fresh process from the same starting state.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    /// Time from process start to the end of the first step, ms.
    pub time_to_first_step_ms: f64,
    /// The first step's wall time, ms (compilation, autotune).
    pub first_step_ms: f64,
    /// Whether the compilation/autotune cache was warm.
    pub cache: String,
    /// Every measured step's wall time, ms, in order.
    pub step_ms: Vec<f64>,
    /// Median of `step_ms`.
    pub median_ms: f64,
    /// The loss of the first step: equal across runs that start from the
    /// same state.
    pub first_loss: Option<f64>,
    /// The loss of the last step.
    pub final_loss: Option<f64>,
    /// Held-out metric: `(name, value)`, accuracy or perplexity.
    pub held_out: Option<(String, f64)>,
}

/// Figures over all runs.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// Statistics of the per-run medians, ms/step.
    pub run_medians_ms: StatsRecord,
    /// Statistics of every measured step of every run, ms/step.
    pub all_steps_ms: StatsRecord,
    /// Samples per second at the median of the run medians.
    pub samples_per_s: f64,
    /// Statistics of the runs' time to first step, ms.
    pub time_to_first_step_ms: StatsRecord,
    /// Whether every run's first loss was identical (same starting state).
    pub same_first_loss: bool,
}

/// [`Stats`], as stored (serialisable both ways).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StatsRecord {
    /// Count.
    pub n: usize,
    /// Smallest.
    pub min: f64,
    /// Median.
    pub median: f64,
    /// Largest.
    pub max: f64,
    /// Sample standard deviation.
    pub std: f64,
    /// Interquartile range.
    pub iqr: f64,
}

impl From<Stats> for StatsRecord {
    fn from(s: Stats) -> Self {
        StatsRecord { n: s.n, min: s.min, median: s.median, max: s.max, std: s.std, iqr: s.iqr }
    }
}

/// The format tag of bench results this crate writes and reads.
///
/// Only the major version is checked. A field added with a default (such
/// as [`BenchResult::kernels`]) keeps it: older readers ignore the field,
/// and this crate reads older files without it.
pub const BENCH_FORMAT: &str = "steptrace-bench/1";

/// The name part of [`BENCH_FORMAT`], before the major version.
const BENCH_FORMAT_NAME: &str = "steptrace-bench/";

/// The major version of [`BENCH_FORMAT`].
const BENCH_FORMAT_MAJOR: u64 = 1;

/// A bench result: the record `steptrace bench --json` writes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BenchResult {
    /// `steptrace-bench/1`.
    pub format: String,
    /// What was run.
    pub fingerprint: Fingerprint,
    /// The backend label, with any fallback and its reason.
    pub backend_label: String,
    /// Warm-up steps per run (not measured).
    pub warmup: u64,
    /// Measured steps per run.
    pub steps: u64,
    /// Samples per step.
    pub batch_size: u64,
    /// The runs.
    pub runs: Vec<RunRecord>,
    /// Figures over the runs.
    pub summary: Summary,
    /// The kernels of each run's traces, one record per run in the order
    /// of `runs` (with `--profile active`); empty when the bench recorded
    /// none (another profile mode, or a result from before kernels were
    /// recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<KernelRecord>,
}

impl BenchResult {
    /// Builds a result from its runs, computing the summary.
    ///
    /// # Errors
    ///
    /// When there is no run or a run has no measured step.
    pub fn new(
        fingerprint: Fingerprint,
        backend_label: String,
        warmup: u64,
        steps: u64,
        batch_size: u64,
        runs: Vec<RunRecord>,
    ) -> Result<BenchResult, BenchError> {
        let medians: Vec<f64> = runs.iter().map(|r| r.median_ms).collect();
        let all: Vec<f64> = runs.iter().flat_map(|r| r.step_ms.iter().copied()).collect();
        let ttfs: Vec<f64> = runs.iter().map(|r| r.time_to_first_step_ms).collect();
        let (Some(m), Some(a), Some(t)) = (Stats::of(&medians), Stats::of(&all), Stats::of(&ttfs)) else {
            return Err(BenchError::NoRun);
        };
        let first = runs.first().and_then(|r| r.first_loss);
        let summary = Summary {
            samples_per_s: batch_size as f64 * 1000.0 / m.median,
            run_medians_ms: m.into(),
            all_steps_ms: a.into(),
            time_to_first_step_ms: t.into(),
            same_first_loss: first.is_some() && runs.iter().all(|r| r.first_loss == first),
        };
        Ok(BenchResult {
            format: BENCH_FORMAT.into(),
            fingerprint,
            backend_label,
            warmup,
            steps,
            batch_size,
            runs,
            summary,
            kernels: Vec::new(),
        })
    }

    /// The result with each run's kernels, one record per run in the order
    /// of `runs` ([`check`](Self::check) refuses another count).
    #[must_use]
    pub fn with_kernels(mut self, kernels: Vec<KernelRecord>) -> BenchResult {
        self.kernels = kernels;
        self
    }
}

// === reading and checking ===

impl BenchResult {
    /// Reads a result from the JSON `steptrace bench --json` writes, and
    /// [`check`](Self::check)s it.
    ///
    /// # Errors
    ///
    /// A format tag of a newer major version, or not a bench result's; JSON
    /// that does not hold a result; or a figure that fails the check.
    ///
    /// # Examples
    ///
    /// ```
    /// use steptrace::bench::{BenchError, BenchResult};
    ///
    /// let err = BenchResult::from_json(br#"{"format":"steptrace-bench/2"}"#).unwrap_err();
    /// assert!(matches!(err, BenchError::NewerFormat { .. }), "{err}");
    /// assert!(BenchResult::from_json(b"[]").is_err());
    /// ```
    pub fn from_json(bytes: &[u8]) -> Result<BenchResult, BenchError> {
        let value: Value = serde_json::from_slice(bytes).map_err(BenchError::Json)?;
        if let Some(tag) = value.get("format").and_then(Value::as_str) {
            check_format(tag)?;
        }
        let result = BenchResult::deserialize(value).map_err(BenchError::Json)?;
        result.check()?;
        Ok(result)
    }

    /// Checks that the result can be compared: its format is
    /// [`BENCH_FORMAT`], its batch size at least 1, every time it holds
    /// (run medians, step times, startup times, summary figures) positive
    /// and finite, and its kernel records, if any, one per run with
    /// figures that are finite and not negative.
    ///
    /// # Errors
    ///
    /// The first figure that fails, named.
    pub fn check(&self) -> Result<(), BenchError> {
        check_format(&self.format)?;
        if self.batch_size == 0 {
            return Err(BenchError::Invalid { what: "batch_size".into(), value: 0.0 });
        }
        if self.runs.is_empty() {
            return Err(BenchError::NoRun);
        }
        let positive = |what: String, value: f64| {
            if value > 0.0 && value.is_finite() {
                Ok(())
            } else {
                Err(BenchError::Invalid { what, value })
            }
        };
        for (i, run) in self.runs.iter().enumerate() {
            positive(format!("run {i} median_ms"), run.median_ms)?;
            positive(format!("run {i} first_step_ms"), run.first_step_ms)?;
            positive(format!("run {i} time_to_first_step_ms"), run.time_to_first_step_ms)?;
            if run.step_ms.is_empty() {
                return Err(BenchError::NoRun);
            }
            for (j, ms) in run.step_ms.iter().enumerate() {
                positive(format!("run {i} step_ms[{j}]"), *ms)?;
            }
        }
        let s = &self.summary;
        for (what, stats) in [("run_medians_ms", &s.run_medians_ms), ("all_steps_ms", &s.all_steps_ms)] {
            for (field, value) in [("min", stats.min), ("median", stats.median), ("max", stats.max)] {
                positive(format!("summary.{what}.{field}"), value)?;
            }
        }
        if !self.kernels.is_empty() && self.kernels.len() != self.runs.len() {
            let what = format!("the count of kernel records for {} runs", self.runs.len());
            return Err(BenchError::Invalid { what, value: self.kernels.len() as f64 });
        }
        for (i, k) in self.kernels.iter().enumerate() {
            if let Some((what, value)) = k.summary().and_then(|s| s.invalid()) {
                return Err(BenchError::Invalid { what: format!("run {i} {what}"), value });
            }
        }
        positive("summary.samples_per_s".into(), s.samples_per_s)
    }
}

/// Accepts [`BENCH_FORMAT`]; refuses a newer major version, or a tag that
/// is not a bench result's.
fn check_format(tag: &str) -> Result<(), BenchError> {
    check_tag(tag, BENCH_FORMAT_NAME, BENCH_FORMAT_MAJOR, BENCH_FORMAT)
}

/// Accepts a tag `NAME` + `MAJOR` (a minor part after a dot is ignored);
/// refuses a newer major version, or a tag of another name, naming
/// `supported`. Bench results and overhead results are versioned alike.
pub(crate) fn check_tag(tag: &str, name: &str, major: u64, supported: &'static str) -> Result<(), BenchError> {
    let found = tag.strip_prefix(name).and_then(|v| v.split('.').next()).and_then(|v| v.parse::<u64>().ok());
    match found {
        Some(m) if m == major => Ok(()),
        Some(m) if m > major => Err(BenchError::NewerFormat { found: tag.to_owned(), supported }),
        _ => Err(BenchError::UnknownFormat { found: tag.to_owned(), supported }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(medians: &[f64]) -> BenchResult {
        let runs = medians
            .iter()
            .map(|&m| RunRecord {
                time_to_first_step_ms: 100.0,
                first_step_ms: 50.0,
                cache: "warm".into(),
                step_ms: vec![m],
                median_ms: m,
                first_loss: None,
                final_loss: None,
                held_out: None,
            })
            .collect();
        BenchResult::new(Fingerprint::new(), "cpu".into(), 1, 1, 8, runs).unwrap()
    }

    #[test]
    fn a_result_round_trips_and_checks() {
        let r = result(&[1.0, 2.0]);
        let back = BenchResult::from_json(&serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn formats_other_than_ours_are_refused() {
        let mut doc = serde_json::to_value(result(&[1.0])).unwrap();
        for (tag, newer) in [
            ("steptrace-bench/2", true),
            ("steptrace-bench/10.1", true),
            ("other/1", false),
            ("steptrace-bench/x", false),
        ] {
            doc["format"] = json!(tag);
            let err = BenchResult::from_json(&serde_json::to_vec(&doc).unwrap()).unwrap_err();
            assert_eq!(matches!(err, BenchError::NewerFormat { .. }), newer, "{tag}: {err}");
            assert!(err.to_string().contains(tag) && err.to_string().contains(BENCH_FORMAT), "{err}");
        }
        doc["format"] = json!("steptrace-bench/1");
        assert!(BenchResult::from_json(&serde_json::to_vec(&doc).unwrap()).is_ok());
    }

    #[test]
    fn kernels_are_optional_and_checked() {
        // A result written before kernels were recorded has no such field.
        let doc = serde_json::to_value(result(&[1.0, 2.0])).unwrap();
        assert!(doc.get("kernels").is_none());
        let back = BenchResult::from_json(&serde_json::to_vec(&doc).unwrap()).unwrap();
        assert!(back.kernels.is_empty());
        let why = KernelRecord::NotObserved { reason: "device activity not observed".into() };
        let r = result(&[1.0, 2.0]).with_kernels(vec![why.clone(), why.clone()]);
        let back = BenchResult::from_json(&serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        let err = result(&[1.0, 2.0]).with_kernels(vec![why]).check().unwrap_err();
        assert!(err.to_string().contains("kernel records for 2 runs is 1"), "{err}");
        let mut doc = serde_json::to_value(&r).unwrap();
        doc["kernels"][1] = json!({"status": "observed", "steps": 3, "kernels_per_step": 2.0, "busy_ms_per_step": 1.0,
            "kernel_ms_per_step": 0.5, "rows": [{"name": "k", "label": "k", "calls_per_step": 2.0, "ms_per_step": -0.5,
            "mean_us": 1.0, "grid": null, "block": null, "share_of_busy": 0.5}], "others_ms_per_step": 0.0, "others": 0});
        let err = BenchResult::from_json(&serde_json::to_vec(&doc).unwrap()).unwrap_err();
        assert!(err.to_string().starts_with("run 1 kernels.rows[0].ms_per_step is -0.5"), "{err}");
    }

    #[test]
    fn non_positive_and_non_finite_times_are_refused() {
        let cases: [(&str, f64); 3] = [("median_ms", -0.84), ("median_ms", 0.0), ("first_step_ms", -1.0)];
        for (field, value) in cases {
            let mut r = result(&[1.0, 2.0]);
            match field {
                "median_ms" => r.runs[1].median_ms = value,
                _ => r.runs[1].first_step_ms = value,
            }
            let err = r.check().unwrap_err();
            assert_eq!(err.to_string().split(" is ").next(), Some(format!("run 1 {field}").as_str()), "{err}");
        }
        let mut r = result(&[1.0]);
        r.runs[0].step_ms[0] = f64::INFINITY;
        assert!(r.check().unwrap_err().to_string().contains("step_ms[0] is inf"));
        let mut r = result(&[1.0]);
        r.batch_size = 0;
        assert!(r.check().is_err());
        // JSON has no NaN: a null where a time belongs is not a result.
        let mut doc = serde_json::to_value(result(&[1.0])).unwrap();
        doc["runs"][0]["median_ms"] = Value::Null;
        assert!(matches!(BenchResult::from_json(&serde_json::to_vec(&doc).unwrap()), Err(BenchError::Json(_))));
    }
}
