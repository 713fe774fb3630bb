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

/// The arguments of a device event that steptrace writes as its own description of the event,
/// in its own words: how it was timed ([`KernelArgs::timing`]) and how it was attributed
/// ([`KernelAttribution::attribution`]). Label hygiene does not read them as input content.
pub const DESCRIPTION_ARGS: &[&str] = &["timing", "attribution"];

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
    /// Grid dimensions; absent where the tracer does not see them (timestamp queries).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grid: Option<[u32; 3]>,
    /// Block dimensions; absent where the tracer does not see them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block: Option<[u32; 3]>,
    /// Registers per thread.
    #[serde(rename = "registers per thread", skip_serializing_if = "Option::is_none")]
    pub registers_per_thread: Option<u32>,
    /// Static plus dynamic shared memory, bytes.
    #[serde(rename = "shared memory", skip_serializing_if = "Option::is_none")]
    pub shared_memory: Option<u64>,
    /// How the kernel's start and end were measured, where it was not by CUPTI
    /// (`timestamp queries`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing: Option<String>,
    /// What the kernel was launched for, where the launch was observed.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<KernelAttribution>,
}

/// What a kernel ran for: the burn operations of its fused block and the host span in which
/// they were called. Every field but `attribution` is absent when the kernel is not tied to
/// a block; `attribution` then says why ([`attribution`] has the words).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct KernelAttribution {
    /// The fused block's number in the window (blocks run in this order). Written as
    /// `fused block`: a kernel's `block` is its thread-block dimensions.
    #[serde(rename = "fused block", skip_serializing_if = "Option::is_none")]
    pub block: Option<u64>,
    /// The op kind the kernel counts under: `matmul`, `conv`, `elementwise (fused)`, ...
    #[serde(rename = "op kind", skip_serializing_if = "Option::is_none")]
    pub op_kind: Option<String>,
    /// The block's operations in a compact, bounded form: `Matmul [256, 128]; Add; Relu`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ops: Option<String>,
    /// The innermost host span path the operations were called in:
    /// `forward > encoder.layer2`, `backward > conv1` (inferred), `optimizer`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span: Option<String>,
    /// The step phase: `forward`, `loss`, `backward`, `optimizer`, or another span's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// How the kernel was attributed, or why it was not: one of [`attribution`]'s words.
    pub attribution: String,
    /// The fused block's minimum work, priced from its operations' shapes and dtypes: every
    /// kernel of the block carries the block's figures (a block's kernels are priced
    /// together, against their summed time).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub work: Option<BlockWork>,
}

/// The least a fused block's operations must do: the FLOPs of its arithmetic, and the bytes
/// that must move (each tensor it reads from outside the block read once, each tensor it
/// leaves behind written once; what one of its operations writes and a later one reads is
/// an intermediate and moves nothing).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct BlockWork {
    /// Floating-point operations (a multiply-add counts two).
    #[serde(rename = "min flops")]
    pub flops: f64,
    /// Bytes read plus bytes written.
    #[serde(rename = "min bytes")]
    pub bytes: f64,
    /// The dtype the arithmetic runs in (`f32`, `f16`, `bf16`): its matmul's or
    /// convolution's, else its first operation's output's.
    #[serde(rename = "compute dtype")]
    pub dtype: String,
    /// The block's operations that have no cost rule (their FLOPs are not counted, their
    /// bytes are): `CtcLoss`, `Custom`. Empty when every operation is priced.
    #[serde(rename = "unpriced ops", default, skip_serializing_if = "Vec::is_empty")]
    pub unpriced: Vec<String>,
}

impl BlockWork {
    /// Whether every operation of the block has a cost rule.
    #[must_use]
    pub fn priced(&self) -> bool {
        self.unpriced.is_empty()
    }
}

impl KernelAttribution {
    /// A kernel attributed to nothing, for `reason` (one of [`attribution`]'s `NO_*` words).
    #[must_use]
    pub fn not_attributed(reason: &str) -> KernelAttribution {
        KernelAttribution { attribution: reason.to_owned(), ..KernelAttribution::default() }
    }
}

/// The words of [`KernelAttribution::attribution`].
pub mod attribution {
    /// The block's operations were called inside `span`.
    pub const CALLED: &str = "called in span";
    /// A backward (or optimizer) operation, tied to the forward span whose tensors it reads.
    pub const INFERRED: &str = "inferred from the forward tensors it reads";
    /// A backward operation that reads no forward tensor: named by its phase only.
    pub const PHASE_ONLY: &str = "phase only: reads no forward tensor";
    /// The block's operations were called in different phases (a fusion across the loss and
    /// backward): `span` lists the phases.
    pub const ACROSS: &str = "called across phases";
    /// The block's operations were called outside every steptrace span: the kernel has an op
    /// (`op kind`, `ops`) but no `span`, so it is attributed to no layer.
    pub const OUTSIDE_SPANS: &str = "called outside steptrace's spans";
    /// The layer is named from the model's module tree rather than from a span: `span` is the
    /// phase and the parameter path of the module whose parameters the block's operations read
    /// (`forward > blocks.1.linear`).
    pub const MODULE: &str = "named by the module tree: the parameters its operations read";
    /// A backward (or optimizer) operation, tied to the forward layer whose tensors it reads,
    /// that layer being named from the module tree (`backward > blocks.1.linear`).
    pub const MODULE_INFERRED: &str = "inferred from forward tensors named by the module tree";
    /// Prefix of the reasons a kernel is not attributed.
    pub const NOT_PREFIX: &str = "not attributed: ";
    /// Launched outside a fused block (an autotune candidate, a copy kernel, a reduction
    /// burn runs on its own).
    pub const NO_BLOCK: &str = "not attributed: launched outside any fused block (autotune, copies, ...)";
    /// A kernel launched once the window's attribution notes were full (a bound on their
    /// memory, a million operations).
    pub const NOTES_FULL: &str = "not attributed: the window's attribution notes were full";
    /// A kernel whose launch was not observed (before the observers were installed, or not
    /// issued through cubecl).
    pub const NO_LAUNCH: &str = "not attributed: its launch was not observed";

