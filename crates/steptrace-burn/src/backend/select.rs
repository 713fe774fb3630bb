//! Turning a [`BackendChoice`] into a labelled [`Selection`].

use std::fmt;

use super::adapter::WgpuTarget;
use super::probe::{probe, Probe};
use super::{BackendChoice, BackendError, BackendKind};

/// The backend a run will use, why, and what was skipped on the way.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Selection {
    /// The backend that will run.
    pub kind: BackendKind,
    /// The device it runs on (`"NVIDIA H200"`, `"llvmpipe (...) [Vulkan, Cpu]"`, CPU model).
    pub device: String,
    /// Why a more preferred backend was skipped (`auto` only), e.g.
    /// `"CUDA unavailable: libcuda.so not found (...)"`; `None` when nothing was skipped.
    pub fallback_reason: Option<String>,
    /// What the user asked for.
    pub requested: BackendChoice,
    /// For [`BackendKind::Wgpu`]: which `WgpuDevice` to build; `None` otherwise.
    pub wgpu_device: Option<WgpuTarget>,
    /// Every probe that was run to reach this selection, for the run manifest.
    pub probes: Vec<Probe>,
}

impl Selection {
    /// Whether `auto` had to skip a preferred backend.
    pub fn is_fallback(&self) -> bool {
        self.fallback_reason.is_some()
    }

    /// Whether the run happens on a GPU (CUDA, or wgpu on a non-CPU adapter).
    pub fn is_gpu(&self) -> bool {
        match self.kind {
            BackendKind::Cuda => true,
            BackendKind::Wgpu => !self.wgpu_device.is_some_and(WgpuTarget::is_cpu),
            BackendKind::Cpu => false,
        }
    }

    /// One line for headers and reports, e.g. `"cuda (NVIDIA H200)"`,
    /// `"wgpu (FALLBACK: CUDA unavailable: libcuda.so not found (...)) on llvmpipe (...) [Vulkan, Cpu]; CPU adapter, not a GPU"`,
    /// `"cpu (FALLBACK: CUDA unavailable: ...; wgpu unavailable: ...) on <CPU model>"`.
    ///
    /// Anything that is not CUDA either says `FALLBACK` (when `auto` skipped CUDA) or was
    /// asked for explicitly; a wgpu CPU adapter is always called out as not a GPU.
    pub fn label(&self) -> String {
        let mut label = match &self.fallback_reason {
            Some(reason) => format!("{} (FALLBACK: {reason}) on {}", self.kind, self.device),
            None => format!("{} ({})", self.kind, self.device),
        };
        if self.kind == BackendKind::Wgpu && self.wgpu_device.is_some_and(WgpuTarget::is_cpu) {
            label.push_str("; CPU adapter, not a GPU");
        }
        label
    }

    /// The concrete autodiff backend type this selection trains on, shortened
    /// (e.g. `Autodiff<Fusion<CubeBackend<CudaRuntime, f32, i32, u8>>>`).
    pub fn backend_type_name(&self) -> String {
        super::types::backend_type_name(self.kind)
    }
}

impl Selection {
    /// The selection of a device the program built itself (`Device::cuda(1)`, a wgpu device of
    /// its choosing, `Device::flex()`), autodiff or not: its kind is read from the device,
    /// and the label says that the program chose it (`cuda (the program's own device:
    /// ...)`). Nothing is probed: the device is the program's to have checked.
    ///
    /// # Errors
    ///
    /// [`BackendError::UnknownBackend`] for a device of a backend steptrace does not profile
    /// (LibTorch, remote).
    pub fn of_device(device: &burn::prelude::Device) -> Result<Selection, BackendError> {
        let plain = device.clone().inner();
        let text = format!("{:?}", plain.as_dispatch());
        let kind = own_device_kind(&text).ok_or_else(|| BackendError::UnknownBackend { name: text.clone() })?;
        Ok(Selection {
            kind,
            device: format!("the program's own device: {text}"),
            fallback_reason: None,
            requested: kind.into(),
            wgpu_device: None,
            probes: Vec::new(),
        })
    }
}

