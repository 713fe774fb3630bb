//! One layer (or op kind) spends a large share of the step above its floor: it is slow
//! because it runs badly, not because it is big.

use super::{ms, Change, Context, Experiment, Hypothesis, NotExamined, CONFIRM};
use crate::read::analysis::device::{rate, PricedRow};

/// Share of the priced kernel time one row's time above its floor must take.
const ABOVE_SHARE: f64 = 0.25;

/// Share of the step's wall time it must take too: time above the floor in a mostly idle
/// step is no lever.
const ABOVE_STEP_SHARE: f64 = 0.1;

pub(super) fn check(cx: &Context<'_>, found: &mut Vec<Hypothesis>, skipped: &mut Vec<NotExamined>) {
    let Some(r) = &cx.device.roofline else { return };
    let (Some(roofs), Some(step)) = (&r.roofs, &r.step) else {
        if let Some(why) = r.no_floor.as_ref().or(r.step_problem.as_ref()) {
            skipped.push(NotExamined { check: "time above the device floor", why: why.clone(), enable: None });
        }
        return;
    };
    let above = |row: &&PricedRow| row.above_floor_ms.unwrap_or(0.0);
    // A layer first (a span path below a phase), else an op kind.
    let layer = r.by_layer.iter().filter(|row| row.name.contains(" > ")).max_by(|a, b| above(a).total_cmp(&above(b)));
    let kind = r.by_op_kind.iter().max_by(|a, b| above(a).total_cmp(&above(b)));
    let priced = r.priced_ms_per_step;
    let lever = |row: &&PricedRow| above(row) >= ABOVE_SHARE * priced && above(row) >= ABOVE_STEP_SHARE * step.step_ms;
    let (what, row) = match (layer.filter(lever), kind.filter(lever)) {
        (Some(l), _) => ("layer", l),
        (None, Some(k)) => ("op kind", k),
        (None, None) => return,
    };
    let (Some(floor), Some(bound), Some(efficiency)) = (row.floor_ms, row.bound, row.efficiency) else { return };
    let (achieved, roof) = if bound == "compute" {
        (
            rate(row.achieved_flops, "FLOP/s"),
            format!("{} in {}", rate(roofs.flops_for(&row.dtype), "FLOP/s"), row.dtype),
        )
    } else {
        (rate(row.achieved_bandwidth, "B/s"), rate(roofs.bandwidth, "B/s"))
    };
    let batch = cx.run.batch_size.unwrap_or(64);
    let (hypothesis, next) = if bound == "memory" {
        (
            "its kernels move far more than its operations need, or move it slowly: operations that do not fuse \
             (each writes and reads its intermediate), re-reads, strided access, or too little work per launch to \
             fill the device",
            format!(
                "rerun at batch {} and compare its share of the roof: rising with the batch points to too little \
                 parallelism, flat to the access pattern or missing fusion (its kernels per step against its \
                 operations, in `--detail ops`); ",
                batch.saturating_mul(2)
            ),
        )
    } else {
        (
            "its arithmetic runs far below the device's throughput: a shape that tiles badly, a dtype without the \
             device's fast units, or a kernel choice tuned for other shapes",
            "time it alone at this shape and at shapes padded to multiples of 64, and in f16/bf16 where the device \
             has tensor cores; "
                .to_owned(),
        )
    };
    found.push(Hypothesis {
        id: "above-floor",
        evidence: format!(
            "{what} `{}` takes {} of kernel time per step, {} above its floor of {} ({bound}-bound, {:.1}% of the \
             roof: {achieved} against {roof}); that is {:.0}% of the priced kernel time and {:.0}% of the step",
            crate::display::label(&row.name, crate::display::LABEL_CHARS),
            ms(row.ms_per_step),
            ms(above(&row)),
            ms(floor),
            efficiency * 100.0,
            above(&row) / priced.max(f64::MIN_POSITIVE) * 100.0,
            above(&row) / step.step_ms.max(f64::MIN_POSITIVE) * 100.0,
        ),
        hypothesis: hypothesis.into(),
        next: next + CONFIRM,
        experiment: batch.checked_mul(2).filter(|_| bound == "memory").map(|b| Experiment::of([Change::BatchSize(b)])),
        command: None,
    });
}
