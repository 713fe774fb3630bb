//! The streaming parser behind [`parse_trace`](super::parse_trace) and
//! [`read_trace`](super::read_trace).
//!
//! The top-level structure (the object's keys, the list's brackets and
//! commas) is scanned by hand; each event, key and metadata value is decoded
//! by `serde_json` on its own, straight into its final type, from the
//! [`Window`] the input is read through. `serde_json` reports whether it
//! failed because the input ended, which is how a file cut short is told
//! apart from a broken one; a value the window ends inside is decoded again
//! once more is read.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::error::{describe_byte, describe_start, ReadError, ReadErrorKind};
use super::event::{RawEvent, TraceEvent};
use super::window::Window;
use super::{JsonEvent, Trace, TraceFormat};

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// How a list or an object ended.
enum End {
    /// With its closing bracket.
    Closed,
    /// With the input; the last `dropped` bytes were an incomplete item.
    Truncated { dropped: usize },
}

/// One decoded JSON value, or the end of the input inside it.
enum Item<T> {
    Value(T),
    Eof,
}

/// A JSON error inside a value: its absolute byte offset and message.
struct JsonError {
    offset: usize,
    message: String,
}

/// What one event is decoded into: the typed [`TraceEvent`] (through
/// [`RawEvent`]), or the event's whole JSON object.
pub(super) trait Shape: DeserializeOwned {
    /// The event as kept.
    type Event: Clone;
    /// Turns the decoded value into the event kept.
    fn finish(self) -> Self::Event;
    /// The args of a partial file's header event, if `event` is one.
    fn header_args(event: &Self::Event) -> Option<&Value>;
}

impl Shape for RawEvent {
    type Event = TraceEvent;
    fn finish(self) -> TraceEvent {
        self.into_event()
    }
    fn header_args(e: &TraceEvent) -> Option<&Value> {
        (e.ph == "M" && e.name == crate::format::names::meta::SEGMENT).then_some(e.args.as_ref()).flatten()
    }
}

impl Shape for JsonEvent {
    type Event = JsonEvent;
    fn finish(self) -> JsonEvent {
        self
    }
    fn header_args(e: &JsonEvent) -> Option<&Value> {
        crate::format::names::is_segment_header(e).then(|| e.get("args")).flatten()
    }
}

/// What a parse gives besides the trace: its top-level keys, in the order
/// they are written.
pub(super) struct Parsed<E> {
    pub(super) trace: Trace<E>,
    pub(super) keys: Vec<String>,
}

/// Parses typed events from bytes in memory (plain JSON, not gzip).
#[cfg(test)]
pub(super) fn parse(input: &[u8]) -> Result<Trace, ReadError> {
    parse_as::<RawEvent>(input)
}

/// Parses events of shape `S` from bytes in memory (plain JSON, not gzip).
#[cfg(test)]
pub(super) fn parse_as<S: Shape>(input: &[u8]) -> Result<Trace<S::Event>, ReadError> {
    let window = Window::new(Box::new(super::window::Plain(input)), super::window::CHUNK);
    let mut events = Vec::new();
    let parsed = parse_window::<S>(window, &mut |event| events.push(event))?;
    Ok(Trace { events, ..parsed.trace })
}

/// Parses events of shape `S` from `window`, each event handed to `each`
/// as it is read: the trace returned holds none.
pub(super) fn parse_window<S: Shape>(
    window: Window<'_>,
    each: &mut dyn FnMut(S::Event),
) -> Result<Parsed<S::Event>, ReadError> {
    let mut parser = Parser { w: window, pos: 0, trailing_comma: false, keys: Vec::new() };
    match parser.trace::<S>(each) {
        Ok(mut trace) => {
            let end = parser.w.end();
            // `serde_json` skips ignored strings without checking their UTF-8.
            if let Some(err) = parser.w.check_until(end - trace.dropped_bytes, true) {
                return Err(err);
            }
            // A crash can leave a zero-filled tail: set aside as dropped bytes.
            let nul_tail = parser.w.nul_tail();
            if nul_tail > 0 && end > 0 {
                trace.truncated = true;
                trace.dropped_bytes += usize::try_from(nul_tail).unwrap_or(usize::MAX);
            }
            trace.truncated |= parser.w.cut();
            Ok(Parsed { trace, keys: parser.keys })
        }
        Err(err) => match err.offset() {
            Some(offset) if !matches!(err.kind(), ReadErrorKind::InvalidUtf8) => {
                Err(parser.invalid_utf8_before(offset).unwrap_or(err))
            }
            _ => Err(err),
        },
    }
}

