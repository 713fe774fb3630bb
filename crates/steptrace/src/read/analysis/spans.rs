//! Spans rebuilt from `B`/`E` pairs and `X` events, with nesting and self
//! time per thread.

use std::collections::HashMap;

use serde_json::Value;

use super::order::sort_stable_by;
use crate::read::reader::{plausible_dur, plausible_ts, Name, Names, Trace, TraceEvent, TrackId};

/// A thread of a trace: `(pid, tid)`.
pub type ThreadKey = (Option<TrackId>, Option<TrackId>);

/// One span: a completed `B`/`E` pair or an `X` event.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// Its name.
    pub name: String,
    /// Its category, as written: shared with the other spans of the
    /// category (a trace has a few categories, and millions of spans).
    pub cat: Option<Name>,
    /// The thread it ran on.
    pub thread: ThreadKey,
    /// Start, µs.
    pub start: f64,
    /// End, µs.
    pub end: f64,
    /// The index of the innermost span of the same thread that contains it.
    pub parent: Option<usize>,
    /// Its duration minus the durations of its direct children, µs.
    pub self_us: f64,
    /// Whether its end was missing (the file was cut short) and the end of
    /// the trace was used instead.
    pub unclosed: bool,
}

impl Span {
    /// Its duration, µs.
    #[must_use]
    pub fn dur(&self) -> f64 {
        self.end - self.start
    }
}

/// The spans of one trace, and what is known about its threads.
#[derive(Clone, Debug, Default)]
pub struct Spans {
    /// Every span, ordered by thread, then start (outer spans first).
    pub spans: Vec<Span>,
    /// Thread names from `thread_name` metadata events.
    pub thread_names: HashMap<ThreadKey, String>,
    /// Instant events: `(name, ts, thread)`.
    pub instants: Vec<(String, f64, ThreadKey)>,
    /// End events with no open span on their thread (ignored).
    pub orphan_ends: usize,
    /// Span indices ordered by start time (all threads).
    by_start: Vec<usize>,
}

impl Spans {
    /// Rebuilds spans from a trace's events.
    ///
    /// `E` closes the innermost open `B` of its thread, as viewers do.
    /// Spans still open at the end of the file are closed at the trace's
    /// last timestamp and marked [`Span::unclosed`]. Events without a
    /// plausible timestamp, and `X` events without a plausible duration
    /// (negative, non-finite, absurd: see
    /// [`plausible_ts`](crate::read::reader::plausible_ts)), are ignored;
    /// [`validate`](crate::read::reader::validate) names them.
    ///
    /// The work grows with the number of events (and their sorting), not
    /// with how deeply spans nest.
    #[must_use]
    pub fn from_trace(trace: &Trace) -> Spans {
        let mut names = Names::default();
        let mut builder = SpansBuilder::default();
        for event in &trace.events {
            builder.event(event, &mut names);
        }
        builder.finish()
    }

    /// Sorts spans by thread and start, then finds each span's parent and
    /// self time.
    fn nest(&mut self) {
        sort_stable_by(&mut self.spans, |a, b| {
            a.thread.cmp(&b.thread).then(a.start.total_cmp(&b.start)).then(b.end.total_cmp(&a.end))
        });
        let mut stack: Vec<usize> = Vec::new();
        for i in 0..self.spans.len() {
            if i > 0 && self.spans[i].thread != self.spans[i - 1].thread {
                stack.clear();
            }
            while let Some(&top) = stack.last() {
                if self.spans[i].start < self.spans[top].end && self.spans[i].end <= self.spans[top].end {
                    break;
                }
                stack.pop();
            }
            self.spans[i].parent = stack.last().copied();
            self.spans[i].self_us = self.spans[i].dur();
            if let Some(parent) = self.spans[i].parent {
                let child = self.spans[i].dur();
                self.spans[parent].self_us -= child;
            }
            stack.push(i);
        }
        self.by_start = (0..self.spans.len()).collect();
        self.by_start.sort_by(|&a, &b| self.spans[a].start.total_cmp(&self.spans[b].start));
    }

