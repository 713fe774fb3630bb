//! Turning a [`BackendChoice`] into a labelled [`Selection`].

use std::fmt;

use burn::backend::wgpu::WgpuDevice;

use super::probe::{probe, probe_wgpu, AdapterSummary, Probe};
use super::{BackendChoice, BackendError, BackendKind};

/// Which `WgpuDevice` to build: the adapter type and its index among adapters of that type,
/// exactly as cubecl counts them (enumeration order of the graphics API cubecl uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum WgpuTarget {
    /// `WgpuDevice::DiscreteGpu(n)`.
    DiscreteGpu(usize),
    /// `WgpuDevice::IntegratedGpu(n)`.
    IntegratedGpu(usize),
    /// `WgpuDevice::VirtualGpu(n)`.
    VirtualGpu(usize),
    /// `WgpuDevice::Cpu`: a software adapter such as lavapipe/llvmpipe.
    Cpu,
}

impl WgpuTarget {
    /// The burn/cubecl device to build.
    pub fn device(self) -> WgpuDevice {
        match self {
            WgpuTarget::DiscreteGpu(n) => WgpuDevice::DiscreteGpu(n),
            WgpuTarget::IntegratedGpu(n) => WgpuDevice::IntegratedGpu(n),
            WgpuTarget::VirtualGpu(n) => WgpuDevice::VirtualGpu(n),
            WgpuTarget::Cpu => WgpuDevice::Cpu,
        }
    }

    /// Whether this is a CPU (software) adapter rather than a GPU.
    pub fn is_cpu(self) -> bool {
        matches!(self, WgpuTarget::Cpu)
    }

    fn device_type(self) -> wgpu::DeviceType {
        match self {
            WgpuTarget::DiscreteGpu(_) => wgpu::DeviceType::DiscreteGpu,
            WgpuTarget::IntegratedGpu(_) => wgpu::DeviceType::IntegratedGpu,
            WgpuTarget::VirtualGpu(_) => wgpu::DeviceType::VirtualGpu,
            WgpuTarget::Cpu => wgpu::DeviceType::Cpu,
        }
    }

    fn index(self) -> usize {
        match self {
            WgpuTarget::DiscreteGpu(n) | WgpuTarget::IntegratedGpu(n) | WgpuTarget::VirtualGpu(n) => n,
            WgpuTarget::Cpu => 0,
        }
    }

    /// Parses cubecl's `CUBECL_WGPU_DEFAULT_DEVICE` syntax: `DiscreteGpu(0)`, `Cpu`, ...
    fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        if s == "Cpu" {
            return Some(WgpuTarget::Cpu);
        }
        let (ty, rest) = s.split_once('(')?;
        let n: usize = rest.strip_suffix(')')?.trim().parse().ok()?;
        match ty {
            "DiscreteGpu" => Some(WgpuTarget::DiscreteGpu(n)),
            "IntegratedGpu" => Some(WgpuTarget::IntegratedGpu(n)),
            "VirtualGpu" => Some(WgpuTarget::VirtualGpu(n)),
            _ => None,
        }
    }
}

impl fmt::Display for WgpuTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WgpuTarget::DiscreteGpu(n) => write!(f, "DiscreteGpu({n})"),
            WgpuTarget::IntegratedGpu(n) => write!(f, "IntegratedGpu({n})"),
            WgpuTarget::VirtualGpu(n) => write!(f, "VirtualGpu({n})"),
            WgpuTarget::Cpu => f.write_str("Cpu"),
        }
    }
}

/// The `n`-th adapter of the target's type, as cubecl's `select_from_adapter_list` finds it.
fn find_adapter(adapters: &[AdapterSummary], target: WgpuTarget) -> Option<&AdapterSummary> {
    adapters
        .iter()
        .filter(|a| a.device_type == target.device_type())
        .nth(target.index())
}

