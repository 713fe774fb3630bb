//! Memory by category, and what a failed step held, for a burn-train run.
//!
//! A session built with [`memory`](crate::SessionBuilder::memory) and handed to
//! [`LearnerProfiler::from_session`](super::LearnerProfiler::from_session) samples the
//! allocator at the start of each recorded step, as `steptrace train --memory` does: at
//! `launch`'s start for step 0, then right after each optimizer update ends a step. The
//! categories are those of a session: parameters (read from the model the optimizer is
//! wrapped with), optimizer state (the per-parameter states the first update returned,
//! elements times element size, read once) and the rest as `other`. burn-train builds the
//! batches on its loader threads, for the device, ahead of the step that takes them, so
//! the batches in flight are in `other` here, not in `input_batch`.
//!
//! The same figures describe a step that fails ([`LearnerProfiler::launch`](super::LearnerProfiler::launch)).

use std::cell::Cell;

use burn::module::Module;
use burn::prelude::Device;

use crate::memory::{MemorySampler, Parameters};

/// How the Learner's memory categories are obtained, for the manifest.
pub(crate) const METHOD: &str = "parameters: elements x element size of every float parameter of the model the \
    optimizer wraps; optimizer state: elements x element size of every tensor of the states the first update \
    returned, read once at its end (0 before it); other (activations, temporaries, and the batches burn-train's \
    loader threads built for the device ahead of their step): in use less the rest. Sampled at the start of \
    recorded steps (at launch, then right after the optimizer update that ends the step before), flushing \
    burn's fusion queue first. Never a device sync.";

thread_local! {
    /// The last of `learner::forward`, `loss` and `backward` that returned in this step.
    static REACHED: Cell<Option<&'static str>> = const { Cell::new(None) };
    /// Whether a phase helper ran on this thread at all.
    static PHASES_USED: Cell<bool> = const { Cell::new(false) };
}

/// Notes that the phase `name` returned (for a failed step's report).
pub(crate) fn reached(name: &'static str) {
    REACHED.with(|r| r.set(Some(name)));
    PHASES_USED.with(|u| u.set(true));
}

/// A new step: no phase of it has returned yet.
pub(crate) fn reset_reached() {
    REACHED.with(|r| r.set(None));
}

/// The last phase of the current step that returned, and whether the program's `TrainStep`
/// marks its phases at all.
pub(crate) fn phases_reached() -> (Option<&'static str>, bool) {
    (REACHED.with(Cell::get), PHASES_USED.with(Cell::get))
}

/// What the session asked of memory, taken over by the Learner wrapper.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WatchSettings {
    /// Memory by category ([`memory`](crate::SessionBuilder::memory)).
    pub(crate) memory: bool,
    /// The batch size the program declared.
    pub(crate) batch_size: Option<u64>,
    /// Whether the console prints a failure's report.
    pub(crate) console_full: bool,
}

/// The run's memory bookkeeping, shared by the optimizer wrapper and the handle.
pub(crate) struct Watch {
    pub(crate) device: Device,
    pub(crate) settings: WatchSettings,
    /// The step-start sampler, once the model is known (with `memory`).
    pub(crate) sampler: Option<MemorySampler>,
    /// The model's float parameters, once the optimizer is wrapped.
    pub(crate) parameters: Option<Parameters>,
    /// The optimizer's state, bytes, once the first update ended.
    pub(crate) optimizer_state: Option<u64>,
    /// What the first update's states added up to so far.
    first_update: u64,
    /// Why the optimizer's state could not be read, when it could not.
    pub(crate) state_unread: Option<String>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("settings", &self.settings)
            .field("parameters", &self.parameters.as_ref().map(|p| p.bytes))
            .field("optimizer_state", &self.optimizer_state)
            .finish_non_exhaustive()
    }
}

impl Watch {
    pub(crate) fn new(device: Device, settings: WatchSettings) -> Watch {
        Watch {
            device,
            settings,
            sampler: None,
            parameters: None,
            optimizer_state: None,
            first_update: 0,
            state_unread: None,
        }
    }

    /// The model the optimizer updates: its parameters' bytes, and with `memory` the sampler.
    pub(crate) fn model<M: Module>(&mut self, model: &M) {
        let parameters = crate::memory::parameters(model);
        if self.settings.memory && self.sampler.is_none() {
            self.sampler = Some(MemorySampler::new(self.device.clone(), parameters.bytes, false, false));
        }
        self.parameters = Some(parameters);
    }

    /// Whether the first update's states are to be measured.
    pub(crate) fn wants_state(&self) -> bool {
        self.settings.memory && self.optimizer_state.is_none() && self.state_unread.is_none()
    }

    /// Adds one parameter's state after the first update (`Err`: why it cannot be read).
    pub(crate) fn add_state(&mut self, bytes: Result<u64, String>) {
        match bytes {
            Ok(b) => self.first_update = self.first_update.saturating_add(b),
            Err(why) => self.state_unread = Some(why),
        }
    }

    /// The first update ended: its states are the optimizer's state from now on.
    pub(crate) fn first_update_ended(&mut self) {
        if self.state_unread.is_some() || !self.settings.memory || self.optimizer_state.is_some() {
            return;
        }
        self.optimizer_state = Some(self.first_update);
        if let Some(sampler) = &mut self.sampler {
            sampler.optimizer_state = Some(self.first_update);
        }
    }

    /// Step `step` begins (`recorded`: whether the schedule records it): its start sample.
    pub(crate) fn step_start(&mut self, step: u64, recorded: bool) {
        if let Some(sampler) = &mut self.sampler {
            sampler.begin_step(recorded);
            sampler.step_start(step);
        }
    }

    /// What the run's summary says of memory.
    pub(crate) fn summary(&self) -> Option<String> {
        if !self.settings.memory {
            return None;
        }
        let unread =
            self.state_unread.as_ref().map(|w| format!("; optimizer state not observed: {w}")).unwrap_or_default();
        Some(match &self.sampler {
            None => {
                "memory not observed: no optimizer was wrapped with the model (LearnerProfiler::optimizer)".to_owned()
            }
            Some(s) if s.last.is_none() => "memory not observed: no recorded step was sampled".to_owned(),
            Some(_) => format!(
                "memory: observed at the start of recorded steps: counter tracks `{}` and `{}`{unread}",
                steptrace::format::names::counters::DEVICE_MEMORY,
                steptrace::format::names::counters::MEMORY_CATEGORIES,
            ),
        })
    }
}

/// The bytes of one optimizer state's tensors (elements times element size). Reading them
/// reads the tensors back from the device: done once, for the first update.
pub(crate) fn state_bytes<S: burn::optim::RecordState>(state: &S) -> Result<u64, String> {
    let mut sink = burn::optim::StateSink::default();
    crate::backend::catch_silently(|| state.state_flatten("", &mut sink))
        .map_err(|panic| format!("reading it panicked: {panic}"))?;
    Ok(sink.tensors.iter().fold(0u64, |sum, (_, data)| {
        sum.saturating_add((data.num_elements() as u64).saturating_mul(data.dtype().size() as u64))
    }))
}
