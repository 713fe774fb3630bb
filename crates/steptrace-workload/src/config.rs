//! Run settings: what to train, on what data, how to sync and what to record.

use std::borrow::Cow;
use std::path::PathBuf;

use serde::Serialize;
use steptrace_burn::backend::{self, BackendChoice, BackendError, CacheConfig, Selection};
use steptrace_burn::sync::UnknownSetting;
use steptrace_burn::{Mode, SyncPolicy};
use steptrace_models::ModelKind;

/// A run configuration that cannot work, or a setting that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `batch_size` is 0.
    #[error("batch size must be at least 1")]
    ZeroBatchSize,
    /// `steps` is 0.
    #[error("steps must be at least 1")]
    ZeroSteps,
    /// The Transformer was given an image dataset.
    #[error("the transformer is a character language model: use --dataset shakespeare (got {dataset})")]
    TransformerNeedsText {
        /// The dataset that was given.
        dataset: String,
    },
    /// An image classifier was given the text dataset.
    #[error("{model} classifies images: use digits, fashion-mnist or synthetic, not shakespeare")]
    ImageModelNeedsImages {
        /// The model that was given.
        model: ModelKind,
    },
    /// A sync policy or mode name that is not one of its values.
    #[error(transparent)]
    Unknown(#[from] UnknownSetting),
    /// The learning rate is not a finite positive number.
    #[error("the learning rate must be a finite number above 0 (got {value})")]
    BadLearningRate {
        /// The value as given.
        value: String,
    },
    /// A size outside what the run can take.
    #[error("{what} must be in {limit} (got {value})")]
    OutOfRange {
        /// The setting.
        what: &'static str,
        /// Its value.
        value: u128,
        /// The allowed range.
        limit: String,
    },
    /// Hidden widths were given for a model other than the MLP.
    #[error("--hidden sets the MLP's hidden layers; the {model} has none to set")]
    HiddenNotMlp {
        /// The model.
        model: ModelKind,
    },
    /// A sample shape the model cannot take.
    #[error("sample shape {shape:?} does not fit: {need}")]
    BadShape {
        /// The shape.
        shape: Vec<usize>,
        /// What the model needs.
        need: String,
    },
    /// The run would need more host memory than the machine has free.
    #[error(
        "{what} needs about {bytes} bytes of host memory, more than the {available} bytes available: use a smaller size"
    )]
    TooLarge {
        /// What would be allocated.
        what: String,
        /// Its estimated size.
        bytes: u128,
        /// Memory available (`MemAvailable`).
        available: u64,
    },
    /// [`RunConfig::save_init`] names a file that exists (it is never overwritten).
    #[error(
        "--save-init {}: the file already exists; steptrace never overwrites a file (it was left as it is): choose another path",
        path.display()
    )]
    SaveInitExists {
        /// The path given.
        path: PathBuf,
    },
    /// [`RunConfig::init`] names no file.
    #[error("--init {}: no such file (an initial-state record written by --save-init)", path.display())]
    InitNotFound {
        /// The path given.
        path: PathBuf,
    },
    /// [`RunConfig::init`] names something that is not a regular file; it is not read.
    #[error("--init {}: {what}, not a file: give the initial-state record --save-init wrote (it was not read)", path.display())]
    InitNotAFile {
        /// The path given.
        path: PathBuf,
        /// What it is: `a directory`, `a FIFO`, `a device`, `a socket`.
        what: &'static str,
    },
}

/// What a path that is not a regular file is, in words.
fn file_kind(m: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = m.file_type();
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if m.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

/// The backend of a run: what was asked for and, once [`select`](steptrace_burn::backend::select)ed,
/// what was chosen. The one place a run's backend is recorded: the choice of a
/// [`BackendSetting::Selected`] is its [`Selection::requested`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendSetting {
    /// Asked for, not probed yet; [`run`](crate::run) selects it when the run starts.
    Requested(BackendChoice),
    /// Probed and chosen (see [`RunConfig::select`]).
    Selected(Selection),
}

impl BackendSetting {
    /// What the user asked for (`--backend`).
    pub fn requested(&self) -> BackendChoice {
        match self {
            BackendSetting::Requested(choice) => *choice,
            BackendSetting::Selected(selection) => selection.requested,
        }
    }

    /// The selection, once made.
    pub fn selection(&self) -> Option<&Selection> {
        match self {
            BackendSetting::Requested(_) => None,
            BackendSetting::Selected(selection) => Some(selection),
        }
    }

