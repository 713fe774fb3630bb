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

/// The plausible range of a measured bandwidth, bytes/s: from 1 MB/s to 1 EB/s. A figure
/// outside it (or zero, negative, not a number) is not a limit anything can be priced
/// against.
pub const BANDWIDTH_RANGE: (f64, f64) = (1e6, 1e18);

/// The plausible range of a measured throughput, FLOP/s: from 1 MFLOP/s to 1 ZFLOP/s.
pub const THROUGHPUT_RANGE: (f64, f64) = (1e6, 1e21);

/// `what` with its value and why it is not a usable limit in `range` (`copy bandwidth 0
/// B/s: not positive`); `None` when it is one. A value that is not finite is not shown.
fn problem(what: &str, value: f64, unit: &str, range: (f64, f64)) -> Option<String> {
    let why = unusable(value, range)?;
    Some(if value.is_finite() { format!("{what} {value} {unit}: {why}") } else { format!("{what}: {why}") })
}

/// Why `value` is not a usable limit in `range`, in words; `None` when it is one.
pub(crate) fn unusable(value: f64, (low, high): (f64, f64)) -> Option<&'static str> {
    if !value.is_finite() {
        Some("not a finite number")
    } else if value <= 0.0 {
        Some("not positive")
    } else if value < low {
        Some("implausibly small")
    } else if value > high {
        Some("implausibly large")
    } else {
        None
    }
}

impl Peaks {
    /// The bandwidth a kernel's minimum bytes are priced against: the copy bandwidth (reads
    /// and writes together, as most kernels move both), else the read bandwidth; a figure
    /// outside [`BANDWIDTH_RANGE`] is passed over.
    #[must_use]
    pub fn bandwidth(&self) -> Option<f64> {
        [&self.copy, &self.read]
            .into_iter()
            .flatten()
            .map(|m| m.value)
            .find(|v| unusable(*v, BANDWIDTH_RANGE).is_none())
    }

    /// The throughput FLOPs of `dtype` are priced against: that dtype's measured figure, else
    /// f32's (the dtype every backend measures); a figure outside [`THROUGHPUT_RANGE`] is
    /// passed over.
    #[must_use]
    pub fn throughput(&self, dtype: &str) -> Option<f64> {
        [self.flops.get(dtype), self.flops.get("f32")]
            .into_iter()
            .flatten()
            .map(|m| m.value)
            .find(|v| unusable(*v, THROUGHPUT_RANGE).is_none())
    }

    /// The figures that cannot be priced against, each named with its value and why
    /// (`copy bandwidth 0 B/s: not positive`), in the order copy, read, write, then each
    /// dtype's throughput. Missing figures are not listed: [`Peaks::check`] says when the
    /// ones pricing needs are missing.
    #[must_use]
    pub fn unusable_figures(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (what, m) in
            [("copy bandwidth", &self.copy), ("read bandwidth", &self.read), ("write bandwidth", &self.write)]
        {
            out.extend(m.as_ref().and_then(|m| problem(what, m.value, "B/s", BANDWIDTH_RANGE)));
        }
        for (dtype, m) in &self.flops {
            out.extend(problem(&format!("{dtype} throughput"), m.value, "FLOP/s", THROUGHPUT_RANGE));
        }
        out
    }

    /// Whether these limits can price work: their layout is [`PEAKS_VERSION`], and they hold
    /// a usable bandwidth (copy or read) and a usable f32 throughput.
    ///
    /// # Errors
    ///
    /// Which of those fails, in words: another layout version, or the unusable or missing
    /// figure (`no usable bandwidth (copy bandwidth 0 B/s: not positive; read bandwidth
    /// missing)`).
    ///
    /// # Examples
    ///
    /// ```
    /// # use steptrace::format::peaks::{Measured, Peaks, PEAKS_VERSION};
    /// # let m = |value: f64| Some(Measured { value, spread: 0.0, method: String::new() });
    /// # let mut peaks = Peaks { version: PEAKS_VERSION, device: "d".into(), backend: "cuda".into(),
    /// #     software: String::new(), measured_at: String::new(), read: None, write: None, copy: None,
    /// #     flops: [("f32".to_owned(), m(1e13).unwrap())].into(), launch_us: None,
    /// #     published: Default::default(), problems: vec![], cpu: false };
    /// peaks.copy = m(0.0);
    /// assert_eq!(
    ///     peaks.check().unwrap_err(),
    ///     "no usable bandwidth (copy bandwidth 0 B/s: not positive; read bandwidth missing)"
    /// );
    /// peaks.read = m(2e12);
    /// assert!(peaks.check().is_ok());
    /// assert_eq!(peaks.bandwidth(), Some(2e12));
    /// ```
    pub fn check(&self) -> Result<(), String> {
        if self.version != PEAKS_VERSION {
            return Err(format!(
                "written in layout version {} of peaks files; this steptrace reads version {PEAKS_VERSION}",
                self.version
            ));
        }
        let describe = |what: &str, m: Option<&Measured>, unit: &str, range| match m {
            None => format!("{what} missing"),
            Some(m) => {
                problem(what, m.value, unit, range).unwrap_or_else(|| format!("{what} {} {unit}: usable", m.value))
            }
        };
        if self.bandwidth().is_none() {
            return Err(format!(
                "no usable bandwidth ({}; {})",
                describe("copy bandwidth", self.copy.as_ref(), "B/s", BANDWIDTH_RANGE),
                describe("read bandwidth", self.read.as_ref(), "B/s", BANDWIDTH_RANGE)
            ));
        }
        if self.flops.get("f32").is_none_or(|m| unusable(m.value, THROUGHPUT_RANGE).is_some()) {
            return Err(format!(
                "no usable f32 throughput ({})",
                describe("f32 throughput", self.flops.get("f32"), "FLOP/s", THROUGHPUT_RANGE)
            ));
        }
        Ok(())
    }
}

/// A device name as two names of the same device compare: trimmed, runs of white space
/// made one space, and case folded (`NVIDIA  H200 ` and `nvidia h200` are one device).
#[must_use]
pub fn device_key(name: &str) -> String {
    name.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

#[cfg(test)]
#[path = "peaks_tests.rs"]
mod tests;