/// Why a value was not decoded.
enum Fail {
    /// Invalid JSON.
    Json(JsonError),
    /// The input could not be read on.
    Read(ReadError),
}

impl From<ReadError> for Fail {
    fn from(err: ReadError) -> Self {
        Fail::Read(err)
    }
}

struct Parser<'a> {
    w: Window<'a>,
    /// The offset of the next byte to parse.
    pos: usize,
    /// Whether a list or object ended with a comma before its bracket.
    trailing_comma: bool,
    /// The top-level keys, in file order.
    keys: Vec<String>,
}

impl Parser<'_> {
    fn trace<S: Shape>(&mut self, each: &mut dyn FnMut(S::Event)) -> Result<Trace<S::Event>, ReadError> {
        let start = self.w.ensure(0, BOM.len()).and_then(|()| {
            if self.w.from(0).starts_with(BOM) {
                self.pos = BOM.len();
            }
            self.skip_ws()?;
            self.peek()
        });
        let first = match start {
            Ok(first) => first,
            // A bomb of NUL bytes is named for what it holds.
            Err(err) if matches!(err.kind(), ReadErrorKind::TooLarge { .. }) && self.w.nul_tail() > 0 => {
                return Err(ReadError::at(ReadErrorKind::NulBytes { count: self.w.nul_tail(), only: false }, self.pos));
            }
            Err(err) => return Err(err),
        };
        match first {
            None if self.w.nul_tail() > 0 => {
                Err(ReadError::at(ReadErrorKind::NulBytes { count: self.w.nul_tail(), only: true }, self.pos))
            }
            None => Err(ReadError::at(ReadErrorKind::Empty, 0)),
            Some(0) => {
                let here = self.w.from(self.pos).iter().take_while(|&&b| b == 0).count() as u64;
                let count = self.w.nul_run_at(self.pos).unwrap_or(here);
                Err(ReadError::at(ReadErrorKind::NulBytes { count, only: false }, self.pos))
            }
            Some(b'[') => self.array_trace::<S>(each),
            Some(b'{') => self.object_trace::<S>(each),
            Some(b) => Err(ReadError::at(ReadErrorKind::NotATrace { found: describe_start(b) }, self.pos)),
        }
    }

    /// `[ event, ... ]`
    fn array_trace<S: Shape>(&mut self, each: &mut dyn FnMut(S::Event)) -> Result<Trace<S::Event>, ReadError> {
        let (truncated, dropped_bytes) = match self.events::<S>(each)? {
            End::Closed => {
                self.expect_end()?;
                (self.trailing_comma, 0)
            }
            End::Truncated { dropped } => (true, dropped),
        };
        Ok(Trace { format: TraceFormat::Array, events: Vec::new(), metadata: Map::new(), truncated, dropped_bytes })
    }

    /// `{ "key": value, ... }` with a `traceEvents` list among the keys.
    // One pass over the top-level object, key by key, with the damage rules
    // of a cut-off file inline: splitting it would scatter that state.
    fn object_trace<S: Shape>(&mut self, each: &mut dyn FnMut(S::Event)) -> Result<Trace<S::Event>, ReadError> {
        self.pos += 1;
        let mut metadata = Map::new();
        let mut events = false;
        let mut expect_key = true;
        let mut after_comma = false;
        let end = loop {
            self.skip_ws()?;
            let Some(b) = self.peek()? else { break End::Truncated { dropped: 0 } };
            if b == b'}' {
                // A comma before it is tolerated, as the mark of a writer
                // that did not end cleanly.
                self.trailing_comma |= expect_key && after_comma;
                self.pos += 1;
                break End::Closed;
            }
            if !expect_key {
                if b == b',' {
                    self.pos += 1;
                    expect_key = true;
                    after_comma = true;
                    continue;
                }
                return Err(ReadError::syntax("expected ',' or '}' after a value", self.pos));
            }
            if b != b'"' {
                return Err(ReadError::syntax(format!("expected a key or '}}', found {}", describe_byte(b)), self.pos));
            }
            let entry = self.pos;
            let key = match self.value::<String>().map_err(syntax_error)? {
                Item::Value(key) => key,
                Item::Eof => break self.dropped_from(entry),
            };
            self.keys.push(key.clone());
            self.skip_ws()?;
            match self.peek()? {
                None => break self.dropped_from(entry),
                Some(b':') => self.pos += 1,
                Some(_) => return Err(ReadError::syntax("expected ':' after a key", self.pos)),
            }
            self.skip_ws()?;
            let Some(first) = self.peek()? else { break self.dropped_from(entry) };
            if key == "traceEvents" {
                if events {
                    return Err(ReadError::at(ReadErrorKind::DuplicateTraceEvents, entry));
                }
                if first != b'[' {
                    let found = describe_start(first);
                    return Err(ReadError::at(ReadErrorKind::TraceEventsNotArray { found }, self.pos));
                }
                let end = self.events::<S>(each)?;
                events = true;
                if let End::Truncated { .. } = end {
                    break end;
                }
            } else {
                match self.value::<Value>().map_err(syntax_error)? {
                    // A number or literal that runs into the end of the
                    // input may have been cut short.
                    Item::Value(_) if self.pos == self.w.end() && !matches!(first, b'{' | b'[' | b'"') => {
                        break self.dropped_from(entry);
                    }
                    Item::Value(value) => {
                        metadata.insert(key, value);
                    }
                    Item::Eof => break self.dropped_from(entry),
                }
            }
            expect_key = false;
        };
        let (truncated, dropped_bytes) = match end {
            End::Closed => {
                let close = self.pos - 1;
                self.expect_end()?;
                if !events {
                    return Err(ReadError::at(ReadErrorKind::MissingTraceEvents, close));
                }
                (self.trailing_comma, 0)
            }
            End::Truncated { dropped } => (true, dropped),
        };
        Ok(Trace { format: TraceFormat::Object, events: Vec::new(), metadata, truncated, dropped_bytes })
    }

    /// The event list; `self.pos` is at its `[`.
    fn events<S: Shape>(&mut self, each: &mut dyn FnMut(S::Event)) -> Result<End, ReadError> {
        self.pos += 1;
        let mut expect_event = true;
        let mut index = 0;
        loop {
            self.skip_ws()?;
            let Some(b) = self.peek()? else { return Ok(End::Truncated { dropped: 0 }) };
            if b == b']' {
                // A comma before it is tolerated, as the mark of a writer
                // that did not end cleanly.
                self.trailing_comma |= expect_event && index > 0;
                self.pos += 1;
                return Ok(End::Closed);
            }
            if !expect_event {
                if b == b',' {
                    self.pos += 1;
                    expect_event = true;
                    continue;
                }
                return Err(ReadError::syntax("expected ',' or ']' after an event", self.pos));
            }
            match b {
                b'{' => {}
                b',' => return Err(ReadError::syntax("expected an event or ']', found ','", self.pos)),
                _ => {
                    let found = describe_start(b);
                    return Err(ReadError::at(ReadErrorKind::EventNotObject { index, found }, self.pos));
                }
            }
            let start = self.pos;
            match self.value::<S>() {
                Ok(Item::Value(raw)) => each(raw.finish()),
                Ok(Item::Eof) => return Ok(self.dropped_from(start)),
                Err(Fail::Json(JsonError { offset, message })) => {
                    return Err(ReadError::at(ReadErrorKind::InvalidEvent { index, message }, offset));
                }
                Err(Fail::Read(err)) => return Err(err),
            }
            index += 1;
            expect_event = false;
        }
    }

    /// Decodes the JSON value at `self.pos` and moves past it, reading on
    /// while the window ends inside it.
    fn value<T: DeserializeOwned>(&mut self) -> Result<Item<T>, Fail> {
        loop {
            let more = !self.w.done();
            let rest = self.w.from(self.pos);
            let len = rest.len();
            let mut stream = serde_json::Deserializer::from_slice(rest).into_iter::<T>();
            match stream.next() {
                // A value that runs to the end of the window may go on.
                Some(Ok(value)) if !(more && stream.byte_offset() == len) => {
                    self.pos += stream.byte_offset();
                    return Ok(Item::Value(value));
                }
                Some(Err(err)) if !err.is_eof() => {
                    let offset = error_offset(rest, &err);
                    let at_end = offset + 1 >= len;
                    if !(more && at_end) {
                        if at_end && is_cut_number::<T>(rest) {
                            return Ok(Item::Eof);
                        }
                        return Err(Fail::Json(JsonError { offset: self.pos + offset, message: error_message(&err) }));
                    }
                }
                _ if !more => return Ok(Item::Eof),
                _ => {}
            }
            // Twice the window at least: a long value is parsed again a
            // bounded number of times.
            self.w.fill(self.pos, len.max(1))?;
        }
    }

    /// The end of a truncated input whose incomplete last item starts at
    /// `start`.
    fn dropped_from(&self, start: usize) -> End {
        End::Truncated { dropped: self.w.end().saturating_sub(start) }
    }

    /// Only whitespace may follow the end of the trace.
    fn expect_end(&mut self) -> Result<(), ReadError> {
        self.skip_ws()?;
        match self.peek()? {
            None => Ok(()),
            Some(_) => Err(ReadError::at(ReadErrorKind::TrailingCharacters, self.pos)),
        }
    }

    fn peek(&mut self) -> Result<Option<u8>, ReadError> {
        loop {
            if let Some(b) = self.w.byte(self.pos) {
                return Ok(Some(b));
            }
            if self.w.done() {
                return Ok(None);
            }
            self.w.fill(self.pos, 1)?;
        }
    }

    fn skip_ws(&mut self) -> Result<(), ReadError> {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek()? {
            self.pos += 1;
        }
        Ok(())
    }

    /// Invalid UTF-8 before `offset`, or in the rest of the string that
    /// starts just before it: `serde_json` reports bad UTF-8 in a string at
    /// the start of the string.
    fn invalid_utf8_before(&mut self, offset: usize) -> Option<ReadError> {
        let in_string = offset > 0 && self.w.byte(offset - 1) == Some(b'"');
        // Up to and with the closing quote: a bad sequence just before it
        // would otherwise look like one cut short. The string is read on to
        // its quote (or the end), so that the verdict does not depend on
        // where the window happened to end.
        let end = if in_string {
            loop {
                let rest = self.w.from(offset);
                if let Some(i) = rest.iter().position(|&b| b == b'"') {
                    break offset + i + 1;
                }
                if self.w.done() {
                    break self.w.end();
                }
                match self.w.fill(offset, rest.len().max(1)) {
                    Ok(()) => {}
                    Err(err) if matches!(err.kind(), ReadErrorKind::InvalidUtf8) => return Some(err),
                    Err(_) => break self.w.end(),
                }
            }
        } else {
            offset
        };
        self.w.check_until(end, false)
    }
}

