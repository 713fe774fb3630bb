//! Many small kernel launches per step.

use super::{ms, Change, Context, Experiment, Hypothesis, NotExamined, CONFIRM};
use crate::read::analysis::device::{counted_steps, origins, per_step, KernelTable, SHORT_KERNEL_US};
use crate::read::analysis::loaded::Producer;
use crate::read::analysis::spans::Span;
use crate::read::analysis::stats::median;

/// Launches per step from which work counts as fragmented.
const MANY_LAUNCHES: f64 = 30.0;

/// Device busy share below which short kernels make the step launch-bound.
const LAUNCH_BOUND_BUSY: f64 = 0.5;

pub(super) fn check(cx: &Context<'_>, found: &mut Vec<Hypothesis>, skipped: &mut Vec<NotExamined>) {
    if let Some(kernels) = &cx.device.kernels {
        from_kernels(cx, kernels, found);
        return;
    }
    let Some(launches) = &cx.device.launches_per_step else {
        if !cx.loaded.iter().any(|l| l.spans.spans.iter().any(|s| cx.vocab.is_launch(&s.name))) {
            skipped.push(NotExamined {
                check: "many small launches per step",
                why: "the trace has no kernel launch events: record the backend's internal spans".into(),
                enable: Some(Change::RecordInternals),
            });
        }
        return;
    };
    if launches.median < MANY_LAUNCHES {
        return;
    }
    let step_ms: Vec<f64> = per_step(cx.loaded, |_, _, _, _| Some(0.0)).iter().map(|x| x.1).collect();
    let step = median(&step_ms).unwrap_or(0.0);
    let host_cost: Vec<f64> = cx
        .loaded
        .iter()
        .flat_map(|l| l.spans.spans.iter().filter(|s| cx.vocab.is_launch(&s.name)).map(Span::dur))
        .collect();
    let mean_launch = host_cost.iter().sum::<f64>() / host_cost.len().max(1) as f64;
    let kernel = cx
        .device
        .device_busy_ms_per_step
        .as_ref()
        .zip(cx.device.device_events_per_step.as_ref())
        .map(|(busy, n)| format!("; device busy {} per step over {:.0} device events", ms(busy.median), n.median))
        .unwrap_or_default();
    let fusion = if cx.loaded.iter().any(|l| l.producer == Producer::TorchProfiler) {
        "torch.compile, CUDA graphs"
    } else {
        "which operations break burn's fusion"
    };
    let batch = cx.run.batch_size.unwrap_or(64);
    found.push(Hypothesis {
        id: "many-launches",
        evidence: format!(
            "{:.0} kernel launches per step (median; min {:.0}, max {:.0}) in a {} step: {} of step per launch; a \
             launch costs the host {} on average{kernel}",
            launches.median,
            launches.min,
            launches.max,
            ms(step),
            ms(step / launches.median),
            ms(mean_launch / 1000.0)
        ),
        hypothesis: "the work is fragmented into many small launches, whose fixed cost and gaps dominate".into(),
        next: format!(
            "raise the work per launch without changing the launch count: run with a 4× batch and compare time per \
             sample; if it falls, launches are the limit, so examine grouping or fusion ({fusion}) and its overall \
             cost; {CONFIRM}"
        ),
        experiment: batch.checked_mul(4).map(|b| Experiment::of([Change::BatchSize(b)])),
        command: None,
    });
}

/// From the device's kernels: many kernels under [`SHORT_KERNEL_US`] per
/// step while the device is idle most of the step.
fn from_kernels(cx: &Context<'_>, kernels: &KernelTable, found: &mut Vec<Hypothesis>) {
    let short = kernels.short_per_step.median;
    let Some(busy) = cx.device.device_busy_share.as_ref().map(|s| s.median) else { return };
    if short < MANY_LAUNCHES || busy >= LAUNCH_BOUND_BUSY {
        return;
    }
    let step_ms: Vec<f64> = per_step(cx.loaded, |_, _, _, _| Some(0.0)).iter().map(|x| x.1).collect();
    let step = median(&step_ms).unwrap_or(0.0);
    let busy_ms = cx.device.device_busy_ms_per_step.as_ref().map_or(0.0, |s| s.median);
    let launch = cx.device.launch.as_ref().map_or_else(String::new, |l| {
        let start = l.launch_to_start_us.as_ref().map_or_else(String::new, |s| {
            format!("a kernel starts {:.1} µs after its launch call (median; p90 {:.1} µs) and ", s.median, s.p90)
        });
        format!(
            "; {start}the host ends its launches {} before the device ends the step's kernels",
            ms(l.host_ahead_ms.median)
        )
    });
    let small =
        cx.device.copies.as_ref().and_then(|c| c.small_uploads_every_step.as_ref()).map_or_else(String::new, |s| {
            format!(
                "; besides, {:.0} small host-to-device copies ({}–{} B) run every step",
                s.per_step, s.min_bytes, s.max_bytes
            )
        });
    let batch = cx.run.batch_size.unwrap_or(64);
    let layer = busiest_launcher(cx);
    found.push(Hypothesis {
        id: "many-launches",
        evidence: format!(
            "{short:.0} of {:.0} kernels per step run under {SHORT_KERNEL_US:.0} µs (median over {} steps); the \
             device is busy {} of a {} step ({:.0}%){launch}{small}{layer}",
            kernels.kernels_per_step.median,
            kernels.short_per_step.n,
            ms(busy_ms),
            ms(step),
            busy * 100.0
        ),
        hypothesis: "the step is launch-bound: the device finishes each small kernel quickly and then waits for the \
                     host to issue the next one"
            .into(),
        next: format!(
            "give each kernel more work without adding launches: run with a 4× batch and compare time per sample; if \
             it falls while the kernel count stays, launches are the limit: {}; {CONFIRM}",
            if cx.loaded.iter().any(|l| l.producer == Producer::TorchProfiler) {
                "try fewer, larger kernels (torch.compile, CUDA graphs) and weigh their own cost"
            } else {
                "look for what breaks burn's fusion (many elementwise kernels in a row) and for scalars rebuilt each \
                 step"
            }
        ),
        experiment: batch.checked_mul(4).map(|b| Experiment::of([Change::BatchSize(b)])),
        command: None,
    });
}

/// `; the span launching most kernels is `backward > conv2` (12.0 per step, 9.0 under 10 µs)`,
/// from the kernels' attribution; empty without it (kernels called outside every span count
/// for no span).
fn busiest_launcher(cx: &Context<'_>) -> String {
    let steps = counted_steps(cx.loaded);
    let mut by_span: std::collections::BTreeMap<&str, (usize, usize)> = std::collections::BTreeMap::new();
    let all = origins(cx.loaded, &steps, None);
    for o in &all {
        let Some(span) = o.span.as_deref() else { continue };
        let e = by_span.entry(span).or_default();
        e.0 += o.calls;
        if o.calls > 0 && o.us / (o.calls as f64) < SHORT_KERNEL_US {
            e.1 += o.calls;
        }
    }
    let n = steps.len().max(1) as f64;
    by_span.into_iter().max_by_key(|(_, (calls, _))| *calls).map_or_else(String::new, |(span, (calls, short))| {
        let span = crate::display::label(span, crate::display::LABEL_CHARS);
        format!(
            "; the span launching most kernels is `{span}` ({:.1} per step, {:.1} of them in groups averaging under \
             {SHORT_KERNEL_US:.0} µs)",
            calls as f64 / n,
            short as f64 / n
        )
    })
}
