//! The wgpu probe: enumerates the adapters cubecl could pick (only with the `wgpu` feature).

use crate::backend::adapter::{pick_adapter, AdapterSummary};
use crate::backend::guard::on_probe_thread;
use crate::backend::BackendKind;

use super::Probe;

/// The graphics API cubecl's `AutoGraphicsApi` uses on this platform.
fn cubecl_graphics_backend() -> wgpu::Backend {
    if cfg!(target_os = "macos") {
        wgpu::Backend::Metal
    } else {
        wgpu::Backend::Vulkan
    }
}

/// Enumerates the adapters cubecl could pick, on a probe thread.
fn wgpu_adapters() -> Result<Vec<AdapterSummary>, String> {
    on_probe_thread("wgpu", || {
        let backend = cubecl_graphics_backend();
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: backend.into(),
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let adapters = cubecl::future::block_on(instance.enumerate_adapters(backend.into()));
        adapters
            .iter()
            .map(|a| {
                let info = a.get_info();
                AdapterSummary {
                    name: info.name,
                    device_type: info.device_type,
                    backend: info.backend,
                    driver: info.driver,
                    driver_info: info.driver_info,
                }
            })
            .collect::<Vec<_>>()
    })
}

/// Probes wgpu; also returns the adapters for [`select`](crate::backend::select).
pub(crate) fn probe_wgpu() -> (Probe, Vec<AdapterSummary>) {
    let mut p = Probe::new(BackendKind::Wgpu);
    let api = format!("{:?}", cubecl_graphics_backend());
    p.detail("graphics_api", api.clone());
    let adapters = match wgpu_adapters() {
        Ok(a) => a,
        Err(panic) => return (p.fail(format!("wgpu adapter enumeration panicked: {panic}")), Vec::new()),
    };
    list_adapters(&mut p, &adapters);
    match pick_adapter(&adapters) {
        Some((target, adapter)) => {
            p.device = Some(adapter.describe());
            p.detail("wgpu_device", target.to_string());
            if let Ok(wanted) = std::env::var("CUBECL_WGPU_DEFAULT_DEVICE") {
                let honoured = wanted.trim() == target.to_string();
                p.detail(
                    "CUBECL_WGPU_DEFAULT_DEVICE",
                    if honoured { wanted } else { format!("{wanted} (no such adapter; ignored)") },
                );
            }
            if target.is_cpu() {
                p.detail("note", "only a CPU adapter (software Vulkan such as lavapipe): runs on the CPU, not a GPU");
            }
            (p.pass(), adapters)
        }
        None => {
            let reason = no_adapter_reason(&api, &adapters);
            (p.fail(reason), adapters)
        }
    }
}

/// One `adapter[i]` detail per adapter, with its driver when wgpu reports one.
fn list_adapters(p: &mut Probe, adapters: &[AdapterSummary]) {
    for (i, a) in adapters.iter().enumerate() {
        let driver = [a.driver.as_str(), a.driver_info.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        let value = if driver.is_empty() { a.describe() } else { format!("{} (driver: {driver})", a.describe()) };
        p.detail(format!("adapter[{i}]"), value);
    }
}

/// Why none of `adapters` can be used.
fn no_adapter_reason(api: &str, adapters: &[AdapterSummary]) -> String {
    if adapters.is_empty() {
        format!(
            "no {api} adapter found (no GPU driver and no CPU adapter; \
             `apt-get install mesa-vulkan-drivers` adds lavapipe)"
        )
    } else {
        format!(
            "no usable {api} adapter: found only adapters of unknown type ({})",
            adapters.iter().map(AdapterSummary::describe).collect::<Vec<_>>().join("; ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With lavapipe installed, wgpu sees a Cpu-type Vulkan adapter. Skipped (with a note)
    /// where no Vulkan adapter exists at all.
    #[test]
    fn wgpu_probe_lists_adapters() {
        let (p, adapters) = probe_wgpu();
        eprintln!("{p:#?}");
        if adapters.is_empty() {
            assert!(!p.available);
            assert!(p
                .reason
                .as_deref()
                .is_some_and(|r| r.contains("no Vulkan adapter") || r.contains("no Metal adapter")));
            return;
        }
        assert!(p.available, "{p:?}");
        assert!(p.device.is_some());
        if steptrace::settings::expect_lavapipe() || lavapipe_installed() {
            assert!(adapters.iter().any(|a| a.device_type == wgpu::DeviceType::Cpu), "{adapters:?}");
        }
    }

    fn lavapipe_installed() -> bool {
        ["/usr/share/vulkan/icd.d/lvp_icd.x86_64.json", "/usr/share/vulkan/icd.d/lvp_icd.aarch64.json"]
            .iter()
            .any(|p| std::path::Path::new(p).exists())
            && std::env::var_os("VK_ICD_FILENAMES").is_none()
            && std::env::var_os("VK_DRIVER_FILES").is_none()
    }
}
