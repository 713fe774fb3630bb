//! The concrete autodiff backends [`run_on`](super::run_on) instantiates, and their names.
//!
//! Each type exists only with its feature (`cuda`, `wgpu`, `cpu`).

use std::panic::{self, AssertUnwindSafe};

use burn::tensor::backend::Backend;

use super::BackendKind;

/// The CUDA training backend: `Autodiff<Fusion<CubeBackend<CudaRuntime, f32, i32, u8>>>`.
#[cfg(feature = "cuda")]
pub type CudaAutodiff = burn::backend::Autodiff<burn::backend::Cuda>;
/// The wgpu training backend: `Autodiff<Fusion<CubeBackend<WgpuRuntime, f32, i32, u32>>>`.
#[cfg(feature = "wgpu")]
pub type WgpuAutodiff = burn::backend::Autodiff<burn::backend::Wgpu>;
/// The CPU training backend: `Autodiff<NdArray<f32, i64, i8>>`.
#[cfg(feature = "cpu")]
pub type CpuAutodiff = burn::backend::Autodiff<burn::backend::NdArray>;

/// burn's own name for the backend stack on `device`, e.g. `autodiff<fusion<cubecl<cuda>>>`
/// or `autodiff<ndarray>` (`Backend::name`). For cubecl backends this creates the device
/// client if it does not exist yet, so call it inside [`BackendRun::run`](super::BackendRun::run).
/// Never panics (a panic yields `"<unknown: ...>"`).
pub fn backend_runtime_name<B: Backend>(device: &B::Device) -> String {
    panic::catch_unwind(AssertUnwindSafe(|| B::name(device)))
        .unwrap_or_else(|p| format!("<unknown: {}>", super::guard::panic_message(p.as_ref())))
}

/// The concrete autodiff backend type [`run_on`](super::run_on) uses for `kind`, shortened
/// with [`short_type_name`], e.g.
/// `Autodiff<Fusion<CubeBackend<CudaRuntime, f32, i32, u8>>, NoCheckpointing>`; for a
/// backend that is not compiled in, `<not compiled in: steptrace-burn was built without its
/// `cuda` feature>`.
pub fn backend_type_name(kind: BackendKind) -> String {
    match kind {
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => short_type_name(std::any::type_name::<CudaAutodiff>()),
        #[cfg(feature = "wgpu")]
        BackendKind::Wgpu => short_type_name(std::any::type_name::<WgpuAutodiff>()),
        #[cfg(feature = "cpu")]
        BackendKind::Cpu => short_type_name(std::any::type_name::<CpuAutodiff>()),
        // Unreachable when every backend feature is on (the default build).
        #[allow(unreachable_patterns)]
        not_compiled => format!("<not compiled in: {}>", not_compiled.not_compiled_reason()),
    }
}

/// Drops the module paths from a `std::any::type_name`:
/// `burn_autodiff::backend::Autodiff<burn_ndarray::backend::NdArray>` →
/// `Autodiff<NdArray>`.
pub fn short_type_name(full: &str) -> String {
    let mut out = String::with_capacity(full.len());
    let mut segment_start = 0;
    for (i, c) in full.char_indices() {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            continue;
        }
        push_last_segment(&mut out, &full[segment_start..i]);
        out.push(c);
        segment_start = i + c.len_utf8();
    }
    push_last_segment(&mut out, &full[segment_start..]);
    out
}

fn push_last_segment(out: &mut String, path: &str) {
    out.push_str(path.rsplit("::").next().unwrap_or(path));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_are_short_and_concrete() {
        assert_eq!(
            short_type_name("a::b::Autodiff<c::NdArray<f32, i64>, d::e::NoCheckpointing>"),
            "Autodiff<NdArray<f32, i64>, NoCheckpointing>"
        );
        #[cfg(feature = "cuda")]
        {
            let cuda = backend_type_name(BackendKind::Cuda);
            assert!(cuda.starts_with("Autodiff<Fusion<CubeBackend<CudaRuntime"), "{cuda}");
        }
        #[cfg(feature = "wgpu")]
        {
            let wgpu = backend_type_name(BackendKind::Wgpu);
            assert!(wgpu.contains("WgpuRuntime"), "{wgpu}");
        }
        #[cfg(feature = "cpu")]
        {
            let cpu = backend_type_name(BackendKind::Cpu);
            assert!(cpu.starts_with("Autodiff<NdArray"), "{cpu}");
        }
        for kind in BackendKind::ALL.into_iter().filter(|k| !k.is_compiled()) {
            let name = backend_type_name(kind);
            assert!(name.starts_with("<not compiled in: "), "{name}");
        }
    }
}
