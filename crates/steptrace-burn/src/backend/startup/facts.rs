//! What the backend and cubecl's live configuration let a capture see ([`Facts`]).

use super::breakdown::{CompileTiming, Facts};
use crate::backend::BackendKind;

/// Where every figure comes from, common to both backends.
const AUTOTUNE_SOURCE: &str = "autotune = cubecl-runtime's `Tuning {key}` (a cache miss) to the autotune \
     logger's `Fastest result` line (through a `log` sink steptrace adds), on the tuning thread; \
     autotune cache hits = its `validate checksum` lines not followed by a tune; device client = \
     timed by steptrace around the device's first sync, which creates cubecl's client (CUDA context, \
     streams, memory pools; the wgpu device)";

/// The facts for a run on `kind` (a cubecl backend), from cubecl's configuration, which
/// [`configure_cubecl_cache`](crate::backend::configure_cubecl_cache) has fixed by now (or
/// cubecl's files and defaults, which the first client would read anyway).
pub(crate) fn facts(kind: BackendKind) -> Facts {
    let (autotune_ends, autotune_hits, compilation_cache) = live_config();
    let intro = "log records of cubecl 0.11 (and wgpu-core 30), read in-process by steptrace from the start of \
                 the run to the end of step 0";
    match kind {
        BackendKind::Cuda => Facts {
            source: format!(
                "{intro}: compile = cubecl-cuda's `Compiling kernel` (one per kernel compile, with {}, on \
                 the device thread) and `Using PTX cache` (one per kernel from the persistent PTX cache); \
                 cubecl-cuda 0.11 writes nothing when a compile ends, so its time is not measured (the upper \
                 bound runs to the next record on the device thread); {AUTOTUNE_SOURCE}",
                cuda_compiler().1
            ),
            compiler: cuda_compiler().0,
            compile_timing: CompileTiming::StartOnly(
                "not measured: cubecl-cuda 0.11 logs the start of each kernel compile (`Compiling kernel`) \
                 but nothing at its end"
                    .to_owned(),
            ),
            compile_cache: if compilation_cache {
                Ok("PTX cache")
            } else {
                Err("not applicable: cubecl's compilation cache is off".to_owned())
            },
            autotune_ends,
            autotune_hits,
        },
        _ => Facts {
            source: format!(
                "{intro}: compile = cubecl-wgpu's `compiling WGSL module` to wgpu-core's \
                 `Device::create_compute_pipeline`, on the device thread (naga and the driver's compiler; \
                 cubecl's WGSL generation just before it is in the rest); {AUTOTUNE_SOURCE}"
            ),
            compiler: "shader",
            compile_timing: CompileTiming::Paired,
            compile_cache: Err(
                "not applicable: cubecl-wgpu 0.11 keeps no persistent cache of WGSL shaders: they compile in every run"
                    .to_owned(),
            ),
            autotune_ends,
            autotune_hits,
        },
    }
}

/// The CUDA kernel compiler's short name (for the breakdown's lines) and its description.
fn cuda_compiler() -> (&'static str, &'static str) {
    match crate::backend::cuda_kernel_compiler() {
        Some(description) if description.contains("NVRTC") => ("NVRTC", description),
        Some(description) => ("LLVM", description),
        None => ("LLVM", "LLVM NVPTX"),
    }
}

/// Whether autotune ends and autotune cache hits reach the `log` crate, and whether the
/// compilation cache is on.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn live_config() -> (Result<(), String>, Result<(), String>, bool) {
    use cubecl::config::autotune::AutotuneLogLevel;
    use cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};

    let config = match super::super::guard::catch_silently(CubeClRuntimeConfig::get) {
        Ok(config) => config,
        Err(panic) => {
            let why = format!("not observed: cubecl's configuration cannot be read ({panic})");
            return (Err(why.clone()), Err(why), false);
        }
    };
    let logger = &config.autotune.logger;
    let ends = match (logger.log.is_some(), logger.level) {
        (_, AutotuneLogLevel::Disabled) => {
            Err("not observed: cubecl's autotune logger is disabled in its configuration".to_owned())
        }
        (false, _) => {
            Err("not observed: cubecl's autotune logger has no `log` sink (its configuration was fixed before \
             configure_cubecl_cache)"
                .to_owned())
        }
        (true, _) => Ok(()),
    };
    let hits = match (&ends, logger.level) {
        (Err(why), _) => Err(why.clone()),
        (Ok(()), AutotuneLogLevel::Full) => Ok(()),
        (Ok(()), level) => Err(format!(
            "not observed: cubecl logs autotune cache hits only at its `full` autotune log level, and its \
             configuration (with sinks of its own) sets {level:?}"
        )),
    };
    (ends, hits, config.compilation.cache)
}

/// A build without cubecl runs nothing that compiles.
#[cfg(not(any(feature = "cuda", feature = "wgpu")))]
fn live_config() -> (Result<(), String>, Result<(), String>, bool) {
    let why = "not applicable: no cubecl runtime in this build".to_owned();
    (Err(why.clone()), Err(why), false)
}
