//! One operation dominates the step.

use super::{ms, Change, Context, Experiment, Hypothesis, CONFIRM};
use crate::analysis::table::Timing;
use crate::read::display::{label, LABEL_CHARS};
use crate::format::names::{is_input, is_wait, STEP_ROW};

/// Share of the recorded wall time one operation must take (self time).
const DOMINANT_SHARE: f64 = 0.4;

pub(super) fn check(cx: &Context<'_>, found: &mut Vec<Hypothesis>) {
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
            "`{}` takes {} ({:.0}% {what}) over {} calls, {:.1}× the next one",
            label(&first.name, LABEL_CHARS),
            ms(first.self_ms),
            share * 100.0,
            first.calls,
            second.map_or(f64::INFINITY, |s| first.self_ms / s.self_ms.max(f64::MIN_POSITIVE))
        ),
        hypothesis: "one operation dominates: its shape or algorithm sets the step time".into(),
        next,
        experiment,
        command: None,
    });
}
