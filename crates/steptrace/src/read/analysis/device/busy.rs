//! Per device and per step: when the device was busy, and what the host's
//! step thread was doing while it was idle.

use serde::Serialize;

use super::events::{DeviceId, WorkKind};
use super::intervals::Set;
use crate::format::names::{is_input, is_wait};
use crate::read::analysis::loaded::Loaded;
use crate::read::analysis::stats::Stats;
use crate::read::analysis::steps::StepRow;

/// One device over the counted steps.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceSteps {
    /// The device, as the trace names it (`GPU 0: NVIDIA H200`).
    pub device: String,
    /// Busy: the union of its kernels, copies and memsets within the
    /// step, ms.
    pub busy_ms: Stats,
    /// Busy over the step's wall time.
    pub busy_share: Stats,
    /// Idle while the step's host thread read input (`data.load`,
    /// `data.wait`, torch's `enumerate(DataLoader)`): starved by input, ms;
    /// `None` when the steps hold no input span (not observed, not zero).
    pub idle_input_ms: Option<Stats>,
    /// Idle over the step's wall time, while the host read input.
    pub idle_input_share: Option<Stats>,
    /// Idle while the host waited for it (`sync` and the like): both
    /// waiting, ms; `None` when the steps hold no waiting span.
    pub idle_sync_ms: Option<Stats>,
    /// Idle over the step, while the host waited.
    pub idle_sync_share: Option<Stats>,
    /// Idle at any other time (the host launching, or busy on its own), ms.
    pub idle_other_ms: Stats,
    /// Idle over the step, at other times.
    pub idle_other_share: Stats,
    /// Busy while the host waited for it: the healthy side of a sync, ms.
    pub busy_while_host_waits_ms: Stats,
    /// Whether the step threads have input spans at all: without them the
    /// idle time while reading input is not observed, not zero.
    pub input_seen: bool,
    /// Whether the step threads have waiting spans (`sync`, `…Synchronize`).
    pub wait_seen: bool,
    /// Every counted step, in order.
    pub steps: Vec<DeviceStep>,
}

/// One step of one device.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceStep {
    /// `N` of `ProfilerStep#N`.
    pub step: u64,
    /// The step's wall time, ms.
    pub step_ms: f64,
    /// Busy, ms.
    pub busy_ms: f64,
    /// Idle while the host read input, ms.
    pub idle_input_ms: f64,
    /// Idle while the host waited for the device, ms.
    pub idle_sync_ms: f64,
    /// Idle at other times, ms.
    pub idle_other_ms: f64,
    /// Busy while the host waited, ms.
    pub busy_while_host_waits_ms: f64,
    /// Kernels that start in the step.
    pub kernels: usize,
    /// Copies that start in the step.
    pub copies: usize,
}

/// The figures of every device seen in `loaded`, over `steps`.
pub(crate) fn device_steps(loaded: &[Loaded], steps: &[(usize, &StepRow)]) -> Vec<DeviceSteps> {
    let mut ids: Vec<DeviceId> = loaded.iter().flat_map(|l| l.device.devices()).collect();
    ids.sort();
    ids.dedup();
    ids.iter()
        .filter_map(|id| {
            let rows: Vec<DeviceStep> = steps.iter().map(|(i, step)| one_step(&loaded[*i], id, step)).collect();
            let name = loaded.iter().find(|l| l.device.devices().contains(id)).map(|l| l.device.device_name(id))?;
            let seen = |pred: fn(&str) -> bool| {
                steps.iter().any(|(i, st)| {
                    loaded[*i].spans.starting_in(st.start, st.end).any(|(_, s)| s.thread == st.thread && pred(&s.name))
                })
            };
            summarise(name, rows, seen(is_input), seen(is_wait))
        })
        .collect()
}

fn one_step(l: &Loaded, id: &DeviceId, step: &StepRow) -> DeviceStep {
    let (a, b) = (step.start, step.end);
    let work: Vec<_> = l.device.overlapping(a, b).filter(|w| &w.device == id).collect();
    let busy = Set::clipped(work.iter().map(|w| (w.start, w.end)), a, b);
    let host = |pred: fn(&str) -> bool| {
        Set::clipped(
            l.spans
                .starting_in(a, b)
                .map(|(_, s)| s)
                .filter(|s| s.thread == step.thread && pred(&s.name))
                .map(|s| (s.start, s.end)),
            a,
            b,
        )
    };
    let (input, wait) = (host(is_input), host(is_wait));
    let idle = busy.complement(a, b);
    let idle_input = idle.intersect(&input);
    let idle_sync = idle.intersect(&wait.minus(&input));
    let starting = || l.device.starting_in(a, b).filter(|w| &w.device == id);
    // Differences of sums can come out a rounding error below zero.
    let ms = |us: f64| if us > 0.0 { us / 1000.0 } else { 0.0 };
    DeviceStep {
        step: step.step,
        step_ms: step.ms,
        busy_ms: ms(busy.len()),
        idle_input_ms: ms(idle_input.len()),
        idle_sync_ms: ms(idle_sync.len()),
        idle_other_ms: ms((idle.len() - idle_input.len() - idle_sync.len()).max(0.0)),
        busy_while_host_waits_ms: ms(busy.intersect(&wait).len()),
        kernels: starting().filter(|w| w.kind == WorkKind::Kernel).count(),
        copies: starting().filter(|w| w.kind == WorkKind::Memcpy).count(),
    }
}

fn summarise(device: String, steps: Vec<DeviceStep>, input_seen: bool, wait_seen: bool) -> Option<DeviceSteps> {
    let of = |f: &dyn Fn(&DeviceStep) -> f64| Stats::of(&steps.iter().map(f).collect::<Vec<_>>());
    let share = |f: &dyn Fn(&DeviceStep) -> f64| {
        Stats::of(&steps.iter().filter(|s| s.step_ms > 0.0).map(|s| f(s) / s.step_ms).collect::<Vec<_>>())
    };
    Some(DeviceSteps {
        device,
        busy_ms: of(&|s| s.busy_ms)?,
        busy_share: share(&|s| s.busy_ms)?,
        idle_input_ms: of(&|s| s.idle_input_ms).filter(|_| input_seen),
        idle_input_share: share(&|s| s.idle_input_ms).filter(|_| input_seen),
        idle_sync_ms: of(&|s| s.idle_sync_ms).filter(|_| wait_seen),
        idle_sync_share: share(&|s| s.idle_sync_ms).filter(|_| wait_seen),
        idle_other_ms: of(&|s| s.idle_other_ms)?,
        idle_other_share: share(&|s| s.idle_other_ms)?,
        busy_while_host_waits_ms: of(&|s| s.busy_while_host_waits_ms)?,
        input_seen,
        wait_seen,
        steps,
    })
}
