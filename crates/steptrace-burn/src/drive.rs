//! The training loop of a [`Job`]: load, transfer, step, sync, advance the
//! profiler, then sum the run up.

use std::time::Instant;

use burn::module::Module;
use burn::optim::{AdamConfig, ModuleOptimizer};
use burn::prelude::Device;
use steptrace::format::names::{counters, instants, MODEL_LOAD, TARGET};
use steptrace::format::{ColdStart, Figure, StartupInfo};
use steptrace::SavedTrace;

use crate::memory::MemorySampler;
use steptrace::Action;
use crate::config::{Mode, SyncPolicy};
use crate::data::HostBatch;
use crate::error::{Error, Result};
use crate::run::{ms, read_scalar, Job};
use crate::step::{self, StepError, StepModel};
use crate::summary::{startup_steps, Anomaly, RunSummary, Stats, StepRecord};

/// Steady steps whose median a new step is compared with, to flag it as
/// slow.
const SLOW_WINDOW: usize = 64;

/// `SIGINT`, `SIGTERM`, `SIGHUP`, or `signal N`: how the run names the
/// signal that stopped it ([`RunConfig::stop`](crate::RunConfig::stop)).
pub fn signal_name(signal: usize) -> String {
    match signal {
        2 => "SIGINT".to_owned(),
        15 => "SIGTERM".to_owned(),
        1 => "SIGHUP".to_owned(),
        n => format!("signal {n}"),
    }
}

/// What the loop carries from step to step.
struct Loop<M: Module> {
    model: Option<M>,
    /// The model in eval mode (`Module::valid`: its tensors on the plain device), for
    /// inference runs.
    eval_model: Option<M>,
    optim: ModuleOptimizer,
    records: Vec<StepRecord>,
    anomalies: Vec<Anomaly>,
    startup_shapes: Vec<Vec<usize>>,
    first_shape: Option<Vec<usize>>,
    memory_note: Option<String>,
    /// `--memory`'s samples.
    memory: Option<MemorySampler>,
    /// The autodiff device the model trains on.
    device: Device,
    /// The model's parameters (bytes, the largest), for an out-of-memory report.
    parameters: crate::memory::Parameters,
    /// The last phase of the current step that returned (`None` before `forward` returns).
    reached: Option<&'static str>,
    /// The current batch's bytes on the device.
    batch_bytes: u64,
}

