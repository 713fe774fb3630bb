//! burn integration for steptrace.
//!
//! - [`Session`] profiles your own model and training loop: the backend with its labelled
//!   fallback, the profiler, the phase spans, device activity, kernel attribution to your
//!   layers, memory by category, the out-of-memory report, Ctrl-C and on-demand capture, in
//!   a few lines ([`Session`] has a whole program). `steptrace train` and the burn-train
//!   wrapper ([`learner`]) are built on it.
//!
//! - [`backend`] chooses CUDA, wgpu or the CPU behind probes that cannot
//!   panic, and labels every fallback with its reason.
//! - [`data`]: a [`BatchSource`](data::BatchSource) of your data and the
//!   [`Loader`](data::Loader) that reads it in `data.load` spans, optionally on named
//!   prefetch threads.
//! - [`LearnerProfiler`] profiles a burn-train `Learner` ([`learner`]).
//! - [`peaks`] measures a device's limits (memory bandwidth, arithmetic throughput, the
//!   cost of a launch) and keeps them in a cache, which every run's traces then carry.
//! - [`failure`]: a step that fails comes back as [`Error::StepFailed`] with what was saved;
//!   [`failure::oom`] explains one that ran out of memory, and [`failure::host_oom`] does it
//!   for the CPU backend, whose failed allocations abort the process otherwise.
//!
//! Nothing global happens until [`SessionBuilder::start`]: the session installs its
//! `tracing` subscriber there, and Ctrl-C handlers and console lines only when asked
//! ([`SessionBuilder::signals`], [`SessionBuilder::console`]).
#![warn(missing_docs)]

#[cfg(feature = "attribution")]
mod attribute;

/// What keeps steptrace's own spans going through tracing
/// ([`Profiler::record_own_spans_directly`](steptrace::Profiler::record_own_spans_directly)):
/// kernel attribution's stamp layer, while a window records it.
#[cfg(feature = "attribution")]
pub(crate) const DIRECT_VETO: Option<fn() -> bool> = Some(attribute::recording);
#[cfg(not(feature = "attribution"))]
pub(crate) const DIRECT_VETO: Option<fn() -> bool> = None;
pub mod backend;
pub mod console;
pub mod data;
pub mod device;
mod error;
pub mod failure;
pub mod learner;
mod memory;
pub mod modules;
#[cfg(feature = "nvtx")]
mod nvtx;
pub mod ops;
pub mod peaks;
mod session;
pub mod signals;
pub mod summary;
pub mod sync;

/// The README's example, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The burn release line this crate is built for (any 0.22.x).
pub const BURN_VERSION: &str = "0.22";

#[cfg(feature = "attribution")]
pub use attribute::StampLayer;
pub use console::Console;
pub use error::{Ended, Error, Result};
pub use failure::{StepError, StepFailure};
pub use learner::LearnerProfiler;
#[cfg(feature = "nvtx")]
pub use nvtx::{NvtxLayer, NVTX_DOMAIN};
pub use session::{
    BackendRequest, IntoSchedule, Profiling, Session, SessionBuilder, SignalHandling, Upload, UploadSize,
    DEFAULT_SCHEDULE,
};
/// A span around one layer's forward: [`steptrace::layer`] (a closure) and
/// [`steptrace::layer_span`] (a guard).
pub use steptrace::{layer, layer_span};
pub use summary::{Mode, RunSummary, StepRecord};
pub use sync::SyncPolicy;
