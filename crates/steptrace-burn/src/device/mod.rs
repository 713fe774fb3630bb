//! Device activity for the profiler: kernels, copies and launches through
//! CUPTI on CUDA; elsewhere "not observed", with the reason.
//!
//! [`setup`] probes first and never panics: without libcupti, with another
//! CUPTI client in the process, on wgpu or the CPU, or with
//! `--device-activity off`, the traces say why the device was not
//! observed, and training runs as usual.

use std::fmt;

use steptrace::collect::DeviceCollector;

use crate::backend::{BackendKind, Selection};

/// Whether to record device activity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceActivityMode {
    /// On CUDA when CUPTI is usable; "not observed" elsewhere.
    #[default]
    Auto,
    /// Never.
    Off,
}

impl fmt::Display for DeviceActivityMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceActivityMode::Auto => "auto",
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
            DeviceSetup::Collector(_, what) => format!("{mode}: recorded by {what} (kernels, copies, memsets, launches)"),
            DeviceSetup::NotObserved(why) => format!("{mode}: not observed ({why})"),
        }
    }
}

/// The device collector for `selection`, or why there is none. Call it
/// before the backend creates its first CUDA context.
pub fn setup(mode: DeviceActivityMode, selection: &Selection) -> DeviceSetup {
    if mode == DeviceActivityMode::Off {
        return DeviceSetup::NotObserved("turned off (--device-activity off)".into());
    }
    if selection.kind != BackendKind::Cuda {
        let mut why = match selection.kind {
            BackendKind::Cpu => "the CPU backend has no separate device: host time is the work itself".to_owned(),
            kind => format!("device activity is recorded on CUDA only, through CUPTI; this run is on {kind}"),
        };
        if let Some(reason) = &selection.fallback_reason {
            why.push_str(&format!(" (a fallback: {reason})"));
        }
        return DeviceSetup::NotObserved(why);
    }
    cuda_setup()
}

#[cfg(feature = "cuda")]
fn cuda_setup() -> DeviceSetup {
    match cupti::CuptiDevice::start(0) {
        Ok(device) => {
            let what = device.source.clone();
            DeviceSetup::Collector(Box::new(device), what)
        }
        Err(why) => DeviceSetup::NotObserved(why),
    }
}

#[cfg(not(feature = "cuda"))]
fn cuda_setup() -> DeviceSetup {
    DeviceSetup::NotObserved("steptrace-burn was built without its `cuda` feature".into())
}

#[cfg(feature = "cuda")]
mod cupti;
