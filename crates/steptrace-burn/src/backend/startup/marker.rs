//! Which `log` records of cubecl 0.11 and wgpu-core 30 mark a compile or an autotune, and
//! what they say. Pure: a record in, a [`Marker`] out.
//!
//! The records, with where they are written (paths in the cargo registry):
//!
//! | record | target, level | source |
//! |---|---|---|
//! | `Compiling kernel` | `cubecl_cuda::compute::context`, trace | cubecl-cuda-0.11.3/src/compute/context.rs:204, before the LLVM (or NVRTC) compile |
//! | `Using PTX cache` | same | context.rs:169, a kernel from the persistent PTX cache |
//! | `[cubecl-wgpu] compiling WGSL module` | `cubecl_wgpu::backend::base`, trace | cubecl-wgpu-0.11.3/src/backend/base.rs:201, before naga |
//! | `Using SPIR-V cache` | same | (SPIR-V builds only) |
//! | `Compiling {kernel}` | `cubecl_wgpu::backend::vulkan`, debug | vulkan.rs (SPIR-V builds only) |
//! | `Device::create_compute_pipeline -> {id}` | `wgpu_core::device::global`, trace | wgpu-core-30.0.2/src/device/global.rs:1667, the pipeline exists |
//! | `Tuning {key}` | `cubecl_runtime::tune::tuner`, info | cubecl-runtime-0.11.4/src/tune/tuner.rs:289, a cache miss: benchmarks follow |
//! | `Fastest result {name}-{key}. ...` | `cubecl::autotune`, the sink's level | tune/log.rs:262 and :281, through the autotune logger's `log` sink |
//! | `validate checksum key={key}, checksum=...` | same | tuner.rs:272 (autotune log level `full`), a key found in the persistent cache |

use std::fmt::{self, Write as _};

use tracing_log::log::Level;

/// cubecl-cuda's compile records.
pub(crate) const CUDA_CONTEXT: &str = "cubecl_cuda::compute::context";
/// cubecl-wgpu's WGSL compile records.
pub(crate) const WGPU_BASE: &str = "cubecl_wgpu::backend::base";
/// cubecl-wgpu's SPIR-V compile records.
pub(crate) const WGPU_VULKAN: &str = "cubecl_wgpu::backend::vulkan";
/// wgpu-core's device API records.
pub(crate) const WGPU_CORE_DEVICE: &str = "wgpu_core::device::global";
/// cubecl-runtime's tuner.
pub(crate) const TUNER: &str = "cubecl_runtime::tune::tuner";
/// Where cubecl's autotune logger writes its `log` sink (cubecl 0.11 names each logger's
/// subsystem as the target).
pub(crate) const CUBECL_LOGGER: &str = "cubecl::autotune";

/// What a record marks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Marker {
    /// A kernel compile begins (NVRTC on CUDA, the shader compiler on wgpu).
    CompileStart,
    /// wgpu: the compute pipeline of the compile in progress exists.
    CompileEnd,
    /// A kernel was taken from cubecl's persistent compilation cache.
    CompileCacheHit,
    /// An autotune of this key begins (a cache miss).
    TuneStart(String),
    /// An autotune ended; the whole line, which names the key.
    TuneEnd(String),
    /// A key found in the persistent autotune cache is checked.
    TuneValidate(String),
}

/// Whether a record's target is one of those [`classify`] reads: the cheap test that every
/// record passes through.
pub(crate) fn is_candidate(target: &str) -> bool {
    matches!(target, CUDA_CONTEXT | WGPU_BASE | WGPU_VULKAN | WGPU_CORE_DEVICE | TUNER | CUBECL_LOGGER)
}

