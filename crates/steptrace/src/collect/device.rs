//! Device activity: kernels, copies and launches recorded by a device
//! tracer (CUPTI on CUDA) during each cycle, on the trace's clock.
//!
//! The core knows no device API. A backend crate gives the profiler a
//! [`DeviceCollector`] ([`ProfilerBuilder::device_collector`]); the
//! profiler opens it when a cycle starts collecting (its warmup, as
//! torch.profiler does), and closes it when the cycle ends, before the
//! file is finalised. The collector returns a [`DeviceWindow`] whose
//! timestamps are already on the trace clock: µs since the `origin`
//! instant the profiler passes in, which is trace time 0.
//!
//! Without a collector, the profiler can be told why
//! ([`ProfilerBuilder::device_not_observed`]): every file then says
//! "device activity: not observed" with that reason, never zero.
//!
//! [`ProfilerBuilder::device_collector`]: crate::ProfilerBuilder::device_collector
//! [`ProfilerBuilder::device_not_observed`]: crate::ProfilerBuilder::device_not_observed

use std::sync::Arc;
use std::time::Instant;

use crate::format::device::{ClockCalibration, DeviceProperties, KernelArgs, MemcpyArgs, MemsetArgs};

/// An error of a device collector, with its explanation.
pub type DeviceError = Box<dyn std::error::Error + Send + Sync>;

/// Records device activity for the profiler's windows.
pub trait DeviceCollector: Send {
    /// Starts recording (when a cycle's warmup begins).
    ///
    /// # Errors
    ///
    /// When the tracer cannot start; the cycle's file then says why the
    /// device was not observed.
    fn open(&mut self) -> Result<(), DeviceError>;

    /// Stops recording, flushes, and returns what was recorded since
    /// [`open`](Self::open), mapped onto the trace clock whose zero is
    /// `origin`.
    ///
    /// # Errors
    ///
    /// When the tracer cannot stop or flush.
    fn close(&mut self, origin: Instant) -> Result<DeviceWindow, DeviceError>;

    /// Called just before [`close`](Self::close): in how many steps the schedule opens the
    /// next window (`None`: no further window is planned, or it cannot be known, as on
    /// demand). A collector whose start-up costs more than staying on for that many steps may
    /// stay on between the two windows. The default ignores it.
    fn next_window_in(&mut self, steps: Option<u64>) {
        let _ = steps;
    }
}

/// What a collector recorded over one window, on the trace clock (µs).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct DeviceWindow {
    /// The tracer and its version (`CUPTI 130001`).
    pub source: String,
    /// The record kinds that were enabled.
    pub kinds: Vec<String>,
    /// The devices seen.
    pub devices: Vec<DeviceProperties>,
    /// Kernels.
    pub kernels: Vec<KernelRecord>,
    /// Copies.
    pub copies: Vec<CopyRecord>,
    /// Memsets.
    pub memsets: Vec<MemsetRecord>,
    /// Host launch calls.
    pub launches: Vec<LaunchRecord>,
    /// Records the tracer dropped for lack of buffer space.
    pub dropped_by_collector: u64,
    /// How the tracer's clock was mapped onto the trace clock.
    pub clock: Option<ClockCalibration>,
    /// Whether launch records were collected (kernels without one are
    /// orphans only then), and why not.
    pub launches_unavailable: Option<String>,
    /// Problems met while collecting (the window may be incomplete).
    pub problems: Vec<String>,
    /// What the collector's own opening and closing took on the profiler's thread, by part
    /// (`open activity kinds`, `close flush`, ...), µs.
    pub collector_us: Vec<(String, f64)>,
}

/// A kernel run on the device.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelRecord {
    /// Start, µs on the trace clock.
    pub start_us: f64,
    /// End, µs.
    pub end_us: f64,
    /// The kernel's name.
    pub name: Arc<str>,
    /// Device, stream, correlation, launch geometry.
    pub args: KernelArgs,
}

/// A copy run by the device.
#[derive(Clone, Debug, PartialEq)]
pub struct CopyRecord {
    /// Start, µs.
    pub start_us: f64,
    /// End, µs.
    pub end_us: f64,
    /// Device, stream, correlation, bytes, direction.
    pub args: MemcpyArgs,
}

/// A memset run by the device.
#[derive(Clone, Debug, PartialEq)]
pub struct MemsetRecord {
    /// Start, µs.
    pub start_us: f64,
    /// End, µs.
    pub end_us: f64,
    /// Device, stream, correlation, bytes.
    pub args: MemsetArgs,
}

/// A host call that launched a kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchRecord {
    /// Start, µs.
    pub start_us: f64,
    /// End, µs.
    pub end_us: f64,
    /// The API call (`cuLaunchKernel`).
    pub name: String,
    /// The same id as its kernel's.
    pub correlation: u64,
    /// The tracer's id of the API call.
    pub cbid: Option<u32>,
    /// The collector's id of the calling thread.
    pub thread: u64,
    /// The calling thread's name (cubecl's device thread is `DSU-…`).
    pub thread_name: Option<String>,
}