    /// The selection: the one already made, else a fresh [`backend::select`] of the choice
    /// (not stored; see [`RunConfig::select`]).
    pub fn resolve(&self) -> Result<Cow<'_, Selection>, BackendError> {
        match self {
            BackendSetting::Requested(choice) => backend::select(*choice).map(Cow::Owned),
            BackendSetting::Selected(selection) => Ok(Cow::Borrowed(selection)),
        }
    }
}

impl Default for BackendSetting {
    /// `auto`, not selected yet.
    fn default() -> Self {
        BackendSetting::Requested(BackendChoice::Auto)
    }
}

impl From<BackendChoice> for BackendSetting {
    fn from(choice: BackendChoice) -> Self {
        BackendSetting::Requested(choice)
    }
}

impl From<Selection> for BackendSetting {
    fn from(selection: Selection) -> Self {
        BackendSetting::Selected(selection)
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
    /// The backend: requested, or already selected (see [`RunConfig::select`]).
    pub backend: BackendSetting,
    /// Steps to run (`step()` calls).
    pub steps: u64,
    /// Samples per batch.
    pub batch_size: usize,
    /// Sequence length for the Transformer.
    pub seq_len: usize,
    /// The MLP's hidden layers' widths, in order (`None`: the model's default, 128 and 128).
    /// The trace names them `hidden0`, `hidden1`, ... Refused for the other models.
    pub mlp_hidden: Option<Vec<usize>>,
    /// Learning rate.
    pub learning_rate: f64,
    /// Seed for weights and data order (with [`init`](Self::init), for the data order only).
    pub seed: u64,
    /// Start from the weights of this record (written by [`save_init`](Self::save_init))
    /// instead of the seed's random draw, which differs per backend: the same record is
    /// the same starting state on every backend. The record is checked against the
    /// run's model and shapes before training ([`init`](crate::init#the-check)).
    pub init: Option<PathBuf>,
    /// Save the model's initial weights to this new file before step 0 (a burn record,
    /// [`init`](crate::init#the-record)); an existing file is never overwritten.
    pub save_init: Option<PathBuf>,
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
    /// A deliberate inefficiency, for testing the report's "repeated upload"
    /// hypothesis: every training step re-creates a constant of 1000 f32
    /// ones on the device from host data (one 4000-byte host-to-device copy)
    /// and multiplies the loss by its mean, exactly 1.0, so that the
    /// training is bit-identical ([`step::planted_upload`](crate::step::planted_upload)).
    /// Inference requests are left as they are.
    pub plant_upload: bool,
    /// Record burn/cubecl internal spans (669,488 bytes per recorded step for the MLP on the H200: docs/benchmarks.md).
    pub internals: bool,
    /// Sample device memory at the end of each recorded step, by category.
    pub memory: bool,
    /// With [`memory`](Self::memory), also after each phase: each such sample flushes burn's
    /// fusion queue and waits for cubecl's device thread (costly; cuts fusion there).
    pub memory_phases: bool,
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
    /// Asks the loop to stop: when it holds a non-zero value (the number of
    /// the signal that asked, by convention), the run ends after the
    /// current step, saves the cycle in progress as cut short, and reports
    /// [`RunSummary::interrupted`](steptrace_burn::RunSummary::interrupted).
    #[serde(skip)]
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
}

impl RunConfig {
    /// Defaults: the MLP on the embedded UCI digits, auto backend, 40 steps,
    /// batch 64, sync per step.
    pub fn new() -> RunConfig {
        RunConfig {
            model: ModelKind::Mlp,
            dataset: "digits".to_owned(),
            data_dir: None,
            backend: BackendSetting::default(),
            steps: 40,
            batch_size: 64,
            seq_len: 64,
            mlp_hidden: None,
            learning_rate: 1e-3,
            seed: 42,
            init: None,
            save_init: None,
            sync: SyncPolicy::Step,
            mode: Mode::Train,
            prefetch: 0,
            prefetch_depth: 2,
            loader_delay_ms: 0,
            plant_upload: false,
            internals: false,
            memory: false,
            memory_phases: false,
            cache: CacheConfig::default(),
            synthetic_samples: 4096,
            synthetic_shape: [1, 28, 28],
            notes: Vec::new(),
            loss_every: 10,
            stop: None,
        }
    }

