//! What a run reports: startup apart from steady state, and the unit stated.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use steptrace::SavedTrace;

use crate::backend::BackendKind;
use crate::sync::{SyncPolicy, UnknownSetting};

/// One step as the loop saw it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StepRecord {
    /// Step number (`ProfilerStep#N`).
    pub step: u64,
    /// Wall time of the step in ms, from the end of the previous step to
    /// the end of this one (after its sync, if the policy syncs).
    pub ms: f64,
    /// Samples in the batch.
    pub samples: usize,
    /// Loss, when it was read this step (reading it waits for the device).
    pub loss: Option<f64>,
}

pub use steptrace::analysis::Stats;

/// Training, or inference requests against a loaded model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Forward, loss, backward and optimizer each step.
    #[default]
    Train,
    /// `model.load` once, then one `infer.request` per step (eval mode).
    Infer,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Train => "train",
            Mode::Infer => "infer",
        })
    }
}

impl FromStr for Mode {
    type Err = UnknownSetting;
    fn from_str(s: &str) -> Result<Self, UnknownSetting> {
        match s.trim().to_ascii_lowercase().as_str() {
            "train" => Ok(Mode::Train),
            "infer" | "inference" => Ok(Mode::Infer),
            other => Err(UnknownSetting { what: "mode", name: other.to_owned(), valid: "train, infer" }),
        }
    }
}

/// A step flagged as possibly leaving the steady state.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Anomaly {
    /// The step.
    pub step: u64,
    /// What was seen.
    pub what: String,
}

/// The result of a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunSummary {
    /// The backend label, with any fallback and its reason.
    pub backend: String,
    /// The backend that ran.
    pub backend_kind: BackendKind,
    /// The device (adapter) name.
    pub device: String,
    /// Trainable parameters.
    pub parameters: usize,
    /// The shape of the first batch's input.
    pub input_shape: Vec<usize>,
    /// Whether the backend is a fallback from the one requested.
    pub fallback: bool,
    /// The sync policy ([`SyncPolicy::meaning`] says what it means for the numbers).
    pub sync: SyncPolicy,
    /// Train or infer.
    pub mode: Mode,
    /// Time from the start of the run to the start of step 0 (data, model,
    /// loader set-up), ms.
    pub setup_ms: f64,
    /// Inference mode: time to load the model and move it to eval mode
    /// (kept apart from every request), ms.
    pub model_load_ms: Option<f64>,
    /// Step 0's wall time (startup: compilation, autotune), ms.
    pub first_step_ms: f64,
    /// Steps counted as startup (not in the steady figures).
    pub startup_steps: u64,
    /// Steady-state ms/step over the remaining steps.
    pub steady_ms: Option<Stats>,
    /// Steady-state samples/s, from the median step time.
    pub steady_samples_per_s: Option<f64>,
    /// Samples per step.
    pub batch_size: usize,
    /// Every step.
    pub steps: Vec<StepRecord>,
    /// First loss read.
    pub first_loss: Option<f64>,
    /// Last loss read.
    pub last_loss: Option<f64>,
    /// Held-out metric: accuracy for classifiers, perplexity for the
    /// language model.
    pub held_out: Option<(String, f64)>,
    /// New shapes or slow steps after startup.
    pub anomalies: Vec<Anomaly>,
    /// Trace files written.
    pub traces: Vec<SavedTrace>,
    /// Trace errors (the run itself went on).
    pub trace_errors: Vec<String>,
    /// cubecl cache location and what its caches gave this run: `DIR (cold)`, `DIR (partly
    /// warm)`, `DIR (warm)`, or the reason it is not known.
    pub cache: String,
    /// The set-up and step 0 itemised (device client, compilation, autotune, rest), or why
    /// not; `None` when the run ended before step 0 did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_start: Option<steptrace::format::Figure<steptrace::format::ColdStart>>,
    /// Device memory per step: "not observed" where the backend cannot say.
    pub memory: Option<String>,
    /// Why the run ended before its last step (a signal), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
}

impl RunSummary {
    /// Trace bytes per recorded step, over all files.
    pub fn trace_bytes_per_step(&self) -> Option<f64> {
        let steps: usize = self.traces.iter().map(|t| t.steps.len()).sum();
        let bytes: u64 = self.traces.iter().map(|t| t.bytes).sum();
        (steps > 0).then(|| bytes as f64 / steps as f64)
    }
}

/// How many leading steps are startup: step 0 always, then up to a fifth of
/// the run, so that compilation of later first-time shapes stays out of the
/// steady figures.
pub fn startup_steps(total: u64) -> u64 {
    (total / 5).max(1).min(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startup_is_step_0_then_a_fifth_of_the_run() {
        assert_eq!(startup_steps(40), 8);
        assert_eq!(startup_steps(3), 1);
        assert_eq!(startup_steps(1), 1);
    }
}
