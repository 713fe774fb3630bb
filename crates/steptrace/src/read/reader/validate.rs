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

/// The largest timestamp taken as a time, µs (about 317 years: beyond
/// microseconds since the Unix epoch, which some writers use).
pub const MAX_PLAUSIBLE_TS_US: f64 = 1e16;

/// The largest duration taken as a time, µs (about 31 years).
pub const MAX_PLAUSIBLE_DUR_US: f64 = 1e15;

/// Whether `ts` can be a timestamp: finite and within
/// ±[`MAX_PLAUSIBLE_TS_US`].
#[must_use]
pub fn plausible_ts(ts: f64) -> bool {
    ts.is_finite() && ts.abs() <= MAX_PLAUSIBLE_TS_US
}

/// Whether `dur` can be a duration: finite, at least 0 and at most
/// [`MAX_PLAUSIBLE_DUR_US`].
#[must_use]
pub fn plausible_dur(dur: f64) -> bool {
    (0.0..=MAX_PLAUSIBLE_DUR_US).contains(&dur)
}

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
    /// A finite `ts` beyond ±[`MAX_PLAUSIBLE_TS_US`], or a `dur` beyond
    /// [`MAX_PLAUSIBLE_DUR_US`]: not a time a trace can hold.
    ImplausibleTime,
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
/// - times are plausible: `ts` within ±[`MAX_PLAUSIBLE_TS_US`], `dur` at
///   most [`MAX_PLAUSIBLE_DUR_US`];
/// - on each thread (`pid`, `tid`), `B` and `E` events, sorted by `ts`
///   (stably, so that file order breaks ties), nest properly: no `E`
///   without an open `B`, no `B` left open, and an `E` with a non-empty
///   name closes a `B` of that name;
/// - async `b`/`e` events balance in the same way per (`cat`, `id`);
/// - async and flow events have an id, instant events a valid scope, and
///   counter events numeric arguments (numbers or numeric strings);
/// - the file is not truncated.
///
/// Events without a finite, plausible `ts` are reported once and left out
/// of the nesting checks.
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
        let timed = event.ts.is_some_and(plausible_ts);
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
            Some(ts) if !plausible_ts(ts) => {
                report(
                    ProblemKind::ImplausibleTime,
                    format!("{} has a timestamp of {ts:e} µs, beyond ±{MAX_PLAUSIBLE_TS_US:e} µs", describe(event)),
                );
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
            Some(dur) if !plausible_dur(dur) => {
                report(
                    ProblemKind::ImplausibleTime,
                    format!("{} has a duration of {dur:e} µs, beyond {MAX_PLAUSIBLE_DUR_US:e} µs", describe(event)),
                );
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
#[path = "validate_tests.rs"]
mod tests;