    /// Whether `how` ties the kernel to a burn op (its fused block's operations): every word
    /// but the `not attributed: ` reasons. Such a kernel may still lie outside every span
    /// ([`OUTSIDE_SPANS`]): [`is_tied_to_span`] says whether it is attributed to a layer.
    #[must_use]
    pub fn is_attributed(how: &str) -> bool {
        !how.starts_with(NOT_PREFIX)
    }

    /// Whether `how` ties the kernel to a span path (a phase, a layer): an op, and a `span`
    /// that says where. [`OUTSIDE_SPANS`] and the `not attributed: ` reasons do not.
    #[must_use]
    pub fn is_tied_to_span(how: &str) -> bool {
        is_attributed(how) && how != OUTSIDE_SPANS
    }

    /// Whether `how` names the kernel's layer by an inference from the forward tensors its
    /// operations read ([`INFERRED`], [`MODULE_INFERRED`]).
    #[must_use]
    pub fn is_inferred(how: &str) -> bool {
        how == INFERRED || how == MODULE_INFERRED
    }

    /// Whether `how` names the kernel's layer from the model's module tree ([`MODULE`],
    /// [`MODULE_INFERRED`]) rather than from steptrace's spans.
    #[must_use]
    pub fn is_named_by_module(how: &str) -> bool {
        how == MODULE || how == MODULE_INFERRED
    }
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
    /// For a host-to-device copy of a tensor made from host data, where that was observed
    /// (`--detail ops`): op kind `upload`, the tensor's shape, and the span that made it.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<KernelAttribution>,
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
    /// What opening and closing the collector took on the profiler's thread, by part, µs
    /// (`open activity kinds`: turning CUPTI's kinds on at the warmup step; `close flush`).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub collector_us: Map<String, Value>,
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
            collector_us: Map::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_args_use_kineto_names_and_activity_says_why_not() {
        let mut args = KernelArgs { device: 0, stream: 7, correlation: 1369, ..KernelArgs::default() };
        let v = serde_json::to_value(&args).unwrap();
        assert_eq!(v["stream"], 7);
        assert!(v.get("registers per thread").is_none() && v.get("grid").is_none(), "absent, not zero: {v}");
        assert!(v.get("attribution").is_none());
        args.registers_per_thread = Some(32);
        args.attribution = Some(KernelAttribution {
            op_kind: Some("matmul".into()),
            span: Some("forward > conv1".into()),
            attribution: attribution::CALLED.into(),
            ..KernelAttribution::default()
        });
        let v = serde_json::to_value(&args).unwrap();
        assert_eq!((v["registers per thread"].as_u64(), v["op kind"].as_str()), (Some(32), Some("matmul")));
        assert_eq!(
            (v["span"].as_str(), v["attribution"].as_str()),
            (Some("forward > conv1"), Some(attribution::CALLED))
        );
        assert!(v.get("fused block").is_none() && !attribution::is_attributed(attribution::NO_BLOCK));
        use attribution::{is_inferred, is_named_by_module, is_tied_to_span, INFERRED, MODULE, MODULE_INFERRED};
        let outside = attribution::OUTSIDE_SPANS;
        assert!(attribution::is_attributed(outside) && !is_tied_to_span(outside) && is_tied_to_span(MODULE));
        assert!(is_inferred(MODULE_INFERRED) && is_inferred(INFERRED) && !is_inferred(MODULE));
        assert!(is_named_by_module(MODULE) && is_named_by_module(MODULE_INFERRED) && !is_named_by_module(INFERRED));
        args.block = Some([32, 8, 1]);
        args.attribution.as_mut().unwrap().block = Some(4);
        let v = serde_json::to_value(&args).unwrap();
        assert_eq!((v["block"][0].as_u64(), v["fused block"].as_u64()), (Some(32), Some(4)), "no key clash: {v}");
        args.timing = Some("timestamp queries".into());
        let v = serde_json::to_value(&args).unwrap();
        assert!(DESCRIPTION_ARGS.iter().all(|key| v[key].is_string()), "{v}");
        let none = serde_json::to_value(DeviceActivity::not_observed("libcupti.so not found")).unwrap();
        assert_eq!(none["status"], "not_observed");
        assert_eq!(none["reason"], "libcupti.so not found");
        let back: DeviceActivity = serde_json::from_value(none).unwrap();
        assert_eq!(back.status, ActivityStatus::NotObserved { reason: "libcupti.so not found".into() });
        assert!(is_device_work(Some(cats::MEMCPY)) && !is_device_work(Some(cats::GPU_ANNOTATION)));
        assert_eq!(device_process_name(0, "NVIDIA H200"), "GPU 0: NVIDIA H200");
    }
}
