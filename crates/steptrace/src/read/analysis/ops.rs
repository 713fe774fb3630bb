//! Backend-specific operation names, registered by the backend crate.
//!
//! The report's upload and launch checks need to know which span names a
//! backend's internals use (with burn: cubecl's `launch_inner`, burn's
//! `float_to_device`, ...). The core does not know any backend: the crate
//! that does registers a [`BackendOps`] table through
//! [`ReportOptions::ops`](super::ReportOptions::ops). CUDA's own API names
//! (`cuLaunchKernel`, `cudaLaunchKernel`) and Kineto's copy events are part
//! of the trace vocabulary and are always recognised.

/// Span names of a backend's internals.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackendOps {
    /// Host-side calls that upload data to the device.
    pub uploads: Vec<String>,
    /// Host-side calls that launch a kernel.
    pub launches: Vec<String>,
}

impl BackendOps {
    /// A table of upload and launch span names.
    ///
    /// ```
    /// use steptrace::analysis::BackendOps;
    /// let ops = BackendOps::new(["float_to_device"], ["launch_inner"]);
    /// assert_eq!(ops.launches, ["launch_inner"]);
    /// ```
    pub fn new<U, L>(uploads: U, launches: L) -> BackendOps
    where
        U: IntoIterator,
        U::Item: Into<String>,
        L: IntoIterator,
        L::Item: Into<String>,
    {
        BackendOps {
            uploads: uploads.into_iter().map(Into::into).collect(),
            launches: launches.into_iter().map(Into::into).collect(),
        }
    }
}
