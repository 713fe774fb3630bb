//! Availability probes for the CUDA, wgpu and CPU backends. None of them can panic.

use std::sync::atomic::{AtomicBool, Ordering};

use super::guard::on_probe_thread;
use super::BackendKind;

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
        Probe {
            kind,
            available: false,
            reason: None,
            device: None,
            details: Vec::new(),
        }
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
pub fn probe(kind: BackendKind) -> Probe {
    match kind {
        BackendKind::Cuda => probe_cuda(),
        BackendKind::Wgpu => probe_wgpu().0,
        BackendKind::Cpu => probe_cpu(),
    }
}

/// Probes every backend, in `auto`'s order of preference (for `steptrace backends`).
pub fn probe_all() -> Vec<Probe> {
    BackendKind::ALL.into_iter().map(probe).collect()
}

// ---------------------------------------------------------------------------------------
// Known-usable flags: memory queries only touch a runtime that a probe has vouched for.

static USABLE: [AtomicBool; 3] = [
    AtomicBool::new(false),
    AtomicBool::new(false),
    AtomicBool::new(false),
];

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
pub(crate) fn known_usable(kind: BackendKind) -> bool {
    slot(kind).load(Ordering::Relaxed)
}

// ---------------------------------------------------------------------------------------
// CPU

fn probe_cpu() -> Probe {
    let mut p = Probe::new(BackendKind::Cpu);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let model = cpu_model();
    p.device = Some(match &model {
        Some(m) => format!("{m} ({threads} threads, ndarray)"),
        None => format!("CPU ({threads} threads, ndarray)"),
    });
    p.detail("threads", threads.to_string());
    if let Some(m) = model {
        p.detail("cpu_model", m);
    }
    p.pass()
}

/// The CPU model name from `/proc/cpuinfo` (Linux only).
pub(crate) fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

// ---------------------------------------------------------------------------------------
// wgpu

/// One adapter as wgpu reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AdapterSummary {
    pub(crate) name: String,
    pub(crate) device_type: wgpu::DeviceType,
    pub(crate) backend: wgpu::Backend,
    pub(crate) driver: String,
    pub(crate) driver_info: String,
}

impl AdapterSummary {
    /// `"llvmpipe (LLVM 15.0.6, 256 bits) [Vulkan, Cpu]"`.
    pub(crate) fn describe(&self) -> String {
        format!("{} [{:?}, {:?}]", self.name, self.backend, self.device_type)
    }
}

/// The graphics API cubecl's `AutoGraphicsApi` uses on this platform.
fn cubecl_graphics_backend() -> wgpu::Backend {
    if cfg!(target_os = "macos") {
        wgpu::Backend::Metal
    } else {
        wgpu::Backend::Vulkan
    }
}

/// Enumerates the adapters cubecl could pick, on a probe thread.
pub(crate) fn wgpu_adapters() -> Result<Vec<AdapterSummary>, String> {
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

/// Probes wgpu; also returns the adapters for [`select`](super::select).
pub(crate) fn probe_wgpu() -> (Probe, Vec<AdapterSummary>) {
    let mut p = Probe::new(BackendKind::Wgpu);
    let api = format!("{:?}", cubecl_graphics_backend());
    p.detail("graphics_api", api.clone());
    if !cfg!(feature = "wgpu") {
        return (
            p.fail("steptrace-burn was built without its `wgpu` feature"),
            Vec::new(),
        );
    }
    let adapters = match wgpu_adapters() {
        Ok(a) => a,
        Err(panic) => {
            return (
                p.fail(format!("wgpu adapter enumeration panicked: {panic}")),
                Vec::new(),
            )
        }
    };
    for (i, a) in adapters.iter().enumerate() {
        let driver = [a.driver.as_str(), a.driver_info.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        let value = if driver.is_empty() {
            a.describe()
        } else {
            format!("{} (driver: {driver})", a.describe())
        };
        p.detail(format!("adapter[{i}]"), value);
    }
    match super::select::pick_adapter(&adapters) {
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
                p.detail(
                    "note",
                    "only a CPU adapter (software Vulkan such as lavapipe): runs on the CPU, not a GPU",
                );
            }
            (p.pass(), adapters)
        }
        None if adapters.is_empty() => {
            let reason = format!(
                "no {api} adapter found (no GPU driver and no CPU adapter; \
                 `apt-get install mesa-vulkan-drivers` adds lavapipe)"
            );
            (p.fail(reason), adapters)
        }
        None => {
            let reason = format!(
                "no usable {api} adapter: found only adapters of unknown type ({})",
                adapters
                    .iter()
                    .map(AdapterSummary::describe)
                    .collect::<Vec<_>>()
                    .join("; ")
            );
            (p.fail(reason), adapters)
        }
    }
}

