//! Reads Chrome Trace Event Format files: ours and others'.
//!
//! The reader accepts both layouts of the format:
//!
//! - the *object* format, `{"traceEvents":[...], "displayTimeUnit":"ms",
//!   "metadata":{...}}`, with its keys in any order (every key other than
//!   `traceEvents` lands in [`Trace::metadata`]);
//! - the *array* format, `[ {...}, {...} ]`, which tracing-chrome streams
//!   and which a crashed process leaves behind.
//!
//! Files from torch.profiler (Kineto) load too: string `pid`/`tid` values
//! and numbers written as strings (`"ts": "123.5"`) are accepted, and
//! unknown event fields are ignored.
//!
//! # Damaged files
//!
//! A file written by a process that was killed is a byte prefix of a valid
//! trace. The reader keeps every complete event of such a file and sets
//! [`Trace::truncated`]: a missing closing `]` or `}`, a trailing comma
//! (before a closing bracket or the end of the file), or a cut-off last
//! event (whose bytes are counted in [`Trace::dropped_bytes`]) are all
//! tolerated. A tail of NUL bytes, which
//! some file systems leave after a crash, is treated the same way.
//! Anything else that is not valid JSON, or not a trace, is a [`ReadError`]
//! with the byte offset of the problem; the reader never panics.
//!
//! # Compressed files
//!
//! A gzip file (`.json.gz`, as Perfetto and torch.profiler save them) is
//! recognised by its magic bytes, whatever its name, and decompressed as
//! it is parsed, all of its members in turn; a compressed stream cut short
//! keeps what decompressed before the cut, like any cut file, and NUL
//! padding after the last member is ignored, as `gzip -d` ignores it. Bytes
//! after the last member that are neither are an error
//! ([`ReadErrorKind::GzipTrailingGarbage`]), as is a file that expands past
//! [`gzip_limit`] (a decompression bomb: refused when that many bytes came
//! out, never holding them). Offsets in errors then count decompressed
//! bytes.
//!
//! # Files
//!
//! [`read_trace_file`] and the other file readers read regular files only
//! ([`TraceFile`]): a FIFO, a device (a link to `/dev/zero`), a socket or
//! a folder is refused before anything is read, and a file is read up to
//! the size it had when it was opened. A file of NUL bytes is named as
//! such ([`ReadErrorKind::NulBytes`]).
//!
//! # Memory
//!
//! The input is read through a window that holds the value being parsed,
//! not the file: events are parsed one by one, straight into
//! [`TraceEvent`]s, without the file's text or a JSON tree of the whole
//! document in memory. What is held is the events: memory grows with their
//! number, not with the file's formatting, and the largest value read at
//! once bounds the window. [`read_trace_head`] holds only the first few
//! events, and [`read_events`] and [`read_json_events`] none: each goes to
//! a callback as it is read. steptrace's own readers of long files keep
//! what they need of each event, not the events:
//! [`LoadedTrace`](crate::read::analysis::LoadedTrace) for the report,
//! [`InventoryBuilder`](crate::read::analysis::InventoryBuilder) and
//! [`SanitisedCopy`](crate::read::analysis::SanitisedCopy) for label hygiene.
//!
//! # Validation
//!
//! [`validate`] checks what a viewer needs: balanced `B`/`E` pairs on each
//! thread, non-negative durations, timestamps, known phases, balanced async
//! events and numeric counters.
//!
//! # Every field
//!
//! [`parse_trace`] keeps the fields steptrace reads, typed. Where every
//! field matters (label hygiene: a secret can sit in any field, known or
//! not), [`parse_json_trace`] parses the same layouts, with the same
//! tolerance of damage, into each event's whole JSON object.

mod error;
mod event;
mod file;
mod gzip;
mod name;
mod parse;
mod validate;
mod window;

#[cfg(test)]
mod prop_tests;

use std::io::{self, Read};
use std::path::Path;

use serde_json::Value;

use crate::format::{MetadataError, Steptrace};
use event::RawEvent;

pub use error::{ReadError, ReadErrorKind};
pub use event::{TraceEvent, TrackId};
pub use file::TraceFile;
pub use gzip::{gzip_limit, GZIP_MAX_RATIO, GZIP_MIN_LIMIT};
pub use name::Name;
pub(crate) use name::Names;
pub(crate) use validate::Validator;
pub use validate::{
    plausible_dur, plausible_ts, validate, Problem, ProblemKind, MAX_PLAUSIBLE_DUR_US, MAX_PLAUSIBLE_TS_US,
};

