//! Backend choice with labelled fallback.
//!
//! * [`probe`] / [`probe_all`] check, without ever panicking, whether CUDA, wgpu and the
//!   CPU backend (burn-flex) can run on this machine, and why not.
//! * [`select`] turns a user's [`BackendChoice`] into a [`Selection`]: `auto` takes CUDA,
//!   else wgpu on a GPU adapter, else wgpu on a CPU adapter (lavapipe), else the CPU (burn-flex), and
//!   records why every skipped backend was skipped. [`Selection::label`] says so loudly, so
//!   a fallback run never reads as a GPU/CUDA analysis.
//! * [`Selection::device`] opens the selected backend's device: burn 0.22's tensors carry no
//!   backend type, so one `burn::prelude::Device` runs CUDA, wgpu or the CPU.
//! * [`memory_in_use`] and [`memory_usage`] read the device's memory pools for the step
//!   profiler (device sync is [`crate::sync::sync`]).
//! * [`configure_cubecl_cache`] points cubecl's autotune and compilation caches at a
//!   persistent directory and sets its autotune level; it must run before the first backend
//!   client is created.
//! * [`StartupCapture`] itemises a run's cold start (device client, compilation, autotune,
//!   rest) from cubecl's own log records, and tells a cold, partly warm or warm start from
//!   what cubecl compiled and tuned (see [Cold start](self#cold-start)).
//!
//! # Cold start
//!
//! See the `startup` module's documentation, summed up on [`StartupCapture`]: the records
//! are read in-process through a `log` logger that stands in for tracing-log's `LogTracer`
//! ([`install_log_capture`], [`install_profiler`]).
//!
//! Each backend is compiled in only with its crate feature (`cuda`, `wgpu`, `cpu`; all three
//! by default). A backend that was not compiled in is reported, never panicked on: its probe
//! is unavailable with the reason "steptrace-burn was built without its `X` feature",
//! [`select`] falls back past it (or names it in [`BackendError::Unavailable`]), and
//! [`Selection::device`] returns [`BackendError::NotCompiled`].
//!
//! Module layering (each file uses only those above it, and the types of this file):
//! `guard` (panic containment), `adapter` (wgpu adapter picking, pure), `probe`, `types`
//! (what burn runs for each kind, and its names), `select`, `startup` (the cold-start
//! capture), `dispatch` (`Selection::device`), `memory`, and `cache`.

mod adapter;
mod cache;
mod dispatch;
mod guard;
mod memory;
mod probe;
mod select;
mod startup;
mod types;

use std::fmt;
use std::str::FromStr;

pub use adapter::WgpuTarget;
pub use guard::catch_silently;
pub(crate) use guard::panic_message;

/// Held by this crate's tests that allocate on the shared wgpu device and read its memory
/// figures: one test's tensors must not appear in another's before/after comparison.
#[cfg(test)]
pub(crate) static DEVICE_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());
pub use cache::{configure_cubecl_cache, count_cache_files, AutotuneLevel, CacheConfig, CacheState};
pub use memory::{
    memory_in_use, memory_limits, memory_usage, memory_usage_after_sync, pool_largest_allocations, MemoryAsker,
    MemoryLimits, MemorySnapshot, PendingUsage,
};
pub use probe::{cuda_kernel_compiler, probe, probe_all, Probe};
pub use select::{select, Selection};
pub(crate) use startup::timed_client;
pub use startup::{
    install_log_capture, install_profiler, startup_progress, LogSlotTaken, StartupCapture, StartupProgress,
};
pub use types::{backend_runtime_name, backend_type_name, short_type_name};

/// What the user asked for (`--backend auto|cuda|wgpu|cpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    /// CUDA if usable, else wgpu on a GPU, else wgpu on a CPU adapter, else the CPU (burn-flex).
    #[default]
    Auto,
    /// CUDA only; an error if CUDA is unusable.
    Cuda,
    /// wgpu only (best adapter: discrete GPU, integrated GPU, virtual GPU, then CPU).
    Wgpu,
    /// burn's CPU backend (burn-flex).
    Cpu,
}

impl BackendChoice {
    /// Every choice, in the order they are documented.
    pub const ALL: [BackendChoice; 4] =
        [BackendChoice::Auto, BackendChoice::Cuda, BackendChoice::Wgpu, BackendChoice::Cpu];

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
            .ok_or_else(|| BackendError::UnknownBackend { name: s.to_string() })
    }
}

/// A concrete backend family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// `Device::cuda(0)`: cubecl's CUDA runtime, fusion on.
    Cuda,
    /// A wgpu device: cubecl's wgpu runtime over Vulkan/Metal, fusion on.
    Wgpu,
    /// `Device::flex()`: burn-flex on the CPU (burn 0.22's replacement for the deprecated
    /// ndarray backend).
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

    /// Whether burn runs this backend through cubecl, so that fusion,
    /// autotune and cubecl's kernel caches apply (burn-flex uses none of
    /// them).
    pub fn uses_cubecl(self) -> bool {
        !matches!(self, BackendKind::Cpu)
    }

    /// What the manifest and the console say for a cubecl setting on a
    /// backend without cubecl.
    pub const NOT_CUBECL: &'static str = "not applicable: burn-flex does not use cubecl";

    /// Human name used in messages: `"CUDA"`, `"wgpu"`, `"CPU (burn-flex)"`.
    pub fn display_name(self) -> &'static str {
        match self {
            BackendKind::Cuda => "CUDA",
            BackendKind::Wgpu => "wgpu",
            BackendKind::Cpu => "CPU (burn-flex)",
        }
    }

    /// The steptrace-burn feature that compiles this backend in: `"cuda"`, `"wgpu"`, `"cpu"`.
    pub fn feature(self) -> &'static str {
        self.as_str()
    }

    /// Whether this build of steptrace-burn has the backend compiled in (its [`feature`]).
    ///
    /// [`feature`]: BackendKind::feature
    pub fn is_compiled(self) -> bool {
        match self {
            BackendKind::Cuda => cfg!(feature = "cuda"),
            BackendKind::Wgpu => cfg!(feature = "wgpu"),
            BackendKind::Cpu => cfg!(feature = "cpu"),
        }
    }

    /// Why a backend that is not compiled in cannot run, for probes and errors.
    pub(crate) fn not_compiled_reason(self) -> String {
        format!("steptrace-burn was built without its `{}` feature", self.feature())
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

/// Errors of backend parsing, selection and dispatch.
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
    /// [`Selection::device`] was asked for a backend that this build does not contain (see
    /// [`BackendKind::is_compiled`]); [`select`] never picks one.
    #[error("the {} backend is not compiled in: {}", kind.display_name(), kind.not_compiled_reason())]
    NotCompiled {
        /// The backend that was asked for.
        kind: BackendKind,
    },
    /// `auto` found no backend that can run here (only possible in a build without the
    /// `cpu` feature: the CPU backend is otherwise always available).
    #[error("no backend can run here: {reasons}")]
    NoBackend {
        /// Why each backend was skipped, e.g. `"CUDA unavailable: ...; wgpu unavailable: ..."`.
        reasons: String,
    },
}
