//! The CUPTI collector, as the profiler's [`DeviceCollector`].

use std::sync::Arc;
use std::time::Instant;

use cubecl::logging::TimingRequest;
use steptrace::device::{CopyRecord, DeviceError, KernelRecord, LaunchRecord, MemsetRecord};
use steptrace::device::{DeviceCollector, DeviceWindow};
use steptrace::format::device::{ClockCalibration, DeviceProperties, KernelArgs, MemcpyArgs, MemsetArgs};
use steptrace_cupti::{probe, ClockMap, Collector, CollectorConfig, LaunchSource};

use crate::attribute::{self, Recorded, Recording};

/// CUPTI, collecting for the profiler's windows, with each kernel tied to its burn ops and
/// span ([`attribute`](crate::attribute)).
pub(super) struct CuptiDevice {
    collector: Collector,
    device: DeviceProperties,
    pub(super) source: String,
    /// The device whose kernels are attributed, when attribution is on.
    burn_device: Option<burn::prelude::Device>,
    recording: Option<Result<Recording, String>>,
    keep: Setting,
}

/// What `STEPTRACE_CUPTI` asks for: whether CUPTI runs, and whether its kinds stay enabled
/// between two windows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Setting {
    /// Kinds kept on when the next window opens within [`KEEP_WITHIN_STEPS`] steps (unset).
    Near,
    /// Always kept on (`keep`).
    Always,
    /// Enabled at each warmup, disabled at each window's end (`per-cycle`).
    Never,
    /// No CUPTI: the path of a machine without libcupti (`off`).
    Off,
}

impl Setting {
    pub(super) fn from_env() -> Setting {
        use steptrace::settings::Cupti;
        match steptrace::settings::cupti() {
            Cupti::Keep => Setting::Always,
            Cupti::PerCycle => Setting::Never,
            Cupti::Off => Setting::Off,
            // A value not understood is named by steptrace::settings::problems, at start.
            _ => Setting::Near,
        }
    }

    /// What the trace's source line says of it.
    fn describe(&self) -> String {
        let near = format!("kinds kept enabled between windows up to {KEEP_WITHIN_STEPS} steps apart");
        match self {
            Setting::Near | Setting::Off => near,
            Setting::Always => "kinds kept enabled between windows (STEPTRACE_CUPTI=keep)".into(),
            Setting::Never => "kinds enabled per window (STEPTRACE_CUPTI=per-cycle)".into(),
        }
    }
}

/// Kinds stay enabled between two windows at most this many steps apart. On the H200 (MLP,
/// batch 256, docs/benchmarks/archive-2026-12-03.md) enabling them made the warmup step 29 to 49% longer, while
/// a step with them enabled and nothing kept was about 1% longer: staying on is cheaper for
/// gaps of up to about 30 steps, and costs at most a third of a step per cycle more beyond.
const KEEP_WITHIN_STEPS: u64 = 32;

impl CuptiDevice {
    /// Probes CUPTI and starts the process's collector; the reason when
    /// it cannot.
    pub(super) fn start(ordinal: u32, attributed: bool, keep: Setting) -> Result<CuptiDevice, String> {
        let found = probe();
        if !found.is_available() {
            return Err(found.reason().unwrap_or_else(|| "CUPTI is not available".into()));
        }
        let collector = Collector::start(CollectorConfig::default()).map_err(|e| e.to_string())?;
        let source = format!("CUPTI {}, {}", collector.cupti_version(), keep.describe());
        let mut device = DeviceProperties::default();
        device.id = ordinal;
        if let Ok(info) = steptrace_cupti::device_info(ordinal) {
            device.name = info.name;
            device.total_global_mem = info.total_memory;
            device.num_sms = info.sm_count;
            (device.compute_major, device.compute_minor) = info.compute_capability;
        }
        let burn_device = attributed.then(|| burn::prelude::Device::cuda(ordinal as usize));
        Ok(CuptiDevice { collector, device, source, burn_device, recording: None, keep })
    }
}

