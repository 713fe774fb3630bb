//! Checks that a trace is well formed for a viewer.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use super::{Trace, TraceEvent, TrackId};

/// Phases of the Chrome Trace Event Format, including deprecated ones.
const KNOWN_PHASES: &[&str] = &[
    "B", "E", "X", "i", "I", "C", "b", "n", "e", "S", "T", "p", "F", "s", "t", "f", "P", "N", "O", "D", "M", "V", "v",
    "R", "c", "(", ")", "=",
];

/// The kind of a [`Problem`] found by [`validate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProblemKind {
    /// The file ended early (see [`Trace::truncated`]); not tied to an
    /// event.
    Truncated,
    /// The `ph` field is missing or not a phase of the format.
    UnknownPhase,
    /// An event other than `M` has no `ts`, or a `ts` that is not finite.
    InvalidTimestamp,
    /// An `X` event has no `dur`, or a negative or non-finite one.
    InvalidDuration,
    /// An `E` event with no open `B` on its thread.
    UnmatchedEnd,
    /// A `B` event that is never closed on its thread.
    UnclosedBegin,
    /// An `E` event whose name differs from that of the innermost open `B`.
    MismatchedEnd,
    /// An async `e` event with no open `b` of the same category and id.
    UnmatchedAsyncEnd,
    /// An async `b` event that is never closed.
    UnclosedAsyncBegin,
    /// An async `e` event whose name differs from that of the innermost
    /// open `b` of the same category and id.
    MismatchedAsyncEnd,
    /// An async (`b`, `n`, `e`) or flow (`s`, `t`, `f`) event without an
    /// id.
    MissingId,
    /// A counter (`C`) event without arguments, or with a non-numeric one.
    InvalidCounter,
    /// An instant event whose scope (`s`) is not `g`, `p` or `t`.
    InvalidScope,
}

