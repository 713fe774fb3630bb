//! The streaming parser behind [`parse_trace`](super::parse_trace).
//!
//! The top-level structure (the object's keys, the list's brackets and
//! commas) is scanned by hand; each event, key and metadata value is decoded
//! by `serde_json` on its own, straight into its final type. `serde_json`
//! reports whether it failed because the input ended, which is how a file
//! cut short is told apart from a broken one.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::error::{describe_byte, describe_start, ReadError, ReadErrorKind};
use super::event::{RawEvent, TraceEvent};
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
    type Event;
    /// Turns the decoded value into the event kept.
    fn finish(self) -> Self::Event;
}

impl Shape for RawEvent {
    type Event = TraceEvent;
    fn finish(self) -> TraceEvent {
        self.into_event()
    }
}

impl Shape for JsonEvent {
    type Event = JsonEvent;
    fn finish(self) -> JsonEvent {
        self
    }
}

/// Parses typed events.
pub(super) fn parse(input: &[u8]) -> Result<Trace, ReadError> {
    parse_as::<RawEvent>(input)
}

/// Parses events of shape `S`.
pub(super) fn parse_as<S: Shape>(input: &[u8]) -> Result<Trace<S::Event>, ReadError> {
    // A crash can leave a zero-filled tail: set it aside as dropped bytes.
    let end = input.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    let nul_tail = input.len() - end;
    let mut parser = Parser { bytes: input.get(..end).unwrap_or_default(), pos: 0, trailing_comma: false };
    match parser.trace::<S>() {
        Ok(mut trace) => {
            if nul_tail > 0 && end > 0 {
                trace.truncated = true;
                trace.dropped_bytes += nul_tail;
            }
            // `serde_json` skips ignored strings without checking their UTF-8.
            let parsed = input.len().saturating_sub(trace.dropped_bytes);
            if let Err(err) = std::str::from_utf8(input.get(..parsed).unwrap_or_default()) {
                return Err(ReadError::at(ReadErrorKind::InvalidUtf8, err.valid_up_to()));
            }
            Ok(trace)
        }
        Err(err) => Err(invalid_utf8_before(input, err.offset().unwrap_or(0)).unwrap_or(err)),
    }
}

/// Invalid UTF-8 before `offset`, or in the rest of the string that starts
/// just before it: `serde_json` reports bad UTF-8 in a string at the start of
/// the string.
fn invalid_utf8_before(input: &[u8], offset: usize) -> Option<ReadError> {
    let in_string = offset > 0 && input.get(offset - 1) == Some(&b'"');
    let rest = if in_string { input.get(offset..).unwrap_or_default() } else { &[] };
    let string_end = rest.iter().position(|&b| b == b'"').unwrap_or(rest.len());
    // Up to and with the closing quote: a bad sequence just before it
    // would otherwise look like one cut short.
    let end = if in_string { offset + string_end + 1 } else { offset };
    let region = input.get(..end).unwrap_or(input);
    match std::str::from_utf8(region) {
        Err(bad) if bad.error_len().is_some() => Some(ReadError::at(ReadErrorKind::InvalidUtf8, bad.valid_up_to())),
        _ => None,
    }
}

struct Parser<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Whether a list or object ended with a comma before its bracket.
    trailing_comma: bool,
}

