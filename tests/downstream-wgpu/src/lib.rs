//! steptrace-burn with its `wgpu` backend only.
//!
//! This crate exists to be built by `scripts/test`: `cargo tree` must show no CUDA crate
//! (`cudarc`, `cubecl-cuda`, `cubecl-llvm`, `burn-cuda`) under it, and `cargo check` must
//! pass, which proves that steptrace-burn's backend features really gate the backends. What
//! it calls covers the backend-specific API that stays: selection, the device it opens, and
//! burn's name for the backend there.

use steptrace_burn::backend::{self, BackendChoice, BackendError};

/// Selects wgpu, opens its device and names the backend stack burn runs there
/// (`dispatch<autodiff<fusion<cubecl<wgpu>>>>`-like).
pub fn wgpu_backend_name() -> Result<String, BackendError> {
    let selection = backend::select(BackendChoice::Wgpu)?;
    let device = selection.device()?.autodiff();
    Ok(backend::backend_runtime_name(&device))
}
