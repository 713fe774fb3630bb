//! The instrumented loop: load, transfer, step, sync, advance the profiler.

use std::sync::Arc;
use std::time::{Duration, Instant};

use burn::prelude::*;
use serde::Serialize;
use steptrace::format::names::LOSS_READ;
use steptrace::format::{ColdStart, Figure, Manifest};
use steptrace::Profiler;
use steptrace_models::{CharTransformerConfig, ConvNetConfig, MlpConfig, ModelKind};

use crate::backend::{BackendKind, CacheState, Selection, StartupCapture};
use crate::config::{Mode, RunConfig};
use crate::data::{self, BatchSource};
use crate::error::{Error, Result};
use crate::loader::Loader;
use crate::step::{self, DeviceTarget, Logits, StepError, StepModel};
use crate::summary::{startup_steps, RunSummary, StepRecord};

/// Held-out batches for the final metric.
const EVAL_BATCHES: u64 = 8;
/// The burn release line this crate is built for (any 0.22.x).
pub const BURN_VERSION: &str = "0.22";

/// What the manifest says of burn itself (beside the generic fields).
#[derive(Serialize)]
struct BurnFields {
    burn_type: String,
    /// `true` on cubecl backends; on the CPU (burn-flex), a "not applicable" string.
    fusion: serde_json::Value,
    autotune: serde_json::Value,
    /// cubecl's autotune level and where it comes from (`--autotune-level`, ...).
    autotune_level: serde_json::Value,
    cubecl_cache: serde_json::Value,
    burn_version: &'static str,
    /// On CUDA, how cubecl compiles kernels (LLVM NVPTX or NVRTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel_compiler: Option<&'static str>,
}

/// cubecl's kernel caches.
#[derive(Serialize)]
struct CubeclCache {
    dir: String,
    compilation_cache: bool,
    autotune_cache: bool,
    /// Files in `dir` before the run (they may be another model's: no label by itself).
    files_before: usize,
    /// `cold`, `partly warm` or `warm`, told at the end of step 0 from what cubecl
    /// compiled and tuned (the startup's `cubecl_cache`).
    state: &'static str,
}

/// What the manifest says of the run's cache state until step 0 has ended.
pub(crate) const CACHE_STATE_PENDING: &str = "not known until step 0 ends";

/// Runs `cfg` on the selected backend, advancing `profiler` once per step,
/// and finishes it at the end. `on_step` sees each step as it ends (for
/// progress bars).
///
/// The data source and loader are created before the profiler's step 0
/// begins. The manifest is written into the profiler before any trace is
/// saved.
pub fn run(
    cfg: &RunConfig,
    cache: &CacheState,
    profiler: Option<Profiler>,
    on_step: &mut dyn FnMut(&StepRecord),
) -> Result<RunSummary> {
    cfg.validate()?;
    // The selection `cfg.backend` holds (`RunConfig::select`), else one made now.
    let selection = cfg.backend.resolve()?;
    let selection: &Selection = &selection;
    // Before anything creates the device client: the cold start is read from here on.
    let startup = StartupCapture::begin(selection.kind);
    let started = Instant::now();
    let (source, vocab) = data::source_for(cfg)?;
    crate::limits::check_shapes(cfg, &source.info().sample_shape)?;
    let loader = Loader::new(
        source.clone(),
        cfg.prefetch,
        cfg.prefetch_depth,
        Duration::from_millis(cfg.loader_delay_ms),
    )?;
    // Opens the device (and creates its client, timed by the startup capture).
    let device = selection.device()?;
    let job = Job {
        cfg,
        selection,
        cache,
        source,
        vocab,
        loader,
        profiler,
        on_step,
        started,
        setup_end: started,
        startup: Some(startup),
        cold_start: None,
        init_hashes: None,
        init_warnings: Vec::new(),
    };
    job.run(device)
}

