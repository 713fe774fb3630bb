//! A kernel that cannot fill the device: a large share of device time on a grid of fewer
//! thread blocks than the device has SMs.

use super::{ms, Change, Context, Experiment, Hypothesis, CONFIRM};
use crate::read::analysis::device::{counted_steps, origins, per_step};
use crate::read::analysis::stats::median;

/// Share of the kernels' device time the kernel (for one op and span) must take.
const SHARE: f64 = 0.15;

/// Share of the step it must take too.
const STEP_SHARE: f64 = 0.05;

/// At most this many kernels are named.
const NAMED: usize = 2;

pub(super) fn check(cx: &Context<'_>, found: &mut Vec<Hypothesis>) {
    let Some(sms) = cx.loaded.iter().find_map(|l| l.device.sms) else { return };
    let steps = counted_steps(cx.loaded);
    if steps.is_empty() {
        return;
    }
    let all = origins(cx.loaded, &steps, None);
    let total: f64 = cx.device.kernels.as_ref().map_or(0.0, |k| k.kernel_ms * 1000.0);
    if total <= 0.0 {
        return;
    }
    let step_ms: Vec<f64> = per_step(cx.loaded, |_, _, _, _| Some(0.0)).iter().map(|x| x.1).collect();
    let step = median(&step_ms).unwrap_or(0.0);
    let n = steps.len() as f64;
    let batch = cx.run.batch_size.unwrap_or(64);
    let mut named = 0;
    for o in &all {
        let Some(grid) = o.grid else { continue };
        // The grid comes from the trace: a product past u64 is no small grid.
        let Some(blocks) = grid.iter().try_fold(1u64, |all, g| all.checked_mul(*g)) else { continue };
        let per_step_ms = o.us / 1000.0 / n;
        if blocks == 0 || blocks >= sms || o.us / total < SHARE || per_step_ms < STEP_SHARE * step {
            continue;
        }
        let op = crate::display::label(o.op_kind.as_deref().unwrap_or("op"), crate::display::LABEL_CHARS);
        found.push(Hypothesis {
            id: "under-filled-grid",
            evidence: format!(
                "`{}` for `{}` {} takes {:.0}% of the kernels' device time ({} per step, {:.1} calls per \
                 step) on a grid of [{}, {}, {}] = {blocks} thread blocks, against the device's {sms} SMs: at most \
                 {blocks} of {sms} SMs work while it runs",
                crate::display::label(&o.name, 60),
                crate::display::label(o.ops.as_deref().unwrap_or("unknown ops"), crate::display::LABEL_CHARS),
                o.place(),
                o.us / total * 100.0,
                ms(per_step_ms),
                o.calls as f64 / n,
                grid[0],
                grid[1],
                grid[2]
            ),
            hypothesis: match &o.span {
                Some(span) => format!(
                    "the {op} of `{}` cannot fill the device: its time is set by too few thread blocks, not by \
                     its work",
                    crate::display::label(span, crate::display::LABEL_CHARS)
                ),
                None => format!(
                    "this {op} (called outside steptrace's spans) cannot fill the device: its time is set by too \
                     few thread blocks, not by its work"
                ),
            },
            next: format!(
                "rerun with twice the batch: if this kernel's time barely grows, it is bound by its grid; then give \
                 it more parallel work (a larger batch or layer, a split over the reduced dimension, another \
                 algorithm for this op) and compare; {CONFIRM}"
            ),
            experiment: Some(Experiment::of([Change::BatchSize(batch.saturating_mul(2))])),
            command: None,
        });
        named += 1;
        if named == NAMED {
            break;
        }
    }
}
