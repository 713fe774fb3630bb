//! [`LearnerProfiler::launch`]: burn-train's `launch`, with a failed step turned into a typed
//! error that carries the saved cycle and, for lack of device memory, what the run held.

use burn::train::{Learner, LearnerModel, LearningResult, SupervisedTraining, TrainingError};
use steptrace::format::names::OPTIMIZER;

use super::handle::ProfiledRun;
use super::watch::{self, Watch};
use super::{LearnerError, LearnerProfiler};
use crate::failure::oom::{Facts, OutOfMemory, Sample, Shortage};
use crate::failure::{StepError, StepFailure};

impl LearnerProfiler {
    /// Runs `training.launch(learner)`, then [`finish`](Self::finish)es: the result of
    /// burn-train and what the profiler wrote.
    ///
    /// A step that fails, in burn-train's loop (a panic, as a failed device allocation is on
    /// burn 0.22) or on its metric processor's thread (which reads the step's loss and outputs,
    /// and so is where an asynchronous backend often reports the failure), ends the run here:
    /// the cycle in progress is saved, cut short with the failure as its reason, and a
    /// failure for lack of device memory is explained as in a [`Session`](crate::Session)
    /// (what the allocator held, parameters and optimizer state counted exactly, the
    /// largest allocations seen, the batch that would have fit when the program declared
    /// its batch size). The console prints the report when the session's console does.
    ///
    /// # Errors
    ///
    /// [`LearnerError::StepFailed`] for a failed step (its [`StepFailure`] holds the saved
    /// traces and the out-of-memory report); otherwise as [`finish`](Self::finish).
    pub fn launch<M: LearnerModel>(
        self,
        training: SupervisedTraining<M>,
        learner: Learner<M>,
    ) -> Result<(LearningResult<M>, ProfiledRun), LearnerError> {
        let result = match crate::backend::catch_silently(|| training.launch(learner)) {
            Ok(result) => result,
            Err(message) => {
                let cause = StepError::Panicked { message };
                return Err(
                    self.fail(cause, "burn-train's training loop (the step, the optimizer or the loader panicked)")
                );
            }
        };
        if let Some(error) = result.error.clone() {
            let surfaced_at = match &*error {
                TrainingError::EventProcessor(_) => {
                    "burn-train's metric processor (it reads the step's loss and outputs on its own thread)"
                }
                TrainingError::Workers(_) => "a worker of burn-train's multi-device strategy",
                _ => "burn-train's training loop",
            };
            return Err(self.fail(StepError::TrainingLoop { message: error.to_string() }, surfaced_at));
        }
        let run = self.finish()?;
        Ok((result, run))
    }

    /// Ends the run after a failure: the report, the cycle in progress saved cut short.
    fn fail(self, cause: StepError, surfaced_at: &'static str) -> LearnerError {
        let step = self.driver.step_now();
        let console_full = self.driver.watch(|w| w.settings.console_full).unwrap_or(false);
        let out_of_memory = cause.out_of_memory().and_then(|(shortage, requested)| {
            self.driver.watch(|w| explain(w, step, shortage, requested, surfaced_at))
        });
        let reason = crate::failure::reason(step, &cause, out_of_memory.as_ref());
        let (mut traces, mut trace_errors) = (Vec::new(), Vec::new());
        if let Some(mut profiler) = self.driver.take() {
            crate::failure::mark(&mut profiler, &reason, out_of_memory.as_ref());
            for outcome in profiler.finish_all() {
                match outcome {
                    Ok(trace) => traces.push(trace),
                    Err(e) => trace_errors.push(e),
                }
            }
        }
        let failure = StepFailure { step, cause, traces, kept: Vec::new(), trace_errors, out_of_memory };
        if console_full {
            failure.print();
        }
        LearnerError::StepFailed(Box::new(failure))
    }
}

/// What the run held when step `step` ran out of device memory.
fn explain(w: &Watch, step: u64, shortage: Shortage, requested: Option<u64>, surfaced_at: &'static str) -> OutOfMemory {
    let parameters = w.parameters.clone().unwrap_or_default();
    let highest = w.sampler.as_ref().and_then(|m| {
        let (snapshot, after, at_step) = m.highest?;
        let updated = at_step > 0 || after == OPTIMIZER;
        Some(Sample {
            in_use: snapshot.bytes_in_use,
            gradients: 0,
            optimizer_state: if updated { m.optimizer_state.unwrap_or(0) } else { 0 },
            after,
            step: at_step,
            inside_step: false,
        })
    });
    let (reached, phases_observed) = watch::phases_reached();
    let pools = crate::backend::pool_largest_allocations(&w.device);
    let mut report = crate::failure::oom::explain(&Facts {
        step,
        shortage,
        requested,
        batch_size: w.settings.batch_size.unwrap_or(0),
        batch_bytes: 0,
        reached,
        surfaced_at,
        parameters: &parameters,
        optimizer_state: w.optimizer_state,
        limits: crate::backend::memory_limits(&w.device),
        at_failure: crate::backend::memory_usage(&w.device),
        pools: &pools,
        highest,
    });
    report.phases_observed = phases_observed;
    if w.parameters.is_none() {
        report.not_observed.push(
            "the model's parameters: no optimizer was wrapped with the model (LearnerProfiler::optimizer)".to_owned(),
        );
    }
    if w.settings.batch_size.is_none() {
        report.not_observed.push("the batch size: declare it with the session's batch_size".to_owned());
    }
    report
        .not_observed
        .push("the input batch's bytes: burn-train's loader threads build the batches on the device".to_owned());
    report.not_observed.push(format!(
        "the step whose allocation failed: burn-train's loop does not wait for the device, so step {step} is where \
         the failure surfaced, and the allocation may be an earlier step's"
    ));
    report
}
