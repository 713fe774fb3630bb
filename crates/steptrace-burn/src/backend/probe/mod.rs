//! Availability probes for the CUDA, wgpu and CPU backends. None of them can panic.
//!
//! The CUDA probe (`cuda.rs`) and the wgpu probe (`wgpu_adapters.rs`) exist only with their
//! features; a backend that was not compiled in probes as unavailable and says so.

// A build without any backend feature probes nothing successfully: the helpers that record
// a passed probe are unused there.
#![cfg_attr(not(any(feature = "cuda", feature = "wgpu", feature = "cpu")), allow(dead_code))]

use std::sync::atomic::{AtomicBool, Ordering};

use super::BackendKind;

#[cfg(feature = "cuda")]
mod cuda;

/// The kernel compiler of this build's CUDA backend (cubecl-cuda 0.11: LLVM NVPTX by
/// default, NVRTC with its `cpp` feature), or `None` without the `cuda` feature.
pub fn cuda_kernel_compiler() -> Option<&'static str> {
    #[cfg(feature = "cuda")]
    return Some(cuda::kernel_compiler());
    #[cfg(not(feature = "cuda"))]
    None
}
#[cfg(feature = "wgpu")]
mod wgpu_adapters;

#[cfg(feature = "wgpu")]
pub(crate) use wgpu_adapters::probe_wgpu;

/// What a probe found out about one backend on this machine.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Probe {
    /// The backend probed.
    pub kind: BackendKind,
    /// Whether the backend can run here.
    pub available: bool,
    /// Why it cannot run (e.g. `"libcuda.so not found ..."`); `None` when available.
    pub reason: Option<String>,
    /// The device the backend would use, e.g. `"NVIDIA H200"` or
    /// `"llvmpipe (LLVM 15.0.6, 256 bits) [Vulkan, Cpu]"`; may be set even when unavailable
    /// (a CUDA GPU whose toolkit headers are missing).
    pub device: Option<String>,
    /// Further facts, in probe order (`("devices", "2")`, `("adapter[0]", "...")`, ...).
    pub details: Vec<(String, String)>,
}

impl Probe {
    fn new(kind: BackendKind) -> Self {
        Probe { kind, available: false, reason: None, device: None, details: Vec::new() }
    }

    /// The probe of a backend this build does not contain.
    fn not_compiled(kind: BackendKind) -> Self {
        Probe::new(kind).fail(kind.not_compiled_reason())
    }

    fn detail(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.details.push((key.into(), value.into()));
    }

    fn fail(mut self, reason: impl Into<String>) -> Self {
        self.available = false;
        self.reason = Some(reason.into());
        self
    }

    fn pass(mut self) -> Self {
        self.available = true;
        self.reason = None;
        note_usable(self.kind);
        self
    }

    /// The reason, or `"available"`, for messages.
    pub fn reason_or_ok(&self) -> &str {
        match &self.reason {
            Some(r) => r,
            None if self.available => "available",
            None => "unavailable",
        }
    }
}

/// Probes one backend. Never panics; a panic inside a dependency becomes an unavailable
/// [`Probe`] whose reason carries the panic message.
///
/// * CUDA: loads `libcuda` (cuInit, device count, name of device 0), finds the CUDA toolkit
///   exactly as cubecl does (`$CUDA_PATH`, `/usr/local/cuda`, `/opt/cuda`, `/usr` if
///   `/usr/bin/nvcc` exists) and requires `include/cuda_runtime.h`, then compiles a tiny
///   kernel that includes `<cuda_runtime.h>` with NVRTC, as cubecl does for every kernel.
///   Creates no CUDA context.
/// * wgpu: enumerates the adapters of the graphics API cubecl uses (Vulkan; Metal on macOS).
/// * CPU: always available.
///
/// A backend whose feature was off when steptrace-burn was built is unavailable, with the
/// reason "steptrace-burn was built without its `X` feature".
pub fn probe(kind: BackendKind) -> Probe {
    match kind {
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => cuda::probe_cuda(),
        #[cfg(feature = "wgpu")]
        BackendKind::Wgpu => probe_wgpu().0,
        #[cfg(feature = "cpu")]
        BackendKind::Cpu => probe_cpu(),
        // Unreachable when every backend feature is on (the default build).
        #[allow(unreachable_patterns)]
        not_compiled => Probe::not_compiled(not_compiled),
    }
}

/// Probes every backend, in `auto`'s order of preference (for `steptrace backends`).
pub fn probe_all() -> Vec<Probe> {
    BackendKind::ALL.into_iter().map(probe).collect()
}

// ---------------------------------------------------------------------------------------
// Known-usable flags: memory queries only touch a runtime that a probe has vouched for.

static USABLE: [AtomicBool; 3] = [AtomicBool::new(false), AtomicBool::new(false), AtomicBool::new(false)];

fn slot(kind: BackendKind) -> &'static AtomicBool {
    match kind {
        BackendKind::Cuda => &USABLE[0],
        BackendKind::Wgpu => &USABLE[1],
        BackendKind::Cpu => &USABLE[2],
    }
}

/// Records that `kind` passed a probe (or is being run) in this process.
pub(crate) fn note_usable(kind: BackendKind) {
    slot(kind).store(true, Ordering::Relaxed);
}

/// Whether `kind` passed a probe (or was run) in this process.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub(crate) fn known_usable(kind: BackendKind) -> bool {
    slot(kind).load(Ordering::Relaxed)
}

// ---------------------------------------------------------------------------------------
// CPU

#[cfg(feature = "cpu")]
fn probe_cpu() -> Probe {
    let mut p = Probe::new(BackendKind::Cpu);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let model = cpu_model();
    p.device = Some(match &model {
        Some(m) => format!("{m} ({threads} threads, burn-flex)"),
        None => format!("CPU ({threads} threads, burn-flex)"),
    });
    p.detail("threads", threads.to_string());
    if let Some(m) = model {
        p.detail("cpu_model", m);
    }
    p.pass()
}

/// The CPU model name from `/proc/cpuinfo` (Linux only).
#[cfg(feature = "cpu")]
fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "cpu")]
    #[test]
    fn cpu_is_always_available() {
        let p = probe(BackendKind::Cpu);
        assert!(p.available);
        assert!(p.reason.is_none());
        assert!(p.device.as_deref().is_some_and(|d| d.contains("burn-flex")));
    }

    #[test]
    fn probe_all_covers_every_kind_in_order() {
        let kinds: Vec<_> = probe_all().into_iter().map(|p| p.kind).collect();
        assert_eq!(kinds, BackendKind::ALL.to_vec());
    }

    /// A backend that is not compiled in is reported, not panicked on.
    #[test]
    fn backends_not_compiled_in_say_so() {
        for kind in BackendKind::ALL.into_iter().filter(|k| !k.is_compiled()) {
            let p = probe(kind);
            assert!(!p.available);
            let reason = p.reason.unwrap_or_default();
            assert!(reason.contains(&format!("built without its `{}` feature", kind.feature())), "{reason}");
        }
    }
}
