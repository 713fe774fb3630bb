//! Run settings: what to train, on what data, how to sync and what to record.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::Serialize;
use steptrace_models::ModelKind;

use crate::backend::{BackendChoice, CacheConfig};

/// When the training loop waits for the device.
///
/// Device work is asynchronous: without a sync a span measures only the
/// host's launch of the work. Every sync is its own `sync` span.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncPolicy {
    /// Never sync: spans measure host-side launch only.
    None,
    /// Sync once at the end of each step, so `ProfilerStep#N` is the true
    /// step time (the default).
    #[default]
    Step,
    /// Sync after each phase, giving device time per phase; this removes
    /// real overlap between phases and changes the program being measured.
    Phase,
}

impl SyncPolicy {
    /// What spans mean under this policy, as written into every trace.
    pub fn meaning(self) -> &'static str {
        match self {
            SyncPolicy::None => "no sync: spans measure host-side launch only; device time is not observed",
            SyncPolicy::Step => "one sync at the end of each step: ProfilerStep#N is the true step time; phase spans are host launch time",
            SyncPolicy::Phase => "sync after every phase: phase spans include device time, but the syncs remove real overlap between phases",
        }
    }
}

impl fmt::Display for SyncPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SyncPolicy::None => "none",
            SyncPolicy::Step => "step",
            SyncPolicy::Phase => "phase",
        })
    }
}

impl FromStr for SyncPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(SyncPolicy::None),
            "step" => Ok(SyncPolicy::Step),
            "phase" => Ok(SyncPolicy::Phase),
            other => Err(format!("unknown sync policy `{other}` (valid: none, step, phase)")),
        }
    }
}

/// Training, or inference requests against a loaded model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
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
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "train" => Ok(Mode::Train),
            "infer" | "inference" => Ok(Mode::Infer),
            other => Err(format!("unknown mode `{other}` (valid: train, infer)")),
        }
    }
}

/// Everything a run needs. Build with [`RunConfig::new`] and adjust fields.
#[derive(Clone, Debug, Serialize)]
pub struct RunConfig {
    /// The model.
    pub model: ModelKind,
    /// Dataset name: `digits`, `fashion-mnist`, `shakespeare`, `synthetic`.
    pub dataset: String,
    /// Directory for datasets read from disk (Fashion-MNIST train split).
    pub data_dir: Option<PathBuf>,
    /// Requested backend.
    pub backend: BackendChoice,
    /// Steps to run (`step()` calls).
    pub steps: u64,
    /// Samples per batch.
    pub batch_size: usize,
    /// Sequence length for the Transformer.
    pub seq_len: usize,
    /// Learning rate.
    pub learning_rate: f64,
    /// Seed for weights and data order.
    pub seed: u64,
    /// Sync policy.
    pub sync: SyncPolicy,
    /// Train or infer.
    pub mode: Mode,
    /// Loader threads (0: load on the training thread).
    pub prefetch: usize,
    /// Batches each loader thread may hold ready.
    pub prefetch_depth: usize,
    /// Extra time spent in each batch read, to plant an input bottleneck.
    pub loader_delay_ms: u64,
    /// Record burn/cubecl internal spans (about 1 MB per step).
    pub internals: bool,
    /// Record device memory in use per step as a counter track.
    pub memory: bool,
    /// cubecl compilation/autotune cache.
    pub cache: CacheConfig,
    /// Synthetic data: samples and sample shape `[C, H, W]`.
    pub synthetic_samples: usize,
    /// Shape of synthetic samples.
    pub synthetic_shape: [usize; 3],
    /// Free-form notes copied into the manifest.
    pub notes: Vec<String>,
    /// Read the loss back every this many steps (it waits for the device);
    /// 0: only at the first and last step, as `steptrace bench` does.
    pub loss_every: u64,
}

impl RunConfig {
    /// Defaults: the MLP on the embedded UCI digits, auto backend, 40 steps,
    /// batch 64, sync per step.
    pub fn new() -> RunConfig {
        RunConfig {
            model: ModelKind::Mlp,
            dataset: "digits".to_owned(),
            data_dir: None,
            backend: BackendChoice::Auto,
            steps: 40,
            batch_size: 64,
            seq_len: 64,
            learning_rate: 1e-3,
            seed: 42,
            sync: SyncPolicy::Step,
            mode: Mode::Train,
            prefetch: 0,
            prefetch_depth: 2,
            loader_delay_ms: 0,
            internals: false,
            memory: false,
            cache: CacheConfig::default(),
            synthetic_samples: 4096,
            synthetic_shape: [1, 28, 28],
            notes: Vec::new(),
            loss_every: 10,
        }
    }

    /// Checks combinations that cannot work, before anything starts.
    pub fn validate(&self) -> Result<(), String> {
        if self.batch_size == 0 {
            return Err("batch size must be at least 1".into());
        }
        if self.steps == 0 {
            return Err("steps must be at least 1".into());
        }
        let text = self.dataset == "shakespeare";
        match (self.model, text) {
            (ModelKind::Transformer, false) => Err(format!(
                "the transformer is a character language model: use --dataset shakespeare (got {})",
                self.dataset
            )),
            (ModelKind::Mlp | ModelKind::ConvNet, true) => {
                Err(format!("{} classifies images: use digits, fashion-mnist or synthetic, not shakespeare", self.model))
            }
            _ => Ok(()),
        }
    }
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig::new()
    }
}
