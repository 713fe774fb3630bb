//! Host launch, device work and waiting: what the trace shows of each, and
//! what it cannot show.

use serde::Serialize;

use super::loaded::{Loaded, Producer, RunInfo, Vocabulary};
use super::spans::union_length;
use super::stats::Stats;
use super::steps::StepRow;
use crate::format::device::{is_device_cat, is_device_work, ActivityStatus};
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

pub(crate) fn device_view(loaded: &[Loaded], run: &RunInfo, vocab: &Vocabulary<'_>) -> DeviceView {
    let observed = loaded.iter().any(|l| l.spans.spans.iter().any(|s| is_device_cat(s.cat.as_deref())));
    let device_events = |pick_busy: bool| {
        per_step(loaded, |l, a, b, _| {
            let events: Vec<(f64, f64)> = l
                .spans
                .starting_in(a, b)
                .map(|(_, s)| s)
                .filter(|s| is_device_work(s.cat.as_deref()))
                .map(|s| (s.start, s.end.min(b)))
                .collect();
            Some(if pick_busy { union_length(events) / 1000.0 } else { events.len() as f64 })
        })
    };
    let (mut counts, mut busy, mut busy_share) = (None, None, None);
    if observed {
        let c = device_events(false);
        let b = device_events(true);
        counts = Stats::of(&c.iter().map(|x| x.0).collect::<Vec<_>>());
        busy = Stats::of(&b.iter().map(|x| x.0).collect::<Vec<_>>());
        busy_share = Stats::of(&b.iter().map(|(v, ms)| v / ms).collect::<Vec<_>>());
    }
    let step_threads_only = |l: &Loaded, a: f64, b: f64, step: &StepRow, pred: &dyn Fn(&str) -> bool| {
        l.spans
            .starting_in(a, b)
            .map(|(_, s)| s)
            .filter(|s| s.thread == step.thread && pred(&s.name))
            .map(|s| s.dur())
            .sum::<f64>()
    };
    let has_wait = loaded.iter().any(|l| l.spans.spans.iter().any(|s| is_wait(&s.name)));
    let waits = per_step(loaded, |l, a, b, step| Some(step_threads_only(l, a, b, step, &is_wait) / 1000.0));
    let (waiting, waiting_share) = if has_wait {
        (
            Stats::of(&waits.iter().map(|x| x.0).collect::<Vec<_>>()),
            Stats::of(&waits.iter().map(|(v, ms)| v / ms).collect::<Vec<_>>()),
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
    let not_observed_reason = (!observed).then(|| absence_reason(loaded, run));
    if observed {
        notes.push(
            "device busy = union of kernel and copy events that start inside the step; the sum of kernel times is \
             not elapsed time"
                .into(),
        );
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
        format!("device activity not observed: {reason}")
    } else if steptrace {
        match run.backend_kind.as_deref() {
            Some("cpu") => "the CPU backend has no separate device: host time is the work itself".to_owned(),
            Some(kind) => format!(
                "the trace has no device timestamps: steptrace recorded host spans only on {kind} (no device \
                 activity was collected)"
            ),
            None => "steptrace records host spans only".to_owned(),
        }
    } else if torch {
        "the trace has no kernel or memcpy events (was ProfilerActivity.CUDA enabled?)".to_owned()
    } else {
        "the trace has no device-side events (kernel, gpu_memcpy, gpu_memset)".to_owned()
    };
    if let Some(reason) = &run.fallback_reason {
        why.push_str(&format!("; this run is a fallback ({reason})"));
    }
    why
}
