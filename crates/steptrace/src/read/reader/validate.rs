//! Checks that a trace is well formed for a viewer.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use super::name::Names;
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
    let mut validator = Validator::default();
    let mut names = Names::default();
    let mut report = |problem| problems.push(problem);
    for event in &trace.events {
        validator.event(event, &mut names, &mut report);
    }
    validator.finish(&names, &mut report);
    // Stable: per-event problems keep their order of discovery.
    problems.sort_by_key(|problem| problem.event_index);
    problems
}

/// [`validate`] one event at a time, as a file is read: what it needs of
/// the events it has seen is kept (a few bytes per `B`/`E` and `b`/`e`
/// event), not the events.
///
/// Each problem goes to `report` when it is found: an event's own problems
/// as it is given, nesting problems at the end, track by track. Sorted
/// stably by event index, they are [`validate`]'s list (less the
/// truncation, which is the trace's).
#[derive(Debug, Default)]
pub(crate) struct Validator {
    /// The index of the next event.
    index: usize,
    threads: BTreeMap<(Option<TrackId>, Option<TrackId>), Vec<Mark>>,
    asyncs: BTreeMap<(Option<String>, TrackId), Vec<Mark>>,
}

/// A begin or end event, as the nesting checks read it.
#[derive(Clone, Copy, Debug)]
struct Mark {
    index: usize,
    ts: f64,
    /// Its name's number (see [`Names`]).
    name: u32,
    /// Whether it opens a span (`B`, `b`).
    open: bool,
}

impl Validator {
    /// Checks the next event; `names` numbers the names of begin and end
    /// events.
    pub(crate) fn event(&mut self, event: &TraceEvent, names: &mut Names, report: &mut impl FnMut(Problem)) {
        let index = self.index;
        self.index += 1;
        check_event(event, &mut |kind, message| report(Problem { event_index: Some(index), kind, message }));
        let Some(ts) = event.ts.filter(|ts| plausible_ts(*ts)) else { return };
        let track = match event.ph.as_str() {
            "B" | "E" => self.threads.entry((event.pid.clone(), event.tid.clone())).or_default(),
            "b" | "e" => match &event.id {
                Some(id) => self.asyncs.entry((event.cat.clone(), id.clone())).or_default(),
                None => return,
            },
            _ => return,
        };
        let open = matches!(event.ph.as_str(), "B" | "b");
        track.push(Mark { index, ts, name: names.id(&event.name), open });
    }

    /// Checks how the begin and end events seen nest, track by track.
    pub(crate) fn finish(self, names: &Names, report: &mut impl FnMut(Problem)) {
        for ((pid, tid), marks) in self.threads {
            let track = format!("pid {} tid {}", show(pid.as_ref()), show(tid.as_ref()));
            check_nesting(marks, names, &NESTING_SYNC, &track, report);
        }
        for ((cat, id), marks) in self.asyncs {
            let track = format!("cat {:?} id {id}", cat.as_deref().unwrap_or(""));
            check_nesting(marks, names, &NESTING_ASYNC, &track, report);
        }
    }
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
    /// The phases that open and close a span.
    phases: [&'static str; 2],
    kinds: [ProblemKind; 3],
}

const NESTING_SYNC: Nesting = Nesting {
    phases: ["B", "E"],
    kinds: [ProblemKind::UnmatchedEnd, ProblemKind::MismatchedEnd, ProblemKind::UnclosedBegin],
};

const NESTING_ASYNC: Nesting = Nesting {
    phases: ["b", "e"],
    kinds: [ProblemKind::UnmatchedAsyncEnd, ProblemKind::MismatchedAsyncEnd, ProblemKind::UnclosedAsyncBegin],
};

/// Checks that the begin and end events of one track, `marks` in file
/// order, nest properly once sorted by timestamp (stably: file order
/// breaks ties).
fn check_nesting(
    mut marks: Vec<Mark>,
    names: &Names,
    nesting: &Nesting,
    track: &str,
    report: &mut impl FnMut(Problem),
) {
    // Unstable, with the (unique) index as the last key: the stable order,
    // without a scratch copy of the marks.
    marks.sort_unstable_by(|a, b| a.ts.total_cmp(&b.ts).then(a.index.cmp(&b.index)));
    let [unmatched, mismatched, unclosed] = nesting.kinds;
    let describe =
        |mark: &Mark| format!("{} event {:?}", nesting.phases[usize::from(!mark.open)], names.name(mark.name));
    let mut open: Vec<Mark> = Vec::new();
    for mark in marks {
        if mark.open {
            open.push(mark);
            continue;
        }
        match open.pop() {
            None => report(Problem {
                event_index: Some(mark.index),
                kind: unmatched,
                message: format!("{} at ts {} closes nothing: no span is open on {track}", describe(&mark), mark.ts),
            }),
            Some(begin) => {
                let name = names.name(mark.name);
                if !name.is_empty() && mark.name != begin.name {
                    report(Problem {
                        event_index: Some(mark.index),
                        kind: mismatched,
                        message: format!(
                            "{} at ts {} closes {:?} (event {}), the innermost span open on {track}",
                            describe(&mark),
                            mark.ts,
                            names.name(begin.name),
                            begin.index
                        ),
                    });
                }
            }
        }
    }
    for begin in open {
        report(Problem {
            event_index: Some(begin.index),
            kind: unclosed,
            message: format!("{} at ts {} is never closed on {track}", describe(&begin), begin.ts),
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