/// An event as its whole JSON object, every field kept.
pub type JsonEvent = serde_json::Map<String, Value>;

/// A trace whose events are kept as JSON objects: see
/// [`parse_json_trace`].
pub type JsonTrace = Trace<JsonEvent>;

/// The layout of a trace file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceFormat {
    /// `{"traceEvents": [...], ...}`: events plus top-level metadata.
    Object,
    /// `[...]`: a bare list of events.
    Array,
}

/// A parsed trace, its events typed ([`TraceEvent`], the default) or kept
/// as JSON ([`JsonTrace`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Trace<E = TraceEvent> {
    /// The layout the file used.
    pub format: TraceFormat,
    /// The events, in file order.
    pub events: Vec<E>,
    /// Every top-level key of an object-format file except `traceEvents`
    /// (for example `metadata`, `displayTimeUnit`, `otherData`,
    /// `deviceProperties`); empty for the array format.
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Whether the file did not end cleanly: its closing `]` (or `}`) is
    /// missing, an incomplete last event (or top-level entry) was dropped,
    /// or a trailing comma precedes a closing bracket (what a writer that
    /// stopped between events, then had its bracket appended, leaves).
    pub truncated: bool,
    /// Bytes of an incomplete trailing event (or top-level entry), and of a
    /// tail of NUL bytes, that were ignored.
    pub dropped_bytes: usize,
}

impl Trace {
    /// steptrace's part of the file: its `metadata` object and, in a
    /// partial file, its header event. `Ok(None)` for a foreign trace.
    ///
    /// # Errors
    ///
    /// A newer or unreadable steptrace format version, or a known field of
    /// the wrong type.
    pub fn steptrace(&self) -> Result<Option<Steptrace>, MetadataError> {
        let header = self.events.iter().take(HEADER_EVENTS).find_map(<RawEvent as parse::Shape>::header_args);
        Steptrace::from_parts(self.metadata.get("metadata"), header)
    }
}

impl JsonTrace {
    /// steptrace's part of the file, as [`Trace::steptrace`] reads it.
    ///
    /// # Errors
    ///
    /// As for [`Trace::steptrace`].
    pub fn steptrace(&self) -> Result<Option<Steptrace>, MetadataError> {
        let header = self.events.iter().take(HEADER_EVENTS).find_map(<JsonEvent as parse::Shape>::header_args);
        Steptrace::from_parts(self.metadata.get("metadata"), header)
    }

    /// The whole document again: the event list, or the object holding it
    /// under `traceEvents` beside the metadata.
    #[must_use]
    pub fn to_value(&self) -> Value {
        let events = Value::Array(self.events.iter().cloned().map(Value::Object).collect());
        match self.format {
            TraceFormat::Array => events,
            TraceFormat::Object => {
                let mut top = self.metadata.clone();
                top.insert("traceEvents".into(), events);
                Value::Object(top)
            }
        }
    }
}

/// How many of a trace's first events [`Trace::steptrace`] looks among for
/// a partial file's header.
pub(crate) const HEADER_EVENTS: usize = 16;

/// Parses a Chrome trace held in memory.
///
/// See the [module documentation](self) for the layouts and damage that
/// are accepted.
///
/// # Errors
///
/// A [`ReadError`] with the byte offset of the first problem when the input
/// is empty, not JSON, or not a trace (for example an event that is not a
/// JSON object).
///
/// # Examples
///
/// ```
/// use steptrace::reader::{parse_trace, TraceFormat, TrackId};
///
/// let text = br#"{"traceEvents":[
///     {"ph":"B","name":"train.step","pid":1,"tid":1,"ts":10},
///     {"ph":"E","pid":1,"tid":1,"ts":25.5}
/// ],"displayTimeUnit":"ms"}"#;
/// let trace = parse_trace(text)?;
/// assert_eq!(trace.format, TraceFormat::Object);
/// assert_eq!(trace.events.len(), 2);
/// assert_eq!(trace.events[0].name, "train.step");
/// assert_eq!(trace.events[1].tid, Some(TrackId::Num(1)));
/// assert_eq!(trace.metadata["displayTimeUnit"], "ms");
/// assert!(!trace.truncated);
///
/// // A file cut short while an event was being written.
/// let cut = br#"[{"ph":"i","name":"a","ts":1},{"ph":"i","na"#;
/// let trace = parse_trace(cut)?;
/// assert_eq!(trace.events.len(), 1);
/// assert!(trace.truncated);
/// assert_eq!(trace.dropped_bytes, 13); // `{"ph":"i","na`
///
/// let err = parse_trace(b"[1]").unwrap_err();
/// assert_eq!(err.offset(), Some(1));
/// # Ok::<(), steptrace::reader::ReadError>(())
/// ```
pub fn parse_trace(bytes: &[u8]) -> Result<Trace, ReadError> {
    read_trace(bytes, bytes.len() as u64)
}

