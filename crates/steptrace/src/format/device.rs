//! The device side of a trace: kernels, copies, launches, streams and the
//! flows between them, in the vocabulary torch.profiler (Kineto) uses, so
//! that one reader serves both and Holistic Trace Analysis reads ours.
//!
//! - A device is a process track (`pid` from [`device_pid`]) named
//!   `GPU N: NAME`, one thread track per stream.
//! - Device events are complete (`"ph":"X"`) events with a category from
//!   [`cats`] and arguments that carry `device`, `stream` and
//!   `correlation` ([`KernelArgs`], [`MemcpyArgs`], [`MemsetArgs`]).
//! - The host call that launched a kernel is an `X` event on the launching
//!   thread with the same `correlation` and no `stream` ([`LaunchArgs`]);
//!   a flow (`s` then `f`, category [`cats::FLOW`], `id` = correlation)
//!   links the two.
//! - What was collected, or why nothing was, is [`DeviceActivity`] in the
//!   metadata.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Event categories.
pub mod cats {
    /// A kernel running on the device.
    pub const KERNEL: &str = "kernel";
    /// A copy run by the device (host to device, device to host, ...).
    pub const MEMCPY: &str = "gpu_memcpy";
    /// A memset run by the device.
    pub const MEMSET: &str = "gpu_memset";
    /// A host-side CUDA driver API call (`cuLaunchKernel`).
    pub const DRIVER: &str = "cuda_driver";
    /// A host-side CUDA runtime API call (`cudaLaunchKernel`: torch).
    pub const RUNTIME: &str = "cuda_runtime";
    /// A host-side synchronisation recorded by the device tracer.
    pub const SYNC: &str = "cuda_sync";
    /// torch's copy of a host annotation on the device timeline.
    pub const GPU_ANNOTATION: &str = "gpu_user_annotation";
    /// The flow from a launch to its kernel.
    pub const FLOW: &str = "ac2g";
}

/// Whether a category is a device-side event (work or annotation).
#[must_use]
pub fn is_device_cat(cat: Option<&str>) -> bool {
    matches!(cat, Some(cats::KERNEL | cats::MEMCPY | cats::MEMSET | cats::GPU_ANNOTATION))
}

/// Whether a category is device work: a kernel, a copy or a memset.
#[must_use]
pub fn is_device_work(cat: Option<&str>) -> bool {
    matches!(cat, Some(cats::KERNEL | cats::MEMCPY | cats::MEMSET))
}

/// Host-side CUDA API names of kernel launches: the driver's
/// `cuLaunchKernel` (cubecl) and the runtime's `cudaLaunchKernel` (torch).
/// A backend's own launch spans are registered with the report instead.
#[must_use]
pub fn is_launch(name: &str) -> bool {
    name.contains("LaunchKernel")
}

/// The process id of device `device` in steptrace traces: host threads
/// live in pid 1, devices from 100 on.
#[must_use]
pub fn device_pid(device: u32) -> u64 {
    100 + u64::from(device)
}

/// The process name of a device track: `GPU 0: NVIDIA H200`.
#[must_use]
pub fn device_process_name(device: u32, name: &str) -> String {
    format!("GPU {device}: {name}")
}

/// The thread name of a stream track: `stream 7`.
#[must_use]
pub fn stream_thread_name(stream: u64) -> String {
    format!("stream {stream}")
}

/// Arguments of a kernel event (Kineto's names).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct KernelArgs {
    /// The device.
    pub device: u32,
    /// The stream.
    pub stream: u64,
    /// Links the kernel to its launch.
    pub correlation: u64,
    /// Grid dimensions.
    pub grid: [u32; 3],
    /// Block dimensions.
    pub block: [u32; 3],
    /// Registers per thread.
    #[serde(rename = "registers per thread")]
    pub registers_per_thread: u32,
    /// Static plus dynamic shared memory, bytes.
    #[serde(rename = "shared memory")]
    pub shared_memory: u64,
}

