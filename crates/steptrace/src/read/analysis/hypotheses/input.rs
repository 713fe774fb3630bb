//! The input pipeline: reading batches takes a large share of the step.

use super::{ms, primary_device, Change, Context, Experiment, Hypothesis, CONFIRM};
use crate::format::names::is_input;
use crate::read::analysis::device::per_step;
use crate::read::analysis::spans::Span;
use crate::read::analysis::stats::median;

/// Share of a step spent reading input above which the input pipeline is
/// a suspect.
const INPUT_SHARE: f64 = 0.15;

pub(super) fn check(cx: &Context<'_>, found: &mut Vec<Hypothesis>) {
    let per = per_step(cx.loaded, |l, a, b, step| {
        let input: f64 = l
            .spans
            .starting_in(a, b)
            .map(|(_, s)| s)
            .filter(|s| s.thread == step.thread && is_input(&s.name))
            .filter(|s| s.parent.is_none_or(|p| !is_input(&l.spans.spans[p].name)))
            .map(Span::dur)
            .sum();
        Some(input / 1000.0)
    });
    if per.iter().all(|(v, _)| *v == 0.0) {
        return;
    }
    let inputs: Vec<f64> = per.iter().map(|x| x.0).collect();
    let shares: Vec<f64> = per.iter().filter(|(_, ms)| *ms > 0.0).map(|(v, ms)| (v / ms).min(1.0)).collect();
    let (Some(input), Some(share), Some(step)) =
        (median(&inputs), median(&shares), median(&per.iter().map(|x| x.1).collect::<Vec<_>>()))
    else {
        return;
    };
    if let Some((dev, idle_ms, idle_share)) =
        primary_device(cx).and_then(|d| Some((d, d.idle_input_ms.as_ref()?, d.idle_input_share.as_ref()?)))
    {
        // The device view says whether the device starved while the batch
        // was read: that, not the host's read time, is the finding.
        let idle = idle_share.median;
        if idle < INPUT_SHARE {
            return;
        }
        let prefetch = cx.run.prefetch_workers.unwrap_or(0);
        found.push(Hypothesis {
            id: "input-pipeline",
            evidence: format!(
                "{} was idle for {} per step while the host read input (median over {} steps), {:.0}% of the median \
                 step ({}); reading input took {} per step; the device was busy {:.0}% of the step",
                dev.device,
                ms(idle_ms.median),
                idle_share.n,
                idle * 100.0,
                ms(step),
                ms(input),
                dev.busy_share.median * 100.0
            ),
            hypothesis: "the input pipeline cannot keep up: the device waits for batches".into(),
            next: format!(
                "rerun with batches prepared ahead (prefetch threads) and check that the device's idle time during \
                 the read falls and the step time with it; {CONFIRM}"
            ),
            experiment: prefetch.max(1).checked_mul(2).map(|p| Experiment::of([Change::Prefetch(p)])),
            command: None,
        });
        return;
    }
    if share < INPUT_SHARE {
        return;
    }
    let idle = match (cx.run.sync_policy.as_deref(), cx.device.observed) {
        (_, true) => {
            let busy = cx.device.device_busy_share.as_ref().map_or(0.0, |s| s.median);
            format!("the device was busy for {:.0}% of the median step", busy * 100.0)
        }
        (Some("step" | "phase"), false) => {
            "every step ends with a sync, so the device had nothing queued while the batch was read".to_owned()
        }
        _ => "whether the device had work queued meanwhile is not observed (no sync, no device events)".to_owned(),
    };
    let prefetch = cx.run.prefetch_workers.unwrap_or(0);
    found.push(Hypothesis {
        id: "input-pipeline",
        evidence: format!(
            "reading input takes {} per step (median over {} steps), {:.0}% of the median step ({}); {idle}",
            ms(input),
            per.len(),
            share * 100.0,
            ms(step)
        ),
        hypothesis: "the input pipeline cannot keep up: the device waits for batches".into(),
        next: format!(
            "rerun with batches prepared ahead (prefetch threads) and check that the input share falls and the step \
             time with it; {CONFIRM}"
        ),
        experiment: prefetch.max(1).checked_mul(2).map(|p| Experiment::of([Change::Prefetch(p)])),
        command: None,
    });
}
