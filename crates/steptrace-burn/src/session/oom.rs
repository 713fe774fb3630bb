//! What a session knew when a step ran out of device memory: [`crate::failure::oom::explain`]'s facts.

use super::Session;
use crate::failure::oom::{Facts, OutOfMemory, Sample, Shortage};
use crate::failure::StepError;

impl Session {
    /// What the run held and asked for when the current step ran out of device memory.
    pub(super) fn explain_oom(&self, shortage: Shortage, requested: Option<u64>, source: &StepError) -> OutOfMemory {
        let surfaced_at = match source {
            StepError::Read { .. } => "the loss read (burn's fusion runs the step's queued operations there)",
            StepError::Sync { .. } => "a device sync (burn's fusion runs the queued operations there)",
            _ => "the step's host code",
        };
        let parameters = self.memory.parameters.as_ref().map(|(p, _)| p.clone()).unwrap_or_default();
        let memory = self.memory.sampler.as_ref();
        let highest = memory.and_then(|m| {
            let (snapshot, after, at_step) = m.highest?;
            // A step's start holds the state the optimizer's updates made, from step 1 on.
            let updated = at_step > 0 || after == steptrace::format::names::OPTIMIZER;
            Some(Sample {
                in_use: snapshot.bytes_in_use,
                gradients: if after == steptrace::format::names::BACKWARD { parameters.bytes } else { 0 },
                optimizer_state: if updated { m.optimizer_state.unwrap_or(0) } else { 0 },
                after,
                step: at_step,
                inside_step: m.samples_phases(),
            })
        });
        let pools = crate::backend::pool_largest_allocations(&self.device);
        let batch_size = self.clock.samples.or(self.clock.batch_size).unwrap_or(0) as u64;
        let mut report = crate::failure::oom::explain(&Facts {
            step: self.clock.step,
            shortage,
            requested,
            batch_size,
            batch_bytes: self.memory.batch_bytes,
            reached: self.failure.reached,
            surfaced_at,
            parameters: &parameters,
            optimizer_state: self.memory.optimizer_state,
            limits: crate::backend::memory_limits(&self.device),
            at_failure: crate::backend::memory_usage(&self.device),
            pools: &pools,
            highest,
        });
        if self.memory.parameters.is_none() {
            report
                .not_observed
                .push("the model's parameters: the session was not given the model (Session::watch)".to_owned());
        }
        report
    }
}

impl Session {
    /// On the CPU backend, notes the step that begins for a failed host allocation's report
    /// ([`crate::failure::host_oom`]): its number, the batch's samples declared, nothing reached yet,
    /// and the file the cycle in progress streams to.
    pub(super) fn note_host_step(&self) {
        if !self.failure.host_memory {
            return;
        }
        let (step, samples) = (self.clock.step, self.clock.batch_size.map(|n| n as u64));
        let recording = self.profiler.as_ref().and_then(|p| p.recording_to());
        crate::failure::host_oom::note(|w| {
            w.step = step;
            w.samples = w.samples.or(samples);
            w.reached = None;
            w.recording = recording;
            w.in_step = true;
        });
    }

    /// On the CPU backend, notes that the step ended: an allocation failing before the next
    /// one begins is not a step's.
    pub(super) fn note_host_step_end(&self) {
        if self.failure.host_memory {
            crate::failure::host_oom::note(|w| w.in_step = false);
        }
    }

    /// The session has ended: a failed host allocation after it is not a step's.
    pub(super) fn end_host_watch(&mut self) {
        if self.failure.host_memory {
            crate::failure::host_oom::forget();
            self.failure.host_memory = false;
        }
    }
}
