//! The backend each [`BackendKind`] runs on, and its names.
//!
//! burn 0.22 has one tensor type for every backend: the device, a runtime value, says which
//! backend runs it (burn's `Dispatch`). So there are no backend types to instantiate here,
//! only devices (see [`Selection::device`](super::Selection::device)) and what burn stacks
//! behind each of them.

use std::panic::{self, AssertUnwindSafe};

use burn::backend::{Backend, Dispatch};
use burn::prelude::Device;

use super::BackendKind;

/// burn's own name for the backend stack on `device`, e.g.
/// `dispatch<autodiff<fusion<cubecl<cuda>>>>` or `dispatch<autodiff<flex>>`
/// (`Backend::name`). For cubecl backends this creates the device client if it does not
/// exist yet, so call it once the device is open ([`Selection::device`](super::Selection::device)).
/// Never panics (a panic yields `"<unknown: ...>"`).
pub fn backend_runtime_name(device: &Device) -> String {
    panic::catch_unwind(AssertUnwindSafe(|| Dispatch::name(device.as_dispatch())))
        .unwrap_or_else(|p| format!("<unknown: {}>", super::guard::panic_message(p.as_ref())))
}

/// What burn runs for `kind` in a training run: the backend stack behind the autodiff device
/// that [`Selection::device`](super::Selection::device) opens, e.g.
/// `Autodiff<Fusion<CubeBackend<CudaRuntime>>>`; for a backend that is not compiled in,
/// `<not compiled in: steptrace-burn was built without its `cuda` feature>`.
pub fn backend_type_name(kind: BackendKind) -> String {
    if !kind.is_compiled() {
        return format!("<not compiled in: {}>", kind.not_compiled_reason());
    }
    match kind {
        BackendKind::Cuda => "Autodiff<Fusion<CubeBackend<CudaRuntime>>>",
        BackendKind::Wgpu => "Autodiff<Fusion<CubeBackend<WgpuRuntime>>>",
        BackendKind::Cpu => "Autodiff<Flex>",
    }
    .to_owned()
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
        for kind in BackendKind::ALL {
            let name = backend_type_name(kind);
            if kind.is_compiled() {
                assert!(name.starts_with("Autodiff<"), "{name}");
            } else {
                assert!(name.starts_with("<not compiled in: "), "{name}");
            }
        }
    }

    /// burn names the stack on a real device: on the CPU, autodiff over burn-flex.
    #[cfg(feature = "cpu")]
    #[test]
    fn the_runtime_name_comes_from_the_device() {
        let name = backend_runtime_name(&Device::flex().autodiff());
        assert!(name.contains("flex") && name.contains("autodiff"), "{name}");
    }
}
