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
}