pub(crate) struct Job<'a> {
    pub(crate) cfg: &'a RunConfig,
    pub(crate) selection: &'a Selection,
    pub(crate) cache: &'a CacheState,
    pub(crate) source: Arc<dyn BatchSource>,
    pub(crate) vocab: Option<usize>,
    pub(crate) loader: Loader,
    pub(crate) profiler: Option<Profiler>,
    pub(crate) on_step: &'a mut dyn FnMut(&StepRecord),
    pub(crate) started: Instant,
    /// When the set-up ended (set as step 0 begins).
    pub(crate) setup_end: Instant,
    /// Reads the cold start until step 0 ends.
    pub(crate) startup: Option<StartupCapture>,
    /// The cold start, itemised when step 0 ended.
    pub(crate) cold_start: Option<Figure<ColdStart>>,
    /// The record holding the starting state, once the model is built.
    pub(crate) init_hashes: Option<crate::init::Hashes>,
    /// What the record's check noticed (NaN or infinite weights).
    pub(crate) init_warnings: Vec<String>,
}

impl Job<'_> {
    /// Builds the configured model on `device` (plain; trained through `.autodiff()`) and
    /// drives it.
    fn run(mut self, device: Device) -> Result<RunSummary> {
        let device = device.autodiff();
        device.seed(self.cfg.seed);
        let info = self.source.info();
        // The seed's draw, or the `--init` record (checked against this model); saved
        // to `--save-init` before step 0.
        let data = format!("{} {:?}", info.name, info.sample_shape);
        let mut start = crate::init::Start::new(self.cfg, &self.selection.kind.to_string(), data);
        let kind = self.cfg.model;
        match kind {
            ModelKind::Mlp => {
                let features: usize = info.sample_shape.iter().product();
                let mut config = MlpConfig::new(features, info.num_classes);
                if let Some(hidden) = &self.cfg.mlp_hidden {
                    config = config.with_hidden(hidden.clone());
                }
                let model = start.apply(kind, &config, config.init(&device))?;
                self.started_from(start);
                let fresh = device.clone();
                self.drive(model, device, std::sync::Arc::new(move || config.init(&fresh)))
            }
            ModelKind::ConvNet => {
                let [c, h, w] = <[usize; 3]>::try_from(info.sample_shape.as_slice())
                    .map_err(|_| Error::Config(format!("the ConvNet needs [C, H, W] samples, got {:?}", info.sample_shape)))?;
                let config = ConvNetConfig::new(c, h, w, info.num_classes);
                let model = start.apply(kind, &config, config.init(&device))?;
                self.started_from(start);
                let fresh = device.clone();
                self.drive(model, device, std::sync::Arc::new(move || config.init(&fresh)))
            }
            ModelKind::Transformer => {
                let vocab = self.vocab.ok_or_else(|| Error::Config("the transformer needs a text dataset".into()))?;
                let config = CharTransformerConfig::new(vocab).with_max_seq_len(self.cfg.seq_len);
                let model = start.apply(kind, &config, config.init(&device))?;
                self.started_from(start);
                let fresh = device.clone();
                self.drive(model, device, std::sync::Arc::new(move || config.init(&fresh)))
            }
        }
    }
}

