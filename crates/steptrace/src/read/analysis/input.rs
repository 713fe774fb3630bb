//! A trace file as the report reads it: what the report rebuilds from its
//! events, built as they are read, without the events.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::io::Read;

use super::checks::ProblemCounts;
use super::device::{DeviceEvents, DeviceEventsBuilder};
use super::loaded::ProducerHints;
use super::memory::{MemorySample, Samples};
use super::spans::{Spans, SpansBuilder};
use crate::format::names::step_number;
use crate::read::reader::{read_events_and_head, Names, ReadError, Trace, TraceEvent, Validator, HEADER_EVENTS};

/// A trace file read for the report: its layout, metadata and damage, and
/// what the report rebuilds from its events (spans, device work and
/// launches, memory samples, the problems [`validate`](crate::read::reader::validate)
/// finds), without the events themselves.
///
/// A [`Trace`] holds every event; this holds what the report reads of
/// them, built one event at a time as the file is read ([`read`](Self::read)):
/// the memory of a long trace is then that of its spans and device work,
/// which share their names, not that of its events. [`Report::build_loaded`]
/// and [`RankReport::build_loaded`] report on such files;
/// [`Report::build`] reads parsed traces the same way.
///
/// [`Report::build_loaded`]: super::Report::build_loaded
/// [`RankReport::build_loaded`]: super::RankReport::build_loaded
/// [`Report::build`]: super::Report::build
///
/// # Examples
///
/// ```
/// use steptrace::analysis::{LoadedTrace, Report, ReportOptions};
///
/// let text = br#"{"traceEvents":[
///     {"ph":"X","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":10},
///     {"ph":"X","name":"ProfilerStep#2","pid":1,"tid":1,"ts":10,"dur":12}
/// ]}"#;
/// let loaded = LoadedTrace::read(&text[..], text.len() as u64)?;
/// assert_eq!(loaded.events(), 2);
/// assert!(loaded.trace().events.len() <= 16);
/// let report = Report::build_loaded(vec![("t.json".into(), loaded)], &ReportOptions::default())?;
/// assert_eq!(report.timing.steps.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct LoadedTrace {
    /// The trace without its events, but for its first ones (what
    /// [`Trace::steptrace`] reads).
    pub(crate) head: Trace,
    /// How many events the file holds.
    pub(crate) events: usize,
    pub(crate) spans: Spans,
    pub(crate) device: DeviceEvents,
    pub(crate) memory: Vec<MemorySample>,
    pub(crate) problems: ProblemCounts,
    pub(crate) producer: ProducerHints,
    /// The `ProfilerStep#N` numbers of its `X` and `B` events.
    pub(crate) step_numbers: BTreeSet<u64>,
}

impl LoadedTrace {
    /// Reads a Chrome trace from `src` (at most `size` bytes, gzip or not),
    /// as [`read_trace`](crate::read::reader::read_trace) does, keeping what the
    /// report reads of each event as it goes.
    ///
    /// # Errors
    ///
    /// As for [`read_trace`](crate::read::reader::read_trace).
    pub fn read(src: impl Read, size: u64) -> Result<LoadedTrace, ReadError> {
        let mut builder = Builder::default();
        let head = read_events_and_head(src, size, HEADER_EVENTS, |event| builder.event(event))?;
        Ok(builder.finish(head))
    }

    /// What the report reads of `trace`'s events.
    #[must_use]
    pub fn of(trace: &Trace) -> LoadedTrace {
        let mut builder = Builder::default();
        for event in &trace.events {
            builder.event(event);
        }
        let head = Trace {
            events: trace.events.iter().take(HEADER_EVENTS).cloned().collect(),
            metadata: trace.metadata.clone(),
            ..*trace
        };
        builder.finish(head)
    }

    /// The trace's layout, metadata and damage; of its events, only the
    /// first 16 are held (where [`Trace::steptrace`] finds a partial file's
    /// header).
    #[must_use]
    pub fn trace(&self) -> &Trace {
        &self.head
    }

    /// How many events the file holds.
    #[must_use]
    pub fn events(&self) -> usize {
        self.events
    }

    /// The spans rebuilt from the file's events, as
    /// [`Spans::from_trace`] rebuilds them.
    #[must_use]
    pub fn spans(&self) -> &Spans {
        &self.spans
    }
}

/// What the report's rank checks read of a trace file: its top level
/// (`distributedInfo`, steptrace's metadata) and its step numbers. A parsed
/// [`Trace`] and a [`LoadedTrace`] both say them.
pub trait ReportSource {
    /// The trace: its layout, metadata and damage, and the events it holds
    /// (a [`LoadedTrace`] holds its first few only).
    fn trace(&self) -> &Trace;

    /// The numbers of the `ProfilerStep#N` spans of its `X` and `B` events.
    fn step_numbers(&self) -> Cow<'_, BTreeSet<u64>>;
}

impl ReportSource for Trace {
    fn trace(&self) -> &Trace {
        self
    }

    fn step_numbers(&self) -> Cow<'_, BTreeSet<u64>> {
        Cow::Owned(self.events.iter().filter_map(event_step).collect())
    }
}

impl ReportSource for LoadedTrace {
    fn trace(&self) -> &Trace {
        &self.head
    }

    fn step_numbers(&self) -> Cow<'_, BTreeSet<u64>> {
        Cow::Borrowed(&self.step_numbers)
    }
}

/// The step number of an `X` or `B` event named `ProfilerStep#N`.
fn event_step(e: &TraceEvent) -> Option<u64> {
    (e.ph == "X" || e.ph == "B").then(|| step_number(&e.name)).flatten()
}

/// A [`LoadedTrace`] built one event at a time.
#[derive(Default)]
struct Builder {
    names: Names,
    events: usize,
    spans: SpansBuilder,
    device: DeviceEventsBuilder,
    memory: Samples,
    validator: Validator,
    problems: ProblemCounts,
    producer: ProducerHints,
    step_numbers: BTreeSet<u64>,
}

impl Builder {
    fn event(&mut self, event: &TraceEvent) {
        self.events += 1;
        let problems = &mut self.problems;
        self.validator.event(event, &mut self.names, &mut |problem| problems.add(problem));
        self.spans.event(event, &mut self.names);
        self.device.event(event, &mut self.names);
        self.memory.event(event);
        self.producer.event(event);
        if let Some(step) = event_step(event) {
            self.step_numbers.insert(step);
        }
    }

    /// The file read: `head` is the trace with its first events only.
    fn finish(mut self, head: Trace) -> LoadedTrace {
        let problems = &mut self.problems;
        self.validator.finish(&self.names, &mut |problem| problems.add(problem));
        LoadedTrace {
            events: self.events,
            spans: self.spans.finish(),
            device: self.device.finish(&head.metadata),
            memory: self.memory.finish(),
            problems: self.problems,
            producer: self.producer,
            step_numbers: self.step_numbers,
            head,
        }
    }
}
