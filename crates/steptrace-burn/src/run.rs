//! The instrumented loop: load, transfer, step, sync, advance the profiler.

use std::sync::Arc;
use std::time::{Duration, Instant};

use burn::module::AutodiffModule;
use burn::optim::AdamConfig;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use serde_json::{json, Value};
use steptrace::Profiler;
use steptrace_models::{CharTransformerConfig, ConvNetConfig, MlpConfig, ModelKind};

use crate::backend::{self, BackendRun, CacheState, Selection};
use crate::config::{Mode, RunConfig, SyncPolicy};
use crate::data::{self, BatchSource, HostBatch};
use crate::error::{Error, Result};
use crate::loader::Loader;
use crate::step::{self, DeviceTarget, Logits, StepModel};
use crate::summary::{startup_steps, Anomaly, RunSummary, Stats, StepRecord};

/// Reads the loss every this many steps (a read waits for the device).
/// Held-out batches for the final metric.
const EVAL_BATCHES: u64 = 8;

/// Runs `cfg` on the selected backend, advancing `profiler` once per step,
/// and finishes it at the end. `on_step` sees each step as it ends (for
/// progress bars).
///
/// The data source and loader are created before the profiler's step 0
/// begins. The manifest is written into the profiler before any trace is
/// saved.
pub fn run(
    cfg: &RunConfig,
    selection: &Selection,
    cache: &CacheState,
    profiler: Option<Profiler>,
    on_step: &mut dyn FnMut(&StepRecord),
) -> Result<RunSummary> {
    cfg.validate().map_err(Error::Config)?;
    let started = Instant::now();
    let (source, vocab) = data::source_for(cfg)?;
    let loader = Loader::new(
        source.clone(),
        cfg.prefetch,
        cfg.prefetch_depth,
        Duration::from_millis(cfg.loader_delay_ms),
    )?;
    let job = Job { cfg, selection, cache, source, vocab, loader, profiler, on_step, started };
    backend::run_on(selection, job)
}

struct Job<'a> {
    cfg: &'a RunConfig,
    selection: &'a Selection,
    cache: &'a CacheState,
    source: Arc<dyn BatchSource>,
    vocab: Option<usize>,
    loader: Loader,
    profiler: Option<Profiler>,
    on_step: &'a mut dyn FnMut(&StepRecord),
    started: Instant,
}

impl BackendRun for Job<'_> {
    type Output = Result<RunSummary>;

    fn run<B: AutodiffBackend>(self, device: B::Device, _info: &Selection) -> Result<RunSummary> {
        B::seed(&device, self.cfg.seed);
        let info = self.source.info();
        match self.cfg.model {
            ModelKind::Mlp => {
                let features: usize = info.sample_shape.iter().product();
                let model = MlpConfig::new(features, info.num_classes).init::<B>(&device);
                self.drive(model, device)
            }
            ModelKind::ConvNet => {
                let [c, h, w] = <[usize; 3]>::try_from(info.sample_shape.as_slice())
                    .map_err(|_| Error::Config(format!("the ConvNet needs [C, H, W] samples, got {:?}", info.sample_shape)))?;
                let model = ConvNetConfig::new(c, h, w, info.num_classes).init::<B>(&device);
                self.drive(model, device)
            }
            ModelKind::Transformer => {
                let vocab = self.vocab.ok_or_else(|| Error::Config("the transformer needs a text dataset".into()))?;
                let model = CharTransformerConfig::new(vocab).with_max_seq_len(self.cfg.seq_len).init::<B>(&device);
                self.drive(model, device)
            }
        }
    }
}

