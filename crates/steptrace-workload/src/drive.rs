//! The bundled models' training loop, on the session's helpers: read, copy, forward, loss,
//! backward, optimizer, step; then the held-out metric, and after an out-of-memory the
//! measurement of what a sample needs.

use burn::optim::{AdamConfig, ModuleOptimizer};
use burn::prelude::Device;
use steptrace::format::names::TRAIN_STEP;
use steptrace_burn::data::BatchSource;
use steptrace_burn::{Mode, StepFailure, StepRecord};

use crate::error::{Error, Result};
use crate::run::{Job, Trained};
use crate::step::{self, BatchError, LossInput, StepModel};

/// The model as the loop holds it: trained, or in eval mode for inference.
struct Models<M> {
    train: Option<M>,
    eval: Option<M>,
}

impl<'a> Job<'a> {
    /// Trains (or serves) `model` for the configured steps.
    ///
    /// `rebuild` makes a fresh model of the same configuration: after an out-of-memory, with
    /// `--memory`, what a sample needs is measured on one ([`crate::oom_probe`]).
    pub(crate) fn drive<M: StepModel + 'static>(
        mut self,
        model: M,
        rebuild: crate::oom_probe::Rebuild<M>,
        on_step: &mut dyn FnMut(&StepRecord),
    ) -> Result<Trained> {
        self.describe();
        let device = self.session.device();
        self.session.watch(&model);
        let mut optim = AdamConfig::new().init();
        let mut models = Models { train: Some(model), eval: None };
        if self.cfg.mode == Mode::Infer {
            let model = models.train.take();
            models.eval = self.session.load_model(|| model.map(|m| m.valid()))?;
        }
        for step in 0..self.cfg.steps {
            match self.one_step(step, &mut models, &mut optim, &device) {
                Ok(record) => on_step(&record),
                Err(Error::Session(steptrace_burn::Error::Interrupted { mut summary, .. })) => {
                    // The step the signal ended ran whole: the caller sees it like the others.
                    if let Some(last) = summary.steps.last() {
                        on_step(last);
                    }
                    summary.held_out = held_out(self.source.as_ref(), &models, &device);
                    return Ok(finish_summary(self.cfg, &self.start, *summary));
                }
                Err(Error::Session(steptrace_burn::Error::StepFailed(failure))) => {
                    drop(models);
                    drop(optim);
                    let failure = Box::new(self.measure_after(*failure, rebuild));
                    return Err(Error::Session(steptrace_burn::Error::StepFailed(failure)));
                }
                Err(other) => return Err(other),
            }
        }
        let Job { cfg, session, source, loader, start } = self;
        drop(loader);
        let mut summary = session.finish()?;
        summary.held_out = held_out(source.as_ref(), &models, &device);
        Ok(finish_summary(cfg, &start, summary))
    }

    /// One step: read, copy, train or serve, sync, record.
    fn one_step<M: StepModel>(
        &mut self,
        step: u64,
        models: &mut Models<M>,
        optim: &mut ModuleOptimizer,
        device: &Device,
    ) -> Result<StepRecord> {
        let cfg = self.cfg;
        let batch = self.session.next_batch(&mut self.loader)?;
        // Inference runs on the plain device, as the eval model's tensors do.
        let target_device = match cfg.mode {
            Mode::Train => device.clone(),
            Mode::Infer => device.clone().without_autodiff(),
        };
        let on_device = self.session.copy(batch, |b| step::to_device(b, &target_device))?;
        let on_device = on_device.map_err(|e| self.session.fail_step(e))?;
        let reads = self.reads_loss(step);
        match cfg.mode {
            Mode::Train => {
                // `train.step` > forward, loss, backward, optimizer, as the bundled runs name it.
                let _train = steptrace::own_span!(TRAIN_STEP);
                let model = models
                    .train
                    .take()
                    .ok_or(BatchError::Missing { what: "model" })
                    .map_err(|e| self.session.fail_step(e))?;
                let logits = self.session.forward(|| model.logits(on_device.input))?;
                let logits = logits.map_err(|e| self.session.fail_step(e))?;
                let pair = LossInput::new(logits, on_device.target).map_err(|e| self.session.fail_step(e))?;
                let plant = cfg.plant_upload;
                let loss = self.session.loss(|| {
                    let loss = pair.loss();
                    if plant {
                        step::planted_upload(loss, device)
                    } else {
                        loss
                    }
                })?;
                let grads = self.session.backward(|| loss.backward())?;
                models.train = Some(self.session.optimize(optim, cfg.learning_rate, model, grads)?);
                drop(_train);
                if reads {
                    self.session.read_loss(loss)?;
                }
            }
            Mode::Infer => {
                let model = models.eval.as_ref().ok_or(BatchError::Missing { what: "eval model" });
                let model = model.map_err(|e| self.session.fail_step(e))?;
                let logits = self.session.infer(|| model.logits(on_device.input))?;
                let logits = logits.map_err(|e| self.session.fail_step(e))?;
                let loss = LossInput::new(logits, on_device.target).map_err(|e| self.session.fail_step(e))?.loss();
                if reads {
                    self.session.read_loss(loss)?;
                }
            }
        }
        Ok(self.session.step()?)
    }

    /// After an out-of-memory, with `--memory`, what a sample needs is measured now, once the
    /// cycle is saved (the device's collector would take the measurement's kernels for the
    /// failed step's).
    fn measure_after<M: StepModel + 'static>(
        &self,
        mut failure: StepFailure,
        rebuild: crate::oom_probe::Rebuild<M>,
    ) -> StepFailure {
        let cfg = self.cfg;
        if let Some(o) = failure.out_of_memory.take() {
            let o = if cfg.memory && cfg.mode == Mode::Train {
                let probe = crate::oom_probe::measure_in_time(
                    rebuild,
                    self.source.clone(),
                    self.session.device(),
                    cfg.learning_rate,
                    &o,
                    cfg.stop.clone(),
                );
                o.with_probe(probe)
            } else {
                o
            };
            failure.out_of_memory = Some(o);
        }
        failure
    }
}

/// The held-out metric of the model as it ended.
fn held_out<M: StepModel>(source: &dyn BatchSource, models: &Models<M>, device: &Device) -> Option<(String, f64)> {
    let plain = device.clone().without_autodiff();
    match (&models.train, &models.eval) {
        (Some(m), _) => crate::run::evaluate(source, &m.valid(), &plain),
        (None, Some(m)) => crate::run::evaluate(source, m, &plain),
        _ => None,
    }
}

/// What only the bundled run knows: the mode, the record that holds the starting state, its
/// warnings, the batch size asked for.
fn finish_summary(
    cfg: &crate::RunConfig,
    start: &crate::init::Start<'_>,
    mut summary: steptrace_burn::RunSummary,
) -> Trained {
    summary.mode = cfg.mode;
    summary.batch_size = cfg.batch_size;
    Trained { summary, init_hashes: start.hashes.clone(), warnings: start.warnings.clone() }
}
