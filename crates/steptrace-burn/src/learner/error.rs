//! What can go wrong when profiling a burn-train run.

/// Errors of [`LearnerProfiler`](super::LearnerProfiler).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LearnerError {
    /// A global `tracing` subscriber was already installed, so steptrace's
    /// could not be. Nothing was installed and no trace will be written.
    #[error(
        "steptrace could not install its tracing subscriber: {reason}. Only one global subscriber can exist: \
         install the profiler before `SupervisedTraining::launch` and pass `profiler.application_logger()` \
         (or `None`) to `with_application_logger`, so that burn-train does not install its own; to keep \
         another subscriber, build the layer with `ProfilerBuilder::build`, add it to yours and use \
         `LearnerProfiler::from_profiler`"
    )]
    SubscriberExists {
        /// What `tracing-subscriber` said.
        reason: String,
    },
    /// The profiler could not be built (output directory, file-name
    /// template, target directives, manifest) or a trace could not be
    /// written.
    #[error(transparent)]
    Profiler(steptrace::Error),
    /// The profiler lives on the thread that installed it; it was asked to
    /// finish from another one.
    #[error(
        "the steptrace profiler can only be finished on the thread that installed it (the thread that calls \
         `launch`); it is saved when that thread ends"
    )]
    WrongThread,
    /// The session given to [`LearnerProfiler::from_session`](super::LearnerProfiler::from_session)
    /// records nothing ([`Profiling::Off`](crate::Profiling::Off)).
    #[error("the session records nothing (built with Profiling::Off): there is no profiler to drive")]
    NoProfiler,
    /// A step failed during [`launch`](super::LearnerProfiler::launch): what went wrong, the
    /// traces saved (the cycle in progress cut short), and for lack of device memory what
    /// the run held and asked for.
    #[error("step {} failed: {}", .0.step, crate::failure::oom::brief(&.0.cause.to_string()))]
    StepFailed(Box<crate::StepFailure>),
}

impl From<steptrace::Error> for LearnerError {
    fn from(err: steptrace::Error) -> Self {
        match err {
            steptrace::Error::Install(reason) => LearnerError::SubscriberExists { reason },
            other => LearnerError::Profiler(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_install_failure_names_the_fix() {
        let err = LearnerError::from(steptrace::Error::Install(
            "a global default trace dispatcher has already been set".into(),
        ));
        let text = err.to_string();
        assert!(matches!(err, LearnerError::SubscriberExists { .. }));
        assert!(text.contains("already been set") && text.contains("with_application_logger"), "{text}");
    }
}
