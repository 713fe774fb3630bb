//! The names of burn's and cubecl's internal operations, for the report.
//!
//! With `--detail internals`, burn's `tracing` feature writes spans named
//! after its functions; the report's upload and launch checks need to know
//! which of them upload data and which launch kernels. The core crate knows
//! no backend, so this table is registered with
//! [`ReportOptions::ops`](steptrace::analysis::ReportOptions::ops).

use steptrace::analysis::BackendOps;

/// Span names of burn 0.22 (autodiff, fusion, cubecl 0.11) that upload data to
/// the device.
pub const UPLOADS: &[&str] =
    &["write_to_gpu", "float_from_data", "int_from_data", "bool_from_data", "float_to_device", "int_to_device"];

/// Span names of cubecl 0.11 that launch a kernel.
pub const LAUNCHES: &[&str] = &["launch_inner"];

/// burn's table for the report.
///
/// ```
/// let ops = steptrace_burn::ops::report_ops();
/// assert!(ops.launches.iter().any(|n| n == "launch_inner"));
/// ```
#[must_use]
pub fn report_ops() -> BackendOps {
    BackendOps::new(UPLOADS.iter().copied(), LAUNCHES.iter().copied())
}