impl Job<'_> {
    fn manifest<B: Backend, M: burn::module::Module<B>>(&self, model: &M) -> Vec<(&'static str, Value)> {
        let cfg = self.cfg;
        let info = self.source.info();
        vec![
            ("model", json!(cfg.model.name())),
            ("parameters", json!(model.num_params())),
            ("batch_size", json!(cfg.batch_size)),
            ("precision", json!("f32")),
            ("mode", json!(match cfg.mode { Mode::Train => "train", Mode::Infer => "eval (inference)" })),
            ("backend", json!(self.selection.label())),
            ("backend_kind", json!(self.selection.kind.to_string())),
            ("device", json!(self.selection.device)),
            ("fallback_reason", json!(self.selection.fallback_reason)),
            ("requested_backend", json!(self.selection.requested.to_string())),
            ("burn_type", json!(std::any::type_name::<B>())),
            ("fusion", json!(true)),
            ("autotune", json!(true)),
            ("cubecl_cache", json!({
                "dir": crate::private::tilde(&self.cache.dir),
                "compilation_cache": self.cache.compilation_cache,
                "autotune_cache": self.cache.autotune_cache,
                "state": if self.cache.warm { "warm" } else { "cold" },
            })),
            ("dataset", json!(info.name)),
            ("data_source", json!(crate::private::tilde_str(&info.source))),
            ("synthetic", json!(info.synthetic)),
            ("data_licence", json!(info.licence)),
            ("seed", json!(cfg.seed)),
            ("sync_policy", json!(cfg.sync.to_string())),
            ("sync_meaning", json!(cfg.sync.meaning())),
            ("prefetch_workers", json!(cfg.prefetch)),
            ("loader_delay_ms", json!(cfg.loader_delay_ms)),
            ("internals", json!(cfg.internals)),
            ("burn_version", json!("0.21.0")),
            ("steps", json!(cfg.steps)),
            ("startup_steps", json!(startup_steps(cfg.steps))),
            ("notes", json!(cfg.notes)),
        ]
    }

    fn drive<B, M>(mut self, model: M, device: B::Device) -> Result<RunSummary>
    where
        B: AutodiffBackend,
        M: StepModel<B> + AutodiffModule<B>,
        M::InnerModule: StepModel<B::InnerBackend>,
    {
        let cfg = self.cfg;
        if let Some(profiler) = &self.profiler {
            for (key, value) in self.manifest::<B, M>(&model) {
                profiler.set_manifest(key, value);
            }
        }
        let parameters = model.num_params();
        let mut first_shape: Option<Vec<usize>> = None;
        let mut optim = AdamConfig::new().init::<B, M>();
        let mut model = Some(model);
        let mut eval_model: Option<M::InnerModule> = None;
        let mut model_load_ms = None;
        if cfg.mode == Mode::Infer {
            let load_start = Instant::now();
            let _load = tracing::info_span!(target: "steptrace", "model.load").entered();
            eval_model = model.take().map(|m| m.valid());
            crate::sync::sync::<B>(&device).map_err(|reason| Error::Execution { step: 0, reason })?;
            let ms_taken = ms(load_start.elapsed());
            model_load_ms = Some(ms_taken);
            if let Some(profiler) = &self.profiler {
                profiler.set_manifest("model_load_ms", ms_taken);
            }
        }
        let setup_ms = ms(self.started.elapsed());
        if let Some(profiler) = &mut self.profiler {
            profiler.start();
        }

        let startup = startup_steps(cfg.steps);
        let mut records: Vec<StepRecord> = Vec::with_capacity(cfg.steps as usize);
        let mut anomalies = Vec::new();
        let mut startup_shapes: Vec<Vec<usize>> = Vec::new();
        let mut memory_note = None;
        let mut step_start = Instant::now();
        for step in 0..cfg.steps {
            let batch: HostBatch = self.loader.next_batch()?;
            let samples = batch.samples;
            let shape = step::input_shape(&batch.input);
            if step == 0 {
                if let Some(profiler) = &self.profiler {
                    profiler.set_manifest("input_shape", json!(shape));
                }
                first_shape = Some(shape.clone());
            }
            if step < startup {
                if !startup_shapes.contains(&shape) {
                    startup_shapes.push(shape);
                }
            } else if !startup_shapes.contains(&shape) {
                tracing::warn!(target: "steptrace", step, shape = ?shape, "new input shape after startup");
                anomalies.push(Anomaly { step, what: format!("new input shape {shape:?} after startup") });
                startup_shapes.push(shape);
            }
            let exec = |reason| Error::Execution { step, reason };
            let on_device = step::transfer::<B>(batch, &device).map_err(exec)?;
            let read_loss = step == 0 || step + 1 == cfg.steps || (cfg.loss_every > 0 && step % cfg.loss_every == 0);
            let loss_value = match cfg.mode {
                Mode::Train => {
                    let current = model.take().ok_or_else(|| exec("model lost".into()))?;
                    let (next, loss) =
                        step::train_step(current, &mut optim, on_device, cfg.learning_rate, cfg.sync, &device)
                            .map_err(exec)?;
                    model = Some(next);
                    read_loss.then(|| read_scalar(loss))
                }
                Mode::Infer => {
                    let inner = eval_model.as_ref().ok_or_else(|| exec("model not loaded".into()))?;
                    let batch = step::DeviceBatch::<B::InnerBackend> {
                        input: inner_input::<B>(on_device.input),
                        target: inner_target::<B>(on_device.target),
                    };
                    let loss = step::infer_request(inner, batch, cfg.sync, &device).map_err(exec)?;
                    read_loss.then(|| read_scalar(loss))
                }
            };
            if cfg.sync != SyncPolicy::None {
                crate::sync::sync::<B>(&device).map_err(exec)?;
            }
            if cfg.memory {
                match backend::memory_in_use::<B>(&device) {
                    Some(bytes) => tracing::info!(target: "steptrace::counter", bytes, "device memory in use"),
                    None => memory_note = Some(format!("not observed: {} does not report memory in use", self.selection.kind)),
                }
            }
            let elapsed = ms(step_start.elapsed());
            if step >= startup {
                let steady: Vec<f64> = records.iter().skip(startup as usize).map(|r| r.ms).collect();
                if let Some(s) = Stats::of(&steady).filter(|s| s.n >= 3) {
                    if elapsed > 3.0 * s.median && elapsed - s.median > 2.0 {
                        tracing::warn!(target: "steptrace", step, ms = elapsed, median_ms = s.median, "slow step after startup: a new compile path?");
                        anomalies.push(Anomaly {
                            step,
                            what: format!("{elapsed:.1} ms, {:.1}x the steady median: a new compile path?", elapsed / s.median),
                        });
                    }
                }
            }
            if step == 0 {
                if let Some(profiler) = &self.profiler {
                    // Startup, measured before any window records.
                    profiler.set_manifest(
                        "startup",
                        json!({
                            "setup_ms": setup_ms,
                            "first_step_ms": elapsed,
                            "cubecl_cache": if self.cache.warm { "warm" } else { "cold" },
                        }),
                    );
                }
            }
            let record = StepRecord { step, ms: elapsed, samples, loss: loss_value.flatten() };
            (self.on_step)(&record);
            records.push(record);
            if let Some(profiler) = &mut self.profiler {
                profiler.step();
            }
            step_start = Instant::now();
        }

        let (traces, trace_errors) = match self.profiler.take() {
            Some(profiler) => {
                let errors = profiler.errors();
                match profiler.finish() {
                    Ok(saved) => (saved, errors),
                    Err(e) => (Vec::new(), [errors, vec![e.to_string()]].concat()),
                }
            }
            None => (Vec::new(), Vec::new()),
        };

        let held_out = match (&model, &eval_model) {
            (Some(m), _) => self.evaluate::<B::InnerBackend, _>(&m.valid(), &device),
            (None, Some(m)) => self.evaluate::<B::InnerBackend, _>(m, &device),
            _ => None,
        };
        let steady: Vec<f64> = records.iter().skip(startup as usize).map(|r| r.ms).collect();
        let steady_ms = Stats::of(&steady);
        let losses: Vec<f64> = records.iter().filter_map(|r| r.loss).collect();
        Ok(RunSummary {
            backend: self.selection.label(),
            backend_kind: self.selection.kind.to_string(),
            device: self.selection.device.clone(),
            parameters,
            input_shape: first_shape.unwrap_or_default(),
            fallback: self.selection.is_fallback(),
            sync: format!("{}: {}", cfg.sync, cfg.sync.meaning()),
            mode: cfg.mode.to_string(),
            setup_ms,
            model_load_ms,
            first_step_ms: records.first().map_or(0.0, |r| r.ms),
            startup_steps: startup,
            steady_samples_per_s: steady_ms.as_ref().map(|s| cfg.batch_size as f64 / (s.median / 1000.0)),
            steady_ms,
            batch_size: cfg.batch_size,
            steps: records,
            first_loss: losses.first().copied(),
            last_loss: losses.last().copied(),
            held_out,
            anomalies,
            traces,
            trace_errors,
            cache: format!(
                "{} ({})",
                crate::private::tilde(&self.cache.dir),
                if self.cache.warm { "warm" } else { "cold" }
            ),
            memory: if cfg.memory { Some(memory_note.unwrap_or_else(|| "observed: counter track `device memory in use`".into())) } else { None },
        })
    }

    /// Accuracy or perplexity on held-out batches (after profiling ended).
    fn evaluate<IB: Backend, M: StepModel<IB>>(&self, model: &M, device: &IB::Device) -> Option<(String, f64)> {
        let mut correct = 0usize;
        let mut seen = 0usize;
        let mut loss_sum = 0.0;
        let mut text = false;
        for index in 0..EVAL_BATCHES {
            let batch = self.source.held_out(index)?.ok()?;
            let on_device = step::transfer::<IB>(batch, device).ok()?;
            let logits = model.logits(on_device.input).ok()?;
            match (logits, on_device.target) {
                (Logits::Classes(l), DeviceTarget::Classes(t)) => {
                    let n = t.dims()[0];
                    let hits = l.argmax(1).squeeze_dim::<1>(1).equal(t).int().sum().into_scalar();
                    correct += hits.to_usize();
                    seen += n;
                }
                (l @ Logits::Tokens(_), t @ DeviceTarget::Tokens(_)) => {
                    text = true;
                    loss_sum += read_scalar(step::loss(l, t).ok()?)?;
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

fn inner_input<B: AutodiffBackend>(input: step::DeviceInput<B>) -> step::DeviceInput<B::InnerBackend> {
    match input {
        step::DeviceInput::Flat(t) => step::DeviceInput::Flat(t.inner()),
        step::DeviceInput::Images(t) => step::DeviceInput::Images(t.inner()),
        step::DeviceInput::Tokens(t) => step::DeviceInput::Tokens(t.inner()),
    }
}

fn inner_target<B: AutodiffBackend>(target: DeviceTarget<B>) -> DeviceTarget<B::InnerBackend> {
    match target {
        DeviceTarget::Classes(t) => DeviceTarget::Classes(t.inner()),
        DeviceTarget::Tokens(t) => DeviceTarget::Tokens(t.inner()),
    }
}

/// Reads a one-element tensor, waiting for the device, in a `loss.read` span.
fn read_scalar<B: Backend>(t: Tensor<B, 1>) -> Option<f64> {
    let _read = tracing::info_span!(target: "steptrace", "loss.read").entered();
    t.into_data().iter::<f64>().next()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