impl<'a> Job<'a> {
    /// Trains (or serves) `model` for the configured steps.
    ///
    /// `rebuild` makes a fresh model of the same configuration: after an out-of-memory, with
    /// `--memory`, what a sample needs is measured on one ([`crate::oom_probe`]).
    pub(crate) fn drive<M: StepModel + 'static>(mut self, model: M, device: Device, rebuild: crate::oom_probe::Rebuild<M>) -> Result<RunSummary> {
        if let Some(profiler) = &self.profiler {
            let manifest = self.manifest(&model);
            profiler.update_manifest(|m| m.absorb(manifest));
        }
        let parameters = model.num_params();
        let parameter_info = crate::memory::parameters(&model);
        let memory = self.cfg.memory.then(|| MemorySampler::new(device.clone(), parameter_info.bytes, self.cfg.memory_phases, self.cfg.sync != SyncPolicy::None));
        let mut state = Loop {
            optim: AdamConfig::new().init(),
            model: Some(model),
            eval_model: None,
            records: Vec::with_capacity(self.cfg.steps.min(1 << 16) as usize),
            anomalies: Vec::new(),
            startup_shapes: Vec::new(),
            first_shape: None,
            memory_note: None,
            memory,
            device,
            parameters: parameter_info,
            reached: None,
            batch_bytes: 0,
        };
        let model_load_ms = if self.cfg.mode == Mode::Infer { Some(self.load_for_inference(&mut state)?) } else { None };
        self.setup_end = Instant::now();
        let setup_ms = ms(self.setup_end - self.started);
        if let Some(profiler) = &mut self.profiler {
            profiler.start();
        }
        let mut step_start = Instant::now();
        let mut interrupted = None;
        for step in 0..self.cfg.steps {
            // A panic inside the step (burn and cubecl panic on some device errors) is a
            // failure of the step like any other: caught, explained and saved.
            let outcome = crate::backend::catch_silently(|| self.one_step(step, &mut state, step_start, setup_ms))
                .unwrap_or_else(|message| Err(Error::Execution { step, source: StepError::Panicked { message } }));
            let record = match outcome {
                Ok(record) => record,
                Err(err) => return Err(self.fail(step, err, &mut state, &rebuild)),
            };
            (self.on_step)(&record);
            state.records.push(record);
            if let Some(signal) = self.stop_requested() {
                // The step just ended is the last: the cycle in progress is
                // saved as cut short, and the summary says why.
                let reason = format!("interrupted ({}) after step {step}", signal_name(signal));
                if let Some(profiler) = &mut self.profiler {
                    // Startup is a fifth of the steps that ran, as the summary counts it,
                    // not of those asked for: the saved cycle's report agrees with it.
                    let ran = step + 1;
                    let startup = startup_steps(ran);
                    profiler.update_manifest(|m| {
                        m.startup_steps = Some(startup);
                        m.notes.push(format!(
                            "{reason}: startup is steps 0..{startup} of the {ran} that ran, not a fifth of the {} asked for",
                            self.cfg.steps
                        ));
                    });
                    profiler.cut_short(reason.clone());
                }
                interrupted = Some(reason);
                break;
            }
            // The next step starts at its boundary: what the profiler does there (ending a
            // recorded step, beginning the next, handing the records to the writer) is in the
            // step it begins, as in the trace's `ProfilerStep` spans.
            step_start = Instant::now();
            if let Some(profiler) = &mut self.profiler {
                profiler.step();
            }
        }
        let (traces, trace_errors) = self.finish_profiler();
        let held_out = match (&state.model, &state.eval_model) {
            (Some(m), _) => self.evaluate(&m.valid(), &state.device.clone().without_autodiff()),
            (None, Some(m)) => self.evaluate(m, &state.device.clone().without_autodiff()),
            _ => None,
        };
        let mut summary = self.summary(state, parameters, setup_ms, model_load_ms, held_out, traces, trace_errors);
        summary.interrupted = interrupted;
        Ok(summary)
    }

    /// A step failed: the cycle in progress is saved, cut short with the failure as its
    /// reason, and a failure for lack of device memory is explained (console, `--json`, and
    /// the saved trace's manifest).
    fn fail<M: StepModel + 'static>(&mut self, step: u64, err: Error, state: &mut Loop<M>, rebuild: &crate::oom_probe::Rebuild<M>) -> Error {
        let (error, out_of_memory) = match &err {
            Error::Execution { source, .. } => {
                let text = source.to_string();
                let oom = crate::oom::classify(&text).map(|(shortage, requested)| self.explain_oom(step, shortage, requested, source, state));
                (text, oom)
            }
            other => (other.to_string(), None),
        };
        drop(err);
        let reason = match &out_of_memory {
            Some(o) => format!(
                "step {step} failed: out of device memory ({}{})",
                o.shortage.meaning(),
                o.requested_bytes.map(|b| format!(": a request for {b} B")).unwrap_or_default()
            ),
            None => format!("step {step} failed: {}", crate::oom::brief(&error)),
        };
        if let Some(profiler) = &mut self.profiler {
            profiler.update_manifest(|m| {
                m.notes.push(reason.clone());
                if let Some(o) = out_of_memory.as_ref().and_then(|o| serde_json::to_value(o).ok()) {
                    m.extra.insert("out_of_memory".into(), o);
                }
            });
            profiler.cut_short(reason);
        }
        let (traces, trace_errors) = self.finish_profiler();
        // With --memory, what a sample needs is measured now, once the cycle is saved (the
        // device's collector would take the measurement's kernels for the failed step's).
        let out_of_memory = match out_of_memory {
            Some(o) if self.cfg.memory && self.cfg.mode == Mode::Train => {
                state.model = None;
                state.eval_model = None;
                state.optim = AdamConfig::new().init();
                let probe = crate::oom_probe::measure_in_time(
                    rebuild.clone(),
                    self.source.clone(),
                    state.device.clone(),
                    self.cfg.learning_rate,
                    &o,
                    self.cfg.stop.clone(),
                );
                Some(o.with_probe(probe))
            }
            other => other,
        };
        Error::StepFailed(Box::new(crate::error::StepFailure { step, error, traces, trace_errors, out_of_memory }))
    }

    /// What the run held and asked for when step `step` ran out of device memory.
    fn explain_oom<M: Module>(
        &self,
        step: u64,
        shortage: crate::oom::Shortage,
        requested: Option<u64>,
        source: &StepError,
        state: &Loop<M>,
    ) -> crate::oom::OutOfMemory {
        let surfaced_at = match source {
            StepError::Read { .. } => "the loss read (burn's fusion runs the step's queued operations there)",
            StepError::Sync { .. } => "a device sync (burn's fusion runs the queued operations there)",
            _ => "the step's host code",
        };
        let memory = state.memory.as_ref();
        let highest = memory.and_then(|m| {
            let (snapshot, after, at_step) = m.highest?;
            // A step's start holds the state the optimizer's updates made, from step 1 on.
            let updated = at_step > 0 || after == steptrace::format::names::OPTIMIZER;
            Some(crate::oom::Sample {
                in_use: snapshot.bytes_in_use,
                gradients: if after == steptrace::format::names::BACKWARD { state.parameters.bytes } else { 0 },
                optimizer_state: if updated { m.optimizer_state.unwrap_or(0) } else { 0 },
                after,
                step: at_step,
                inside_step: m.samples_phases(),
            })
        });
        let pools = crate::backend::pool_largest_allocations(&state.device);
        crate::oom::explain(&crate::oom::Facts {
            step,
            shortage,
            requested,
            batch_size: self.cfg.batch_size as u64,
            batch_bytes: state.batch_bytes,
            reached: state.reached,
            surfaced_at,
            parameters: &state.parameters,
            optimizer_state: memory.and_then(|m| m.optimizer_state),
            limits: crate::backend::memory_limits(&state.device),
            at_failure: crate::backend::memory_usage(&state.device),
            pools: &pools,
            highest,
        })
    }

    /// The signal number that asked the run to stop, if any.
    fn stop_requested(&self) -> Option<usize> {
        let signal = self.cfg.stop.as_ref()?.load(std::sync::atomic::Ordering::SeqCst);
        (signal != 0).then_some(signal)
    }

    /// Inference mode: loads the model in a `model.load` span, before step 0.
    fn load_for_inference<M: Module>(&self, state: &mut Loop<M>) -> Result<f64> {
        let load_start = Instant::now();
        let _load = tracing::info_span!(target: TARGET, MODEL_LOAD).entered();
        state.eval_model = state.model.take().map(|m| m.valid());
        step::sync(&state.device).map_err(|source| Error::Execution { step: 0, source })?;
        let taken = ms(load_start.elapsed());
        if let Some(profiler) = &self.profiler {
            profiler.update_manifest(|m| m.model_load_ms = Some(taken));
        }
        Ok(taken)
    }

    /// One step: read, transfer, train or serve, sync, record.
    fn one_step<M: StepModel>(&mut self, step: u64, state: &mut Loop<M>, step_start: Instant, setup_ms: f64) -> Result<StepRecord> {
        let cfg = self.cfg;
        // A recorded step's memory is sampled at its start, before the batch is copied: the
        // question asked at the end of the step before is answered meanwhile (crate::memory).
        if let Some(memory) = &mut state.memory {
            memory.begin_step(self.profiler.as_ref().is_some_and(|p| matches!(p.action(), Action::Record | Action::RecordAndSave)));
        }
        let batch: HostBatch = self.loader.next_batch()?;
        let samples = batch.samples;
        self.watch_shape(step, step::input_shape(&batch.input), state);
        let exec = |source| Error::Execution { step, source };
        // Inference runs on the plain device, as the eval model's tensors do.
        let target_device = match cfg.mode {
            Mode::Train => state.device.clone(),
            Mode::Infer => state.device.clone().without_autodiff(),
        };
        let batch_bytes = step::batch_device_bytes(&batch, &target_device);
        state.batch_bytes = batch_bytes;
        state.reached = None;
        if let Some(memory) = &mut state.memory {
            // Before the batch's copy, the device's first operation of the step.
            memory.batch = batch_bytes;
            memory.step_start(step);
            if memory.unanswered > 0 && state.memory_note.is_none() {
                state.memory_note = Some(format!("not observed: {} does not report memory in use", self.selection.kind));
            }
        }
        let on_device = step::transfer(batch, &target_device).map_err(exec)?;
        let read_loss = step == 0 || step + 1 == cfg.steps || (cfg.loss_every > 0 && step % cfg.loss_every == 0);
        let loss = match cfg.mode {
            Mode::Train => {
                let current = state.model.take().ok_or(StepError::Missing { what: "model" }).map_err(exec)?;
                let memory = &mut state.memory;
                let reached = &mut state.reached;
                let (next, loss) = step::train_step_sampled(
                    current,
                    &mut state.optim,
                    on_device,
                    cfg.learning_rate,
                    cfg.sync,
                    &state.device,
                    cfg.plant_upload,
                    &mut |phase| {
                        *reached = Some(phase);
                        if let Some(m) = memory.as_mut() {
                            m.sample(phase, step);
                        }
                    },
                )
                .map_err(exec)?;
                state.model = Some(next);
                if read_loss { read_scalar(loss).map_err(exec)? } else { None }
            }
            Mode::Infer => {
                let inner = state.eval_model.as_ref().ok_or(StepError::Missing { what: "eval model" }).map_err(exec)?;
                let loss = step::infer_request(inner, on_device, cfg.sync, &target_device).map_err(exec)?;
                if read_loss { read_scalar(loss).map_err(exec)? } else { None }
            }
        };
        if cfg.sync != SyncPolicy::None {
            step::sync(&state.device).map_err(exec)?;
        }
        // The optimizer's state exists once it has updated: its size is read once, after the
        // step's work has run (reading it from a step that failed would fail too).
        if let Some(m) = state.memory.as_mut().filter(|m| m.optimizer_state.is_none() && cfg.mode == Mode::Train) {
            match crate::backend::catch_silently(|| crate::memory::optimizer_bytes(&state.optim)) {
                Ok(Ok(bytes)) => m.optimizer_state = Some(bytes),
                Ok(Err(why)) => tracing::warn!(target: TARGET, "--memory: optimizer state not observed: {why}"),
                Err(panic) => tracing::warn!(target: TARGET, "--memory: optimizer state not observed: reading it panicked: {panic}"),
            }
        }
        if let Some(memory) = &mut state.memory {
            // The next step's start sample, asked now so that its answer is ready then.
            let next = step + 1 < cfg.steps && self.profiler.as_ref().is_some_and(|p| p.schedule().action(p.step_num() + 1).records());
            memory.ask_ahead(next);
        }
        let step_end = Instant::now();
        let elapsed = ms(step_end - step_start);
        self.watch_time(step, elapsed, state);
        if step == 0 {
            self.record_startup(setup_ms, elapsed, (step_start, step_end));
        }
        Ok(StepRecord { step, ms: elapsed, samples, loss })
    }

    /// Notes the first shape, and flags a shape first seen after startup.
    fn watch_shape<M: Module>(&self, step: u64, shape: Vec<usize>, state: &mut Loop<M>) {
        if step == 0 {
            if let Some(profiler) = &self.profiler {
                profiler.update_manifest(|m| m.input_shape = Some(shape.iter().map(|&d| d as u64).collect()));
            }
            state.first_shape = Some(shape.clone());
        }
        if state.startup_shapes.contains(&shape) {
            return;
        }
        if step >= startup_steps(self.cfg.steps) {
            tracing::warn!(target: TARGET, step, shape = ?shape, "{}", instants::NEW_SHAPE);
            state.anomalies.push(Anomaly { step, what: format!("new input shape {shape:?} after startup") });
        }
        state.startup_shapes.push(shape);
    }

    /// Flags a steady step far slower than the steady median so far.
    fn watch_time<M: Module>(&self, step: u64, elapsed: f64, state: &mut Loop<M>) {
        let startup = startup_steps(self.cfg.steps);
        if step < startup {
            return;
        }
        // The median of the last steady steps (at most SLOW_WINDOW of them):
        // constant work per step, however long the run.
        let steady_so_far = state.records.len().saturating_sub(startup as usize);
        let recent = &state.records[state.records.len() - steady_so_far.min(SLOW_WINDOW)..];
        let steady: Vec<f64> = recent.iter().map(|r| r.ms).collect();
        if let Some(s) = Stats::of(&steady).filter(|s| s.n >= 3) {
            if elapsed > 3.0 * s.median && elapsed - s.median > 2.0 {
                tracing::warn!(target: TARGET, step, ms = elapsed, median_ms = s.median, "{}", instants::SLOW_STEP);
                state.anomalies.push(Anomaly {
                    step,
                    what: format!("{elapsed:.1} ms, {:.1}x the steady median: a new compile path?", elapsed / s.median),
                });
            }
        }
    }

    /// Startup figures, measured before any window records: the cold start is itemised
    /// now that step 0 (`first_step`, its start and end) is over.
    fn record_startup(&mut self, setup_ms: f64, first_step_ms: f64, first_step: (Instant, Instant)) {
        let cold = self.startup.take().map(|c| c.finish((self.started, self.setup_end), first_step));
        self.cold_start = cold.clone();
        let Some(profiler) = &self.profiler else { return };
        let label = self.cache_label();
        profiler.update_manifest(|m| {
            let mut startup = StartupInfo::default();
            startup.setup_ms = Some(setup_ms);
            startup.first_step_ms = Some(first_step_ms);
            startup.cubecl_cache = Some(label.clone());
            startup.cold_start = cold;
            m.startup = Some(startup);
            if let Some(serde_json::Value::Object(c)) = m.extra.get_mut("cubecl_cache") {
                c.insert("state".to_owned(), label.into());
            }
        });
    }

    /// `cold`, `partly warm` or `warm` from what cubecl compiled and tuned in this run's
    /// start, or why that is not known.
    fn cache_label(&self) -> String {
        if !self.selection.kind.uses_cubecl() {
            return crate::backend::BackendKind::NOT_CUBECL.to_owned();
        }
        match &self.cold_start {
            Some(Figure::Known(ColdStart { cache, .. })) => cache.label.clone(),
            Some(Figure::Absent(why)) => why.clone(),
            None => crate::run::CACHE_STATE_PENDING.to_owned(),
        }
    }

    /// Finishes the profiler: the traces written and the errors met.
    fn finish_profiler(&mut self) -> (Vec<SavedTrace>, Vec<String>) {
        let Some(profiler) = self.profiler.take() else { return (Vec::new(), Vec::new()) };
        let (mut saved, mut errors) = (Vec::new(), Vec::new());
        for outcome in profiler.finish_all() {
            match outcome {
                Ok(trace) => saved.push(trace),
                Err(err) => errors.push(err.to_string()),
            }
        }
        (saved, errors)
    }

    /// The run's result. Its arguments are the loop's outcome, gathered by
    /// [`drive`](Self::drive); kept apart so that the loop reads plainly.
    #[allow(clippy::too_many_arguments)]
    fn summary<M: Module>(
        &self,
        state: Loop<M>,
        parameters: usize,
        setup_ms: f64,
        model_load_ms: Option<f64>,
        held_out: Option<(String, f64)>,
        traces: Vec<SavedTrace>,
        trace_errors: Vec<String>,
    ) -> RunSummary {
        let cfg = self.cfg;
        let records = state.records;
        // An interrupted run is summed up over the steps that ran.
        let startup = startup_steps(cfg.steps.min(records.len() as u64));
        let steady: Vec<f64> = records.iter().skip(startup as usize).map(|r| r.ms).collect();
        let steady_ms = Stats::of(&steady);
        let losses: Vec<f64> = records.iter().filter_map(|r| r.loss).collect();
        let cache_state = self.cache_label();
        RunSummary {
            backend: self.selection.label(),
            backend_kind: self.selection.kind.to_string(),
            device: self.selection.device.clone(),
            parameters,
            input_shape: state.first_shape.unwrap_or_default(),
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
            first_loss: losses.first().copied(),
            last_loss: losses.last().copied(),
            steps: records,
            held_out,
            anomalies: state.anomalies,
            traces,
            trace_errors,
            cache: if self.selection.kind.uses_cubecl() {
                format!("{} ({cache_state})", crate::private::tilde(&self.cache.dir))
            } else {
                crate::backend::BackendKind::NOT_CUBECL.to_owned()
            },
            memory: cfg.memory.then(|| match (state.memory_note, state.memory.as_ref().is_some_and(|m| m.last.is_some())) {
                (Some(note), _) => note,
                (None, true) => format!(
                    "observed in recorded steps: counter tracks `{}` and `{}`{}",
                    counters::DEVICE_MEMORY,
                    counters::MEMORY_CATEGORIES,
                    state.memory.as_ref().and_then(|m| m.query_times()).map_or(String::new(), |t| format!("; {t}"))
                ),
                (None, false) => "not observed: no recorded step was sampled (memory is sampled in recorded steps only)".to_owned(),
            }),
            interrupted: None,
            cold_start: self.cold_start.clone(),
            init_hashes: self.init_hashes.clone(),
            warnings: self.init_warnings.clone(),
        }
    }
}
