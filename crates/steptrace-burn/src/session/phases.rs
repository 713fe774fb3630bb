//! The parts of a step: the batch read, the copy, and the autodiff phases, each in its span.

use burn::module::Module;
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::prelude::Tensor;
use burn::tensor::Gradients;
use steptrace::direct::OwnSpan;
use steptrace::format::names::{
    BACKWARD, DATA_LOAD, FORWARD, INFER_REQUEST, LOSS, LOSS_READ, MODEL_LOAD, OPTIMIZER, TARGET, TRANSFER_H2D,
};
use steptrace::own_span;

use super::upload::Upload;
use super::Session;
use crate::backend::catch_silently;
use crate::error::Result;
use crate::failure::StepError;
use crate::memory::MemorySampler;
use crate::sync::SyncPolicy;

/// The span of an autodiff phase.
fn phase_span(phase: &'static str) -> OwnSpan<'static> {
    match phase {
        FORWARD => own_span!(FORWARD),
        LOSS => own_span!(LOSS),
        BACKWARD => own_span!(BACKWARD),
        _ => own_span!(OPTIMIZER),
    }
}

impl Session {
    /// Tells the session about the model: its parameters' count and bytes (for
    /// [`memory`](super::SessionBuilder::memory) and an out-of-memory report) and, with
    /// [`ops`](super::SessionBuilder::ops), their paths in the module tree, so that kernels of
    /// layers without a [`layer`](crate::layer) span are named after the parameters they
    /// read (`blocks.1.linear`). Call it once the model is built;
    /// [`optimize`](Self::optimize) keeps it up to date after each update. A loop that updates
    /// the model otherwise ([`optimizer`](Self::optimizer)) calls it again after each update
    /// for layer names from the module tree.
    pub fn watch<M: Module>(&mut self, model: &M) {
        let parameters = crate::memory::parameters(model);
        let count = model.num_params();
        if let Some(profiler) = &self.profiler {
            profiler.update_manifest(|m| m.parameters = Some(count as u64));
        }
        if self.memory.wanted && self.memory.sampler.is_none() {
            let mut sampler = MemorySampler::new(
                self.device.clone(),
                parameters.bytes,
                self.memory.phases,
                self.sync != SyncPolicy::None,
            );
            // A step already under way is not sampled: its start has passed.
            sampler.begin_step(false);
            self.memory.sampler = Some(sampler);
        }
        if self.failure.host_memory {
            let noted = parameters.clone();
            crate::failure::host_oom::note(|w| w.parameters = noted);
        }
        self.memory.parameters = Some((parameters, count));
        self.note_module_tree(model);
    }

    /// Notes where each parameter sits in the module tree, for kernel attribution.
    fn note_module_tree<M: Module>(&self, model: &M) {
        #[cfg(feature = "attribution")]
        if self.attributed {
            crate::attribute::note_parameters(model);
        }
        #[cfg(not(feature = "attribution"))]
        let _ = model;
    }

    /// Reads the step's batch in a `data.load` span (with the step as its `batch` field):
    /// `session.load(|| batches.next())`. Its result is the closure's.
    ///
    /// # Errors
    ///
    /// When the closure panics: [`Error::StepFailed`](crate::Error::StepFailed), the cycle in
    /// progress saved.
    pub fn load<T>(&mut self, read: impl FnOnce() -> T) -> Result<T> {
        self.begin()?;
        let outcome = {
            let _load = own_span!(DATA_LOAD, batch = self.clock.step);
            catch_silently(read)
        };
        outcome.map_err(|message| self.fail(StepError::Panicked { message }))
    }

    /// Copies host data to the device in a `transfer.h2d` span: `to_device` gets `host` and
    /// makes the tensors (`Tensor::from_data(x, &device)`). `host` is a burn `TensorData`, a
    /// pair `(input, target)` of them, or a [`HostBatch`](crate::data::HostBatch)
    /// ([`Upload`]): its bytes are read before the copy, for the span's `input_bytes` and
    /// `target_bytes`, and its first dimension is the step's samples.
    ///
    /// The copy is asynchronous for the host: the span is the host's side (staging the bytes
    /// and queueing the upload).
    ///
    /// # Errors
    ///
    /// As [`load`](Self::load).
    pub fn copy<H: Upload, T>(&mut self, host: H, to_device: impl FnOnce(H) -> T) -> Result<T> {
        self.begin()?;
        let size = host.upload_size(&self.device);
        self.clock.samples = size.samples;
        self.memory.batch_bytes = size.input_bytes.saturating_add(size.target_bytes);
        if self.failure.host_memory {
            let (samples, bytes) =
                (self.clock.samples.or(self.clock.batch_size).map(|n| n as u64), self.memory.batch_bytes);
            crate::failure::host_oom::note(|w| (w.samples, w.batch_bytes) = (samples, bytes));
        }
        self.sample_step_start();
        if !size.input_shape.is_empty() {
            self.watch_shape(size.input_shape.clone());
        }
        let outcome = {
            let _h2d = own_span!(
                TRANSFER_H2D,
                batch = self.clock.step,
                input_bytes = size.input_bytes,
                target_bytes = size.target_bytes
            );
            catch_silently(|| to_device(host))
        };
        outcome.map_err(|message| self.fail(StepError::Panicked { message }))
    }

    /// Runs the forward pass in a `forward` span.
    ///
    /// # Errors
    ///
    /// When it panics (burn and cubecl panic on some device errors) or, with
    /// [`SyncPolicy::Phase`], when the device reports an error at the phase's sync:
    /// [`Error::StepFailed`](crate::Error::StepFailed), with an out-of-memory explained.
    pub fn forward<T>(&mut self, forward: impl FnOnce() -> T) -> Result<T> {
        self.begin()?;
        self.sample_step_start();
        self.phase(FORWARD, forward)
    }

    /// Computes the loss in a `loss` span. The session keeps a detached handle of it: the
    /// step's end reads one element of it, which waits for the device and reports a failed
    /// allocation of the step ([`step`](Self::step)).
    ///
    /// # Errors
    ///
    /// As [`forward`](Self::forward).
    pub fn loss(&mut self, loss: impl FnOnce() -> Tensor<1>) -> Result<Tensor<1>> {
        self.begin()?;
        let loss = self.phase(LOSS, loss)?;
        self.failure.witness = Some(loss.clone().detach());
        Ok(loss)
    }

    /// Runs the backward pass in a `backward` span: `session.backward(|| loss.backward())`.
    ///
    /// # Errors
    ///
    /// As [`forward`](Self::forward).
    pub fn backward<T>(&mut self, backward: impl FnOnce() -> T) -> Result<T> {
        self.begin()?;
        self.phase(BACKWARD, backward)
    }

    /// Runs the optimizer's update in an `optimizer` span, for an update of your own (several
    /// parameter groups, clipping, a scheduler); [`optimize`](Self::optimize) is the usual
    /// one. Call [`watch`](Self::watch) with the updated model afterwards to keep layer
    /// names from the module tree.
    ///
    /// # Errors
    ///
    /// As [`forward`](Self::forward).
    pub fn optimizer<T>(&mut self, update: impl FnOnce() -> T) -> Result<T> {
        self.begin()?;
        self.phase(OPTIMIZER, update)
    }

    /// Tells the session about an optimizer that [`optimizer`](Self::optimizer) updates
    /// with, once it has made its first update: its state's size (Adam's moments, say) is read
    /// at the end of the step, for [`memory`](super::SessionBuilder::memory).
    /// [`optimize`](Self::optimize) does this itself.
    pub fn watch_optimizer(&mut self, optim: &ModuleOptimizer) {
        if self.memory.wanted && !self.memory.optimizer_state_tried && self.memory.pending_optimizer.is_none() {
            self.memory.pending_optimizer = Some(optim.clone());
        }
    }

    /// One optimizer update in an `optimizer` span: the gradients of `model`'s parameters
    /// from `grads`, then `optim`'s step at `learning_rate`. Returns the updated model. The
    /// session reads the optimizer's state once (its bytes, for
    /// [`memory`](super::SessionBuilder::memory)) and notes the updated parameters for layer
    /// names.
    ///
    /// # Errors
    ///
    /// As [`forward`](Self::forward).
    pub fn optimize<M: Module>(
        &mut self,
        optim: &mut ModuleOptimizer,
        learning_rate: f64,
        model: M,
        grads: Gradients,
    ) -> Result<M> {
        self.begin()?;
        let model = self.phase(OPTIMIZER, || {
            let grads = GradientsParams::from_grads(grads, &model);
            optim.step(learning_rate, model, grads)
        })?;
        // Its state is read at the step's end, once the step's work is known to have run
        // (reading it reads its tensors back: after a failed step it would fail too).
        self.watch_optimizer(optim);
        let next_collects = self.profiler.as_ref().is_some_and(|p| {
            let schedule = p.schedule();
            schedule.action(p.step_num() + 1).collects() || schedule.is_on_demand()
        });
        if next_collects {
            self.note_module_tree(&model);
        }
        Ok(model)
    }

    /// The next batch of steptrace's [`Loader`](crate::data::Loader), which puts its reads in
    /// `data.load` spans itself (on its prefetch threads, with a `data.wait` on this one).
    ///
    /// # Errors
    ///
    /// When the loader fails: [`Error::StepFailed`](crate::Error::StepFailed), the cycle in
    /// progress saved.
    pub fn next_batch(&mut self, loader: &mut crate::data::Loader) -> Result<crate::data::HostBatch> {
        self.begin()?;
        match catch_silently(|| loader.next_batch()) {
            Ok(Ok(batch)) => Ok(batch),
            Ok(Err(e)) => Err(self.fail(StepError::Data { reason: e.to_string() })),
            Err(message) => Err(self.fail(StepError::Panicked { message })),
        }
    }

    /// One inference request: an `infer.request` span with the model's forward pass in a
    /// `forward` span inside it (no `train.step`).
    ///
    /// # Errors
    ///
    /// As [`forward`](Self::forward).
    pub fn infer<T>(&mut self, forward: impl FnOnce() -> T) -> Result<T> {
        self.begin()?;
        self.sample_step_start();
        if !self.clock.inferred {
            self.clock.inferred = true;
            self.update_manifest(|m| m.mode = Some("eval (inference)".into()));
        }
        let outcome = {
            let _request = own_span!(INFER_REQUEST);
            self.run_phase(FORWARD, forward)
        };
        // The request's span is closed before a failure saves the cycle.
        match outcome {
            Ok(out) => Ok(self.after_phase(FORWARD, out)),
            Err(source) => Err(self.fail(source)),
        }
    }

    /// Before the first step, loads or prepares a model for inference in a `model.load` span
    /// (and waits for the device), kept apart from every request: its time goes to the
    /// manifest's `model_load_ms` and the summary.
    ///
    /// # Errors
    ///
    /// When it panics or the device fails; [`Error::Ended`](crate::Error::Ended) once a step
    /// has begun (the load would be charged to it).
    pub fn load_model<T>(&mut self, load: impl FnOnce() -> T) -> Result<T> {
        self.check_running()?;
        if self.clock.setup_end.is_some() {
            return Err(crate::Error::Ended(crate::error::Ended::ModelLoadInStep));
        }
        let started = std::time::Instant::now();
        let device = self.device.clone();
        let outcome = {
            let _load = own_span!(MODEL_LOAD);
            catch_silently(|| {
                let out = load();
                step_sync(&device).map(|()| out)
            })
        };
        let out = match outcome {
            Ok(Ok(out)) => out,
            Ok(Err(source)) => return Err(self.fail(source)),
            Err(message) => return Err(self.fail(StepError::Panicked { message })),
        };
        let taken = started.elapsed().as_secs_f64() * 1000.0;
        self.clock.model_load_ms = Some(taken);
        self.update_manifest(|m| m.model_load_ms = Some(taken));
        Ok(out)
    }

    /// Ends the run because the step failed for a reason of the program's own (a data file
    /// that cannot be read, a batch of the wrong shape): the cycle in progress is saved, cut
    /// short with `error` as its reason, and the returned
    /// [`Error::StepFailed`](crate::Error::StepFailed) says what was saved.
    pub fn fail_step(&mut self, error: impl std::fmt::Display) -> crate::Error {
        if let Err(ended) = self.check_running() {
            return ended;
        }
        self.fail(StepError::Program { message: error.to_string() })
    }

    /// Reads a loss (or any one-element tensor) back to the host in a `loss.read` span; it
    /// waits for the device. The value is the step's loss in its record.
    ///
    /// # Errors
    ///
    /// When the device reports an error (a failed allocation surfaces here):
    /// [`Error::StepFailed`](crate::Error::StepFailed), with an out-of-memory explained.
    pub fn read_loss(&mut self, loss: Tensor<1>) -> Result<f64> {
        self.begin()?;
        let outcome = {
            let _read = own_span!(LOSS_READ);
            catch_silently(|| loss.try_into_data())
        };
        let value = match outcome {
            Ok(Ok(data)) => data.iter::<f64>().next(),
            Ok(Err(e)) => return Err(self.fail(StepError::Read { reason: e.to_string() })),
            Err(message) => return Err(self.fail(StepError::Panicked { message })),
        };
        self.clock.loss = value;
        Ok(value.unwrap_or(f64::NAN))
    }

    /// Runs `f` in the span of `phase`, syncing at its end with [`SyncPolicy::Phase`]; then,
    /// with `--memory-phases`, samples the allocator. A failure saves the cycle.
    fn phase<T>(&mut self, phase: &'static str, f: impl FnOnce() -> T) -> Result<T> {
        match self.run_phase(phase, f) {
            Ok(out) => Ok(self.after_phase(phase, out)),
            Err(source) => Err(self.fail(source)),
        }
    }

    /// [`phase`](Self::phase)'s span and sync, the failure returned rather than handled.
    fn run_phase<T>(&mut self, phase: &'static str, f: impl FnOnce() -> T) -> std::result::Result<T, StepError> {
        let policy = self.sync;
        let device = &self.device;
        let _span = phase_span(phase);
        match catch_silently(|| {
            let out = f();
            if policy == SyncPolicy::Phase {
                step_sync(device).map(|()| out)
            } else {
                Ok(out)
            }
        }) {
            Ok(outcome) => outcome,
            Err(message) => Err(StepError::Panicked { message }),
        }
    }

    /// What follows a phase that returned: the phase reached, and its memory sample.
    fn after_phase<T>(&mut self, phase: &'static str, out: T) -> T {
        self.failure.reached = Some(phase);
        if self.failure.host_memory {
            crate::failure::host_oom::note(|w| w.reached = Some(phase));
        }
        let step = self.clock.step;
        if let Some(memory) = &mut self.memory.sampler {
            memory.sample(phase, step);
        }
        out
    }

    /// The step's start sample (`--memory`), before its batch is copied, once per step.
    fn sample_step_start(&mut self) {
        if self.memory.sampled_start {
            return;
        }
        self.memory.sampled_start = true;
        let step = self.clock.step;
        let batch = self.memory.batch_bytes;
        let Some(memory) = &mut self.memory.sampler else { return };
        memory.batch = batch;
        memory.step_start(step);
        if memory.unanswered > 0 && self.memory.note.is_none() {
            self.memory.note = Some(format!("not observed: {} does not report memory in use", self.selection.kind));
        }
    }

    /// The optimizer's state exists once it has updated: its size is read once (`--memory`),
    /// at the end of the first step whose work ran after that update.
    pub(super) fn read_optimizer_state(&mut self) {
        let Some(optim) = self.memory.pending_optimizer.take() else { return };
        self.memory.optimizer_state_tried = true;
        match catch_silently(|| crate::memory::optimizer_bytes(&optim)) {
            Ok(Ok(bytes)) => {
                self.memory.optimizer_state = Some(bytes);
                if self.failure.host_memory {
                    crate::failure::host_oom::note(|w| w.optimizer_state = Some(bytes));
                }
                if let Some(memory) = &mut self.memory.sampler {
                    memory.optimizer_state = Some(bytes);
                }
            }
            Ok(Err(why)) => tracing::warn!(target: TARGET, "memory: optimizer state not observed: {why}"),
            Err(panic) => {
                tracing::warn!(target: TARGET, "memory: optimizer state not observed: reading it panicked: {panic}")
            }
        }
    }
}

/// [`sync`](crate::sync::sync), as a step's failure cause.
fn step_sync(device: &burn::prelude::Device) -> std::result::Result<(), StepError> {
    crate::sync::sync(device).map_err(|e| StepError::Sync { reason: e.reason })
}