/// Whether `rest`, which failed to parse at its last byte, only failed
/// because it ends inside a number.
///
/// `serde_json` reports a number cut short inside a skipped field (`1.`,
/// `-`, `2e+`) as an invalid number rather than as the end of the input;
/// appending a digit tells the two apart.
fn is_cut_number<T: DeserializeOwned>(rest: &[u8]) -> bool {
    let mut completed = Vec::with_capacity(rest.len() + 1);
    completed.extend_from_slice(rest);
    completed.push(b'0');
    let mut stream = serde_json::Deserializer::from_slice(&completed).into_iter::<T>();
    match stream.next() {
        Some(Err(err)) => err.is_eof(),
        Some(Ok(_)) => stream.byte_offset() == completed.len(),
        None => false,
    }
}

fn syntax_error(fail: Fail) -> ReadError {
    match fail {
        Fail::Json(err) => ReadError::syntax(err.message, err.offset),
        Fail::Read(err) => err,
    }
}

/// The byte offset in `slice` of a `serde_json` error: that of the byte at its
/// (1-based) line and column.
fn error_offset(slice: &[u8], err: &serde_json::Error) -> usize {
    if err.line() == 0 {
        return 0;
    }
    let mut line_start = 0;
    for _ in 1..err.line() {
        match slice.get(line_start..).and_then(|rest| rest.iter().position(|&b| b == b'\n')) {
            Some(newline) => line_start += newline + 1,
            None => break,
        }
    }
    (line_start + err.column().saturating_sub(1)).min(slice.len())
}

/// The most characters of a `serde_json` message kept: it may quote a
/// value of the input, which may be huge.
const MESSAGE_CHARS: usize = 300;

/// A `serde_json` error's message without its (slice-relative) position,
/// and with any quoted input escaped and cut.
fn error_message(err: &serde_json::Error) -> String {
    let text = err.to_string();
    let position = format!(" at line {} column {}", err.line(), err.column());
    let message = text.strip_suffix(&position).unwrap_or(&text);
    crate::display::label(message, MESSAGE_CHARS).into_owned()
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
