//! The `--json` of a `train` run whose step failed (its console lines are steptrace-burn's
//! [`StepFailure::print`]).

use steptrace_burn::failure::oom::OutOfMemory;
use steptrace_burn::StepFailure;

/// The `--json` of a failed run.
#[derive(serde::Serialize)]
pub(crate) struct FailedRun<'a> {
    /// Always `failed`.
    pub(crate) outcome: &'static str,
    pub(crate) step: u64,
    /// The cause, as its message says it.
    pub(crate) error: String,
    pub(crate) traces: &'a [steptrace::SavedTrace],
    /// Cycles left as the `.partial` files they were streamed to (a failed host allocation).
    pub(crate) kept_partial: &'a [std::path::PathBuf],
    pub(crate) trace_errors: Vec<String>,
    pub(crate) out_of_memory: Option<&'a OutOfMemory>,
}

impl<'a> FailedRun<'a> {
    pub(crate) fn of(f: &'a StepFailure) -> FailedRun<'a> {
        FailedRun {
            outcome: "failed",
            step: f.step,
            error: f.cause.to_string(),
            traces: &f.traces,
            kept_partial: &f.kept,
            trace_errors: f.trace_errors.iter().map(ToString::to_string).collect(),
            out_of_memory: f.out_of_memory.as_ref(),
        }
    }
}

/// `--json` of a run refused before its first step for the host memory it would need.
#[derive(serde::Serialize)]
pub(crate) struct RefusedRun<'a> {
    /// Always `refused`.
    pub(crate) outcome: &'static str,
    pub(crate) error: &'a str,
    /// What it would have needed and what the process may use, bytes.
    pub(crate) host_memory: Option<HostMemory<'a>>,
    /// Always empty: nothing ran, nothing was recorded.
    pub(crate) traces: [(); 0],
}

/// The estimate a refusal rests on.
#[derive(serde::Serialize)]
pub(crate) struct HostMemory<'a> {
    pub(crate) what: &'a str,
    /// At least this much (the estimate counts activations only).
    pub(crate) needed_at_least: u128,
    pub(crate) available: u64,
}

impl<'a> RefusedRun<'a> {
    pub(crate) fn of(error: &'a str, refused: &'a steptrace_workload::ConfigError) -> RefusedRun<'a> {
        let host_memory = match refused {
            steptrace_workload::ConfigError::TooLarge { what, bytes, available } => {
                Some(HostMemory { what, needed_at_least: *bytes, available: *available })
            }
            _ => None,
        };
        RefusedRun { outcome: "refused", error, host_memory, traces: [] }
    }
}
