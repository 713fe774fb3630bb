//! Steps: the `ProfilerStep#N` spans, startup apart from steady state.

use serde::Serialize;

use super::spans::{Span, Spans, ThreadKey};
use crate::format::names::step_number;

/// A recorded step.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepRow {
    /// `N` of `ProfilerStep#N`.
    pub step: u64,
    /// Wall time, ms.
    pub ms: f64,
    /// Index of the trace file it came from.
    pub source: usize,
    /// Whether it belongs to startup (compilation, autotune, first
    /// shapes) rather than the steady state.
    pub startup: bool,
    /// Start, µs (trace clock of its file).
    #[serde(skip)]
    pub start: f64,
    /// End, µs.
    #[serde(skip)]
    pub end: f64,
    /// The thread that ran the step.
    #[serde(skip)]
    pub thread: ThreadKey,
}


/// Whether a span is a host-side step marker. torch.profiler also writes a
/// `ProfilerStep#N` copy on the GPU timeline (category
/// `gpu_user_annotation`), which is not a step boundary.
fn is_host_step(span: &Span) -> bool {
    step_number(&span.name).is_some() && !span.cat.as_deref().is_some_and(|c| c.contains("gpu"))
}

/// The steps of one file, ordered by number; a step written twice keeps
/// its longest span.
#[must_use]
pub(crate) fn steps_of(spans: &Spans, source: usize) -> Vec<StepRow> {
    let mut rows: Vec<StepRow> = spans
        .spans
        .iter()
        .filter(|s| is_host_step(s) && !s.unclosed)
        .filter_map(|s| {
            Some(StepRow {
                step: step_number(&s.name)?,
                ms: s.dur() / 1000.0,
                source,
                startup: false,
                start: s.start,
                end: s.end,
                thread: s.thread.clone(),
            })
        })
        .collect();
    rows.sort_by(|a, b| a.step.cmp(&b.step).then(b.ms.total_cmp(&a.ms)));
    rows.dedup_by_key(|r| r.step);
    rows
}