// ---------------------------------------------------------------------------------------
// CUDA

#[cfg(not(feature = "cuda"))]
fn probe_cuda() -> Probe {
    Probe::new(BackendKind::Cuda)
        .fail("steptrace-burn was built without its `cuda` feature (cudarc probe disabled)")
}

/// Name of the CUDA driver library, for messages.
#[cfg(feature = "cuda")]
const LIBCUDA: &str = if cfg!(windows) { "nvcuda.dll" } else { "libcuda.so" };

/// Name of the NVRTC library, for messages.
#[cfg(feature = "cuda")]
const LIBNVRTC: &str = if cfg!(windows) { "nvrtc64_*.dll" } else { "libnvrtc.so" };

#[cfg(feature = "cuda")]
fn probe_cuda() -> Probe {
    use std::time::Instant;

    let mut p = Probe::new(BackendKind::Cuda);

    // Under panic=abort a cudarc loader panic would kill the process: only call into cudarc
    // when the library file can be seen on the loader path.
    if cfg!(panic = "abort") && !cuda_libs::library_visible(&cuda_libs::LIBCUDA_FILES) {
        return p.fail(format!(
            "{LIBCUDA} not found (no NVIDIA driver on the loader path; checked LD_LIBRARY_PATH, \
             the ld.so cache and the standard library directories)"
        ));
    }

    // 1. Driver: cuInit, device count, name of device 0. No context is created.
    let driver = on_probe_thread("cuda-driver", || -> Result<(i32, String), String> {
        use cudarc::driver::result;
        result::init().map_err(|e| format!("cuInit failed: {}", driver_error(&e)))?;
        let count = result::device::get_count()
            .map_err(|e| format!("cuDeviceGetCount failed: {}", driver_error(&e)))?;
        if count <= 0 {
            return Err("no CUDA device visible (cuDeviceGetCount returned 0; \
                        check CUDA_VISIBLE_DEVICES)"
                .to_string());
        }
        let dev = result::device::get(0)
            .map_err(|e| format!("cuDeviceGet(0) failed: {}", driver_error(&e)))?;
        let name = result::device::get_name(dev)
            .map_err(|e| format!("cuDeviceGetName failed: {}", driver_error(&e)))?;
        Ok((count, name))
    });
    match driver {
        Err(panic) => return p.fail(loader_panic_reason(&panic, LIBCUDA, "NVIDIA driver")),
        Ok(Err(reason)) => {
            p.detail("libcuda", "loaded");
            return p.fail(reason);
        }
        Ok(Ok((count, name))) => {
            p.detail("libcuda", "loaded");
            p.detail("devices", count.to_string());
            p.detail("device[0]", name.clone());
            p.device = Some(name);
        }
    }

    // 2. Toolkit headers: cubecl passes `--include-path=<toolkit>/include` to NVRTC and every
    //    kernel starts with `#include <cuda_runtime.h>`.
    let Some(toolkit) = cuda_libs::cuda_path() else {
        return p.fail(
            "CUDA toolkit not found (CUDA_PATH unset and none of /usr/local/cuda, /opt/cuda, \
             /usr/bin/nvcc exist); cubecl compiles every kernel with NVRTC and needs \
             <toolkit>/include/cuda_runtime.h",
        );
    };
    let include = toolkit.join("include");
    let header = include.join("cuda_runtime.h");
    p.detail("cuda_path", toolkit.display().to_string());
    if !header.is_file() {
        return p.fail(format!(
            "CUDA headers not found: {} is missing (cubecl compiles every kernel with NVRTC and \
             #include <cuda_runtime.h>; install the CUDA toolkit headers or set CUDA_PATH)",
            header.display()
        ));
    }
    p.detail("cuda_runtime.h", header.display().to_string());

    // 3. NVRTC: compile a kernel the way cubecl does (include path + cuda_runtime.h).
    let include_arg = include.display().to_string();
    let started = Instant::now();
    let nvrtc = on_probe_thread("cuda-nvrtc", move || -> Result<usize, String> {
        use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};
        let src = "#include <cuda_runtime.h>\n\
                   extern \"C\" __global__ void steptrace_probe(float* x) { x[threadIdx.x] += 1.0f; }\n";
        let opts = CompileOptions {
            include_paths: vec![include_arg],
            name: Some("steptrace_probe.cu".to_string()),
            ..Default::default()
        };
        match compile_ptx_with_opts(src, opts) {
            Ok(ptx) => Ok(ptx.to_src().len()),
            Err(CompileError::CompileError { nvrtc, log, .. }) => {
                let log = log.to_string_lossy();
                let log: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).take(4).collect();
                Err(format!(
                    "NVRTC cannot compile a kernel that includes cuda_runtime.h ({nvrtc:?}): {}",
                    log.join(" | ")
                ))
            }
            Err(other) => Err(format!("NVRTC failed: {other:?}")),
        }
    });
    match nvrtc {
        Err(panic) => p.fail(loader_panic_reason(&panic, LIBNVRTC, "CUDA toolkit's NVRTC")),
        Ok(Err(reason)) => {
            p.detail("nvrtc", "loaded");
            p.fail(reason)
        }
        Ok(Ok(ptx_len)) => {
            p.detail(
                "nvrtc",
                format!(
                    "compiled a probe kernel ({ptx_len} bytes of PTX) in {} ms",
                    started.elapsed().as_millis()
                ),
            );
            p.pass()
        }
    }
}

