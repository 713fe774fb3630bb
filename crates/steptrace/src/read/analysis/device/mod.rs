//! Host launch, device work and waiting: what the trace shows of each, and
//! what it cannot show.
//!
//! From kernel, copy and memset events (steptrace's CUPTI bridge or
//! torch.profiler), per counted step: device busy and idle by cause
//! ([`DeviceSteps`]), launches against device work ([`LaunchView`]),
//! copies ([`CopyView`]) and kernels by device time ([`KernelTable`]).
//! Without such events every one of them is `None`, and
//! [`DeviceView::not_observed_reason`] says why: absent is not zero.

mod attribution;
mod busy;
mod consistency;
mod copies;
mod events;
mod intervals;
mod kernels;
mod launch;
mod limits;
mod roofline;
mod roofline_checks;

use serde::Serialize;

pub(crate) use attribution::origins;
pub use attribution::{AttributionView, DeviceSpanRow, TimeRow};
pub use busy::{DeviceStep, DeviceSteps};
pub(crate) use consistency::{DeviceIssues, Found};
pub use copies::{BatchCopies, CopyDirection, CopySize, CopyView, SmallUploads, SMALL_COPY_BYTES};
pub(crate) use events::{DeviceEvents, DeviceEventsBuilder};
pub use kernels::{short_name, KernelRow, KernelTable, SHORT_KERNEL_US};
pub use launch::LaunchView;
pub(crate) use limits::pick_roofs;
pub use limits::Roofs;
pub use roofline::{rate, PricedRow, RooflineView, StepFloor, MAX_BLOCK_BYTES, MAX_BLOCK_FLOPS, MIN_BLOCK_US};

use self::intervals::Set;
use super::loaded::{Loaded, Producer, RunInfo, Vocabulary};
use super::stats::Stats;
use super::steps::StepRow;
use crate::format::device::{is_device_cat, ActivityStatus};
use crate::format::names::is_wait;

/// What the traces show of the device.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceView {
    /// Whether device-timed events (kernels, copies) are in the trace.
    pub observed: bool,
    /// Why they are absent (never reported as zero).
    pub not_observed_reason: Option<String>,
    /// Device events per step.
    pub device_events_per_step: Option<Stats>,
    /// Device busy time per step (union of device events), ms.
    pub device_busy_ms_per_step: Option<Stats>,
    /// Device busy time over step time, per step.
    pub device_busy_share: Option<Stats>,
    /// Waiting for the device per step (`sync`, `cuda*Synchronize`), ms.
    pub waiting_ms_per_step: Option<Stats>,
    /// Waiting over step time, per step.
    pub waiting_share: Option<Stats>,
    /// Kernel launches per step (host side: `launch_inner`,
    /// `cudaLaunchKernel`), when the trace has them.
    pub launches_per_step: Option<Stats>,
    /// Per device: busy, and idle by what the host was doing.
    pub devices: Vec<DeviceSteps>,
    /// Launches matched to kernels; `None` when not observed.
    pub launch: Option<LaunchView>,
    /// Copies per step; `None` when the trace has no copy events.
    pub copies: Option<CopyView>,
    /// Kernels by device time; `None` when the trace has no kernels.
    pub kernels: Option<KernelTable>,
    /// Kernel time by burn op kind, span path and phase; `None` when the kernels carry no
    /// attribution.
    pub attribution: Option<AttributionView>,
    /// Every priced kernel against the device's measured limits; `None` when the kernels
    /// carry no attribution.
    pub roofline: Option<RooflineView>,
    /// Why each absent part is absent: `(part, reason)`.
    pub not_observed: Vec<(&'static str, String)>,
    /// How to read these figures.
    pub notes: Vec<String>,
}

/// Per steady step (startup steps too when there is no steady step), the
/// figure `f` computes from the spans that start inside the step.
pub(crate) fn per_step<F>(loaded: &[Loaded], mut f: F) -> Vec<(f64, f64)>
where
    F: FnMut(&Loaded, f64, f64, &StepRow) -> Option<f64>,
{
    let any_steady = loaded.iter().flat_map(|l| &l.steps).any(|s| !s.startup);
    let mut out = Vec::new();
    for l in loaded {
        for step in l.steps.iter().filter(|s| !any_steady || !s.startup) {
            if let Some(v) = f(l, step.start, step.end, step) {
                out.push((v, step.ms));
            }
        }
    }
    out
}