/// A problem found by [`validate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The index of the offending event in [`Trace::events`]; `None` for
    /// problems of the whole trace.
    pub event_index: Option<usize>,
    /// What kind of problem it is.
    pub kind: ProblemKind,
    /// A description for people.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.event_index {
            Some(index) => write!(f, "event {index}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Checks a trace, returning its problems ordered by event index (problems
/// of the whole trace first); an empty list means the trace is valid.
///
/// The checks:
///
/// - every event has a known `ph`, and every event but `M` a finite `ts`;
/// - `X` events have a `dur` of at least 0;
/// - on each thread (`pid`, `tid`), `B` and `E` events, sorted by `ts`
///   (stably, so that file order breaks ties), nest properly: no `E`
///   without an open `B`, no `B` left open, and an `E` with a non-empty
///   name closes a `B` of that name;
/// - async `b`/`e` events balance in the same way per (`cat`, `id`);
/// - async and flow events have an id, instant events a valid scope, and
///   counter events numeric arguments (numbers or numeric strings);
/// - the file is not truncated.
///
/// Events without a finite `ts` are reported once and left out of the
/// nesting checks.
///
/// # Examples
///
/// ```
/// use steptrace::reader::{parse_trace, validate, ProblemKind};
///
/// let trace = parse_trace(br#"[
///     {"ph":"B","name":"step","pid":1,"tid":1,"ts":1},
///     {"ph":"X","name":"k","pid":1,"tid":1,"ts":2,"dur":-1}
/// ]"#)?;
/// let problems = validate(&trace);
/// let kinds: Vec<_> = problems.iter().map(|p| p.kind).collect();
/// assert_eq!(kinds, [ProblemKind::UnclosedBegin, ProblemKind::InvalidDuration]);
/// assert_eq!(problems[1].event_index, Some(1));
/// # Ok::<(), steptrace::reader::ReadError>(())
/// ```
#[must_use]
pub fn validate(trace: &Trace) -> Vec<Problem> {
    let mut problems = Vec::new();
    if trace.truncated {
        problems.push(Problem {
            event_index: None,
            kind: ProblemKind::Truncated,
            message: format!(
                "the trace is truncated: its end is missing ({} trailing bytes ignored)",
                trace.dropped_bytes
            ),
        });
    }
    let mut threads: BTreeMap<(Option<&TrackId>, Option<&TrackId>), Vec<usize>> = BTreeMap::new();
    let mut asyncs: BTreeMap<(Option<&str>, &TrackId), Vec<usize>> = BTreeMap::new();
    for (index, event) in trace.events.iter().enumerate() {
        let mut report = |kind, message: String| {
            problems.push(Problem { event_index: Some(index), kind, message });
        };
        check_event(event, &mut report);
        let timed = event.ts.is_some_and(f64::is_finite);
        match event.ph.as_str() {
            "B" | "E" if timed => {
                threads.entry((event.pid.as_ref(), event.tid.as_ref())).or_default().push(index);
            }
            "b" | "e" if timed => {
                if let Some(id) = &event.id {
                    asyncs.entry((event.cat.as_deref(), id)).or_default().push(index);
                }
            }
            _ => {}
        }
    }
    for ((pid, tid), mut indices) in threads {
        let track = format!("pid {} tid {}", show(pid), show(tid));
        check_nesting(&trace.events, &mut indices, &NESTING_SYNC, &track, &mut problems);
    }
    for ((cat, id), mut indices) in asyncs {
        let track = format!("cat {:?} id {id}", cat.unwrap_or(""));
        check_nesting(&trace.events, &mut indices, &NESTING_ASYNC, &track, &mut problems);
    }
    // Stable: per-event problems keep their order of discovery.
    problems.sort_by_key(|problem| problem.event_index);
    problems
}

/// The per-event checks.
fn check_event(event: &TraceEvent, report: &mut impl FnMut(ProblemKind, String)) {
    let ph = event.ph.as_str();
    if ph.is_empty() {
        report(ProblemKind::UnknownPhase, "the event has no phase (ph)".to_owned());
    } else if !KNOWN_PHASES.contains(&ph) {
        report(ProblemKind::UnknownPhase, format!("unknown phase {ph:?}"));
    }
    if ph != "M" {
        match event.ts {
            None => report(ProblemKind::InvalidTimestamp, format!("{} has no timestamp (ts)", describe(event))),
            Some(ts) if !ts.is_finite() => {
                report(ProblemKind::InvalidTimestamp, format!("{} has a non-finite timestamp {ts}", describe(event)));
            }
            Some(_) => {}
        }
    }
    match ph {
        "X" => match event.dur {
            None => report(ProblemKind::InvalidDuration, format!("{} has no duration (dur)", describe(event))),
            Some(dur) if !(dur >= 0.0 && dur.is_finite()) => {
                report(ProblemKind::InvalidDuration, format!("{} has an invalid duration {dur}", describe(event)));
            }
            Some(_) => {}
        },
        "b" | "n" | "e" | "s" | "t" | "f" if event.id.is_none() => {
            report(ProblemKind::MissingId, format!("{} has no id", describe(event)));
        }
        "i" | "I" => {
            if let Some(scope) = event.scope.as_deref().filter(|s| !matches!(*s, "g" | "p" | "t")) {
                report(
                    ProblemKind::InvalidScope,
                    format!("{} has scope {scope:?}, not \"g\", \"p\" or \"t\"", describe(event)),
                );
            }
        }
        "C" => {
            if let Some(message) = counter_problem(event) {
                report(ProblemKind::InvalidCounter, message);
            }
        }
        _ => {}
    }
}

/// What is wrong with a counter event's arguments, if anything.
fn counter_problem(event: &TraceEvent) -> Option<String> {
    let args = match &event.args {
        Some(Value::Object(args)) if !args.is_empty() => args,
        Some(Value::Object(_) | Value::Null) | None => {
            return Some(format!("{} has no values in its args", describe(event)));
        }
        Some(_) => return Some(format!("{} has args that are not an object", describe(event))),
    };
    let bad: Vec<&str> = args
        .iter()
        .filter(|(_, value)| match value {
            Value::Number(_) => false,
            Value::String(s) => s.trim().parse::<f64>().is_err(),
            _ => true,
        })
        .map(|(key, _)| key.as_str())
        .collect();
    (!bad.is_empty()).then(|| format!("{} has non-numeric values for {}", describe(event), bad.join(", ")))
}

/// The phases and problem kinds of one kind of nesting.
struct Nesting {
    open: &'static str,
    kinds: [ProblemKind; 3],
}

const NESTING_SYNC: Nesting =
    Nesting { open: "B", kinds: [ProblemKind::UnmatchedEnd, ProblemKind::MismatchedEnd, ProblemKind::UnclosedBegin] };

const NESTING_ASYNC: Nesting = Nesting {
    open: "b",
    kinds: [ProblemKind::UnmatchedAsyncEnd, ProblemKind::MismatchedAsyncEnd, ProblemKind::UnclosedAsyncBegin],
};

/// Checks that the begin and end events at `indices`, all on one track,
/// nest properly once sorted by timestamp.
fn check_nesting(
    events: &[TraceEvent],
    indices: &mut [usize],
    nesting: &Nesting,
    track: &str,
    problems: &mut Vec<Problem>,
) {
    let ts = |i: usize| events.get(i).and_then(|e| e.ts).unwrap_or(0.0);
    indices.sort_by(|&a, &b| ts(a).total_cmp(&ts(b)));
    let [unmatched, mismatched, unclosed] = nesting.kinds;
    let mut open: Vec<usize> = Vec::new();
    for &index in indices.iter() {
        let Some(event) = events.get(index) else { continue };
        if event.ph == nesting.open {
            open.push(index);
            continue;
        }
        match open.pop() {
            None => problems.push(Problem {
                event_index: Some(index),
                kind: unmatched,
                message: format!("{} at ts {} closes nothing: no span is open on {track}", describe(event), ts(index)),
            }),
            Some(begin) => {
                let begin_name = events.get(begin).map_or("", |b| b.name.as_str());
                if !event.name.is_empty() && event.name != begin_name {
                    problems.push(Problem {
                        event_index: Some(index),
                        kind: mismatched,
                        message: format!(
                            "{} at ts {} closes {begin_name:?} (event {begin}), the innermost span open on {track}",
                            describe(event),
                            ts(index)
                        ),
                    });
                }
            }
        }
    }
    for begin in open {
        let Some(event) = events.get(begin) else { continue };
        problems.push(Problem {
            event_index: Some(begin),
            kind: unclosed,
            message: format!("{} at ts {} is never closed on {track}", describe(event), ts(begin)),
        });
    }
}

/// `X event "name"`, for messages.
fn describe(event: &TraceEvent) -> String {
    format!("{} event {:?}", if event.ph.is_empty() { "the" } else { &event.ph }, event.name)
}

fn show(id: Option<&TrackId>) -> String {
    id.map_or_else(|| "(none)".to_owned(), ToString::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::parse_trace;

    fn problems(json: &str) -> Vec<(Option<usize>, ProblemKind)> {
        let trace = parse_trace(json.as_bytes()).unwrap();
        validate(&trace).into_iter().map(|p| (p.event_index, p.kind)).collect()
    }

    #[test]
    fn a_well_formed_trace_has_no_problems() {
        let json = r#"{"traceEvents":[
            {"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"main"}},
            {"ph":"B","name":"step","pid":1,"tid":1,"ts":0},
            {"ph":"B","name":"fwd","pid":1,"tid":1,"ts":1},
            {"ph":"E","pid":1,"tid":1,"ts":2},
            {"ph":"X","name":"k","pid":1,"tid":2,"ts":1,"dur":0},
            {"ph":"i","name":"mark","pid":1,"tid":1,"ts":2,"s":"t"},
            {"ph":"C","name":"mem","pid":1,"ts":2,"args":{"bytes":10,"peak":"12.5"}},
            {"ph":"b","cat":"io","id":"0x1","name":"load","pid":1,"ts":0},
            {"ph":"n","cat":"io","id":"0x1","name":"chunk","pid":1,"ts":1},
            {"ph":"e","cat":"io","id":"0x1","name":"load","pid":1,"ts":3},
            {"ph":"s","id":7,"name":"flow","pid":1,"tid":1,"ts":1},
            {"ph":"f","id":7,"name":"flow","pid":1,"tid":2,"ts":2,"bp":"e"},
            {"ph":"E","name":"step","pid":1,"tid":1,"ts":3}
        ]}"#;
        assert_eq!(problems(json), []);
    }

    #[test]
    fn begin_end_pairs_are_matched_per_thread_in_time_order() {
        // Written out of order, and interleaved across threads.
        let json = r#"[
            {"ph":"E","name":"a","pid":1,"tid":1,"ts":5},
            {"ph":"B","name":"a","pid":1,"tid":2,"ts":1},
            {"ph":"B","name":"a","pid":1,"tid":1,"ts":1},
            {"ph":"E","name":"a","pid":1,"tid":2,"ts":2}
        ]"#;
        assert_eq!(problems(json), []);
        // Equal timestamps keep file order: zero-length spans back to back.
        let json = r#"[
            {"ph":"B","name":"a","tid":1,"ts":1},{"ph":"E","name":"a","tid":1,"ts":1},
            {"ph":"B","name":"b","tid":1,"ts":1},{"ph":"E","name":"b","tid":1,"ts":1}
        ]"#;
        assert_eq!(problems(json), []);
        // The same tid in another process is another thread.
        let json = r#"[{"ph":"B","name":"a","pid":1,"tid":1,"ts":1},{"ph":"E","name":"a","pid":2,"tid":1,"ts":2}]"#;
        assert_eq!(problems(json), [(Some(0), ProblemKind::UnclosedBegin), (Some(1), ProblemKind::UnmatchedEnd)]);
    }

    #[test]
    fn nesting_problems() {
        let json = r#"[
            {"ph":"E","name":"x","tid":1,"ts":0},
            {"ph":"B","name":"outer","tid":1,"ts":1},
            {"ph":"B","name":"inner","tid":1,"ts":2},
            {"ph":"E","name":"outer","tid":1,"ts":3},
            {"ph":"E","name":"","tid":1,"ts":4},
            {"ph":"B","name":"open","tid":1,"ts":5}
        ]"#;
        assert_eq!(
            problems(json),
            [
                (Some(0), ProblemKind::UnmatchedEnd),
                (Some(3), ProblemKind::MismatchedEnd),
                (Some(5), ProblemKind::UnclosedBegin),
            ]
        );
        let trace = parse_trace(json.as_bytes()).unwrap();
        let found = validate(&trace);
        assert!(found[1].message.contains("closes \"inner\""), "{}", found[1].message);
        assert!(found[2].to_string().starts_with("event 5: B event \"open\""), "{}", found[2]);
    }

    #[test]
    fn events_without_a_timestamp_are_reported_once() {
        let json = r#"[
            {"ph":"B","name":"a","tid":1},
            {"ph":"X","name":"k","ts":"NaN","dur":1},
            {"ph":"M","name":"thread_name","args":{"name":"t"}},
            {"ph":"E","name":"a","tid":1,"ts":3}
        ]"#;
        assert_eq!(
            problems(json),
            [
                (Some(0), ProblemKind::InvalidTimestamp),
                (Some(1), ProblemKind::InvalidTimestamp),
                (Some(3), ProblemKind::UnmatchedEnd),
            ]
        );
    }

    #[test]
    fn durations_of_complete_events() {
        let json = r#"[
            {"ph":"X","name":"ok","ts":1,"dur":0},
            {"ph":"X","name":"neg","ts":1,"dur":-0.5},
            {"ph":"X","name":"none","ts":1},
            {"ph":"X","name":"inf","ts":1,"dur":"inf"},
            {"ph":"B","name":"b","ts":1,"dur":-5},
            {"ph":"E","name":"b","ts":1}
        ]"#;
        assert_eq!(
            problems(json),
            [
                (Some(1), ProblemKind::InvalidDuration),
                (Some(2), ProblemKind::InvalidDuration),
                (Some(3), ProblemKind::InvalidDuration),
            ]
        );
    }

    #[test]
    fn unknown_and_missing_phases() {
        let json = r#"[{"ph":"Q","ts":1},{"name":"nophase","ts":1},{"ph":"bb","ts":1},{"ph":"I","ts":1}]"#;
        assert_eq!(
            problems(json),
            [
                (Some(0), ProblemKind::UnknownPhase),
                (Some(1), ProblemKind::UnknownPhase),
                (Some(2), ProblemKind::UnknownPhase)
            ]
        );
    }

    #[test]
    fn async_events_balance_per_category_and_id() {
        let json = r#"[
            {"ph":"b","cat":"a","id":1,"name":"x","ts":1},
            {"ph":"e","cat":"b","id":1,"name":"x","ts":2},
            {"ph":"b","cat":"a","id":2,"name":"y","ts":1},
            {"ph":"e","cat":"a","id":2,"name":"z","ts":2},
            {"ph":"e","cat":"a","id":"2","name":"","ts":3},
            {"ph":"b","name":"noid","ts":1},
            {"ph":"f","name":"flow","ts":1}
        ]"#;
        assert_eq!(
            problems(json),
            [
                (Some(0), ProblemKind::UnclosedAsyncBegin),
                (Some(1), ProblemKind::UnmatchedAsyncEnd),
                (Some(3), ProblemKind::MismatchedAsyncEnd),
                (Some(4), ProblemKind::UnmatchedAsyncEnd),
                (Some(5), ProblemKind::MissingId),
                (Some(6), ProblemKind::MissingId),
            ]
        );
    }

    #[test]
    fn counters_need_numeric_args() {
        let json = r#"[
            {"ph":"C","name":"ok","ts":1,"args":{"a":1,"b":2.5,"c":"3"}},
            {"ph":"C","name":"none","ts":1},
            {"ph":"C","name":"empty","ts":1,"args":{}},
            {"ph":"C","name":"text","ts":1,"args":{"a":"lots","b":1,"c":[1]}},
            {"ph":"C","name":"list","ts":1,"args":[1,2]}
        ]"#;
        assert_eq!(
            problems(json),
            [
                (Some(1), ProblemKind::InvalidCounter),
                (Some(2), ProblemKind::InvalidCounter),
                (Some(3), ProblemKind::InvalidCounter),
                (Some(4), ProblemKind::InvalidCounter),
            ]
        );
        let trace = parse_trace(json.as_bytes()).unwrap();
        let found = validate(&trace);
        assert!(found[2].message.contains("non-numeric values for a, c"), "{}", found[2].message);
    }

    #[test]
    fn instant_scopes() {
        let json = r#"[{"ph":"i","ts":1,"s":"g"},{"ph":"i","ts":1,"s":"x"},{"ph":"I","ts":1,"s":"process"}]"#;
        assert_eq!(problems(json), [(Some(1), ProblemKind::InvalidScope), (Some(2), ProblemKind::InvalidScope)]);
    }

    #[test]
    fn truncation_is_a_problem_of_the_whole_trace() {
        let json = r#"[{"ph":"B","name":"a","tid":1,"ts":1},{"ph":"E","na"#;
        assert_eq!(problems(json), [(None, ProblemKind::Truncated), (Some(0), ProblemKind::UnclosedBegin)]);
        let trace = parse_trace(json.as_bytes()).unwrap();
        assert!(validate(&trace)[0].to_string().contains("13 trailing bytes ignored"));
    }
}
