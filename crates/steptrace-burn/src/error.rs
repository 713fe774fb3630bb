//! The crate's errors: what can go wrong in a profiled loop of your own.

use crate::failure::StepFailure;

/// Errors from a [`Session`](crate::Session) and the loop it profiles.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The requested backend is not available here.
    #[error(transparent)]
    Backend(#[from] crate::backend::BackendError),
    /// The profiler or its sink failed.
    #[error(transparent)]
    Profiler(#[from] steptrace::Error),
    /// The schedule given to [`SessionBuilder::schedule`](crate::SessionBuilder::schedule) is
    /// not one.
    #[error("schedule {text:?}: {source}")]
    Schedule {
        /// The text as given.
        text: String,
        /// Why it is not a schedule.
        #[source]
        source: steptrace::ScheduleError,
    },
    /// The Ctrl-C handlers could not be installed ([`SignalHandling::Install`](crate::SignalHandling::Install)).
    #[error("cannot install the Ctrl-C handler: {0}")]
    Signals(#[source] std::io::Error),
    /// The [`Loader`](crate::data::Loader) could not read a batch.
    #[error(transparent)]
    Loader(#[from] crate::data::LoaderError),
    /// A step failed inside the training loop: the cycle in progress was saved as cut short,
    /// and, where the device ran out of memory, what it held and asked for is explained.
    #[error("{0}")]
    StepFailed(Box<StepFailure>),
    /// A signal (Ctrl-C, SIGTERM, SIGHUP) asked the run to stop: it ended after the current
    /// step, with the cycle in progress saved as cut short. The summary says what ran and
    /// what was written.
    #[error("{}", summary.interrupted.as_deref().unwrap_or("interrupted"))]
    Interrupted {
        /// The signal's number (2 for SIGINT, 15 for SIGTERM).
        signal: usize,
        /// The run so far: its steps, and the traces saved.
        summary: Box<crate::RunSummary>,
    },
    /// The session takes no more steps: it failed, was interrupted, or finished.
    #[error("the session has ended: {0}")]
    Ended(Ended),
}

impl Error {
    /// The exit status a program ends with for this error, by the shell's convention: 128 +
    /// the signal for an interruption (130 for Ctrl-C), else 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Interrupted { signal, .. } => crate::signals::exit_code(*signal),
            _ => 1,
        }
    }
}

/// Why a session takes no more steps ([`Error::Ended`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Ended {
    /// A step failed.
    #[error("step {step} failed")]
    Failed {
        /// The step.
        step: u64,
    },
    /// A signal stopped the run after a step.
    #[error("interrupted ({}) after step {step}", crate::signals::signal_name(*signal))]
    Interrupted {
        /// The signal's number.
        signal: usize,
        /// The last step that ran.
        step: u64,
    },
    /// [`Session::finish`](crate::Session::finish) was called.
    #[error("the session finished")]
    Finished,
    /// A model is loaded before the first step, not during one.
    #[error("a model is loaded before the first step, not during one")]
    ModelLoadInStep,
}

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