fn us(map: &ClockMap, origin: Instant, ns: u64) -> f64 {
    map.offset_from(origin, ns) as f64 / 1000.0
}

impl DeviceCollector for CuptiDevice {
    fn open(&mut self) -> Result<(), DeviceError> {
        self.collector.enable()?;
        self.recording = self.burn_device.as_ref().map(|device| attribute::open(device, TimingRequest::None));
        Ok(())
    }

    fn next_window_in(&mut self, steps: Option<u64>) {
        let keep = match self.keep {
            Setting::Always => true,
            Setting::Never | Setting::Off => false,
            Setting::Near => steps.is_some_and(|n| n <= KEEP_WITHIN_STEPS),
        };
        self.collector.set_keep_enabled(keep);
    }

    fn close(&mut self, origin: Instant) -> Result<DeviceWindow, DeviceError> {
        let w = self.collector.disable_and_flush()?;
        let recorded = match self.recording.take() {
            Some(Ok(recording)) => Ok(attribute::close(recording)),
            Some(Err(why)) => Err(why),
            None => Err("attribution is off (`--detail ops` turns it on)".to_owned()),
        };
        let map = w.clock_map();
        let mut out = DeviceWindow::default();
        out.source = self.source.clone();
        out.kinds = ["kernel", "memcpy", "memset", "launch (callback API)"].map(String::from).to_vec();
        out.devices.push(self.device.clone());
        for k in &w.kernels {
            let mut args = KernelArgs::default();
            args.device = k.device_id;
            args.stream = u64::from(k.stream_id);
            args.correlation = u64::from(k.correlation_id);
            args.grid = Some(k.grid.map(|g| g.max(0) as u32));
            args.block = Some(k.block.map(|b| b.max(0) as u32));
            args.registers_per_thread = Some(u32::from(k.registers_per_thread));
            args.shared_memory = Some((k.static_shared_bytes.max(0) + k.dynamic_shared_bytes.max(0)) as u64);
            out.kernels.push(KernelRecord {
                start_us: us(&map, origin, k.start_ns),
                end_us: us(&map, origin, k.end_ns),
                name: Arc::clone(&k.name),
                args,
            });
        }
        for c in &w.memcpys {
            let mut args = MemcpyArgs::default();
            (args.device, args.stream, args.correlation) =
                (c.device_id, u64::from(c.stream_id), u64::from(c.correlation_id));
            (args.bytes, args.kind) = (c.bytes, c.kind.label().to_owned());
            out.copies.push(CopyRecord {
                start_us: us(&map, origin, c.start_ns),
                end_us: us(&map, origin, c.end_ns),
                args,
            });
        }
        for m in &w.memsets {
            let mut args = MemsetArgs::default();
            (args.device, args.stream, args.correlation, args.bytes) =
                (m.device_id, u64::from(m.stream_id), u64::from(m.correlation_id), m.bytes);
            out.memsets.push(MemsetRecord {
                start_us: us(&map, origin, m.start_ns),
                end_us: us(&map, origin, m.end_ns),
                args,
            });
        }
        for l in &w.launches {
            out.launches.push(LaunchRecord {
                start_us: us(&map, origin, l.start_ns),
                end_us: us(&map, origin, l.end_ns),
                name: l.name.to_owned(),
                correlation: u64::from(l.correlation_id),
                cbid: Some(l.cbid),
                thread: l.thread.id,
                thread_name: l.thread.name.as_deref().map(str::to_owned),
            });
        }
        attribute_kernels(&mut out, &recorded);
        if let Ok(recorded) = &recorded {
            attribute_copies(&mut out, recorded);
        }
        out.dropped_by_collector = w.dropped_records;
        let costs = w
            .open_cost
            .iter()
            .map(|(part, d)| ("open", part, d))
            .chain(w.close_cost.iter().map(|(part, d)| ("close", part, d)));
        out.collector_us = costs.map(|(when, part, d)| (format!("{when} {part}"), d.as_secs_f64() * 1e6)).collect();
        let mut clock = ClockCalibration::default();
        // CUPTI's clock reading at trace time 0.
        clock.offset_ns = map.to_cupti_ns(origin).map_or(f64::NAN, |ns| ns as f64);
        clock.drift_ppm = map.drift_ppm();
        clock.uncertainty_ns = map.uncertainty().as_nanos() as f64;
        out.clock = Some(clock);
        out.launches_unavailable = match &w.launch_source {
            LaunchSource::Unavailable(why) => Some(why.to_string()),
            LaunchSource::Off => Some("launch records are off".into()),
            _ => None,
        };
        out.problems = w.problems.iter().map(ToString::to_string).collect();
        if w.incomplete_records > 0 {
            out.problems.push(format!("{} records had not finished at the window's end", w.incomplete_records));
        }
        Ok(out)
    }
}