/// The steps the device view counts: the steady ones, or every step when
/// none is steady. `(file index, step)`.
pub(crate) fn counted_steps(loaded: &[Loaded]) -> Vec<(usize, &StepRow)> {
    let any_steady = loaded.iter().flat_map(|l| &l.steps).any(|s| !s.startup);
    loaded
        .iter()
        .enumerate()
        .flat_map(|(i, l)| l.steps.iter().filter(move |s| !any_steady || !s.startup).map(move |s| (i, s)))
        .collect()
}

pub(crate) fn device_view(
    loaded: &[Loaded],
    run: &RunInfo,
    vocab: &Vocabulary<'_>,
    roofs: Result<Roofs, String>,
) -> DeviceView {
    let observed = loaded.iter().any(|l| l.spans.spans.iter().any(|s| is_device_cat(s.cat.as_deref())));
    let steps = counted_steps(loaded);
    let (mut counts, mut busy, mut busy_share) = (None, None, None);
    let (mut devices, mut launch, mut copies, mut kernels) = (Vec::new(), None, None, None);
    let mut attributed = None;
    let mut roofline = None;
    let mut not_observed = Vec::new();
    let has_work = loaded.iter().any(|l| !l.device.work.is_empty());
    if observed && has_work {
        // All devices together: the union of their work within the step.
        let all: Vec<(f64, f64)> = steps
            .iter()
            .map(|(i, step)| {
                let d = &loaded[*i].device;
                let set =
                    Set::clipped(d.overlapping(step.start, step.end).map(|w| (w.start, w.end)), step.start, step.end);
                (set.len() / 1000.0, step.ms)
            })
            .collect();
        let c: Vec<f64> =
            steps.iter().map(|(i, s)| loaded[*i].device.starting_in(s.start, s.end).count() as f64).collect();
        counts = Stats::of(&c);
        busy = Stats::of(&all.iter().map(|x| x.0).collect::<Vec<_>>());
        busy_share = Stats::of(&all.iter().filter(|x| x.1 > 0.0).map(|(v, ms)| v / ms).collect::<Vec<_>>());
        devices = busy::device_steps(loaded, &steps);
        launch = launch::launch_view(loaded, &steps);
        copies = copies::copy_view(loaded, &steps, run.batch_size);
        kernels = kernels::kernel_table(loaded, &steps, all.iter().map(|x| x.0).sum());
        attributed = attribution::attribution_view(loaded, &steps);
        let primary = devices.iter().max_by(|a, b| a.busy_ms.median.total_cmp(&b.busy_ms.median));
        roofline = roofline::roofline_view(loaded, &steps, roofs, primary);
        if kernels.is_some() && attributed.is_none() {
            not_observed.push((
                "attribution",
                "the kernels carry no attribution (recorded without `--detail ops`, or by another tool): no time \
                 by op or layer"
                    .to_owned(),
            ));
        }
        if launch.is_none() {
            not_observed.push((
                "launch",
                "no kernel of the counted steps could be matched to its host launch (no launch events with a \
                 correlation id)"
                    .to_owned(),
            ));
        }
        if copies.is_none() {
            not_observed.push(("copies", "the trace has no copy (gpu_memcpy) events in the counted steps".to_owned()));
        }
        if kernels.is_none() {
            not_observed.push(("kernels", "the trace has no kernel events in the counted steps".to_owned()));
        }
        if steps.is_empty() {
            not_observed
                .push(("per step", "the trace has no ProfilerStep#N spans: no per-step device figures".to_owned()));
        }
    } else {
        let reason = if observed {
            "the trace has device annotations but no kernel, copy or memset events".to_owned()
        } else {
            absence_reason(loaded, run)
        };
        for part in ["device busy and idle", "launch", "copies", "kernels"] {
            not_observed.push((part, reason.clone()));
        }
    }
    // Elapsed time, so that a wait nested in another counts once.
    let step_threads_only = |l: &Loaded, a: f64, b: f64, step: &StepRow, pred: &dyn Fn(&str) -> bool| {
        let spans = l.spans.starting_in(a, b).map(|(_, s)| s).filter(|s| s.thread == step.thread && pred(&s.name));
        Set::clipped(spans.map(|s| (s.start, s.end)), a, b).len()
    };
    let has_wait = loaded.iter().any(|l| l.spans.spans.iter().any(|s| is_wait(&s.name)));
    let waits = per_step(loaded, |l, a, b, step| Some(step_threads_only(l, a, b, step, &is_wait) / 1000.0));
    let (waiting, waiting_share) = if has_wait {
        (
            Stats::of(&waits.iter().map(|x| x.0).collect::<Vec<_>>()),
            Stats::of(&waits.iter().filter(|(_, ms)| *ms > 0.0).map(|(v, ms)| (v / ms).min(1.0)).collect::<Vec<_>>()),
        )
    } else {
        (None, None)
    };
    let has_launch = loaded.iter().any(|l| l.spans.spans.iter().any(|s| vocab.is_launch(&s.name)));
    let launches = has_launch.then(|| {
        let v = per_step(loaded, |l, a, b, _| {
            Some(l.spans.starting_in(a, b).filter(|(_, s)| vocab.is_launch(&s.name)).count() as f64)
        });
        Stats::of(&v.iter().map(|x| x.0).collect::<Vec<_>>())
    });
    let mut notes = Vec::new();
    let not_observed_reason = (!(observed && has_work))
        .then(|| not_observed.first().map_or_else(|| absence_reason(loaded, run), |(_, why)| why.clone()));
    if observed && has_work {
        notes.push(
            "device busy = the union of kernel, copy and memset intervals within the step's wall time; the sum of \
             kernel times is not elapsed time"
                .into(),
        );
        notes.push(
            "device idle is split by what the step's host thread was doing: reading input (data.load, data.wait), \
             waiting for the device (sync), or anything else (launching, host work)"
                .into(),
        );
    }
    if let Some(n) = kernels.as_ref().map(|k| k.inconsistent_kernels).filter(|n| *n > 0) {
        notes.push(format!(
            "{n} kernel(s) of the counted steps overlap another kernel on their stream or share a launch with \
             another kernel: the kernel sums, means and calls per step rest on inconsistent input (see the warnings)"
        ));
    }
    if let Some(n) = launch.as_ref().map(|l| l.before_launch).filter(|n| *n > 0) {
        notes.push(format!(
            "{n} matched kernel(s) start before their launch call: a negative launch-to-start time is no measurement, \
             so they are left out of it (see the warnings)"
        ));
    }
    sync_note(run, &mut notes);
    DeviceView {
        observed,
        not_observed_reason,
        device_events_per_step: counts,
        device_busy_ms_per_step: busy,
        device_busy_share: busy_share,
        waiting_ms_per_step: waiting,
        waiting_share,
        launches_per_step: launches.flatten(),
        devices,
        launch,
        copies,
        kernels,
        attribution: attributed,
        roofline,
        not_observed,
        notes,
    }
}

