//! Observations turned into hypotheses, each with a next experiment.
//!
//! Nothing here is a verdict: every item says what was measured, what it
//! might mean, and the controlled experiment that would tell. The
//! experiment is typed ([`Experiment`], a list of [`Change`]s to the run's
//! knobs); the program that made the run turns it into a command, since
//! only it knows its flags (the CLI does, through
//! [`Report::render_commands`](super::Report::render_commands)).
//!
//! Adding a rule: write a function in a file of this folder that pushes
//! [`Hypothesis`] values (or [`NotExamined`] when the trace cannot answer),
//! and call it from [`hypotheses`].

mod dominant;
mod grid;
mod input;
mod launches;
mod memory;
mod roofline;
mod steady;
mod upload;

use serde::Serialize;

use super::device::{DeviceSteps, DeviceView};
use super::loaded::{Loaded, RunInfo, Vocabulary};
use super::table::SpanTable;
use super::timing::StepTiming;

/// One possibility.
#[derive(Clone, Debug, Serialize)]
pub struct Hypothesis {
    /// A stable identifier: `input-pipeline`, `repeated-upload`,
    /// `many-launches`, `dominant-operation` (from spans), `dominant-kernel`
    /// (from device kernels), `above-floor` (a layer far from the device's limits),
    /// `not-steady`.
    pub id: &'static str,
    /// What was measured, with numbers.
    pub evidence: String,
    /// What it might mean.
    pub hypothesis: String,
    /// The next controlled experiment, in words.
    pub next: String,
    /// The same experiment as changes to the run, when it is one.
    pub experiment: Option<Experiment>,
    /// The exact command for it, when the trace says how the run was made
    /// and the caller rendered it.
    pub command: Option<String>,
}

/// A check that could not run on these traces.
#[derive(Clone, Debug, Serialize)]
pub struct NotExamined {
    /// The check.
    pub check: &'static str,
    /// Why.
    pub why: String,
    /// What would make it possible, as a change to the run.
    pub enable: Option<Change>,
}

/// A rerun of the same command with some knobs changed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Experiment {
    /// The knobs to change, in order.
    pub changes: Vec<Change>,
}

impl Experiment {
    /// An experiment that changes `changes`.
    #[must_use]
    pub fn of(changes: impl IntoIterator<Item = Change>) -> Experiment {
        Experiment { changes: changes.into_iter().collect() }
    }
}

/// One knob of a run and its new value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "knob", content = "value", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Change {
    /// Prepare batches on this many prefetch threads.
    Prefetch(u64),
    /// Record the backend's internal spans (uploads, launches).
    RecordInternals,
    /// Sync after every phase, so that phase spans include device work.
    SyncEveryPhase,
    /// Samples per step.
    BatchSize(u64),
    /// Steps skipped before the first recorded cycle.
    SkipFirst(u64),
    /// Steps run in all.
    Steps(u64),
}

/// The report's inputs to the rules.
pub(crate) struct Context<'a> {
    pub(crate) loaded: &'a [Loaded],
    pub(crate) run: &'a RunInfo,
    pub(crate) timing: &'a StepTiming,
    pub(crate) table: &'a SpanTable,
    pub(crate) device: &'a DeviceView,
    /// Device memory per step, when the trace holds samples.
    pub(crate) memory: Option<&'a crate::read::analysis::memory::MemoryView>,
    pub(crate) anomalies: &'a [(Option<u64>, String)],
    /// Steps that hold an epoch boundary (validation, checkpointing).
    pub(crate) boundaries: &'a [u64],
    pub(crate) vocab: &'a Vocabulary<'a>,
}

/// Runs every rule.
pub(crate) fn hypotheses(cx: &Context<'_>) -> (Vec<Hypothesis>, Vec<NotExamined>) {
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    if cx.timing.steps.is_empty() {
        skipped.push(NotExamined {
            check: "per-step checks (input, uploads, launches)",
            why: "no ProfilerStep#N spans: the trace has no step boundaries".into(),
            enable: None,
        });
    } else {
        input::check(cx, &mut found);
        upload::check(cx, &mut found, &mut skipped);
        launches::check(cx, &mut found, &mut skipped);
    }
    dominant::check(cx, &mut found);
    roofline::check(cx, &mut found, &mut skipped);
    grid::check(cx, &mut found);
    memory::check(cx, &mut found);
    steady::check(cx, &mut found);
    (found, skipped)
}

/// The device with the most busy time, when the device view has one.
fn primary_device<'a>(cx: &Context<'a>) -> Option<&'a DeviceSteps> {
    cx.device.devices.iter().max_by(|a, b| a.busy_ms.median.total_cmp(&b.busy_ms.median))
}

/// How to confirm a gain: outside the profiler.
const CONFIRM: &str = "confirm any gain outside the profiler: `steptrace bench` both variants from the same seed, \
                       then `steptrace compare A.json B.json --vary <what changed>`";

/// A duration in ms, at a readable precision.
pub(crate) fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 1.0 {
        format!("{v:.2} ms")
    } else {
        format!("{:.1} µs", v * 1000.0)
    }
}
