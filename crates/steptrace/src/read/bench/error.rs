//! The bench error type.

/// Why a bench result could not be built or compared.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// A result has no run with measured steps.
    #[error("a bench result needs at least one run with measured steps")]
    NoRun,
    /// The fingerprints differ in more than the declared variables.
    #[error(
        "refusing to compare: the workloads also differ in {differences}; only the declared variable ({declared}) \
         may differ, so that the difference can be attributed to it"
    )]
    Undeclared {
        /// The undeclared differences, `key (a vs b)`.
        differences: String,
        /// The declared variables.
        declared: String,
    },
    /// The result is of a newer format than this crate reads: its fields
    /// may mean what this crate cannot know.
    #[error(
        "the bench result is in format {found}, newer than this steptrace reads ({supported}); use a newer steptrace"
    )]
    NewerFormat {
        /// The format tag found.
        found: String,
        /// The one this crate reads.
        supported: &'static str,
    },
    /// The `format` tag is not that of a steptrace bench result.
    #[error("not a steptrace bench result: its format is {found:?}, not {supported}")]
    UnknownFormat {
        /// The format tag found.
        found: String,
        /// The one this crate reads.
        supported: &'static str,
    },
    /// The JSON does not hold a bench result.
    #[error("not a steptrace bench result: {0}")]
    Json(#[source] serde_json::Error),
    /// A time or count no measurement can give: zero, negative or not
    /// finite.
    #[error("{what} is {value}: a bench result holds positive, finite times (and a batch size of at least 1)")]
    Invalid {
        /// Which figure, for example `run 2 median_ms`.
        what: String,
        /// Its value.
        value: f64,
    },
}
