//! Waiting for the device, inside a `sync` span.

use burn::tensor::backend::Backend;

/// Waits for all work queued by this thread on `device`, in a `sync` span.
///
/// cubecl gives each thread its own stream: this covers the calling
/// thread's work only. A failure is returned as text, never a panic.
pub fn sync<B: Backend>(device: &B::Device) -> Result<(), String> {
    let _sync = tracing::info_span!(target: "steptrace", "sync").entered();
    B::sync(device).map_err(|e| e.to_string())
}