/// `CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)`.
#[cfg(feature = "cuda")]
fn driver_error(e: &cudarc::driver::DriverError) -> String {
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    match e.error_string() {
        Ok(s) => format!("{name} ({})", s.to_string_lossy()),
        Err(_) => name,
    }
}

/// Turns a cudarc loader panic into a short reason.
#[cfg(feature = "cuda")]
fn loader_panic_reason(panic: &str, lib: &str, what: &str) -> String {
    if panic.contains("Unable to dynamically load") {
        format!("{lib} not found ({what} not installed or not on the loader path)")
    } else if panic.contains("Missing symbol") {
        format!("{lib} is too old for the CUDA version cudarc was built for: {panic}")
    } else {
        format!("probing {lib} panicked: {panic}")
    }
}

#[cfg(feature = "cuda")]
mod cuda_libs {
    //! File-level checks that need no FFI.

    use std::path::{Path, PathBuf};

    /// File names of the CUDA driver library.
    pub(super) const LIBCUDA_FILES: [&str; 2] = ["libcuda.so", "libcuda.so.1"];

    /// The CUDA toolkit root, found exactly as `cubecl_cuda::install::cuda_path` does.
    pub(super) fn cuda_path() -> Option<PathBuf> {
        if let Ok(path) = std::env::var("CUDA_PATH") {
            return Some(PathBuf::from(path));
        }
        if cfg!(target_os = "linux") {
            for (probe, root) in [
                ("/usr/local/cuda", "/usr/local/cuda"),
                ("/opt/cuda", "/opt/cuda"),
                ("/usr/bin/nvcc", "/usr"),
            ] {
                if Path::new(probe).exists() {
                    return Some(PathBuf::from(root));
                }
            }
            None
        } else if cfg!(windows) {
            Some(PathBuf::from(
                "C:/Program Files/NVIDIA GPU Computing Toolkit/CUDA/",
            ))
        } else {
            None
        }
    }