/// The backend of a device, from burn's description of it (`Cube(Cuda(..))`, `Flex(..)`).
fn own_device_kind(text: &str) -> Option<BackendKind> {
    if text.contains("Cuda") {
        Some(BackendKind::Cuda)
    } else if ["Wgpu", "Vulkan", "WebGpu", "Metal"].iter().any(|w| text.contains(w)) {
        Some(BackendKind::Wgpu)
    } else if text.starts_with("Flex") || text.starts_with("NdArray") {
        Some(BackendKind::Cpu)
    } else {
        None
    }
}

impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// Chooses the backend for `choice`. Never panics.
///
/// * `auto`: CUDA if [`probe`] passes; else wgpu on a GPU adapter (discrete, integrated,
///   virtual); else wgpu on a CPU adapter (lavapipe); else the CPU (burn-flex). Every fallback records
///   the reasons of the backends it skipped in [`Selection::fallback_reason`]. Only a build
///   without the `cpu` feature can run out of backends ([`BackendError::NoBackend`]).
/// * `cuda` / `wgpu`: that backend, or [`BackendError::Unavailable`] naming what is missing.
///   Explicit `wgpu` takes the best adapter, which may be a CPU adapter (see the label).
/// * `cpu`: burn-flex on the CPU.
///
/// A backend that is not compiled in is unavailable with the reason "steptrace-burn was
/// built without its `X` feature".
pub fn select(choice: BackendChoice) -> Result<Selection, BackendError> {
    match choice {
        BackendChoice::Cpu => {
            let cpu = probe(BackendKind::Cpu);
            if cpu.available {
                Ok(cpu_selection(choice, None, Vec::new(), cpu))
            } else {
                Err(unavailable(&cpu))
            }
        }
        BackendChoice::Cuda => {
            let p = probe(BackendKind::Cuda);
            if p.available {
                Ok(cuda_selection(choice, p))
            } else {
                Err(unavailable(&p))
            }
        }
        BackendChoice::Wgpu => match probe_wgpu_target() {
            (p, Some((target, device))) => Ok(wgpu_selection(choice, target, device, None, vec![p])),
            (p, None) => Err(unavailable(&p)),
        },
        BackendChoice::Auto => select_auto(),
    }
}

/// `auto`: CUDA, else wgpu (GPU adapter, then CPU adapter), else the CPU (burn-flex).
fn select_auto() -> Result<Selection, BackendError> {
    let choice = BackendChoice::Auto;
    let cuda = probe(BackendKind::Cuda);
    if cuda.available {
        return Ok(cuda_selection(choice, cuda));
    }
    let mut skipped = vec![format!("CUDA unavailable: {}", cuda.reason_or_ok())];
    let (wgpu, picked) = probe_wgpu_target();
    let mut probes = vec![cuda];
    if let Some((target, device)) = picked {
        if target.is_cpu() {
            skipped.push("no GPU adapter for wgpu (CPU adapter only)".to_string());
        }
        probes.push(wgpu);
        return Ok(wgpu_selection(choice, target, device, Some(skipped.join("; ")), probes));
    }
    skipped.push(format!("wgpu unavailable: {}", wgpu.reason_or_ok()));
    probes.push(wgpu);
    let cpu = probe(BackendKind::Cpu);
    if cpu.available {
        return Ok(cpu_selection(choice, Some(skipped.join("; ")), probes, cpu));
    }
    skipped.push(format!("{} unavailable: {}", BackendKind::Cpu.display_name(), cpu.reason_or_ok()));
    Err(BackendError::NoBackend { reasons: skipped.join("; ") })
}

