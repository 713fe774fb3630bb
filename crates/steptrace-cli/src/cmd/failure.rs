//! The `--json` of a `train` run whose step failed (its console lines are steptrace-burn's
//! [`failure::print`](steptrace_burn::failure::print)).

use steptrace_burn::oom::OutOfMemory;
use steptrace_burn::StepFailure;

/// The `--json` of a failed run.
#[derive(serde::Serialize)]
pub(crate) struct FailedRun<'a> {
    /// Always `failed`.
    pub(crate) outcome: &'static str,
    pub(crate) step: u64,
    pub(crate) error: &'a str,
    pub(crate) traces: &'a [steptrace::SavedTrace],
    pub(crate) trace_errors: &'a [String],
    pub(crate) out_of_memory: Option<&'a OutOfMemory>,
}

impl<'a> FailedRun<'a> {
    pub(crate) fn of(f: &'a StepFailure) -> FailedRun<'a> {
        FailedRun {
            outcome: "failed",
            step: f.step,
            error: &f.error,
            traces: &f.traces,
            trace_errors: &f.trace_errors,
            out_of_memory: f.out_of_memory.as_ref(),
        }
    }
}