    /// Spans that start in `[from, to)`, on any thread, with their index.
    pub fn starting_in(&self, from: f64, to: f64) -> impl Iterator<Item = (usize, &Span)> + '_ {
        let first = self.by_start.partition_point(|&i| self.spans[i].start < from);
        self.by_start[first..].iter().map(|&i| (i, &self.spans[i])).take_while(move |(_, s)| s.start < to)
    }

    /// The display name of a thread: its `thread_name`, else `pid/tid`.
    #[must_use]
    pub fn thread_label(&self, thread: &ThreadKey) -> String {
        self.thread_names.get(thread).cloned().unwrap_or_else(|| {
            let show = |id: &Option<TrackId>| id.as_ref().map_or_else(|| "?".to_owned(), ToString::to_string);
            format!("{}/{}", show(&thread.0), show(&thread.1))
        })
    }

    /// For each span, whether a span nested in it (a child, a child's
    /// child, ...) is named `name`: one pass over the spans, however deeply
    /// they nest.
    #[must_use]
    pub fn with_descendant_named(&self, name: &str) -> Vec<bool> {
        let mut found = vec![false; self.spans.len()];
        // Children come after their parent: walk backwards, and each span
        // hands its answer to its parent before the parent is read.
        for (i, span) in self.spans.iter().enumerate().rev() {
            let here = found.get(i).copied().unwrap_or(false) || span.name == name;
            if let Some(slot) = span.parent.and_then(|p| found.get_mut(p)) {
                *slot |= here;
            }
        }
        found
    }

    /// For each span, whether a span it is nested in (its parent, the
    /// parent's parent, ...) satisfies `pred`: one pass over the spans.
    #[must_use]
    pub fn with_ancestor(&self, pred: impl Fn(&Span) -> bool) -> Vec<bool> {
        let mut found = vec![false; self.spans.len()];
        // Parents come before their children: walk forwards.
        for i in 0..self.spans.len() {
            if let Some(p) = self.spans[i].parent {
                found[i] = found[p] || pred(&self.spans[p]);
            }
        }
        found
    }

    /// Whether span `i` has a descendant named `name`. It reads the spans
    /// nested in `i`: to ask of every span, use
    /// [`with_descendant_named`](Self::with_descendant_named).
    #[must_use]
    pub fn contains_named(&self, i: usize, name: &str) -> bool {
        // Descendants follow their ancestor in order and start before its end.
        let outer = &self.spans[i];
        self.spans[i + 1..]
            .iter()
            .take_while(|s| s.thread == outer.thread && s.start < outer.end)
            .any(|s| s.name == name && s.end <= outer.end)
    }
}

/// [`Spans::from_trace`] one event at a time, as a file is read: the spans
/// are kept, not the events.
#[derive(Debug, Default)]
pub(crate) struct SpansBuilder {
    out: Spans,
    /// The spans begun and not yet ended, by thread.
    open: HashMap<ThreadKey, Vec<Span>>,
    last_ts: Option<f64>,
}

impl SpansBuilder {
    /// Reads the next event; `names` holds the categories of its spans.
    pub(crate) fn event(&mut self, event: &TraceEvent, names: &mut Names) {
        let out = &mut self.out;
        if event.ph == "M" {
            if event.name == crate::format::names::meta::THREAD_NAME {
                if let Some(Value::String(name)) = event.arg("name") {
                    out.thread_names.insert((event.pid.clone(), event.tid.clone()), name.clone());
                }
            }
            return;
        }
        let Some(ts) = event.ts.filter(|t| plausible_ts(*t)) else { return };
        let last_ts = self.last_ts.get_or_insert(f64::MIN);
        *last_ts = last_ts.max(ts);
        let thread = || (event.pid.clone(), event.tid.clone());
        let mut span = |end: f64| Span {
            name: event.name.clone(),
            cat: event.cat.as_deref().map(|cat| names.get(cat)),
            thread: thread(),
            start: ts,
            end,
            parent: None,
            self_us: 0.0,
            unclosed: false,
        };
        match event.ph.as_str() {
            "B" => self.open.entry(thread()).or_default().push(span(ts)),
            "E" => match self.open.get_mut(&thread()).and_then(Vec::pop) {
                Some(mut begun) => {
                    begun.end = ts.max(begun.start);
                    out.spans.push(begun);
                }
                None => out.orphan_ends += 1,
            },
            "X" => {
                let Some(dur) = event.dur.filter(|d| plausible_dur(*d)) else { return };
                *last_ts = last_ts.max(ts + dur);
                out.spans.push(span(ts + dur));
            }
            "i" | "I" | "n" => out.instants.push((event.name.clone(), ts, thread())),
            _ => {}
        }
    }

    /// The spans: those still open closed at the last timestamp seen, and
    /// nested.
    pub(crate) fn finish(self) -> Spans {
        let mut out = self.out;
        let last_ts = self.last_ts.unwrap_or(f64::MIN);
        for (_, stack) in self.open {
            for mut begun in stack {
                begun.end = last_ts.max(begun.start);
                begun.unclosed = true;
                out.spans.push(begun);
            }
        }
        out.nest();
        out
    }
}

