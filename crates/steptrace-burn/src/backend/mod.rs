//! Backend choice with labelled fallback.
//!
//! * [`probe`] / [`probe_all`] check, without ever panicking, whether CUDA, wgpu and the
//!   CPU (ndarray) backend can run on this machine, and why not.
//! * [`select`] turns a user's [`BackendChoice`] into a [`Selection`]: `auto` takes CUDA,
//!   else wgpu on a GPU adapter, else wgpu on a CPU adapter (lavapipe), else ndarray, and
//!   records why every skipped backend was skipped. [`Selection::label`] says so loudly, so
//!   a fallback run never reads as a GPU/CUDA analysis.
//! * [`run_on`] monomorphises a [`BackendRun`] job over the selected autodiff backend.
//! * [`sync`], [`try_sync`], [`memory_in_use`] and [`memory_usage`] are the backend-generic
//!   helpers the step profiler needs.
//! * [`configure_cubecl_cache`] points cubecl's autotune and compilation caches at a
//!   persistent directory; it must run before the first backend client is created.

mod cache;
mod guard;
mod probe;
mod run;
mod select;

use std::fmt;
use std::str::FromStr;

pub use cache::{configure_cubecl_cache, count_cache_files, CacheConfig, CacheState};
pub use probe::{probe, probe_all, Probe};
pub use run::{
    backend_runtime_name, backend_type_name, memory_in_use, memory_usage, run_on, short_type_name,
    sync, try_sync, BackendRun, CpuAutodiff, CudaAutodiff, MemorySnapshot, WgpuAutodiff,
};
pub use select::{select, Selection, WgpuTarget};

/// What the user asked for (`--backend auto|cuda|wgpu|cpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    /// CUDA if usable, else wgpu on a GPU, else wgpu on a CPU adapter, else ndarray.
    #[default]
    Auto,
    /// CUDA only; an error if CUDA is unusable.
    Cuda,
    /// wgpu only (best adapter: discrete GPU, integrated GPU, virtual GPU, then CPU).
    Wgpu,
    /// The ndarray CPU backend.
    Cpu,
}

impl BackendChoice {
    /// Every choice, in the order they are documented.
    pub const ALL: [BackendChoice; 4] = [
        BackendChoice::Auto,
        BackendChoice::Cuda,
        BackendChoice::Wgpu,
        BackendChoice::Cpu,
    ];

    /// The name accepted by [`FromStr`] and printed by [`Display`](fmt::Display).
    pub fn as_str(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Cuda => "cuda",
            BackendChoice::Wgpu => "wgpu",
            BackendChoice::Cpu => "cpu",
        }
    }

    /// The backend this choice pins, or `None` for [`BackendChoice::Auto`].
    pub fn kind(self) -> Option<BackendKind> {
        match self {
            BackendChoice::Auto => None,
            BackendChoice::Cuda => Some(BackendKind::Cuda),
            BackendChoice::Wgpu => Some(BackendKind::Wgpu),
            BackendChoice::Cpu => Some(BackendKind::Cpu),
        }
    }
}

impl fmt::Display for BackendChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for BackendChoice {
    type Err = BackendError;

    /// Parses `auto`, `cuda`, `wgpu` or `cpu` (case-insensitive, surrounding blanks ignored).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim();
        BackendChoice::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(wanted))
            .ok_or_else(|| BackendError::UnknownBackend {
                name: s.to_string(),
            })
    }
}

/// A concrete backend family.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// `Autodiff<burn::backend::Cuda>` (cubecl CUDA runtime, fusion on).
    Cuda,
    /// `Autodiff<burn::backend::Wgpu>` (cubecl wgpu runtime over Vulkan/Metal, fusion on).
    Wgpu,
    /// `Autodiff<burn::backend::NdArray>` on the CPU.
    Cpu,
}

impl BackendKind {
    /// Every kind, in `auto`'s order of preference.
    pub const ALL: [BackendKind; 3] = [BackendKind::Cuda, BackendKind::Wgpu, BackendKind::Cpu];

    /// `"cuda"`, `"wgpu"` or `"cpu"`.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Cuda => "cuda",
            BackendKind::Wgpu => "wgpu",
            BackendKind::Cpu => "cpu",
        }
    }

    /// Human name used in messages: `"CUDA"`, `"wgpu"`, `"CPU (ndarray)"`.
    pub fn display_name(self) -> &'static str {
        match self {
            BackendKind::Cuda => "CUDA",
            BackendKind::Wgpu => "wgpu",
            BackendKind::Cpu => "CPU (ndarray)",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<BackendKind> for BackendChoice {
    fn from(kind: BackendKind) -> Self {
        match kind {
            BackendKind::Cuda => BackendChoice::Cuda,
            BackendKind::Wgpu => BackendChoice::Wgpu,
            BackendKind::Cpu => BackendChoice::Cpu,
        }
    }
}

/// Errors of backend parsing, selection and synchronisation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The explicitly requested backend cannot run here.
    #[error("the {} backend was requested but is unavailable: {reason}", kind.display_name())]
    Unavailable {
        /// The backend that was requested.
        kind: BackendKind,
        /// What is missing (e.g. `libcuda.so not found ...`).
        reason: String,
    },
    /// A backend name that is not one of `auto`, `cuda`, `wgpu`, `cpu`.
    #[error("unknown backend `{name}`; valid names are: auto, cuda, wgpu, cpu")]
    UnknownBackend {
        /// The name that was given.
        name: String,
    },
    /// Waiting for the device to finish its queued work failed (see [`try_sync`]).
    #[error("backend synchronisation failed: {message}")]
    Sync {
        /// The backend's error message, or the panic message.
        message: String,
    },
}