    /// Whether one of `files` is visible to the dynamic loader (`LD_LIBRARY_PATH`, the
    /// ld.so cache, standard directories). Only used when a loader panic cannot be caught.
    pub(super) fn library_visible(files: &[&str]) -> bool {
        let mut dirs: Vec<PathBuf> = std::env::var_os("LD_LIBRARY_PATH")
            .map(|v| std::env::split_paths(&v).collect())
            .unwrap_or_default();
        dirs.extend(
            [
                "/lib",
                "/lib64",
                "/usr/lib",
                "/usr/lib64",
                "/usr/lib/x86_64-linux-gnu",
                "/usr/lib/aarch64-linux-gnu",
                "/usr/lib/wsl/lib",
                "/usr/local/cuda/lib64",
                "/usr/local/cuda/compat",
            ]
            .map(PathBuf::from),
        );
        if dirs
            .iter()
            .any(|d| files.iter().any(|f| d.join(f).exists()))
        {
            return true;
        }
        std::fs::read("/etc/ld.so.cache").is_ok_and(|cache| {
            files.iter().any(|f| {
                let needle = f.as_bytes();
                cache.windows(needle.len()).any(|w| w == needle)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_is_always_available() {
        let p = probe(BackendKind::Cpu);
        assert!(p.available);
        assert!(p.reason.is_none());
        assert!(p.device.as_deref().is_some_and(|d| d.contains("ndarray")));
    }

    /// This machine has no CUDA: the probe must say why, without panicking.
    #[test]
    fn cuda_probe_reports_a_reason_without_panicking() {
        let p = probe(BackendKind::Cuda);
        if p.available {
            eprintln!("CUDA is available here ({:?}); skipping the no-CUDA checks", p.device);
            return;
        }
        let reason = p.reason.as_deref().unwrap_or_default();
        assert!(!reason.is_empty());
        // No libcuda here: the reason must name it.
        if cfg!(feature = "cuda") && !cuda_present_on_disk() {
            assert!(reason.contains("libcuda.so not found"), "{reason}");
        }
        // Probing twice works (cudarc's lazy loader is retried, not poisoned).
        let again = probe(BackendKind::Cuda);
        assert_eq!(again.reason, p.reason);
    }

    fn cuda_present_on_disk() -> bool {
        #[cfg(feature = "cuda")]
        {
            cuda_libs::library_visible(&cuda_libs::LIBCUDA_FILES)
        }
        #[cfg(not(feature = "cuda"))]
        {
            false
        }
    }

    /// With lavapipe installed, wgpu sees a Cpu-type Vulkan adapter. Skipped (with a note)
    /// where no Vulkan adapter exists at all.
    #[test]
    fn wgpu_probe_lists_adapters() {
        let (p, adapters) = probe_wgpu();
        eprintln!("{p:#?}");
        if adapters.is_empty() {
            assert!(!p.available);
            assert!(p.reason.as_deref().is_some_and(|r| r.contains("no Vulkan adapter")
                || r.contains("no Metal adapter")));
            return;
        }
        assert!(p.available, "{p:?}");
        assert!(p.device.is_some());
        if std::env::var_os("STEPTRACE_EXPECT_LAVAPIPE").is_some() || lavapipe_installed() {
            assert!(
                adapters.iter().any(|a| a.device_type == wgpu::DeviceType::Cpu),
                "{adapters:?}"
            );
        }
    }

    fn lavapipe_installed() -> bool {
        ["/usr/share/vulkan/icd.d/lvp_icd.x86_64.json", "/usr/share/vulkan/icd.d/lvp_icd.aarch64.json"]
            .iter()
            .any(|p| std::path::Path::new(p).exists())
            && std::env::var_os("VK_ICD_FILENAMES").is_none()
            && std::env::var_os("VK_DRIVER_FILES").is_none()
    }

    #[test]
    fn probe_all_covers_every_kind_in_order() {
        let kinds: Vec<_> = probe_all().into_iter().map(|p| p.kind).collect();
        assert_eq!(kinds, BackendKind::ALL.to_vec());
    }
}