impl Job<'_> {
    /// Keeps what the model's start found out (the record's hashes, its warnings), and
    /// says each warning in the trace.
    fn started_from(&mut self, start: crate::init::Start<'_>) {
        for warning in &start.warnings {
            tracing::warn!(target: steptrace::format::names::TARGET, "{warning}");
        }
        self.init_hashes = start.hashes;
        self.init_warnings = start.warnings;
    }

    /// The manifest of this run, for the profiler.
    pub(crate) fn manifest<M: burn::module::Module>(&self, model: &M) -> Manifest {
        let cfg = self.cfg;
        let info = self.source.info();
        let mut m = Manifest::default();
        m.model = Some(cfg.model.name().to_owned());
        m.parameters = Some(model.num_params() as u64);
        m.batch_size = Some(cfg.batch_size as u64);
        m.precision = Some("f32".into());
        m.mode = Some(match cfg.mode { Mode::Train => "train", Mode::Infer => "eval (inference)" }.into());
        m.backend = Some(self.selection.label());
        m.backend_kind = Some(self.selection.kind.to_string());
        m.device = Some(self.selection.device.clone());
        m.fallback_reason = self.selection.fallback_reason.clone();
        m.requested_backend = Some(self.selection.requested.to_string());
        m.dataset = Some(info.name.to_string());
        m.data_source = Some(crate::private::tilde_str(&info.source));
        m.synthetic = Some(info.synthetic);
        m.data_licence = Some(info.licence.to_string());
        m.seed = Some(cfg.seed);
        m.init = Some(crate::init::label(cfg.init.as_deref(), cfg.seed));
        m.init_sha256 = self.init_hashes.as_ref().map(|h| h.file.clone());
        m.init_weights_sha256 = self.init_hashes.as_ref().map(|h| h.weights.clone());
        m.sync_policy = Some(cfg.sync.to_string());
        m.sync_meaning = Some(cfg.sync.meaning().to_owned());
        m.prefetch_workers = Some(cfg.prefetch as u64);
        m.loader_delay_ms = Some(cfg.loader_delay_ms);
        m.plant_upload = Some(cfg.plant_upload);
        if cfg.memory {
            m.extra.insert("memory_description".into(), serde_json::json!(crate::memory::METHOD));
        }
        if let Some(hidden) = &cfg.mlp_hidden {
            m.extra.insert("mlp_hidden".into(), serde_json::json!(hidden));
        }
        m.internals = Some(cfg.internals);
        m.steps = Some(cfg.steps);
        m.startup_steps = Some(startup_steps(cfg.steps));
        m.notes = cfg.notes.clone();
        m.notes.extend(self.init_warnings.iter().cloned());
        let cubecl = self.selection.kind.uses_cubecl();
        let applies = |on: serde_json::Value| if cubecl { on } else { BackendKind::NOT_CUBECL.into() };
        let cache = CubeclCache {
            dir: crate::private::tilde(&self.cache.dir),
            compilation_cache: self.cache.compilation_cache,
            autotune_cache: self.cache.autotune_cache,
            files_before: self.cache.files_before,
            state: CACHE_STATE_PENDING,
        };
        let level = serde_json::json!({
            "level": self.cache.autotune_level,
            "source": self.cache.autotune_level_source,
        });
        let burn = BurnFields {
            burn_type: self.selection.backend_type_name(),
            fusion: applies(true.into()),
            autotune: applies(true.into()),
            autotune_level: applies(level),
            cubecl_cache: applies(serde_json::to_value(&cache).unwrap_or_default()),
            burn_version: BURN_VERSION,
            kernel_compiler: (self.selection.kind == BackendKind::Cuda)
                .then(crate::backend::cuda_kernel_compiler)
                .flatten(),
        };
        // A struct of plain fields always serialises to an object.
        let _ = m.extend_extra(&burn);
        m
    }

    /// Accuracy or perplexity on held-out batches (after profiling ended).
    pub(crate) fn evaluate<M: StepModel>(&self, model: &M, device: &Device) -> Option<(String, f64)> {
        let mut correct = 0usize;
        let mut seen = 0usize;
        let mut loss_sum = 0.0;
        let mut text = false;
        for index in 0..EVAL_BATCHES {
            let batch = self.source.held_out(index)?.ok()?;
            let on_device = step::transfer(batch, device).ok()?;
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
                    loss_sum += read_scalar(step::loss(l, t).ok()?).ok()??;
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
}

/// Reads a one-element tensor, waiting for the device, in a `loss.read` span.
/// Reads a scalar back to the host (it waits for the device): an error the device reports (a
/// kernel that could not launch, memory that ran out) is returned, never a panic.
pub(crate) fn read_scalar(t: Tensor<1>) -> std::result::Result<Option<f64>, StepError> {
    let _read = steptrace::own_span!(LOSS_READ);
    let data = t.try_into_data().map_err(|e| StepError::Read { reason: e.to_string() })?;
    let value = data.iter::<f64>().next();
    Ok(value)
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
