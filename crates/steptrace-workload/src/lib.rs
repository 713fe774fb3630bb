//! The workload `steptrace train` runs: the bundled models (MLP, ConvNet, character
//! Transformer) on the bundled datasets, driven through a [`steptrace_burn::Session`] as a
//! program of one's own would drive it.
//!
//! - [`RunConfig`] says what to train and how; [`train`] runs it on a session's builder and
//!   [`run`] runs it quietly with a profiler of the caller's.
//! - [`init`] saves the model's initial weights as a burn record and starts a run from one,
//!   checked against the run's model and shapes, so that every backend can start from the
//!   same state.
//! - After an out-of-memory, with `--memory`, two short runs at smaller batches measure what
//!   a sample needs (`oom_probe`).
//!
//! It is not published: a user's program depends on `steptrace-burn` alone.
#![warn(missing_docs)]

mod config;
pub mod data;
mod drive;
mod error;
pub mod init;
mod limits;
mod oom_probe;
mod run;
pub mod step;

pub use config::{BackendSetting, ConfigError, RunConfig};
pub use error::{Error, Result};
pub use limits::{CONVNET_MIN_SIDE, MAX_SEQ_LEN};
pub use run::{run, train, Trained};
