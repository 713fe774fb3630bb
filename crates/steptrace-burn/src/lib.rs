//! burn integration for steptrace.
//!
//! - [`Session`] profiles your own model and training loop: the backend with its labelled
//!   fallback, the profiler, the phase spans, device activity, kernel attribution to your
//!   layers, memory by category, the out-of-memory report, Ctrl-C and on-demand capture, in
//!   a few lines ([`session`] has a whole program). `steptrace train` and the burn-train
//!   wrapper ([`learner`]) are built on it.
//!
//! - [`backend`] chooses CUDA, wgpu or the CPU behind probes that cannot
//!   panic, and labels every fallback with its reason.
//! - [`Loader`] reads batches on the host in `data.load` spans, optionally
//!   on named prefetch threads.
//! - [`step`] copies a batch to the device in a `transfer.h2d` span and runs
//!   the autodiff step in a `train.step` span with `forward`, `loss`,
//!   `backward` and `optimizer` children, syncing as the [`SyncPolicy`] says.
//! - [`run`] drives it all under a [`steptrace::Profiler`] and writes the run
//!   manifest into every trace.
//! - [`peaks`] measures a device's limits (memory bandwidth, arithmetic throughput, the
//!   cost of a launch) and keeps them in a cache, which every run's traces then carry.
//! - [`init`] saves the model's initial weights as a burn record and starts
//!   a run from one, checked against the run's model and shapes, so that
//!   every backend can start from the same state.
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
mod config;
pub mod data;
pub mod device;
mod drive;
mod error;
pub mod failure;
pub mod host_oom;
pub mod init;
pub mod learner;
mod limits;
mod loader;
mod memory;
#[cfg(feature = "nvtx")]
mod nvtx;
pub mod oom;
mod oom_probe;
mod ops;
pub mod peaks;
mod private;
mod run;
pub mod session;
pub mod signals;
pub mod step;
mod summary;
pub mod sync;

pub use config::{BackendSetting, ConfigError, Mode, RunConfig, SyncPolicy};
pub use session::{Console, Session, SessionBuilder, Upload};
pub use signals::signal_name;
pub use error::{Error, Result, StepFailure};
pub use learner::{LearnerProfiler, Profiled, ProfiledBatcher};
pub use limits::{CONVNET_MIN_SIDE, MAX_SEQ_LEN};
pub use loader::Loader;
pub use ops::report_ops;
pub use private::{tilde as home_relative, tilde_str as home_relative_str};
pub use run::{run, train, BURN_VERSION};
pub use step::StepError;
/// A span around one layer's forward: [`steptrace::layer`] (a closure) and
/// [`steptrace::layer_span`] (a guard).
pub use steptrace::{layer, layer_span};
#[cfg(feature = "attribution")]
pub use attribute::StampLayer;
#[cfg(feature = "nvtx")]
pub use nvtx::{NvtxLayer, NVTX_DOMAIN};
pub use summary::{startup_steps, Anomaly, RunSummary, Stats, StepRecord};
