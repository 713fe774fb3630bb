//! Device activity for the profiler: kernels, copies and launches through
//! CUPTI on CUDA; on wgpu, and on CUDA without a usable CUPTI, kernels timed
//! by cubecl itself (timestamp queries, CUDA events); on the CPU "not
//! observed", with the reason. Every kernel is tied to the burn operations
//! and the span it ran for.
//!
//! [`setup`] probes first and never panics: with another CUPTI client in the
//! process, on the CPU, or with `--device-activity off`, the traces say why
//! the device was not observed, and training runs as usual.

use std::fmt;

use steptrace::device::DeviceCollector;

use crate::backend::{BackendKind, Selection};

/// Whether to record device activity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceActivityMode {
    /// On CUDA when CUPTI is usable; "not observed" elsewhere.
    #[default]
    Auto,
    /// As `Auto`, and each kernel tied to the burn ops and span it ran for; on wgpu (and on
    /// CUDA without a usable CUPTI) kernels timed by cubecl's timestamp queries. It costs the
    /// launch path: about +2.6 points of step time over host spans alone while recording, about
    /// 4 over `Auto` (the MLP and the ConvNet at batch 256 on the H200, docs/benchmarks.md).
    Attributed,
    /// Never.
    Off,
}

impl fmt::Display for DeviceActivityMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceActivityMode::Auto => "auto",
            DeviceActivityMode::Attributed => "auto, with ops",
            DeviceActivityMode::Off => "off",
        })
    }
}

/// What the profiler is given.
pub enum DeviceSetup {
    /// A collector, and what it is (`CUPTI 130001`).
    Collector(Box<dyn DeviceCollector>, String),
    /// Why the device is not observed.
    NotObserved(String),
}

impl fmt::Debug for DeviceSetup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSetup::Collector(_, what) => write!(f, "Collector({what})"),
            DeviceSetup::NotObserved(why) => write!(f, "NotObserved({why})"),
        }
    }
}

impl DeviceSetup {
    /// One line for the console and the manifest.
    pub fn describe(&self, mode: DeviceActivityMode) -> String {
        match self {
            DeviceSetup::Collector(_, what) if what.starts_with("CUPTI") => {
                format!("{mode}: recorded by {what} (kernels, copies, memsets, launches; kernels tied to burn ops and spans)")
            }
            DeviceSetup::Collector(_, what) => {
                format!("{mode}: kernels recorded by {what}, tied to burn ops and spans")
            }
            DeviceSetup::NotObserved(why) => format!("{mode}: not observed ({why})"),
        }
    }
}

/// The device collector for `selection`, or why there is none. Call it
/// before the backend creates its first CUDA context.
pub fn setup(mode: DeviceActivityMode, selection: &Selection) -> DeviceSetup {
    setup_on(mode, selection, None)
}

/// [`setup`], for the kernels of `device` (a device the program built itself) rather than the
/// one `selection` opens.
pub fn setup_on(
    mode: DeviceActivityMode,
    selection: &Selection,
    device: Option<&burn::prelude::Device>,
) -> DeviceSetup {
    if mode == DeviceActivityMode::Off {
        return DeviceSetup::NotObserved("turned off (--device-activity off)".into());
    }
    match selection.kind {
        BackendKind::Cuda => cuda_setup(selection, mode == DeviceActivityMode::Attributed, device),
        BackendKind::Wgpu => wgpu_setup(selection, mode == DeviceActivityMode::Attributed, device),
        BackendKind::Cpu => {
            let mut why = "the CPU backend has no separate device: host time is the work itself".to_owned();
            if let Some(reason) = &selection.fallback_reason {
                why.push_str(&format!(" (a fallback: {reason})"));
            }
            DeviceSetup::NotObserved(why)
        }
    }
}

/// CUPTI where it can run; else cubecl's own timing (CUDA events), with CUPTI's reason.
#[cfg(feature = "cuda")]
fn cuda_setup(selection: &Selection, attributed: bool, own: Option<&burn::prelude::Device>) -> DeviceSetup {
    let started = match cupti::Setting::from_env() {
        // Runs as on a machine without libcupti (to check that path where CUPTI is installed).
        cupti::Setting::Off => Err("CUPTI turned off (STEPTRACE_CUPTI=off)".to_owned()),
        setting => cupti::CuptiDevice::start(0, attributed, setting),
    };
    match started {
        Ok(device) => {
            let what = device.source.clone();
            DeviceSetup::Collector(Box::new(device), what)
        }
        Err(why) if !attributed => {
            DeviceSetup::NotObserved(format!("{why} (--detail ops times kernels without CUPTI)"))
        }
        Err(why) => {
            let device = own.map_or_else(|| burn::prelude::Device::cuda(0), |d| d.clone().inner());
            let device = timed::TimedDevice::new(device, &selection.device, timed::CUDA_EVENTS);
            let what = format!("{} (CUPTI unusable: {why})", device.source);
            DeviceSetup::Collector(Box::new(device), what)
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn cuda_setup(_: &Selection, _: bool, _: Option<&burn::prelude::Device>) -> DeviceSetup {
    DeviceSetup::NotObserved("steptrace-burn was built without its `cuda` feature".into())
}

#[cfg(feature = "wgpu")]
fn wgpu_setup(selection: &Selection, attributed: bool, own: Option<&burn::prelude::Device>) -> DeviceSetup {
    if !attributed {
        // Kernels are timed on wgpu only with attribution (`--detail ops`), through cubecl's
        // launch observer; without it the device is not observed.
        return not_cuda(selection);
    }
    if steptrace::settings::attribution_off() {
        return DeviceSetup::NotObserved(format!(
            "kernel attribution turned off ({}=off, an experiment's knob): on wgpu kernels are timed through it, so none are recorded",
            steptrace::settings::ATTRIBUTION
        ));
    }
    let device = match own {
        Some(device) => device.clone().inner(),
        None => selection
            .wgpu_device
            .map_or_else(|| burn::prelude::Device::wgpu(burn::prelude::DeviceKind::DefaultDevice), |t| t.device()),
    };
    let device = timed::TimedDevice::new(device, &selection.device, timed::DEVICE_TIMESTAMPS);
    let what = device.source.clone();
    DeviceSetup::Collector(Box::new(device), what)
}

#[cfg(not(feature = "wgpu"))]
fn wgpu_setup(selection: &Selection, _: bool, _: Option<&burn::prelude::Device>) -> DeviceSetup {
    not_cuda(selection)
}

/// Why a run off CUDA has no device activity without `--detail ops`.
fn not_cuda(selection: &Selection) -> DeviceSetup {
    let mut why = format!("device activity is recorded on CUDA only, through CUPTI; this run is on {}", selection.kind);
    if let Some(reason) = &selection.fallback_reason {
        why.push_str(&format!(" (a fallback: {reason})"));
    }
    DeviceSetup::NotObserved(why)
}

#[cfg(feature = "cuda")]
mod cupti;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
mod timed;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub use timed::{CUDA_EVENTS, DEVICE_TIMESTAMPS, HOST_CLOCK};
