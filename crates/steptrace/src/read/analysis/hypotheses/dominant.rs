//! One operation dominates the step.

use super::{ms, Change, Context, Experiment, Hypothesis, CONFIRM};
use crate::display::{label, LABEL_CHARS};
use crate::format::names::{is_input, is_wait, STEP_ROW};
use crate::read::analysis::device::{counted_steps, origins, per_step, KernelTable};
use crate::read::analysis::stats::median;
use crate::read::analysis::table::Timing;

/// Share of the recorded wall time one operation must take (self time).
const DOMINANT_SHARE: f64 = 0.4;

/// Share of the kernels' device time one kernel must take.
const DOMINANT_KERNEL_SHARE: f64 = 0.3;

/// Share of the step's wall time it must take too: a kernel of 20 µs in a
/// 2 ms step is no lever, whatever its share of a mostly idle device.
const DOMINANT_KERNEL_STEP_SHARE: f64 = 0.1;

pub(super) fn check(cx: &Context<'_>, found: &mut Vec<Hypothesis>) {
    if let Some(kernels) = &cx.device.kernels {
        from_kernels(cx, kernels, found);
        return;
    }
    let table = cx.table;
    let device_rows = table.rows.iter().any(|r| r.timing == Timing::Device);
    let candidates: Vec<_> = table
        .rows
        .iter()
        .filter(|r| r.name != STEP_ROW && !is_wait(&r.name) && !is_input(&r.name))
        .filter(|r| !device_rows || r.timing == Timing::Device)
        .collect();
    let (Some(first), second) = (candidates.first(), candidates.get(1)) else { return };
    let base = if device_rows { candidates.iter().map(|r| r.self_ms).sum::<f64>() } else { table.wall_ms };
    if base <= 0.0 {
        return;
    }
    let share = first.self_ms / base;
    if share < DOMINANT_SHARE || second.is_some_and(|s| s.self_ms * 2.0 > first.self_ms) {
        return;
    }
    let what = if device_rows { "of device time" } else { "of the recorded wall time (self time)" };
    let (next, experiment) = if first.timing == Timing::HostLaunch || first.timing == Timing::Mixed {
        (
            "its time here is host launch only: rerun with a sync after every phase to see whether its device time \
             is as large, then time that operation alone with the same input shapes and compare algorithms or shapes"
                .to_owned(),
            Some(Experiment::of([Change::SyncEveryPhase])),
        )
    } else {
        (
            "time that operation alone with the same input shapes (a micro-benchmark), then compare shapes, \
             layouts or algorithms; "
                .to_owned()
                + CONFIRM,
            None,
        )
    };
    found.push(Hypothesis {
        id: "dominant-operation",
        evidence: format!(
            "`{}` takes {} ({:.0}% {what}) over {} calls{}",
            label(&first.name, LABEL_CHARS),
            ms(first.self_ms),
            share.min(1.0) * 100.0,
            first.calls,
            against_next(first.self_ms, second.map(|s| s.self_ms))
        ),
        hypothesis: "one operation dominates: its shape or algorithm sets the step time".into(),
        next,
        experiment,
        command: None,
    });
}

/// How the first compares with the next one: `, 3.2× the next one`; `, the next one takes
/// 0` when it takes nothing; empty when there is no next one or no ratio to quote (a ratio
/// is never infinite, nor a 300-digit number).
fn against_next(first_ms: f64, next_ms: Option<f64>) -> String {
    let Some(next) = next_ms else { return String::new() };
    if next <= 0.0 {
        return ", the next one takes 0".to_owned();
    }
    let ratio = first_ms / next;
    if !ratio.is_finite() {
        String::new()
    } else if ratio >= 1e6 {
        format!(", {ratio:.1e}× the next one")
    } else {
        format!(", {ratio:.1}× the next one")
    }
}

/// From the device's kernels: one kernel name over
/// [`DOMINANT_KERNEL_SHARE`] of the kernels' device time.
fn from_kernels(cx: &Context<'_>, kernels: &KernelTable, found: &mut Vec<Hypothesis>) {
    let Some(top) = kernels.rows.first() else { return };
    if kernels.kernel_ms <= 0.0 {
        return;
    }
    let share = (top.total_ms / kernels.kernel_ms).min(1.0);
    let step_ms: Vec<f64> = per_step(cx.loaded, |_, _, _, _| Some(0.0)).iter().map(|x| x.1).collect();
    let step = median(&step_ms).unwrap_or(0.0);
    if share < DOMINANT_KERNEL_SHARE || top.share_of_step < DOMINANT_KERNEL_STEP_SHARE {
        return;
    }
    let inconsistent = if kernels.inconsistent_kernels > 0 {
        format!(
            "; these figures rest on inconsistent input: {} kernel(s) overlap another on their stream or share a \
             launch with another kernel (see the warnings)",
            kernels.inconsistent_kernels
        )
    } else {
        String::new()
    };
    let dims =
        |d: Option<[u64; 3]>| d.map_or_else(|| "not recorded".to_owned(), |[x, y, z]| format!("[{x}, {y}, {z}]"));
    let grids = if top.grids > 1 { format!(" (most often; {} distinct grids)", top.grids) } else { String::new() };
    let batch = cx.run.batch_size.unwrap_or(64);
    let steps = counted_steps(cx.loaded);
    let origins = origins(cx.loaded, &steps, Some(&top.name));
    let (ran_for, lever) = match origins.first() {
        Some(o) => {
            let mine: f64 = origins.iter().map(|o| o.us).sum();
            let op = o.op_kind.as_deref().unwrap_or("op");
            (
                format!(
                    "; it runs for `{}` {} ({:.0}% of its time{})",
                    label(o.ops.as_deref().unwrap_or("unknown ops"), LABEL_CHARS),
                    o.place(),
                    o.us / mine.max(f64::MIN_POSITIVE) * 100.0,
                    if origins.len() > 1 {
                        format!("; {} other op or span groups", origins.len() - 1)
                    } else {
                        String::new()
                    }
                ),
                match &o.span {
                    Some(span) => format!(" (the {} of `{}`)", label(op, LABEL_CHARS), label(span, LABEL_CHARS)),
                    None => format!(" (the {}, called outside steptrace's spans)", label(op, LABEL_CHARS)),
                },
            )
        }
        None => (String::new(), String::new()),
    };
    found.push(Hypothesis {
        id: "dominant-kernel",
        evidence: format!(
            "`{}` takes {:.0}% of the kernels' device time: {} per step (it runs {:.0}% of the {} step) over {} \
             calls per step, {:.1} µs per call, grid {}{grids}, block {}{ran_for}{inconsistent}",
            label(&top.label, LABEL_CHARS),
            share * 100.0,
            ms(top.per_step_ms),
            top.share_of_step * 100.0,
            ms(step),
            top.calls_per_step,
            top.mean_us,
            dims(top.grid),
            dims(top.block)
        ),
        hypothesis: format!(
            "one kernel sets the device time: its shape, algorithm or launch configuration{lever} is the lever"
        ),
        next: format!(
            "rerun with half the batch: if the kernel's time halves it scales with the work (look at its algorithm \
             or layout); if it stays, it is a fixed cost (too small a grid for the device, or a poor tile \
             choice); time it alone with the same shapes; {CONFIRM}"
        ),
        experiment: Some(Experiment::of([Change::BatchSize((batch / 2).max(1))])),
        command: None,
    });
}
