//! wgpu adapters: which wgpu device to build, and how cubecl picks an adapter.
//!
//! Pure data and rules; enumerating the adapters is a probe (`probe::wgpu`). Everything that
//! touches wgpu's types exists only with the `wgpu` feature; [`WgpuTarget`] itself always
//! exists, so that [`Selection`](super::Selection) has the same shape in every build.

use std::fmt;

/// Which wgpu device to build: the adapter type and its index among adapters of that type,
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
    /// Whether this is a CPU (software) adapter rather than a GPU.
    pub fn is_cpu(self) -> bool {
        matches!(self, WgpuTarget::Cpu)
    }
}

#[cfg(feature = "wgpu")]
impl WgpuTarget {
    /// The burn device to build (`Device::wgpu`, on the graphics API cubecl picks).
    pub fn device(self) -> burn::prelude::Device {
        use burn::prelude::{Device, DeviceKind};
        Device::wgpu(match self {
            WgpuTarget::DiscreteGpu(n) => DeviceKind::DiscreteGpu(n),
            WgpuTarget::IntegratedGpu(n) => DeviceKind::IntegratedGpu(n),
            WgpuTarget::VirtualGpu(n) => DeviceKind::VirtualGpu(n),
            WgpuTarget::Cpu => DeviceKind::Cpu,
        })
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

/// One adapter as wgpu reports it.
#[cfg(feature = "wgpu")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AdapterSummary {
    pub(crate) name: String,
    pub(crate) device_type: wgpu::DeviceType,
    pub(crate) backend: wgpu::Backend,
    pub(crate) driver: String,
    pub(crate) driver_info: String,
}

#[cfg(feature = "wgpu")]
impl AdapterSummary {
    /// `"llvmpipe (LLVM 15.0.6, 256 bits) [Vulkan, Cpu]"`.
    pub(crate) fn describe(&self) -> String {
        format!("{} [{:?}, {:?}]", self.name, self.backend, self.device_type)
    }
}

/// The `n`-th adapter of the target's type, as cubecl's `select_from_adapter_list` finds it.
#[cfg(feature = "wgpu")]
fn find_adapter(adapters: &[AdapterSummary], target: WgpuTarget) -> Option<&AdapterSummary> {
    adapters.iter().filter(|a| a.device_type == target.device_type()).nth(target.index())
}

/// The adapter `auto`/`wgpu` would use: `CUBECL_WGPU_DEFAULT_DEVICE` if it names an existing
/// adapter, else the first discrete GPU, integrated GPU, virtual GPU, then CPU adapter.
/// Adapters of type `Other` are never picked.
#[cfg(feature = "wgpu")]
pub(crate) fn pick_adapter(adapters: &[AdapterSummary]) -> Option<(WgpuTarget, &AdapterSummary)> {
    if let Some(target) = std::env::var("CUBECL_WGPU_DEFAULT_DEVICE").ok().and_then(|v| WgpuTarget::parse(&v)) {
        if let Some(a) = find_adapter(adapters, target) {
            return Some((target, a));
        }
    }
    [WgpuTarget::DiscreteGpu(0), WgpuTarget::IntegratedGpu(0), WgpuTarget::VirtualGpu(0), WgpuTarget::Cpu]
        .into_iter()
        .find_map(|t| find_adapter(adapters, t).map(|a| (t, a)))
}

#[cfg(all(test, feature = "wgpu"))]
mod tests {
    use super::*;
    use burn::prelude::{Device, DeviceKind};

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
        assert_eq!(WgpuTarget::DiscreteGpu(0).device(), Device::wgpu(DeviceKind::DiscreteGpu(0)));
    }
}