/// Probes wgpu and, when it is available, the adapter to run on and its description.
#[cfg(feature = "wgpu")]
fn probe_wgpu_target() -> (Probe, Option<(WgpuTarget, String)>) {
    let (p, adapters) = super::probe::probe_wgpu();
    let picked = super::adapter::pick_adapter(&adapters)
        .filter(|_| p.available)
        .map(|(target, adapter)| (target, adapter.describe()));
    (p, picked)
}

/// Without the `wgpu` feature: the probe says so, and there is no adapter.
#[cfg(not(feature = "wgpu"))]
fn probe_wgpu_target() -> (Probe, Option<(WgpuTarget, String)>) {
    (probe(BackendKind::Wgpu), None)
}

fn unavailable(p: &Probe) -> BackendError {
    BackendError::Unavailable { kind: p.kind, reason: p.reason_or_ok().to_string() }
}

fn cuda_selection(requested: BackendChoice, p: Probe) -> Selection {
    Selection {
        kind: BackendKind::Cuda,
        device: p.device.clone().unwrap_or_else(|| "CUDA device 0".to_string()),
        fallback_reason: None,
        requested,
        wgpu_device: None,
        probes: vec![p],
    }
}

fn wgpu_selection(
    requested: BackendChoice,
    target: WgpuTarget,
    device: String,
    fallback_reason: Option<String>,
    probes: Vec<Probe>,
) -> Selection {
    Selection { kind: BackendKind::Wgpu, device, fallback_reason, requested, wgpu_device: Some(target), probes }
}

