//! The CUDA probe (only with the `cuda` feature): the driver, then what cubecl's kernel
//! compiler needs, through cudarc, without creating a CUDA context.
//!
//! cubecl-cuda 0.11 compiles kernels through LLVM (NVPTX) by default, linked into the binary,
//! and loads the PTX with the driver; NVRTC and the toolkit headers are only needed when it is
//! built with its `cpp` feature (CUDA C++ through NVRTC). The probe asks for what the
//! compiler of this build needs ([`kernel_compiler`]), and reports the other as a detail.

use std::time::Instant;

use crate::backend::guard::on_probe_thread;
use crate::backend::BackendKind;

use super::Probe;

/// Name of the CUDA driver library, for messages.
const LIBCUDA: &str = if cfg!(windows) { "nvcuda.dll" } else { "libcuda.so" };

/// Name of the NVRTC library, for messages.
const LIBNVRTC: &str = if cfg!(windows) { "nvrtc64_*.dll" } else { "libnvrtc.so" };

/// Probes CUDA in three steps, each adding its details to the probe: the driver, the
/// toolkit headers, then an NVRTC compile.
pub(super) fn probe_cuda() -> Probe {
    let mut p = Probe::new(BackendKind::Cuda);

    // Under panic=abort a cudarc loader panic would kill the process: only call into cudarc
    // when the library file can be seen on the loader path.
    if cfg!(panic = "abort") && !cuda_libs::library_visible(&cuda_libs::LIBCUDA_FILES) {
        return p.fail(format!(
            "{LIBCUDA} not found (no NVIDIA driver on the loader path; checked LD_LIBRARY_PATH, \
             the ld.so cache and the standard library directories)"
        ));
    }
    p.detail("kernel compiler", kernel_compiler());
    let checked = check_driver(&mut p).and_then(|()| {
        if uses_nvrtc() {
            check_headers(&mut p).and_then(|include| check_nvrtc(&mut p, include))
        } else {
            // Not needed by the LLVM compiler: said, not required.
            match check_headers(&mut p).and_then(|include| check_nvrtc(&mut p, include)) {
                Ok(()) => {}
                Err(why) => p.detail("nvrtc", format!("not needed by the LLVM compiler ({why})")),
            }
            Ok(())
        }
    });
    match checked {
        Ok(()) => p.pass(),
        Err(reason) => p.fail(reason),
    }
}

/// Whether this build's cubecl-cuda compiles kernels with NVRTC (its `cpp` feature) rather
/// than LLVM.
fn uses_nvrtc() -> bool {
    cubecl::cuda::compiler::CudaBackend::default() == cubecl::cuda::compiler::CudaBackend::Cpp
}

/// The kernel compiler of this build's cubecl-cuda, for labels and the manifest.
pub(crate) fn kernel_compiler() -> &'static str {
    if uses_nvrtc() {
        "CUDA C++ through NVRTC (cubecl-cuda's `cpp` feature)"
    } else {
        "LLVM NVPTX, linked in (cubecl-cuda 0.11's default)"
    }
}

/// 1. Driver: cuInit, device count, name of device 0. No context is created.
fn check_driver(p: &mut Probe) -> Result<(), String> {
    let driver = on_probe_thread("cuda-driver", || -> Result<(i32, String), String> {
        use cudarc::driver::result;
        result::init().map_err(|e| format!("cuInit failed: {}", driver_error(&e)))?;
        let count =
            result::device::get_count().map_err(|e| format!("cuDeviceGetCount failed: {}", driver_error(&e)))?;
        if count <= 0 {
            return Err("no CUDA device visible (cuDeviceGetCount returned 0; \
                        check CUDA_VISIBLE_DEVICES)"
                .to_string());
        }
        let dev = result::device::get(0).map_err(|e| format!("cuDeviceGet(0) failed: {}", driver_error(&e)))?;
        let name =
            result::device::get_name(dev).map_err(|e| format!("cuDeviceGetName failed: {}", driver_error(&e)))?;
        Ok((count, name))
    });
    match driver {
        Err(panic) => Err(loader_panic_reason(&panic, LIBCUDA, "NVIDIA driver")),
        Ok(Err(reason)) => {
            p.detail("libcuda", "loaded");
            Err(reason)
        }
        Ok(Ok((count, name))) => {
            p.detail("libcuda", "loaded");
            p.detail("devices", count.to_string());
            p.detail("device[0]", name.clone());
            p.device = Some(name);
            Ok(())
        }
    }
}