    /// Checks combinations that cannot work, before anything starts (an
    /// [`init`](Self::init) record that is not there, a [`save_init`](Self::save_init)
    /// file that is).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(path) = self.save_init.as_ref().filter(|p| p.exists()) {
            return Err(ConfigError::SaveInitExists { path: path.clone() });
        }
        if let Some(path) = &self.init {
            match std::fs::metadata(path) {
                Ok(m) if m.is_file() => {}
                Ok(m) => return Err(ConfigError::InitNotAFile { path: path.clone(), what: file_kind(&m) }),
                Err(_) => return Err(ConfigError::InitNotFound { path: path.clone() }),
            }
        }
        if self.batch_size == 0 {
            return Err(ConfigError::ZeroBatchSize);
        }
        if self.steps == 0 {
            return Err(ConfigError::ZeroSteps);
        }
        let text = self.dataset == "shakespeare";
        match (self.model, text) {
            (ModelKind::Transformer, false) => Err(ConfigError::TransformerNeedsText { dataset: self.dataset.clone() }),
            (model @ (ModelKind::Mlp | ModelKind::ConvNet), true) => Err(ConfigError::ImageModelNeedsImages { model }),
            _ => crate::limits::check_settings(self),
        }
    }

    /// Selects the requested backend ([`backend::select`]: probes, labelled fallback) and
    /// keeps the selection in [`RunConfig::backend`], so that the run uses exactly what was
    /// printed; an existing selection is returned as it is, without probing again.
    pub fn select(&mut self) -> Result<&Selection, BackendError> {
        if let BackendSetting::Requested(choice) = self.backend {
            self.backend = BackendSetting::Selected(backend::select(choice)?);
        }
        match &self.backend {
            BackendSetting::Selected(selection) => Ok(selection),
            // A logic invariant, not a runtime condition: the line above stored a selection.
            BackendSetting::Requested(_) => unreachable!("RunConfig::select stores a selection"),
        }
    }
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages are the ones the `String` errors had.
    #[test]
    fn config_errors_keep_their_messages() {
        let mut cfg = RunConfig::new();
        cfg.batch_size = 0;
        assert_eq!(cfg.validate().unwrap_err().to_string(), "batch size must be at least 1");
        cfg.batch_size = 1;
        cfg.steps = 0;
        assert_eq!(cfg.validate(), Err(ConfigError::ZeroSteps));
        cfg.steps = 1;
        cfg.model = ModelKind::Transformer;
        assert_eq!(
            cfg.validate().unwrap_err().to_string(),
            "the transformer is a character language model: use --dataset shakespeare (got digits)"
        );
        cfg.model = ModelKind::ConvNet;
        cfg.dataset = "shakespeare".into();
        assert_eq!(
            cfg.validate().unwrap_err().to_string(),
            "convnet classifies images: use digits, fashion-mnist or synthetic, not shakespeare"
        );
        assert_eq!(
            " Often ".parse::<SyncPolicy>().unwrap_err().to_string(),
            "unknown sync policy `often` (valid: none, step, phase)"
        );
        assert_eq!("Serve".parse::<Mode>().unwrap_err().to_string(), "unknown mode `serve` (valid: train, infer)");
        let run_error: crate::Error = ConfigError::ZeroSteps.into();
        assert_eq!(run_error.to_string(), "invalid run configuration: steps must be at least 1");
    }

    #[test]
    fn the_backend_is_requested_until_selected() {
        let mut cfg = RunConfig::new();
        assert_eq!(cfg.backend, BackendSetting::Requested(BackendChoice::Auto));
        assert_eq!(cfg.backend.requested(), BackendChoice::Auto);
        assert!(cfg.backend.selection().is_none());
        cfg.backend = BackendChoice::Cpu.into();
        assert_eq!(cfg.backend.requested(), BackendChoice::Cpu);
    }

    /// `select` stores the selection once; the stored one is what a run resolves to.
    #[cfg(feature = "cpu")]
    #[test]
    fn select_stores_the_selection_once() {
        let mut cfg = RunConfig::new();
        cfg.backend = BackendChoice::Cpu.into();
        let first = cfg.select().expect("cpu").clone();
        assert_eq!(first.kind, steptrace_burn::backend::BackendKind::Cpu);
        assert_eq!(cfg.backend, BackendSetting::Selected(first.clone()));
        assert_eq!(cfg.backend.requested(), BackendChoice::Cpu);
        assert_eq!(cfg.select().expect("stored"), &first);
        assert!(matches!(cfg.backend.resolve(), Ok(Cow::Borrowed(s)) if *s == first));
    }
}