/// Parses a Chrome trace held in memory, keeping each event's whole JSON
/// object: the layouts, damage and errors are those of [`parse_trace`].
///
/// # Errors
///
/// As for [`parse_trace`], except that fields of the wrong type are not
/// errors here (they are kept as they are).
///
/// # Examples
///
/// ```
/// use steptrace::reader::parse_json_trace;
///
/// let trace = parse_json_trace(br#"[{"ph":"X","name":"a","ts":1,"dur":2,"sf":"frame 7"}]"#)?;
/// assert_eq!(trace.events[0]["sf"], "frame 7");
/// # Ok::<(), steptrace::reader::ReadError>(())
/// ```
pub fn parse_json_trace(bytes: &[u8]) -> Result<JsonTrace, ReadError> {
    read_json_trace(bytes, bytes.len() as u64)
}

/// Reads a Chrome trace from `src`, at most `size` bytes of it (a gzip
/// stream's limit is [`gzip_limit`] of `size`), streaming: its text is
/// never held whole. [`parse_trace`] reads bytes in memory this way,
/// [`read_trace_file`] a [`TraceFile`].
///
/// # Errors
///
/// As for [`parse_trace`]; a read error is of kind [`ReadErrorKind::Io`].
pub fn read_trace(src: impl Read, size: u64) -> Result<Trace, ReadError> {
    let mut events = Vec::new();
    let parsed = read_as::<RawEvent>(src, size, window::CHUNK, &mut |event| events.push(event))?;
    let trace = Trace { events, ..parsed.trace };
    check_format(trace.steptrace())?;
    Ok(trace)
}

/// Reads a Chrome trace from `src` as [`read_trace`] does, keeping only
/// its first `keep` events: every event is read and checked, and what a
/// trace says of itself ([`Trace::steptrace`]: its metadata, or the header
/// event a partial file starts with) is there, at the memory of `keep`
/// events.
///
/// # Errors
///
/// As for [`read_trace`].
///
/// # Examples
///
/// ```
/// use steptrace::reader::read_trace_head;
///
/// let text = br#"[{"ph":"i","name":"a","ts":1},{"ph":"i","name":"b","ts":2}]"#;
/// let head = read_trace_head(&text[..], text.len() as u64, 1)?;
/// assert_eq!(head.events.len(), 1);
/// assert!(read_trace_head(&b"[{},{} {}]"[..], 10, 1).is_err());
/// # Ok::<(), steptrace::reader::ReadError>(())
/// ```
pub fn read_trace_head(src: impl Read, size: u64, keep: usize) -> Result<Trace, ReadError> {
    read_events_and_head(src, size, keep, |_| {})
}

/// Reads a Chrome trace from `src` as [`read_events`] does, each event to
/// `each`, keeping its first `keep` events as [`read_trace_head`] does (a
/// partial file's header among them, checked as [`read_trace`] checks it).
pub(crate) fn read_events_and_head(
    src: impl Read,
    size: u64,
    keep: usize,
    mut each: impl FnMut(&TraceEvent),
) -> Result<Trace, ReadError> {
    let mut events = Vec::new();
    let mut all = |event| {
        each(&event);
        if events.len() < keep {
            events.push(event);
        }
    };
    let parsed = read_as::<RawEvent>(src, size, window::CHUNK, &mut all)?;
    let trace = Trace { events, ..parsed.trace };
    check_format(trace.steptrace())?;
    Ok(trace)
}

