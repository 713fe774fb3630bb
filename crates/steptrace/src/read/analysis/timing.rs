//! Step timing: the headline figures, from wall-clock step boundaries,
//! startup kept apart from the steady state.

use serde::Serialize;

use super::loaded::{Loaded, RunInfo};
use super::stats::Stats;
use super::steps::StepRow;

/// Step timing: the headline figures.
#[derive(Clone, Debug, Serialize)]
pub struct StepTiming {
    /// The unit of the headline figure.
    pub unit: &'static str,
    /// Every recorded step, in order.
    pub steps: Vec<StepRow>,
    /// Statistics over steady steps, ms/step.
    pub steady_ms: Option<Stats>,
    /// Statistics over steady steps, samples/s (needs the batch size).
    pub steady_samples_per_s: Option<Stats>,
    /// Statistics over startup steps, ms/step (never merged with steady).
    pub startup_ms: Option<Stats>,
    /// The wall-clock rate over steady windows: elapsed time from the first
    /// steady step's start to the last one's end, per file, divided by the
    /// number of steps.
    pub window: Option<WindowRate>,
}

/// A wall-clock rate over windows.
#[derive(Clone, Debug, Serialize)]
pub struct WindowRate {
    /// Elapsed wall time, ms.
    pub wall_ms: f64,
    /// Steps in it.
    pub steps: usize,
    /// ms/step.
    pub ms_per_step: f64,
    /// samples/s, when the batch size is known.
    pub samples_per_s: Option<f64>,
}

/// Marks startup steps: those the run declared as startup, else step 0.
pub(crate) fn mark_startup(loaded: &mut [Loaded], run: &mut RunInfo, notes: &mut Vec<String>) {
    let declared = run.startup_steps;
    if declared.is_none() {
        notes.push(
            "the trace does not declare its startup steps: only ProfilerStep#0, if recorded, is counted as startup"
                .into(),
        );
    }
    let limit = declared.unwrap_or(1);
    for l in loaded.iter_mut() {
        for row in &mut l.steps {
            row.startup = row.step < limit;
        }
    }
}

pub(crate) fn step_timing(loaded: &[Loaded], batch: Option<u64>) -> StepTiming {
    let steps: Vec<StepRow> = loaded.iter().flat_map(|l| l.steps.iter().cloned()).collect();
    let steady: Vec<f64> = steps.iter().filter(|s| !s.startup).map(|s| s.ms).collect();
    let startup: Vec<f64> = steps.iter().filter(|s| s.startup).map(|s| s.ms).collect();
    let rate = |ms: &f64| batch.map(|b| b as f64 * 1000.0 / ms);
    let per_s: Option<Vec<f64>> = steady.iter().map(rate).collect();
    let mut wall_us = 0.0;
    let mut count = 0;
    for l in loaded {
        // The time extent of the file's steady steps (earliest start to
        // latest end), whatever order their numbers are in.
        let kept = l.steps.iter().filter(|s| !s.startup);
        let start = kept.clone().map(|s| s.start).fold(f64::INFINITY, f64::min);
        let end = kept.clone().map(|s| s.end).fold(f64::NEG_INFINITY, f64::max);
        if end >= start {
            wall_us += end - start;
            count += kept.count();
        }
    }
    // Never a figure to quote that cannot be a time.
    let window = (count > 0 && wall_us > 0.0 && wall_us.is_finite()).then(|| {
        let ms_per_step = wall_us / 1000.0 / count as f64;
        WindowRate { wall_ms: wall_us / 1000.0, steps: count, ms_per_step, samples_per_s: rate(&ms_per_step) }
    });
    StepTiming {
        unit: "ms/step",
        steady_ms: Stats::of(&steady),
        steady_samples_per_s: per_s.and_then(|v| Stats::of(&v)),
        startup_ms: Stats::of(&startup),
        window,
        steps,
    }
}
