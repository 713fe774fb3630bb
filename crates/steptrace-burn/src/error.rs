//! The burn crate's error type.

/// Errors from a steptrace training or inference run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The requested backend is not available here.
    #[error(transparent)]
    Backend(#[from] crate::backend::BackendError),
    /// A dataset could not be loaded.
    #[error(transparent)]
    Data(#[from] steptrace_datasets::DatasetError),
    /// The profiler or its sink failed.
    #[error(transparent)]
    Profiler(#[from] steptrace::Error),
    /// The run's configuration is inconsistent.
    #[error("invalid run configuration: {0}")]
    Config(String),
    /// The run's settings fail [`RunConfig::validate`](crate::RunConfig::validate).
    #[error("invalid run configuration: {0}")]
    InvalidConfig(#[from] crate::config::ConfigError),
    /// The initial state could not be saved, read, or fit to the run.
    #[error(transparent)]
    Init(#[from] crate::init::InitError),
    /// A loader thread stopped unexpectedly.
    #[error("data loader: {0}")]
    Loader(String),
    /// A step failed.
    #[error("step {step} failed: {source}")]
    Execution {
        /// The step that failed.
        step: u64,
        /// What went wrong.
        #[source]
        source: crate::step::StepError,
    },
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
    #[error("the session has ended: {why}")]
    Ended {
        /// Why.
        why: String,
    },
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

/// A step that failed inside the loop, and what was saved ([`Error::StepFailed`]).
#[derive(Debug, thiserror::Error)]
#[error("step {step} failed: {error}")]
pub struct StepFailure {
    /// The step that failed.
    pub step: u64,
    /// What went wrong (without the step number).
    pub error: String,
    /// The traces the profiler saved when the run stopped (the cycle in progress is cut
    /// short, with this failure as its reason).
    pub traces: Vec<steptrace::SavedTrace>,
    /// Cycles kept as the `NAME.partial` files the profiler streamed them to, where the
    /// process ends before it can finalise them (a failed host allocation:
    /// [`host_oom`](crate::host_oom)); `report` and `inspect` read them.
    pub kept: Vec<std::path::PathBuf>,
    /// Traces the profiler could not save, and why.
    pub trace_errors: Vec<String>,
    /// Where the step ran out of device memory: the explanation.
    pub out_of_memory: Option<crate::oom::OutOfMemory>,
}

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
