//! The workload's errors: the session's, and what only a bundled run can get wrong.

/// Errors from a run of the bundled workload.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The session failed, or a step of it did ([`steptrace_burn::Error`]).
    #[error(transparent)]
    Session(#[from] steptrace_burn::Error),
    /// A dataset could not be loaded.
    #[error(transparent)]
    Data(#[from] steptrace_datasets::DatasetError),
    /// The run's settings fail [`RunConfig::validate`](crate::RunConfig::validate) or do not
    /// fit the data.
    #[error("invalid run configuration: {0}")]
    Config(#[from] crate::config::ConfigError),
    /// The initial state could not be saved, read, or fit to the run.
    #[error(transparent)]
    Init(#[from] crate::init::InitError),
    /// The loader could not start.
    #[error(transparent)]
    Loader(#[from] steptrace_burn::data::LoaderError),
}

impl Error {
    /// The exit status a program ends with for this error ([`steptrace_burn::Error::exit_code`]).
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Session(e) => e.exit_code(),
            _ => 1,
        }
    }
}

impl From<steptrace_burn::backend::BackendError> for Error {
    fn from(e: steptrace_burn::backend::BackendError) -> Self {
        Error::Session(e.into())
    }
}

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