/// What the sync policy means for the figures.
fn sync_note(run: &RunInfo, notes: &mut Vec<String>) {
    match run.sync_policy.as_deref() {
        Some("none") => notes.push(
            "sync policy none: no span waits for the device, so step and phase times are host launch times; device \
             work overlaps later steps"
                .into(),
        ),
        Some("step") => notes.push(
            "sync policy step: each step ends with a sync, so ProfilerStep#N is the true step time; the sync span \
             is the host waiting for work it queued earlier"
                .into(),
        ),
        Some("phase") => notes.push(
            "sync policy phase: every phase ends with a sync, which removes the overlap between host and device: \
             phase times add up, but the step is slower than without it"
                .into(),
        ),
        _ => {}
    }
}

fn absence_reason(loaded: &[Loaded], run: &RunInfo) -> String {
    let steptrace = loaded.iter().any(|l| l.producer == Producer::Steptrace);
    let torch = loaded.iter().any(|l| l.producer == Producer::TorchProfiler);
    let recorded = loaded.iter().find_map(|l| match &l.activity {
        Some(ActivityStatus::NotObserved { reason }) => Some(reason.clone()),
        _ => None,
    });
    let mut why = if let Some(reason) = recorded {
        format!("device activity not observed: {}", crate::display::line(&reason))
    } else if steptrace {
        match run.backend_kind.as_deref() {
            Some("cpu") => "the CPU backend has no separate device: host time is the work itself".to_owned(),
            Some(kind) => format!(
                "the trace has no device timestamps: steptrace recorded host spans only on {} (no device \
                 activity was collected)",
                crate::display::line(kind)
            ),
            None => "steptrace records host spans only".to_owned(),
        }
    } else if torch {
        "the trace has no kernel or memcpy events (was ProfilerActivity.CUDA enabled?)".to_owned()
    } else {
        "the trace has no device-side events (kernel, gpu_memcpy, gpu_memset)".to_owned()
    };
    if let Some(reason) = &run.fallback_reason {
        why.push_str(&format!("; this run is a fallback ({})", crate::display::line(reason)));
    }
    why
}
