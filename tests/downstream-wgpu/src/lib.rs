//! steptrace-burn with its `wgpu` backend only.
//!
//! This crate exists to be built by `scripts/test`: `cargo tree` must show no CUDA crate
//! (`cudarc`, `cubecl-cuda`, `burn-cuda`) under it, and `cargo check` must pass, which
//! proves that steptrace-burn's backend features really gate the backends. What it calls
//! covers the backend-specific API that stays: the wgpu backend type, selection, and
//! dispatch of a generic job.

use burn::tensor::backend::AutodiffBackend;
use steptrace_burn::backend::{self, BackendChoice, BackendError, BackendRun, Selection, WgpuAutodiff};

/// The concrete wgpu training backend of this build.
pub type Backend = WgpuAutodiff;

/// The name of the backend type a job runs on.
struct TypeName;

impl BackendRun for TypeName {
    type Output = &'static str;

    fn run<B: AutodiffBackend>(self, _device: B::Device, _info: &Selection) -> &'static str {
        std::any::type_name::<B>()
    }
}

/// Selects wgpu and names the backend type a job runs on there.
pub fn wgpu_type_name() -> Result<&'static str, BackendError> {
    let selection = backend::select(BackendChoice::Wgpu)?;
    backend::run_on(&selection, TypeName)
}
