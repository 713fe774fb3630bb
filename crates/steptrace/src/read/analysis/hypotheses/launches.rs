//! Many small kernel launches per step.

use super::{ms, Change, Context, Experiment, Hypothesis, NotExamined, CONFIRM};
use crate::analysis::device::per_step;
use crate::analysis::loaded::Producer;
use crate::analysis::spans::Span;
use crate::analysis::stats::median;

/// Launches per step from which work counts as fragmented.
const MANY_LAUNCHES: f64 = 30.0;

pub(super) fn check(cx: &Context<'_>, found: &mut Vec<Hypothesis>, skipped: &mut Vec<NotExamined>) {
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
        experiment: Some(Experiment::of([Change::BatchSize(batch * 4)])),
        command: None,
    });
}
