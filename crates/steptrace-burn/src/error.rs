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
    /// A loader thread stopped unexpectedly.
    #[error("data loader: {0}")]
    Loader(String),
    /// The backend reported an execution error.
    #[error("backend execution failed at step {step}: {reason}")]
    Execution {
        /// The step that failed.
        step: u64,
        /// The backend's explanation.
        reason: String,
    },
}

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
