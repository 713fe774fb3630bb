//! The bundled models' run (`steptrace train`), on the public [`Session`]: the data, the
//! model and its starting state, the manifest of what was trained, the held-out metric. The
//! loop itself is in `drive.rs`; everything it records goes through the session's helpers,
//! as a program of one's own would.

use std::sync::Arc;
use std::time::Duration;

use burn::prelude::*;
use serde::{Deserialize, Serialize};
use steptrace::Profiler;
use steptrace_burn::backend::{BackendKind, CacheState, WgpuTarget};
use steptrace_burn::data::{BatchSource, Loader};
use steptrace_burn::signals::Signals;
use steptrace_burn::{Console, Mode, Profiling, RunSummary, Session, SessionBuilder, SignalHandling, StepRecord};
use steptrace_models::{CharTransformerConfig, ConvNetConfig, MlpConfig, ModelKind};

use crate::config::{ConfigError, RunConfig};
use crate::data;
use crate::error::Result;
use crate::init::{Hashes, Start};
use crate::step::{self, DeviceTarget, Logits, StepModel};

/// Held-out batches for the final metric.
const EVAL_BATCHES: u64 = 8;

/// What a bundled run ended with: the session's summary, and what only this workload knows
/// (the record that holds its starting state, its warnings). Written as one JSON object.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Trained {
    /// The session's summary.
    #[serde(flatten)]
    pub summary: RunSummary,
    /// The record that holds the run's starting state (`--init`, else `--save-init`): its
    /// file's and its weights' SHA-256; `None` for a start drawn from the seed alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_hashes: Option<Hashes>,
    /// What the run noticed but went on with (NaN or infinite weights in its `--init`
    /// record), for the console.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl std::ops::Deref for Trained {
    type Target = RunSummary;

    fn deref(&self) -> &RunSummary {
        &self.summary
    }
}

/// Runs `cfg` with `profiler` (its layer installed by the caller; `None` records nothing),
/// quietly, and finishes it at the end: [`train`] with a session built from `cfg`. `cache`
/// is cubecl's cache as the caller configured it. `on_step` sees each step as it ends.
pub fn run(
    cfg: &RunConfig,
    cache: &CacheState,
    profiler: Option<Profiler>,
    on_step: &mut dyn FnMut(&StepRecord),
) -> Result<Trained> {
    let selection = cfg.backend.resolve()?.into_owned();
    let mut builder = Session::builder().backend(selection).cache_state(cache.clone()).console(Console::Off);
    builder = builder.profiling(match profiler {
        Some(profiler) => Profiling::Installed(profiler),
        None => Profiling::Off,
    });
    builder = builder.signals(match &cfg.stop {
        Some(stop) => SignalHandling::Given(Signals::from_flag(stop.clone())),
        None => SignalHandling::Off,
    });
    train(cfg, builder, on_step)
}

/// Trains (or serves) `cfg`'s bundled model on a session from `builder`. `cfg` gives the
/// workload, the sync policy, the steps and the memory sampling; the builder gives the rest:
/// the backend, cubecl's cache, the signal flags, where traces go, device activity and what
/// the console says (`cfg.backend`, `cfg.cache` and `cfg.stop` are not read here: [`run`]
/// puts them on the builder).
pub fn train(cfg: &RunConfig, builder: SessionBuilder, on_step: &mut dyn FnMut(&StepRecord)) -> Result<Trained> {
    cfg.validate()?;
    let mut builder = builder.sync(cfg.sync).steps(cfg.steps).batch_size(cfg.batch_size);
    if cfg.memory {
        builder = builder.memory();
    }
    if cfg.memory_phases {
        builder = builder.memory_phases();
    }
    let session = builder.start()?;
    let (source, vocab) = data::source_for(cfg)?;
    crate::limits::check_shapes(cfg, &source.info().sample_shape)?;
    // Where the device's memory is the host's, a failed allocation aborts the process (the CPU
    // backend) or takes the machine's memory: a batch whose activations cannot fit is refused
    // before anything runs.
    let selection = session.selection();
    let host_memory = selection.kind == BackendKind::Cpu || selection.wgpu_device.is_some_and(WgpuTarget::is_cpu);
    if host_memory {
        let info = source.info();
        crate::limits::check_activations(cfg, &info.sample_shape, info.num_classes, vocab)?;
    }
    let loader =
        Loader::new(source.clone(), cfg.prefetch, cfg.prefetch_depth, Duration::from_millis(cfg.loader_delay_ms))?;
    let device = session.device();
    device.seed(cfg.seed);
    let info = source.info();
    // The seed's draw, or the `--init` record (checked against this model); saved to
    // `--save-init` before step 0.
    let data = format!("{} {:?}", info.name, info.sample_shape);
    let backend = session.selection().kind.to_string();
    let mut start = Start::new(cfg, &backend, data);
    let kind = cfg.model;
    let job = |session, start| Job { cfg, session, source: source.clone(), loader, start };
    match kind {
        ModelKind::Mlp => {
            let features: usize = info.sample_shape.iter().product();
            let mut config = MlpConfig::new(features, info.num_classes);
            if let Some(hidden) = &cfg.mlp_hidden {
                config = config.with_hidden(hidden.clone());
            }
            let model = start.apply(kind, &config, config.init(&device));
            let fresh = device.clone();
            job(session, start).drive(model?, Arc::new(move || config.init(&fresh)), on_step)
        }
        ModelKind::ConvNet => {
            let [c, h, w] =
                <[usize; 3]>::try_from(info.sample_shape.as_slice()).map_err(|_| ConfigError::BadShape {
                    shape: info.sample_shape.clone(),
                    need: "the ConvNet needs [C, H, W] samples".into(),
                })?;
            let config = ConvNetConfig::new(c, h, w, info.num_classes);
            let model = start.apply(kind, &config, config.init(&device));
            let fresh = device.clone();
            job(session, start).drive(model?, Arc::new(move || config.init(&fresh)), on_step)
        }
        ModelKind::Transformer => {
            let vocab = vocab.ok_or_else(|| ConfigError::TransformerNeedsText { dataset: cfg.dataset.clone() })?;
            let config = CharTransformerConfig::new(vocab).with_max_seq_len(cfg.seq_len);
            let model = start.apply(kind, &config, config.init(&device));
            let fresh = device.clone();
            job(session, start).drive(model?, Arc::new(move || config.init(&fresh)), on_step)
        }
    }
}