/// Total length of the union of intervals, µs.
#[must_use]
pub fn union_length(mut intervals: Vec<(f64, f64)>) -> f64 {
    intervals.retain(|(a, b)| b > a);
    intervals.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut current: Option<(f64, f64)> = None;
    for (a, b) in intervals {
        current = match current {
            Some((s, e)) if a <= e => Some((s, e.max(b))),
            Some((s, e)) => {
                total += e - s;
                Some((a, b))
            }
            None => Some((a, b)),
        };
    }
    total + current.map_or(0.0, |(s, e)| e - s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::reader::parse_trace;

    #[test]
    fn self_time_subtracts_direct_children_only() {
        // outer 0..100 > a 10..40 > b 20..30 ; outer > c 50..60 (X event).
        let trace = parse_trace(
            br#"[{"ph":"B","name":"outer","tid":1,"ts":0},
                {"ph":"B","name":"a","tid":1,"ts":10},
                {"ph":"B","name":"b","tid":1,"ts":20},
                {"ph":"E","tid":1,"ts":30},
                {"ph":"E","tid":1,"ts":40},
                {"ph":"X","name":"c","tid":1,"ts":50,"dur":10},
                {"ph":"E","tid":1,"ts":100}]"#,
        )
        .unwrap();
        let spans = Spans::from_trace(&trace);
        let by_name = |n: &str| spans.spans.iter().find(|s| s.name == n).unwrap();
        assert_eq!(by_name("outer").self_us, 100.0 - 30.0 - 10.0);
        assert_eq!(by_name("a").self_us, 20.0);
        assert_eq!(by_name("b").self_us, 10.0);
        assert_eq!(by_name("c").parent, Some(0));
        assert!(spans.contains_named(0, "b"));
        assert!(!spans.contains_named(3, "b"));
        let order: Vec<&str> = spans.spans.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(order, ["outer", "a", "b", "c"]);
        assert_eq!(spans.with_descendant_named("b"), [true, true, false, false]);
        assert_eq!(spans.with_ancestor(|s| s.name == "a"), [false, false, true, false]);
        assert_eq!(spans.with_ancestor(|s| s.name == "outer"), [false, true, true, true]);
    }

    #[test]
    fn deep_nesting_is_rebuilt_in_one_pass() {
        let depth = 50_000;
        let mut text = String::from("[");
        for i in 0..depth {
            text.push_str(&format!(r#"{{"ph":"B","name":"s{}","tid":1,"ts":{i}}},"#, i % 7));
        }
        for i in 0..depth {
            let sep = if i + 1 == depth { "]" } else { "," };
            text.push_str(&format!(r#"{{"ph":"E","tid":1,"ts":{}}}{sep}"#, depth + i));
        }
        let spans = Spans::from_trace(&parse_trace(text.as_bytes()).unwrap());
        assert_eq!(spans.spans.len(), depth);
        assert!(spans.spans.iter().skip(1).enumerate().all(|(i, s)| s.parent == Some(i)));
        let has = spans.with_descendant_named("s3");
        assert!(has[..depth - 5].iter().all(|&h| h) && !has[depth - 1]);
        // Each span's own time is 2 µs (1 µs each side of its child).
        assert!(spans.spans[..depth - 1].iter().all(|s| s.self_us == 2.0));
    }

    #[test]
    fn implausible_times_are_left_out() {
        let trace = parse_trace(
            br#"[{"ph":"X","name":"neg","tid":1,"ts":0,"dur":-889},
                {"ph":"X","name":"far","tid":1,"ts":1e308,"dur":1},
                {"ph":"X","name":"long","tid":1,"ts":1,"dur":1e300},
                {"ph":"X","name":"ok","tid":1,"ts":1,"dur":2}]"#,
        )
        .unwrap();
        let spans = Spans::from_trace(&trace);
        let names: Vec<&str> = spans.spans.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["ok"]);
    }

    #[test]
    fn spans_on_other_threads_do_not_nest() {
        let trace = parse_trace(
            br#"[{"ph":"X","name":"main","tid":1,"ts":0,"dur":100},
                {"ph":"X","name":"loader","tid":2,"ts":10,"dur":50}]"#,
        )
        .unwrap();
        let spans = Spans::from_trace(&trace);
        assert!(spans.spans.iter().all(|s| s.parent.is_none()));
        assert_eq!(spans.spans[0].self_us, 100.0);
    }

    #[test]
    fn open_spans_are_closed_at_the_end_of_a_cut_file() {
        let trace =
            parse_trace(br#"[{"ph":"B","name":"a","tid":1,"ts":5},{"ph":"i","name":"x","tid":1,"ts":9},"#).unwrap();
        let spans = Spans::from_trace(&trace);
        assert_eq!(spans.spans.len(), 1);
        assert!(spans.spans[0].unclosed);
        assert_eq!(spans.spans[0].end, 9.0);
        assert_eq!(spans.instants.len(), 1);
    }

    #[test]
    fn union_counts_overlap_once() {
        assert_eq!(union_length(vec![(0.0, 10.0), (5.0, 15.0), (20.0, 25.0)]), 20.0);
        assert_eq!(union_length(vec![(0.0, 10.0), (2.0, 3.0)]), 10.0);
        assert_eq!(union_length(vec![]), 0.0);
    }
}
