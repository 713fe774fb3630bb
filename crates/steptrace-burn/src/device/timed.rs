//! Device time without CUPTI: each kernel measured by cubecl itself (timestamp queries on
//! wgpu, events on CUDA), kept unread while the window runs (`TimingRequest::Deferred`, so
//! kernels still run back to back) and read when it closes.
//!
//! The measurements become kernel events whose `timing` argument names the method; a kernel
//! that cubecl could time only by the host's clock around a blocking submit (wgpu once its
//! timestamp-query budget is spent) says so, for its length is not the kernel's.

use std::sync::Arc;
use std::time::Instant;

use burn::prelude::Device;
use cubecl::config::{type_name_format, TypeNameFormatLevel};
use cubecl::logging::TimingRequest;
use cubecl::profile::TimingMethod;
use steptrace::device::{DeviceCollector, DeviceWindow};
use steptrace::device::{DeviceError, KernelRecord};
use steptrace::format::device::{DeviceProperties, KernelArgs};

use crate::attribute::{self, Recording};

/// What a kernel timed on the device by wgpu says in its `timing` argument.
pub const DEVICE_TIMESTAMPS: &str = "timestamp queries";
/// What a kernel timed on the device by CUDA events (no CUPTI) says. Their window holds more
/// than the kernel: on the H200 the MLP's kernels summed 0.83 ms per step by CUDA events
/// against 0.10 ms by CUPTI (docs/benchmarks.md).
pub const CUDA_EVENTS: &str = "CUDA events (a window around the launch, longer than the kernel)";
/// What a kernel timed by the host's clock says.
pub const HOST_CLOCK: &str = "host clock around a blocking submit (not the kernel's own time)";

/// Kernels timed by cubecl, attributed to their ops and spans.
pub(super) struct TimedDevice {
    device: Device,
    properties: DeviceProperties,
    pub(super) source: String,
    /// The `timing` label of a kernel the device timed.
    method: &'static str,
    recording: Option<Recording>,
}

impl TimedDevice {
    /// Kernels of `device` (named `name`), timed on the device by `method`
    /// ([`DEVICE_TIMESTAMPS`], [`CUDA_EVENTS`]).
    pub(super) fn new(device: Device, name: &str, method: &'static str) -> TimedDevice {
        let mut properties = DeviceProperties::default();
        properties.name = name.to_owned();
        let source = format!("cubecl's kernel timing: {method}");
        TimedDevice { device, properties, source, method, recording: None }
    }

    fn method_label(&self, method: TimingMethod) -> &'static str {
        match method {
            TimingMethod::Device => self.method,
            TimingMethod::System => HOST_CLOCK,
        }
    }
}

impl DeviceCollector for TimedDevice {
    fn open(&mut self) -> Result<(), DeviceError> {
        self.recording = Some(attribute::open(&self.device, TimingRequest::Deferred)?);
        Ok(())
    }

    fn close(&mut self, origin: Instant) -> Result<DeviceWindow, DeviceError> {
        let recording = self.recording.take().ok_or("the timed collector was closed without being opened")?;
        // Every measurement handed over is read below, which waits for its kernel anyway.
        let synced = self.device.sync();
        let recorded = attribute::close(recording);
        let recorded_dropped = recorded.dropped_launches;
        let mut out = DeviceWindow::default();
        out.source = self.source.clone();
        out.kinds = vec![format!("kernel (timed by cubecl: {} where the device has them)", self.method)];
        out.devices.push(self.properties.clone());
        out.launches_unavailable = Some(
            "kernels are timed through cubecl's launch observer: there is no driver record of their launches".into(),
        );
        let (mut unread, mut lengths_only, mut untimed) = (0u64, 0u64, 0u64);
        // Seconds since `deep`, a reference before every instant of the run.
        let deep = origin.checked_sub(std::time::Duration::from_secs(1 << 20)).unwrap_or(origin);
        let secs = |d: std::time::Duration| d.as_secs_f64();
        let mut measured = Vec::new();
        for (i, (note, attribution)) in recorded.launches.into_iter().enumerate() {
            let Some(profile) = note.profile else {
                if note.timed.is_some() {
                    lengths_only += 1;
                } else {
                    untimed += 1;
                }
                continue;
            };
            let method = profile.timing_method();
            let Some(ticks) = cubecl_environment::future::block_on(profile.resolve()) else {
                unread += 1;
                continue;
            };
            let (start, end) = (secs(ticks.start_duration_since(deep)), secs(ticks.end_duration_since(deep)));
            let launched = secs(note.at.unwrap_or(origin).duration_since(deep));
            measured.push((i, note.kernel, method, attribution, start, end, launched));
        }
        // The device's clock is not the host's (wgpu's timestamps count from an arbitrary
        // epoch): kernels are placed on the host clock by their launches. A kernel starts no
        // earlier than its launch, so the offset is at least every launch's lead over its
        // kernel's start; the largest lead is the estimate (exact for a kernel that started as
        // soon as it was launched, onto an idle device).
        let offset = measured.iter().map(|m| m.6 - m.4).fold(f64::NEG_INFINITY, f64::max);
        let origin_s = secs(origin.duration_since(deep));
        for (i, kernel, method, attribution, start, end, _) in measured {
            let mut args = KernelArgs::default();
            args.correlation = i as u64 + 1;
            args.timing = Some(self.method_label(method).to_owned());
            args.attribution = Some(attribution);
            out.kernels.push(KernelRecord {
                start_us: (start + offset - origin_s) * 1e6,
                end_us: (end + offset - origin_s) * 1e6,
                name: Arc::from(type_name_format(kernel, TypeNameFormatLevel::Short)),
                args,
            });
        }
        if offset.is_finite() {
            out.problems.push(
                "device timestamps are placed on the host clock by their launches (each kernel starts no earlier than \
                 its launch; the largest launch lead sets the offset): lengths and gaps are the device's, positions \
                 against host spans are estimates"
                    .into(),
            );
        }
        if let Err(e) = synced {
            out.problems.push(format!("the device could not be synchronised at the window's end: {e:?}"));
        }
        if unread > 0 {
            out.problems.push(format!("{unread} kernel measurements could not be read back"));
        }
        if lengths_only > 0 {
            out.problems.push(format!(
                "{lengths_only} kernels were timed by cubecl's profiling logger, which gives lengths without starts: \
                 not written (turn the logger off to place them)"
            ));
        }
        if recorded_dropped > 0 {
            out.problems.push(format!(
                "{recorded_dropped} launches were not noted (the window's attribution notes were full): their kernels \
                 are not written"
            ));
        }
        if untimed > 0 {
            out.problems.push(format!("{untimed} launches were not timed (refused by the backend, or dry runs)"));
        }
        Ok(out)
    }
}
