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

/// What [`steps_of`] had to set aside, for the report's warnings.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct StepIssues {
    /// Step numbers written more than once, with how many times.
    pub(crate) duplicates: Vec<(u64, usize)>,
    /// Steps that start inside an earlier step of their thread (nested or
    /// overlapping markers), left out.
    pub(crate) overlapping: Vec<u64>,
    /// Whether step numbers do not follow the order of their start times.
    pub(crate) out_of_order: bool,
}

/// The steps of one file, ordered by number; a step written twice keeps
/// its longest span, and a step that starts inside an earlier one on its
/// thread is left out: steps follow each other.
#[must_use]
pub(crate) fn steps_of(spans: &Spans, source: usize) -> (Vec<StepRow>, StepIssues) {
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
    let mut issues = StepIssues::default();
    rows.sort_by(|a, b| a.step.cmp(&b.step).then(b.ms.total_cmp(&a.ms)));
    for group in rows.chunk_by(|a, b| a.step == b.step) {
        if group.len() > 1 {
            issues.duplicates.push((group[0].step, group.len()));
        }
    }
    rows.dedup_by_key(|r| r.step);
    // In time order per thread, each step must start after the previous
    // one ended.
    let mut by_time: Vec<usize> = (0..rows.len()).collect();
    by_time.sort_by(|&a, &b| rows[a].thread.cmp(&rows[b].thread).then(rows[a].start.total_cmp(&rows[b].start)));
    let mut keep = vec![true; rows.len()];
    let mut last: Option<usize> = None;
    for &i in &by_time {
        match last {
            Some(prev) if rows[prev].thread == rows[i].thread && rows[i].start < rows[prev].end => {
                keep[i] = false;
                issues.overlapping.push(rows[i].step);
            }
            _ => last = Some(i),
        }
    }
    let mut kept = keep.iter();
    rows.retain(|_| kept.next().copied().unwrap_or(true));
    issues.overlapping.sort_unstable();
    issues.out_of_order = rows.windows(2).any(|w| w[0].thread == w[1].thread && w[1].start < w[0].start);
    (rows, issues)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::reader::parse_trace;

    fn steps(json: &str) -> (Vec<(u64, f64)>, StepIssues) {
        let spans = Spans::from_trace(&parse_trace(json.as_bytes()).unwrap());
        let (rows, issues) = steps_of(&spans, 0);
        (rows.iter().map(|r| (r.step, r.ms)).collect(), issues)
    }

    #[test]
    fn duplicates_keep_the_longest_and_are_counted() {
        let (rows, issues) = steps(
            r#"[{"ph":"X","name":"ProfilerStep#1","tid":1,"ts":0,"dur":1000},
                {"ph":"X","name":"ProfilerStep#2","tid":1,"ts":1000,"dur":1000},
                {"ph":"X","name":"ProfilerStep#2","tid":2,"ts":1000,"dur":3000}]"#,
        );
        assert_eq!(rows, [(1, 1.0), (2, 3.0)]);
        assert_eq!(issues, StepIssues { duplicates: vec![(2, 2)], ..StepIssues::default() });
    }

    #[test]
    fn nested_steps_are_left_out_and_order_is_checked() {
        let (rows, issues) = steps(
            r#"[{"ph":"X","name":"ProfilerStep#1","tid":1,"ts":0,"dur":5000},
                {"ph":"X","name":"ProfilerStep#2","tid":1,"ts":1000,"dur":1000},
                {"ph":"X","name":"ProfilerStep#4","tid":1,"ts":5000,"dur":1000},
                {"ph":"X","name":"ProfilerStep#3","tid":1,"ts":6000,"dur":1000}]"#,
        );
        assert_eq!(rows, [(1, 5.0), (3, 1.0), (4, 1.0)]);
        assert_eq!(issues.overlapping, [2]);
        assert!(issues.out_of_order);
    }
}
