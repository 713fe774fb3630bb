//! Waiting for the device, inside a `sync` span: the crate's one device sync, and the
//! [`SyncPolicy`] that says when a loop waits.

use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use burn::prelude::Device;
use steptrace::format::names::SYNC;

/// A setting's name that is not one of its values (`--sync`, `--mode`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{name}` (valid: {valid})")]
pub struct UnknownSetting {
    /// The setting (`sync policy`, `mode`).
    pub what: &'static str,
    /// The name given, trimmed and lower-cased.
    pub name: String,
    /// The names it takes.
    pub valid: &'static str,
}

/// A device sync that failed, with the backend's explanation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct SyncError {
    /// What the backend said (or the panic's message).
    pub reason: String,
}

/// Waits for all work queued by this thread on `device`, in a `sync` span.
///
/// cubecl gives each thread its own stream: this covers the calling
/// thread's work only. A failure is returned as a [`SyncError`], never a
/// panic: a backend that panics while syncing yields `"panicked: <message>"`.
///
/// What it reports is a device fault. A failed allocation or launch is not one: burn (cubecl
/// 0.11) keeps it on the tensors the work would have written, and reports it where one of
/// them is read (`Tensor::try_into_data`), so this returns `Ok` after it. Read a tensor the
/// step made (its loss) to learn whether the step's work ran, as a
/// [`Session`](crate::Session) does at the end of its startup steps.
pub fn sync(device: &Device) -> Result<(), SyncError> {
    let _sync = steptrace::own_span!(SYNC);
    match panic::catch_unwind(AssertUnwindSafe(|| device.sync())) {
        Ok(result) => result.map_err(|e| SyncError { reason: e.to_string() }),
        Err(payload) => {
            Err(SyncError { reason: format!("panicked: {}", crate::backend::panic_message(payload.as_ref())) })
        }
    }
}

/// When the training loop waits for the device.
///
/// Device work is asynchronous: without a sync a span measures only the
/// host's launch of the work. Every sync is its own `sync` span.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncPolicy {
    /// Never sync: spans measure host-side launch only.
    None,
    /// Sync once at the end of each step, so `ProfilerStep#N` is the true
    /// step time (the default).
    #[default]
    Step,
    /// Sync after each phase, giving device time per phase; this removes
    /// real overlap between phases and changes the program being measured.
    Phase,
}

impl SyncPolicy {
    /// What spans mean under this policy, as written into every trace.
    pub fn meaning(self) -> &'static str {
        match self {
            SyncPolicy::None => "no sync: spans measure host-side launch only; device time is not observed",
            SyncPolicy::Step => "one sync at the end of each step: ProfilerStep#N is the true step time; phase spans are host launch time",
            SyncPolicy::Phase => "sync after every phase: phase spans include device time, but the syncs remove real overlap between phases",
        }
    }
}

impl fmt::Display for SyncPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SyncPolicy::None => "none",
            SyncPolicy::Step => "step",
            SyncPolicy::Phase => "phase",
        })
    }
}

impl FromStr for SyncPolicy {
    type Err = UnknownSetting;
    fn from_str(s: &str) -> Result<Self, UnknownSetting> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(SyncPolicy::None),
            "step" => Ok(SyncPolicy::Step),
            "phase" => Ok(SyncPolicy::Phase),
            other => Err(UnknownSetting { what: "sync policy", name: other.to_owned(), valid: "none, step, phase" }),
        }
    }
}
