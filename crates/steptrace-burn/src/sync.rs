//! Waiting for the device, inside a `sync` span: the crate's one device sync.

use std::panic::{self, AssertUnwindSafe};

use burn::prelude::Device;
use steptrace::format::names::SYNC;

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
