//! A device's measured limits: what its memory moves and its arithmetic computes per second
//! at best, and what an empty kernel launch costs, as `steptrace peaks` measures them with
//! the backend's own kernels.
//!
//! A profiled run puts the peaks it found (in the cache `steptrace peaks` keeps) in its
//! trace's manifest, under [`PEAKS`] among the manifest's other fields; the report prices each kernel's minimum work against
//! them (the floor: the larger of its bytes over the bandwidth and its FLOPs over the
//! throughput). Every figure says how it was measured, and the published figures (a
//! datasheet's) stay apart from the measured ones: the report prices against measured
//! figures only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The manifest key of a trace's [`Peaks`].
pub const PEAKS: &str = "peaks";

/// The version of this layout; a cache file of another version is measured again.
pub const PEAKS_VERSION: u32 = 1;

/// One measured figure: its value, and how it was measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// The figure (bytes/s, FLOP/s or µs, as its field says).
    pub value: f64,
    /// The spread of the repeats it is the best of: (worst - best) / best.
    pub spread: f64,
    /// How it was measured, in words: the kernel, the size, the repeats, what is timed.
    pub method: String,
}

/// A datasheet's figure for the device, where known, with its source.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Published {
    /// The figure (bytes/s or FLOP/s).
    pub value: f64,
    /// Where it comes from (the datasheet and the line of it).
    pub source: String,
}

/// A device's limits as measured on one backend.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Peaks {
    /// [`PEAKS_VERSION`] of the layout.
    pub version: u32,
    /// The device, as the backend names it (`NVIDIA H200`, `llvmpipe (LLVM 15.0.7, 256 bits)`).
    pub device: String,
    /// The backend: `cuda`, `wgpu` or `cpu`.
    pub backend: String,
    /// The versions of the software the figures hold for (burn, cubecl, the driver where
    /// known): a cache file for other versions is measured again.
    pub software: String,
    /// When they were measured (RFC 3339, UTC).
    pub measured_at: String,
    /// Memory read bandwidth, bytes/s (a reduction over a tensor much larger than the caches).
    pub read: Option<Measured>,
    /// Memory write bandwidth, bytes/s (a fill).
    pub write: Option<Measured>,
    /// Copy bandwidth, bytes/s, counting the bytes read and the bytes written.
    pub copy: Option<Measured>,
    /// Arithmetic throughput by dtype (`f32`, `f16`, `bf16`), FLOP/s (a large square matmul).
    pub flops: BTreeMap<String, Measured>,
    /// The cost of an empty kernel launch, µs (a one-element kernel launched many times).
    pub launch_us: Option<Measured>,
    /// The device's published figures, where known: `bandwidth`, `f32`, `f16`, `bf16`.
    #[serde(default)]
    pub published: BTreeMap<String, Published>,
    /// What could not be measured, and why.
    #[serde(default)]
    pub problems: Vec<String>,
    /// Whether these are a CPU's figures (wgpu on lavapipe, or the CPU backend): said
    /// wherever they are shown.
    pub cpu: bool,
}

impl Peaks {
    /// The bandwidth a kernel's minimum bytes are priced against: the copy bandwidth (reads
    /// and writes together, as most kernels move both), else the read bandwidth.
    #[must_use]
    pub fn bandwidth(&self) -> Option<f64> {
        self.copy.as_ref().or(self.read.as_ref()).map(|m| m.value).filter(|v| *v > 0.0)
    }

    /// The throughput FLOPs of `dtype` are priced against: that dtype's measured figure, else
    /// f32's (the dtype every backend measures).
    #[must_use]
    pub fn throughput(&self, dtype: &str) -> Option<f64> {
        self.flops.get(dtype).or_else(|| self.flops.get("f32")).map(|m| m.value).filter(|v| *v > 0.0)
    }
}