/// A bundled run under way: the session, the data, and the model's start.
pub(crate) struct Job<'a> {
    pub(crate) cfg: &'a RunConfig,
    pub(crate) session: Session,
    pub(crate) source: Arc<dyn BatchSource>,
    pub(crate) loader: Loader,
    pub(crate) start: Start<'a>,
}

impl Job<'_> {
    /// Writes what was trained into the manifest (what the session cannot know), and says
    /// each warning of the model's start in the trace.
    pub(crate) fn describe(&self) {
        for warning in &self.start.warnings {
            tracing::warn!(target: steptrace::format::names::TARGET, "{warning}");
        }
        let cfg = self.cfg;
        let info = self.source.info();
        let hashes = self.start.hashes.clone();
        let warnings = self.start.warnings.clone();
        self.session.update_manifest(|m| {
            m.model = Some(cfg.model.name().to_owned());
            m.precision = Some("f32".into());
            m.mode = Some(
                match cfg.mode {
                    Mode::Train => "train",
                    Mode::Infer => "eval (inference)",
                }
                .into(),
            );
            m.dataset = Some(info.name.to_string());
            m.data_source = Some(steptrace::settings::home_relative_str(&info.source));
            m.synthetic = Some(info.synthetic);
            m.data_licence = Some(info.licence.to_string());
            m.seed = Some(cfg.seed);
            m.init = Some(crate::init::label(cfg.init.as_deref(), cfg.seed));
            m.init_sha256 = hashes.as_ref().map(|h| h.file.clone());
            m.init_weights_sha256 = hashes.as_ref().map(|h| h.weights.clone());
            m.prefetch_workers = Some(cfg.prefetch as u64);
            m.loader_delay_ms = Some(cfg.loader_delay_ms);
            m.plant_upload = Some(cfg.plant_upload);
            if let Some(hidden) = &cfg.mlp_hidden {
                m.extra.insert("mlp_hidden".into(), serde_json::json!(hidden));
            }
            m.internals = Some(cfg.internals);
            m.notes.extend(cfg.notes.iter().cloned());
            m.notes.extend(warnings);
        });
    }

    /// Whether the loss is read this step (it waits for the device): the first and last
    /// steps, and every `loss_every`.
    pub(crate) fn reads_loss(&self, step: u64) -> bool {
        let cfg = self.cfg;
        step == 0 || step + 1 == cfg.steps || (cfg.loss_every > 0 && step.is_multiple_of(cfg.loss_every))
    }
}

/// Accuracy or perplexity on held-out batches (after profiling ended).
pub(crate) fn evaluate<M: StepModel>(source: &dyn BatchSource, model: &M, device: &Device) -> Option<(String, f64)> {
    let mut correct = 0usize;
    let mut seen = 0usize;
    let mut loss_sum = 0.0;
    let mut text = false;
    for index in 0..EVAL_BATCHES {
        let batch = source.held_out(index)?.ok()?;
        let on_device = step::to_device(batch, device).ok()?;
        let logits = model.logits(on_device.input).ok()?;
        match (logits, on_device.target) {
            (Logits::Classes(l), DeviceTarget::Classes(t)) => {
                let n = t.dims()[0];
                let hits: i64 = l.argmax(1).squeeze_dim::<1>(1).equal(t).int().sum().try_into_scalar().ok()?;
                correct += usize::try_from(hits).unwrap_or(0);
                seen += n;
            }
            (l @ Logits::Tokens(_), t @ DeviceTarget::Tokens(_)) => {
                text = true;
                let loss = step::loss(l, t).ok()?;
                loss_sum += loss.try_into_data().ok()?.iter::<f64>().next()?;
                seen += 1;
            }
            _ => return None,
        }
    }
    if seen == 0 {
        return None;
    }
    Some(if text {
        ("perplexity".to_owned(), (loss_sum / seen as f64).exp())
    } else {
        ("accuracy".to_owned(), correct as f64 / seen as f64)
    })
}