/// Reads a Chrome trace from `src` as [`read_trace`] does, one event at a
/// time: each event goes to `each` as it is read, and is not kept (the
/// trace returned holds none of them; its metadata and damage are there).
/// Memory is then that of the window and of what `each` keeps.
///
/// Events are handed over before the file is read to its end: an error
/// returned after some of them were means the file is refused as a whole
/// (a syntax error further on, invalid UTF-8, a newer steptrace format).
///
/// # Errors
///
/// As for [`read_trace`].
///
/// # Examples
///
/// ```
/// use steptrace::reader::read_events;
///
/// let text = br#"{"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":2},{"ph":"X","name":"b","ts":3,"dur":4}],"k":1}"#;
/// let mut busy = 0.0;
/// let trace = read_events(&text[..], text.len() as u64, |event| busy += event.dur.unwrap_or(0.0))?;
/// assert_eq!((busy, trace.events.len(), trace.metadata.len()), (6.0, 0, 1));
/// # Ok::<(), steptrace::reader::ReadError>(())
/// ```
pub fn read_events(src: impl Read, size: u64, mut each: impl FnMut(TraceEvent)) -> Result<Trace, ReadError> {
    stream::<RawEvent>(src, size, &mut each).map(|parsed| parsed.trace)
}

/// Reads a Chrome trace from `src` one event at a time, as [`read_events`]
/// does, each event as its whole JSON object, as [`read_json_trace`] keeps
/// them; with the top-level keys in file order, as
/// [`read_json_trace_in_order`] gives them.
///
/// # Errors
///
/// As for [`read_json_trace`].
///
/// # Examples
///
/// ```
/// use steptrace::reader::read_json_events;
///
/// let text = br#"{"k":1,"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":2,"sf":7}]}"#;
/// let mut fields = 0;
/// let (trace, keys) = read_json_events(&text[..], text.len() as u64, |event| fields += event.len())?;
/// assert_eq!((fields, trace.events.len()), (5, 0));
/// assert_eq!(keys, ["k", "traceEvents"]);
/// # Ok::<(), steptrace::reader::ReadError>(())
/// ```
pub fn read_json_events(
    src: impl Read,
    size: u64,
    mut each: impl FnMut(JsonEvent),
) -> Result<(JsonTrace, Vec<String>), ReadError> {
    stream::<JsonEvent>(src, size, &mut each).map(|parsed| (parsed.trace, parsed.keys))
}

/// [`read_events`] and [`read_json_events`]: each event of shape `S` to `each`, none kept;
/// the format checked on the metadata and a partial file's header, which is among the
/// first events.
fn stream<S: parse::Shape>(
    src: impl Read,
    size: u64,
    each: &mut dyn FnMut(S::Event),
) -> Result<parse::Parsed<S::Event>, ReadError> {
    let mut head = Vec::new();
    let parsed = read_as::<S>(src, size, window::CHUNK, &mut |event| {
        if head.len() < HEADER_EVENTS {
            head.push(event.clone());
        }
        each(event);
    })?;
    let header = head.iter().find_map(S::header_args);
    check_format(Steptrace::from_parts(parsed.trace.metadata.get("metadata"), header))?;
    Ok(parsed)
}

/// Reads a Chrome trace from `src` as [`read_trace`] does, keeping each
/// event's whole JSON object, as [`parse_json_trace`] does.
///
/// # Errors
///
/// As for [`parse_json_trace`].
pub fn read_json_trace(src: impl Read, size: u64) -> Result<JsonTrace, ReadError> {
    read_json_trace_in_order(src, size).map(|(trace, _)| trace)
}

/// Reads a Chrome trace as [`read_json_trace`] does, with its top-level
/// keys in the order the file writes them (`traceEvents` among them; the
/// keys read before a cut, for a file cut short; none for the array
/// format): what a copy that keeps the file's layout needs.
///
/// # Errors
///
/// As for [`read_json_trace`].
///
/// # Examples
///
/// ```
/// use steptrace::reader::read_json_trace_in_order;
///
/// let text = br#"{"b":1,"traceEvents":[],"a":{"c":2}}"#;
/// let (trace, keys) = read_json_trace_in_order(&text[..], text.len() as u64)?;
/// assert_eq!(keys, ["b", "traceEvents", "a"]);
/// assert_eq!(trace.metadata.len(), 2);
/// # Ok::<(), steptrace::reader::ReadError>(())
/// ```
pub fn read_json_trace_in_order(src: impl Read, size: u64) -> Result<(JsonTrace, Vec<String>), ReadError> {
    let mut events = Vec::new();
    let parsed = read_as::<JsonEvent>(src, size, window::CHUNK, &mut |event| events.push(event))?;
    let trace = Trace { events, ..parsed.trace };
    check_format(trace.steptrace())?;
    Ok((trace, parsed.keys))
}