/// The CPU selection; `cpu` is the (passed) CPU probe, recorded after `probes`.
fn cpu_selection(
    requested: BackendChoice,
    fallback_reason: Option<String>,
    mut probes: Vec<Probe>,
    cpu: Probe,
) -> Selection {
    let device = cpu.device.clone().unwrap_or_else(|| "CPU".to_string());
    probes.push(cpu);
    Selection { kind: BackendKind::Cpu, device, fallback_reason, requested, wgpu_device: None, probes }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        let cuda = Selection {
            kind: BackendKind::Cuda,
            device: "NVIDIA H200".into(),
            fallback_reason: None,
            requested: BackendChoice::Auto,
            wgpu_device: None,
            probes: vec![],
        };
        assert_eq!(cuda.label(), "cuda (NVIDIA H200)");
        assert!(!cuda.is_fallback() && cuda.is_gpu());

        let lvp = Selection {
            kind: BackendKind::Wgpu,
            device: "llvmpipe [Vulkan, Cpu]".into(),
            fallback_reason: Some("CUDA unavailable: libcuda.so not found".into()),
            requested: BackendChoice::Auto,
            wgpu_device: Some(WgpuTarget::Cpu),
            probes: vec![],
        };
        assert_eq!(
            lvp.label(),
            "wgpu (FALLBACK: CUDA unavailable: libcuda.so not found) on llvmpipe [Vulkan, Cpu]; \
             CPU adapter, not a GPU"
        );
        assert!(lvp.is_fallback() && !lvp.is_gpu());
    }

    #[cfg(feature = "cpu")]
    #[test]
    fn explicit_cpu_is_not_a_fallback() {
        let s = select(BackendChoice::Cpu).expect("cpu always works");
        assert_eq!(s.kind, BackendKind::Cpu);
        assert!(!s.is_fallback());
        assert!(s.label().starts_with("cpu ("), "{}", s.label());
    }

    /// No CUDA on this machine: explicit CUDA is an error naming what is missing, `auto`
    /// falls back and says so.
    #[cfg(feature = "cpu")]
    #[test]
    fn cuda_missing_errors_and_auto_falls_back() {
        let cuda = probe(BackendKind::Cuda);
        if cuda.available {
            eprintln!("CUDA available here; skipping");
            return;
        }
        let reason = cuda.reason.clone().unwrap_or_default();
        match select(BackendChoice::Cuda) {
            Err(e @ BackendError::Unavailable { kind: BackendKind::Cuda, .. }) => {
                let msg = e.to_string();
                assert!(msg.contains("CUDA backend was requested but is unavailable"), "{msg}");
                assert!(msg.contains(&reason), "{msg}");
            }
            other => panic!("expected Unavailable, got {other:?}"),
        }
        let auto = select(BackendChoice::Auto).expect("auto never fails");
        let label = auto.label();
        eprintln!("auto: {label}");
        assert_ne!(auto.kind, BackendKind::Cuda);
        assert!(auto.is_fallback());
        assert!(label.contains("FALLBACK"), "{label}");
        assert!(label.contains(&format!("CUDA unavailable: {reason}")), "{label}");
        assert!(!label.starts_with("cuda"), "{label}");
        assert_eq!(auto.requested, BackendChoice::Auto);
        match auto.kind {
            BackendKind::Wgpu => assert!(auto.wgpu_device.is_some()),
            _ => assert!(label.contains("wgpu unavailable"), "{label}"),
        }
    }

    #[cfg(all(feature = "cpu", feature = "wgpu"))]
    const NO_ADAPTER_CHILD: &str = "STEPTRACE_NO_ADAPTER_CHILD";

    /// Hides every Vulkan driver from the Vulkan loader in a child process: wgpu then has no
    /// adapter, which must be reported (not panicked) and make `auto` fall back to the CPU.
    #[cfg(all(feature = "cpu", feature = "wgpu"))]
    #[test]
    fn without_any_adapter_auto_falls_back_to_cpu() {
        let exe = std::env::current_exe().expect("test binary");
        let status = std::process::Command::new(exe)
            .args(["--exact", "backend::select::tests::child_without_any_adapter", "--nocapture", "--test-threads=1"])
            .env(NO_ADAPTER_CHILD, "1")
            .env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
            .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
            .env_remove("CUBECL_WGPU_DEFAULT_DEVICE")
            .status()
            .expect("spawn child test");
        assert!(status.success(), "child test failed: {status}");
    }

    /// Runs only as the child of [`without_any_adapter_auto_falls_back_to_cpu`].
    #[cfg(all(feature = "cpu", feature = "wgpu"))]
    #[test]
    fn child_without_any_adapter() {
        if std::env::var_os(NO_ADAPTER_CHILD).is_none() {
            return;
        }
        let (p, adapters) = crate::backend::probe::probe_wgpu();
        eprintln!("{p:#?}");
        assert!(adapters.is_empty(), "{adapters:?}");
        assert!(!p.available);
        let reason = p.reason.clone().unwrap_or_default();
        assert!(reason.contains("adapter found"), "{reason}");

        let err = select(BackendChoice::Wgpu).expect_err("no adapter");
        assert!(err.to_string().contains("wgpu backend was requested but is unavailable"), "{err}");

        let auto = select(BackendChoice::Auto).expect("auto never fails");
        let label = auto.label();
        eprintln!("auto: {label}");
        if probe(BackendKind::Cuda).available {
            return;
        }
        assert_eq!(auto.kind, BackendKind::Cpu);
        assert!(label.starts_with("cpu (FALLBACK: CUDA unavailable: "), "{label}");
        assert!(label.contains(&format!("wgpu unavailable: {reason}")), "{label}");
        assert_eq!(auto.probes.len(), 3);
    }

    /// Without the `cpu` feature `auto` can run out of backends: an error naming each reason.
    #[cfg(not(feature = "cpu"))]
    #[test]
    fn auto_without_any_backend_is_an_error_not_a_panic() {
        let err = select(BackendChoice::Cpu).expect_err("cpu not compiled in");
        assert!(err.to_string().contains("built without its `cpu` feature"), "{err}");
        if let Err(err) = select(BackendChoice::Auto) {
            let msg = err.to_string();
            assert!(msg.starts_with("no backend can run here: CUDA unavailable: "), "{msg}");
            assert!(msg.contains("CPU (burn-flex) unavailable: "), "{msg}");
        }
    }
}