/// The marker a record carries, if any.
pub(crate) fn classify(target: &str, level: Level, message: &fmt::Arguments<'_>) -> Option<Marker> {
    match (target, level) {
        (CUDA_CONTEXT, Level::Trace) => match message.as_str()? {
            "Compiling kernel" => Some(Marker::CompileStart),
            "Using PTX cache" => Some(Marker::CompileCacheHit),
            _ => None,
        },
        (WGPU_BASE, Level::Trace) => {
            if message.as_str() == Some("Using SPIR-V cache") {
                Some(Marker::CompileCacheHit)
            } else {
                starts_with(message, "[cubecl-wgpu] compiling WGSL module").then_some(Marker::CompileStart)
            }
        }
        (WGPU_VULKAN, Level::Debug) => starts_with(message, "Compiling ").then_some(Marker::CompileStart),
        (WGPU_CORE_DEVICE, Level::Trace) => {
            starts_with(message, "Device::create_compute_pipeline -> ").then_some(Marker::CompileEnd)
        }
        (TUNER, Level::Info) => {
            let text = message.to_string();
            text.strip_prefix("Tuning ").map(|key| Marker::TuneStart(key.to_owned()))
        }
        (CUBECL_LOGGER, _) => {
            if starts_with(message, "Fastest result ") {
                Some(Marker::TuneEnd(message.to_string()))
            } else if starts_with(message, "validate checksum key=") {
                let text = message.to_string();
                let rest = text.strip_prefix("validate checksum key=")?;
                let key = rest.rsplit_once(", checksum=").map_or(rest, |(key, _)| key);
                Some(Marker::TuneValidate(key.to_owned()))
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Whether the `Fastest result` line `end` closes the autotune of `key`: cubecl writes
/// `Fastest result {name}-{key}. ...`.
pub(crate) fn ends_tune(end: &str, key: &str) -> bool {
    let Some(rest) = end.strip_prefix("Fastest result ") else { return false };
    let mut from = 0;
    while let Some(found) = rest[from..].find(key) {
        let at = from + found;
        let before = rest[..at].ends_with('-');
        let after = rest[at + key.len()..].starts_with('.');
        if before && after {
            return true;
        }
        from = at + 1;
        while !rest.is_char_boundary(from) {
            from += 1;
        }
    }
    false
}

/// Whether `message` starts with `prefix`, formatting no more of it than needed (a WGSL
/// record carries the whole shader source).
fn starts_with(message: &fmt::Arguments<'_>, prefix: &str) -> bool {
    if let Some(s) = message.as_str() {
        return s.starts_with(prefix);
    }
    let mut probe = Prefix { want: prefix.as_bytes(), seen: 0, matches: true };
    let _ = probe.write_fmt(*message);
    probe.matches && probe.seen == prefix.len()
}

/// A writer that compares what is written with a prefix and stops (with an error) as soon as
/// it can tell.
struct Prefix<'a> {
    want: &'a [u8],
    seen: usize,
    matches: bool,
}

impl fmt::Write for Prefix<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let rest = &self.want[self.seen..];
        let n = rest.len().min(s.len());
        if s.as_bytes()[..n] != rest[..n] {
            self.matches = false;
            return Err(fmt::Error);
        }
        self.seen += n;
        if self.seen == self.want.len() {
            return Err(fmt::Error);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_records_of_cubecl_and_wgpu_core_are_told_apart() {
        let source = "fn main() {}\n".repeat(1000);
        let entry = "elemwise_fuse";
        let id = 7;
        let key = "FusedMatmulAutotuneKey - m: 64, n: 10";
        assert_eq!(classify(CUDA_CONTEXT, Level::Trace, &format_args!("Compiling kernel")), Some(Marker::CompileStart));
        assert_eq!(
            classify(CUDA_CONTEXT, Level::Trace, &format_args!("Using PTX cache")),
            Some(Marker::CompileCacheHit)
        );
        assert_eq!(classify(CUDA_CONTEXT, Level::Debug, &format_args!("Compiling kernel")), None);
        assert_eq!(
            classify(WGPU_BASE, Level::Trace, &format_args!("[cubecl-wgpu] compiling WGSL module `{entry}`\n{source}")),
            Some(Marker::CompileStart)
        );
        assert_eq!(
            classify(WGPU_BASE, Level::Trace, &format_args!("Using SPIR-V cache")),
            Some(Marker::CompileCacheHit)
        );
        assert_eq!(classify(WGPU_VULKAN, Level::Debug, &format_args!("Compiling {entry}")), Some(Marker::CompileStart));
        assert_eq!(
            classify(WGPU_CORE_DEVICE, Level::Trace, &format_args!("Device::create_compute_pipeline -> Id({id},1)")),
            Some(Marker::CompileEnd)
        );
        assert_eq!(
            classify(WGPU_CORE_DEVICE, Level::Trace, &format_args!("Device::create_shader_module -> Id({id},1)")),
            None
        );
        assert_eq!(classify(TUNER, Level::Info, &format_args!("Tuning {key}")), Some(Marker::TuneStart(key.into())));
        let end = format!("Fastest result matmul_simple-{key}. \n Top 3 times: [(0, 1ms)], context: ");
        assert_eq!(classify(CUBECL_LOGGER, Level::Trace, &format_args!("{end}")), Some(Marker::TuneEnd(end.clone())));
        assert_eq!(
            classify(CUBECL_LOGGER, Level::Trace, &format_args!("validate checksum key={key}, checksum=abc")),
            Some(Marker::TuneValidate(key.into()))
        );
        assert_eq!(classify(CUBECL_LOGGER, Level::Trace, &format_args!("Autotune[0] name x => y")), None);
        assert_eq!(classify("wgpu_hal::vulkan", Level::Trace, &format_args!("Compiling kernel")), None);
        assert!(is_candidate(TUNER) && !is_candidate("naga::front"));
    }

    #[test]
    fn an_end_names_its_key_after_a_dash_and_before_a_dot() {
        let key = "Key - 64x10";
        assert!(ends_tune(&format!("Fastest result simple-{key}. \n Top 3"), key));
        assert!(ends_tune(&format!("Fastest result double-buffered-{key}. Context: x"), key));
        assert!(!ends_tune(&format!("Fastest result simple-{key}0. Context: x"), key));
        assert!(!ends_tune("Fastest result simple-Other. Context: x", key));
        assert!(!ends_tune(&format!("Tuning {key}"), key));
    }
}