impl Parser<'_> {
    fn trace<S: Shape>(&mut self) -> Result<Trace<S::Event>, ReadError> {
        if self.bytes.starts_with(BOM) {
            self.pos = BOM.len();
        }
        self.skip_ws();
        match self.peek() {
            None => Err(ReadError::at(ReadErrorKind::Empty, 0)),
            Some(b'[') => self.array_trace::<S>(),
            Some(b'{') => self.object_trace::<S>(),
            Some(b) => Err(ReadError::at(ReadErrorKind::NotATrace { found: describe_start(b) }, self.pos)),
        }
    }

    /// `[ event, ... ]`
    fn array_trace<S: Shape>(&mut self) -> Result<Trace<S::Event>, ReadError> {
        let mut events = Vec::new();
        let (truncated, dropped_bytes) = match self.events::<S>(&mut events)? {
            End::Closed => {
                self.expect_end()?;
                (self.trailing_comma, 0)
            }
            End::Truncated { dropped } => (true, dropped),
        };
        Ok(Trace { format: TraceFormat::Array, events, metadata: Map::new(), truncated, dropped_bytes })
    }

    /// `{ "key": value, ... }` with a `traceEvents` list among the keys.
    // One pass over the top-level object, key by key, with the damage rules
    // of a cut-off file inline: splitting it would scatter that state.
    fn object_trace<S: Shape>(&mut self) -> Result<Trace<S::Event>, ReadError> {
        self.pos += 1;
        let mut metadata = Map::new();
        let mut events: Option<Vec<S::Event>> = None;
        let mut expect_key = true;
        let mut after_comma = false;
        let end = loop {
            self.skip_ws();
            let Some(b) = self.peek() else { break End::Truncated { dropped: 0 } };
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
            self.skip_ws();
            match self.peek() {
                None => break self.dropped_from(entry),
                Some(b':') => self.pos += 1,
                Some(_) => return Err(ReadError::syntax("expected ':' after a key", self.pos)),
            }
            self.skip_ws();
            let Some(first) = self.peek() else { break self.dropped_from(entry) };
            if key == "traceEvents" {
                if events.is_some() {
                    return Err(ReadError::at(ReadErrorKind::DuplicateTraceEvents, entry));
                }
                if first != b'[' {
                    let found = describe_start(first);
                    return Err(ReadError::at(ReadErrorKind::TraceEventsNotArray { found }, self.pos));
                }
                let mut list = Vec::new();
                let end = self.events::<S>(&mut list)?;
                events = Some(list);
                if let End::Truncated { .. } = end {
                    break end;
                }
            } else {
                match self.value::<Value>().map_err(syntax_error)? {
                    // A number or literal that runs into the end of the
                    // input may have been cut short.
                    Item::Value(_) if self.pos == self.bytes.len() && !matches!(first, b'{' | b'[' | b'"') => {
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
                if events.is_none() {
                    return Err(ReadError::at(ReadErrorKind::MissingTraceEvents, close));
                }
                (self.trailing_comma, 0)
            }
            End::Truncated { dropped } => (true, dropped),
        };
        Ok(Trace {
            format: TraceFormat::Object,
            events: events.unwrap_or_default(),
            metadata,
            truncated,
            dropped_bytes,
        })
    }

    /// The event list; `self.pos` is at its `[`.
    fn events<S: Shape>(&mut self, events: &mut Vec<S::Event>) -> Result<End, ReadError> {
        self.pos += 1;
        let mut expect_event = true;
        loop {
            self.skip_ws();
            let Some(b) = self.peek() else { return Ok(End::Truncated { dropped: 0 }) };
            if b == b']' {
                // A comma before it is tolerated, as the mark of a writer
                // that did not end cleanly.
                self.trailing_comma |= expect_event && !events.is_empty();
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
            let index = events.len();
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
                Ok(Item::Value(raw)) => events.push(raw.finish()),
                Ok(Item::Eof) => return Ok(self.dropped_from(start)),
                Err(JsonError { offset, message }) => {
                    return Err(ReadError::at(ReadErrorKind::InvalidEvent { index, message }, offset));
                }
            }
            expect_event = false;
        }
    }

    /// Decodes the JSON value at `self.pos` and moves past it.
    fn value<T: DeserializeOwned>(&mut self) -> Result<Item<T>, JsonError> {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        let mut stream = serde_json::Deserializer::from_slice(rest).into_iter::<T>();
        match stream.next() {
            Some(Ok(value)) => {
                self.pos += stream.byte_offset();
                Ok(Item::Value(value))
            }
            Some(Err(err)) if err.is_eof() => Ok(Item::Eof),
            Some(Err(err)) => {
                let offset = error_offset(rest, &err);
                if offset + 1 >= rest.len() && is_cut_number::<T>(rest) {
                    return Ok(Item::Eof);
                }
                Err(JsonError { offset: self.pos + offset, message: error_message(&err) })
            }
            None => Ok(Item::Eof),
        }
    }

    /// The end of a truncated input whose incomplete last item starts at
    /// `start`.
    fn dropped_from(&self, start: usize) -> End {
        End::Truncated { dropped: self.bytes.len().saturating_sub(start) }
    }

    /// Only whitespace may follow the end of the trace.
    fn expect_end(&mut self) -> Result<(), ReadError> {
        self.skip_ws();
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(ReadError::at(ReadErrorKind::TrailingCharacters, self.pos)),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
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

fn syntax_error(err: JsonError) -> ReadError {
    ReadError::syntax(err.message, err.offset)
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
    crate::read::display::label(message, MESSAGE_CHARS).into_owned()
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
