//! What `steptrace bench` records.

use super::BenchError;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::analysis::Stats;

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
            format: "steptrace-bench/1".into(),
            fingerprint,
            backend_label,
            warmup,
            steps,
            batch_size,
            runs,
            summary,
        })
    }
}