/// Arguments of a copy event.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MemcpyArgs {
    /// The device.
    pub device: u32,
    /// The stream.
    pub stream: u64,
    /// Links the copy to its host call.
    pub correlation: u64,
    /// Bytes copied.
    pub bytes: u64,
    /// `HtoD`, `DtoH`, `DtoD`, `HtoH`, `PtoP` or `other`.
    pub kind: String,
    /// Achieved rate.
    #[serde(rename = "memory bandwidth (GB/s)")]
    pub gb_per_s: f64,
}

/// Arguments of a memset event.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MemsetArgs {
    /// The device.
    pub device: u32,
    /// The stream.
    pub stream: u64,
    /// Links the memset to its host call.
    pub correlation: u64,
    /// Bytes set.
    pub bytes: u64,
}

/// Arguments of a host launch event: no `stream` (HTA reads an event with
/// a stream as a device event).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LaunchArgs {
    /// The same id as the kernel's.
    pub correlation: u64,
    /// CUPTI's callback id of the API call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cbid: Option<u32>,
}

/// The top-level `deviceProperties` entry of one device (Kineto's names).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct DeviceProperties {
    /// The device ordinal.
    pub id: u32,
    /// The device name.
    pub name: String,
    /// Global memory, bytes.
    pub total_global_mem: u64,
    /// Compute capability, major.
    pub compute_major: u32,
    /// Compute capability, minor.
    pub compute_minor: u32,
    /// Streaming multiprocessors.
    pub num_sms: u32,
}

/// Whether device activity is in the file, or why not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ActivityStatus {
    /// Device events were collected.
    Observed,
    /// None were; the reason says why (never read as zero).
    NotObserved {
        /// Why.
        reason: String,
    },
}

/// How CUPTI's clock was mapped onto the trace clock.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct ClockCalibration {
    /// The device clock's reading at trace time 0, ns (trace µs ≈ (device
    /// ns − offset) / 1000, corrected for drift).
    pub offset_ns: f64,
    /// Drift of the device clock against the host clock, parts per million.
    pub drift_ppm: f64,
    /// Half-width of the bracket of the calibration reads, ns.
    pub uncertainty_ns: f64,
}

/// What was collected of the device during the window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeviceActivity {
    /// Observed, or not with a reason.
    #[serde(flatten)]
    pub status: ActivityStatus,
    /// The collector and its version (`CUPTI 13.0.1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The activity kinds enabled.
    #[serde(default)]
    pub kinds: Vec<String>,
    /// Records written, by category.
    #[serde(default)]
    pub written: Map<String, Value>,
    /// Records outside the window (dropped, counted here).
    #[serde(default)]
    pub outside_window: u64,
    /// Records CUPTI dropped for lack of buffer space.
    #[serde(default)]
    pub dropped_by_collector: u64,
    /// Kernels without a launch record of the same correlation.
    #[serde(default)]
    pub orphan_kernels: u64,
    /// The clock mapping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockCalibration>,
    /// Problems met while collecting (the records may be incomplete).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

impl DeviceActivity {
    /// Nothing observed, for `reason`.
    #[must_use]
    pub fn not_observed(reason: impl Into<String>) -> DeviceActivity {
        DeviceActivity {
            status: ActivityStatus::NotObserved { reason: reason.into() },
            source: None,
            kinds: Vec::new(),
            written: Map::new(),
            outside_window: 0,
            dropped_by_collector: 0,
            orphan_kernels: 0,
            clock: None,
            problems: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_args_use_kineto_names_and_activity_says_why_not() {
        let args = KernelArgs { device: 0, stream: 7, correlation: 1369, ..KernelArgs::default() };
        let v = serde_json::to_value(&args).unwrap();
        assert_eq!(v["stream"], 7);
        assert!(v.get("registers per thread").is_some());
        let none = serde_json::to_value(DeviceActivity::not_observed("libcupti.so not found")).unwrap();
        assert_eq!(none["status"], "not_observed");
        assert_eq!(none["reason"], "libcupti.so not found");
        let back: DeviceActivity = serde_json::from_value(none).unwrap();
        assert_eq!(back.status, ActivityStatus::NotObserved { reason: "libcupti.so not found".into() });
        assert!(is_device_work(Some(cats::MEMCPY)) && !is_device_work(Some(cats::GPU_ANNOTATION)));
        assert_eq!(device_process_name(0, "NVIDIA H200"), "GPU 0: NVIDIA H200");
    }
}