/// Parses events of shape `S` from at most `size` bytes of `src`,
/// decompressed as they are read when they are gzip, handing each to
/// `each`.
fn read_as<S: parse::Shape>(
    src: impl Read,
    size: u64,
    chunk: usize,
    each: &mut dyn FnMut(S::Event),
) -> Result<parse::Parsed<S::Event>, ReadError> {
    let mut src = src.take(size);
    let mut head = Vec::with_capacity(2);
    (&mut src).take(2).read_to_end(&mut head).map_err(|err| ReadError::whole(ReadErrorKind::Io(err)))?;
    let gz = head == gzip::MAGIC;
    let raw = io::Cursor::new(head).chain(src);
    if gz {
        let source = gzip::Gunzip::new(raw, size, gzip_limit(size));
        parse::parse_window::<S>(window::Window::new(Box::new(source), chunk), each).map_err(ReadError::in_decompressed)
    } else {
        parse::parse_window::<S>(window::Window::new(Box::new(window::Plain(raw)), chunk), each)
    }
}

/// Refuses a steptrace file of a newer format version: its fields may mean
/// what this crate cannot know.
fn check_format<T>(steptrace: Result<T, MetadataError>) -> Result<(), ReadError> {
    match steptrace {
        Err(MetadataError::Version(err)) => Err(ReadError::version(err)),
        _ => Ok(()),
    }
}

/// Reads and parses a Chrome trace file.
///
/// The file is opened as a [`TraceFile`] (a regular file, never a FIFO or
/// a device) and read as by [`read_trace`]: streaming, never whole.
///
/// # Errors
///
/// A [`ReadError`] of kind [`ReadErrorKind::Io`] when the file cannot be
/// read, [`ReadErrorKind::NotAFile`] when it is not a regular file, or as
/// for [`parse_trace`]; either way the error carries `path`.
///
/// # Examples
///
/// ```
/// use steptrace::reader::{read_trace_file, ReadErrorKind};
///
/// let err = read_trace_file("no/such/trace.json".as_ref()).unwrap_err();
/// assert!(matches!(err.kind(), ReadErrorKind::Io(_)));
/// assert!(err.to_string().contains("no/such/trace.json"));
/// ```
pub fn read_trace_file(path: &Path) -> Result<Trace, ReadError> {
    let file = TraceFile::open(path)?;
    let size = file.len();
    read_trace(file, size).map_err(|err| err.with_path(path))
}

/// Reads and parses a Chrome trace file, keeping each event's whole JSON
/// object, as [`parse_json_trace`] does.
///
/// # Errors
///
/// As for [`read_trace_file`].
pub fn read_json_trace_file(path: &Path) -> Result<JsonTrace, ReadError> {
    let file = TraceFile::open(path)?;
    let size = file.len();
    read_json_trace(file, size).map_err(|err| err.with_path(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_trace_file_reads_and_names_the_file_in_errors() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.json");
        std::fs::write(&good, br#"[{"ph":"X","name":"a","ts":1,"dur":2}]"#).unwrap();
        let trace = read_trace_file(&good).unwrap();
        assert_eq!(trace.format, TraceFormat::Array);
        assert_eq!(trace.events[0].dur, Some(2.0));

        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, b"[{\"ph\":\"X\"} x]").unwrap();
        let err = read_trace_file(&bad).unwrap_err();
        assert_eq!(err.path(), Some(bad.as_path()));
        assert_eq!(err.offset(), Some(12));
        let text = err.to_string();
        assert!(text.contains("bad.json"), "{text}");
        assert!(text.contains("invalid trace at byte 12: expected ',' or ']' after an event"), "{text}");

        let missing = dir.path().join("missing.json");
        let err = read_trace_file(&missing).unwrap_err();
        assert!(matches!(err.kind(), ReadErrorKind::Io(_)));
        assert_eq!(err.offset(), None);
        assert_eq!(err.path(), Some(missing.as_path()));
        assert!(std::error::Error::source(&err).is_some());
    }
}