/// Ties each kernel to the launch cubecl's observer saw for it, paired in launch (correlation)
/// order, and so to its block's operations and span.
fn attribute_kernels(out: &mut DeviceWindow, recorded: &Result<Recorded, String>) {
    let recorded = match recorded {
        Ok(r) => r,
        Err(why) => {
            if !why.starts_with("attribution is off") {
                out.problems.push(format!("kernels not attributed: {why}"));
            }
            return;
        }
    };
    if recorded.dropped_launches > 0 {
        out.problems.push(format!(
            "{} launches were not noted (the window's attribution notes were full): their kernels are not attributed",
            recorded.dropped_launches
        ));
    }
    let mut order: Vec<usize> = (0..out.kernels.len()).collect();
    order.sort_by_key(|&i| out.kernels[i].args.correlation);
    let observed: Vec<&str> = recorded.launches.iter().map(|(l, _)| l.kernel).collect();
    let names: Vec<&str> = order.iter().map(|&i| &*out.kernels[i].name).collect();
    let pairs = attribute::align(&names, &observed);
    let paired = pairs.iter().flatten().count();
    if paired * 2 < names.len() {
        let first = |list: &[&str]| {
            list.iter().take(3).map(|n| n.chars().take(60).collect::<String>()).collect::<Vec<_>>().join(", ")
        };
        out.problems.push(format!(
            "only {paired} of {} kernels were paired with the {} launches cubecl's observer saw (first kernels: {}; \
             first observed launches: {})",
            names.len(),
            observed.len(),
            first(&names),
            first(&observed)
        ));
    }
    let found: Vec<_> = pairs.iter().map(|p| p.map(|j| recorded.launches[j].1.clone())).collect();
    for (&i, attribution) in order.iter().zip(found) {
        out.kernels[i].args.attribution = Some(attribution.unwrap_or_else(attribute::not_observed));
    }
}

/// Ties each host-to-device copy to the tensor made from host data that it uploaded, and so
/// to the span that made it: copies in stream order against the tensors in the order they
/// were made, paired by size ([`attribute::pair_uploads`]). Copies nothing explains (the
/// backend's own, or any made before the window) are left as they are.
fn attribute_copies(out: &mut DeviceWindow, recorded: &Recorded) {
    let mut order: Vec<usize> = (0..out.copies.len()).filter(|&i| out.copies[i].args.kind == "HtoD").collect();
    order.sort_by(|&a, &b| out.copies[a].start_us.total_cmp(&out.copies[b].start_us));
    let sizes: Vec<u64> = order.iter().map(|&i| out.copies[i].args.bytes).collect();
    let made: Vec<u64> = recorded.uploads.iter().map(|(bytes, _)| *bytes).collect();
    for (&i, pair) in order.iter().zip(attribute::pair_uploads(&sizes, &made)) {
        if let Some(j) = pair {
            out.copies[i].args.attribution = Some(recorded.uploads[j].1.clone());
        }
    }
}