/// 2. Toolkit headers: cubecl passes `--include-path=<toolkit>/include` to NVRTC and every
///    kernel starts with `#include <cuda_runtime.h>`. Returns the include directory.
fn check_headers(p: &mut Probe) -> Result<String, String> {
    let Some(toolkit) = cuda_libs::cuda_path() else {
        return Err("CUDA toolkit not found (CUDA_PATH unset and none of /usr/local/cuda, /opt/cuda, \
             /usr/bin/nvcc exist); cubecl compiles every kernel with NVRTC and needs \
             <toolkit>/include/cuda_runtime.h"
            .to_string());
    };
    let include = toolkit.join("include");
    let header = include.join("cuda_runtime.h");
    p.detail("cuda_path", toolkit.display().to_string());
    if !header.is_file() {
        return Err(format!(
            "CUDA headers not found: {} is missing (cubecl compiles every kernel with NVRTC and \
             #include <cuda_runtime.h>; install the CUDA toolkit headers or set CUDA_PATH)",
            header.display()
        ));
    }
    p.detail("cuda_runtime.h", header.display().to_string());
    Ok(include.display().to_string())
}

/// 3. NVRTC: compile a kernel the way cubecl does (include path + cuda_runtime.h).
fn check_nvrtc(p: &mut Probe, include_arg: String) -> Result<(), String> {
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
        Err(panic) => Err(loader_panic_reason(&panic, LIBNVRTC, "CUDA toolkit's NVRTC")),
        Ok(Err(reason)) => {
            p.detail("nvrtc", "loaded");
            Err(reason)
        }
        Ok(Ok(ptx_len)) => {
            p.detail(
                "nvrtc",
                format!("compiled a probe kernel ({ptx_len} bytes of PTX) in {} ms", started.elapsed().as_millis()),
            );
            Ok(())
        }
    }
}

/// `CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)`.
fn driver_error(e: &cudarc::driver::DriverError) -> String {
    let name = e.error_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
    match e.error_string() {
        Ok(s) => format!("{name} ({})", s.to_string_lossy()),
        Err(_) => name,
    }
}

/// Turns a cudarc loader panic into a short reason.
fn loader_panic_reason(panic: &str, lib: &str, what: &str) -> String {
    if panic.contains("Unable to dynamically load") {
        format!("{lib} not found ({what} not installed or not on the loader path)")
    } else if panic.contains("Missing symbol") {
        format!("{lib} is too old for the CUDA version cudarc was built for: {panic}")
    } else {
        format!("probing {lib} panicked: {panic}")
    }
}

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
            for (probe, root) in
                [("/usr/local/cuda", "/usr/local/cuda"), ("/opt/cuda", "/opt/cuda"), ("/usr/bin/nvcc", "/usr")]
            {
                if Path::new(probe).exists() {
                    return Some(PathBuf::from(root));
                }
            }
            None
        } else if cfg!(windows) {
            Some(PathBuf::from("C:/Program Files/NVIDIA GPU Computing Toolkit/CUDA/"))
        } else {
            None
        }
    }

    /// Whether one of `files` is visible to the dynamic loader (`LD_LIBRARY_PATH`, the
    /// ld.so cache, standard directories). Only used when a loader panic cannot be caught.
    pub(super) fn library_visible(files: &[&str]) -> bool {
        let mut dirs: Vec<PathBuf> =
            std::env::var_os("LD_LIBRARY_PATH").map(|v| std::env::split_paths(&v).collect()).unwrap_or_default();
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
        if dirs.iter().any(|d| files.iter().any(|f| d.join(f).exists())) {
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
    use crate::backend::probe;

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
        if !cuda_libs::library_visible(&cuda_libs::LIBCUDA_FILES) {
            assert!(reason.contains("libcuda.so not found"), "{reason}");
        }
        // Probing twice works (cudarc's lazy loader is retried, not poisoned).
        let again = probe(BackendKind::Cuda);
        assert_eq!(again.reason, p.reason);
    }
}