/// The adapter `auto`/`wgpu` would use: `CUBECL_WGPU_DEFAULT_DEVICE` if it names an existing
/// adapter, else the first discrete GPU, integrated GPU, virtual GPU, then CPU adapter.
/// Adapters of type `Other` are never picked.
pub(crate) fn pick_adapter(adapters: &[AdapterSummary]) -> Option<(WgpuTarget, &AdapterSummary)> {
    if let Some(target) = std::env::var("CUBECL_WGPU_DEFAULT_DEVICE")
        .ok()
        .and_then(|v| WgpuTarget::parse(&v))
    {
        if let Some(a) = find_adapter(adapters, target) {
            return Some((target, a));
        }
    }
    [
        WgpuTarget::DiscreteGpu(0),
        WgpuTarget::IntegratedGpu(0),
        WgpuTarget::VirtualGpu(0),
        WgpuTarget::Cpu,
    ]
    .into_iter()
    .find_map(|t| find_adapter(adapters, t).map(|a| (t, a)))
}

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

    /// The concrete autodiff backend type that [`run_on`](super::run_on) uses, shortened
    /// (e.g. `Autodiff<Fusion<CubeBackend<CudaRuntime, f32, i32, u8>>>`).
    pub fn backend_type_name(&self) -> String {
        super::backend_type_name(self.kind)
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
///   virtual); else wgpu on a CPU adapter (lavapipe); else ndarray. Every fallback records
///   the reasons of the backends it skipped in [`Selection::fallback_reason`].
/// * `cuda` / `wgpu`: that backend, or [`BackendError::Unavailable`] naming what is missing.
///   Explicit `wgpu` takes the best adapter, which may be a CPU adapter (see the label).
/// * `cpu`: ndarray.
pub fn select(choice: BackendChoice) -> Result<Selection, BackendError> {
    match choice {
        BackendChoice::Cpu => Ok(cpu_selection(choice, None, Vec::new())),
        BackendChoice::Cuda => {
            let p = probe(BackendKind::Cuda);
            if p.available {
                Ok(cuda_selection(choice, p))
            } else {
                Err(unavailable(&p))
            }
        }
        BackendChoice::Wgpu => {
            let (p, adapters) = probe_wgpu();
            match pick_adapter(&adapters) {
                Some((target, adapter)) if p.available => {
                    let device = adapter.describe();
                    Ok(wgpu_selection(choice, target, device, None, vec![p]))
                }
                _ => Err(unavailable(&p)),
            }
        }
        BackendChoice::Auto => {
            let cuda = probe(BackendKind::Cuda);
            if cuda.available {
                return Ok(cuda_selection(choice, cuda));
            }
            let mut skipped = vec![format!("CUDA unavailable: {}", cuda.reason_or_ok())];
            let (wgpu, adapters) = probe_wgpu();
            let picked = pick_adapter(&adapters).map(|(t, a)| (t, a.describe()));
            let mut probes = vec![cuda];
            match picked {
                Some((target, device)) if wgpu.available => {
                    if target.is_cpu() {
                        skipped.push("no GPU adapter for wgpu (CPU adapter only)".to_string());
                    }
                    probes.push(wgpu);
                    Ok(wgpu_selection(choice, target, device, Some(skipped.join("; ")), probes))
                }
                _ => {
                    skipped.push(format!("wgpu unavailable: {}", wgpu.reason_or_ok()));
                    probes.push(wgpu);
                    Ok(cpu_selection(choice, Some(skipped.join("; ")), probes))
                }
            }
        }
    }
}

fn unavailable(p: &Probe) -> BackendError {
    BackendError::Unavailable {
        kind: p.kind,
        reason: p.reason_or_ok().to_string(),
    }
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
    Selection {
        kind: BackendKind::Wgpu,
        device,
        fallback_reason,
        requested,
        wgpu_device: Some(target),
        probes,
    }
}

fn cpu_selection(
    requested: BackendChoice,
    fallback_reason: Option<String>,
    mut probes: Vec<Probe>,
) -> Selection {
    let p = probe(BackendKind::Cpu);
    let device = p.device.clone().unwrap_or_else(|| "CPU".to_string());
    probes.push(p);
    Selection {
        kind: BackendKind::Cpu,
        device,
        fallback_reason,
        requested,
        wgpu_device: None,
        probes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapter(name: &str, device_type: wgpu::DeviceType) -> AdapterSummary {
        AdapterSummary {
            name: name.to_string(),
            device_type,
            backend: wgpu::Backend::Vulkan,
            driver: String::new(),
            driver_info: String::new(),
        }
    }

    #[test]
    fn adapter_preference_order() {
        use wgpu::DeviceType::*;
        let list = vec![
            adapter("llvmpipe", Cpu),
            adapter("intel", IntegratedGpu),
            adapter("weird", Other),
            adapter("nvidia", DiscreteGpu),
            adapter("nvidia2", DiscreteGpu),
        ];
        if std::env::var_os("CUBECL_WGPU_DEFAULT_DEVICE").is_none() {
            let (t, a) = pick_adapter(&list).expect("an adapter");
            assert_eq!((t, a.name.as_str()), (WgpuTarget::DiscreteGpu(0), "nvidia"));
            let (t, a) = pick_adapter(&list[..3]).expect("an adapter");
            assert_eq!((t, a.name.as_str()), (WgpuTarget::IntegratedGpu(0), "intel"));
            let (t, _) = pick_adapter(&list[..1]).expect("an adapter");
            assert_eq!(t, WgpuTarget::Cpu);
            assert!(pick_adapter(&list[2..3]).is_none());
            assert!(pick_adapter(&[]).is_none());
        }
        assert_eq!(find_adapter(&list, WgpuTarget::DiscreteGpu(1)).map(|a| a.name.as_str()), Some("nvidia2"));
    }

    #[test]
    fn target_parsing_matches_cubecl_syntax() {
        assert_eq!(WgpuTarget::parse("Cpu"), Some(WgpuTarget::Cpu));
        assert_eq!(WgpuTarget::parse("DiscreteGpu(1)"), Some(WgpuTarget::DiscreteGpu(1)));
        assert_eq!(WgpuTarget::parse("IntegratedGpu(0)"), Some(WgpuTarget::IntegratedGpu(0)));
        assert_eq!(WgpuTarget::parse("Gpu"), None);
        for t in [WgpuTarget::Cpu, WgpuTarget::VirtualGpu(2)] {
            assert_eq!(WgpuTarget::parse(&t.to_string()), Some(t));
        }
        assert_eq!(WgpuTarget::DiscreteGpu(0).device(), WgpuDevice::DiscreteGpu(0));
    }

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

    #[test]
    fn explicit_cpu_is_not_a_fallback() {
        let s = select(BackendChoice::Cpu).expect("cpu always works");
        assert_eq!(s.kind, BackendKind::Cpu);
        assert!(!s.is_fallback());
        assert!(s.label().starts_with("cpu ("), "{}", s.label());
    }

    /// No CUDA on this machine: explicit CUDA is an error naming what is missing, `auto`
    /// falls back and says so.
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

    const NO_ADAPTER_CHILD: &str = "STEPTRACE_NO_ADAPTER_CHILD";

    /// Hides every Vulkan driver from the Vulkan loader in a child process: wgpu then has no
    /// adapter, which must be reported (not panicked) and make `auto` fall back to ndarray.
    #[test]
    fn without_any_adapter_auto_falls_back_to_cpu() {
        let exe = std::env::current_exe().expect("test binary");
        let status = std::process::Command::new(exe)
            .args([
                "--exact",
                "backend::select::tests::child_without_any_adapter",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(NO_ADAPTER_CHILD, "1")
            .env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
            .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
            .env_remove("CUBECL_WGPU_DEFAULT_DEVICE")
            .status()
            .expect("spawn child test");
        assert!(status.success(), "child test failed: {status}");
    }

    /// Runs only as the child of [`without_any_adapter_auto_falls_back_to_cpu`].
    #[test]
    fn child_without_any_adapter() {
        if std::env::var_os(NO_ADAPTER_CHILD).is_none() {
            return;
        }
        let (p, adapters) = probe_wgpu();
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
}
