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
use super::{Trace, TraceFormat};

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

pub(super) fn parse(input: &[u8]) -> Result<Trace, ReadError> {
    // A crash can leave a zero-filled tail: set it aside as dropped bytes.
    let end = input.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    let nul_tail = input.len() - end;
    let mut parser = Parser { bytes: input.get(..end).unwrap_or_default(), pos: 0, trailing_comma: false };
    match parser.trace() {
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
    let region = input.get(..offset + string_end).unwrap_or(input);
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
    fn trace(&mut self) -> Result<Trace, ReadError> {
        if self.bytes.starts_with(BOM) {
            self.pos = BOM.len();
        }
        self.skip_ws();
        match self.peek() {
            None => Err(ReadError::at(ReadErrorKind::Empty, 0)),
            Some(b'[') => self.array_trace(),
            Some(b'{') => self.object_trace(),
            Some(b) => Err(ReadError::at(ReadErrorKind::NotATrace { found: describe_start(b) }, self.pos)),
        }
    }

    /// `[ event, ... ]`
    fn array_trace(&mut self) -> Result<Trace, ReadError> {
        let mut events = Vec::new();
        let (truncated, dropped_bytes) = match self.events(&mut events)? {
            End::Closed => {
                self.expect_end()?;
                (self.trailing_comma, 0)
            }
            End::Truncated { dropped } => (true, dropped),
        };
        Ok(Trace { format: TraceFormat::Array, events, metadata: Map::new(), truncated, dropped_bytes })
    }

    /// `{ "key": value, ... }` with a `traceEvents` list among the keys.
    fn object_trace(&mut self) -> Result<Trace, ReadError> {
        self.pos += 1;
        let mut metadata = Map::new();
        let mut events: Option<Vec<TraceEvent>> = None;
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
                let end = self.events(&mut list)?;
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
    fn events(&mut self, events: &mut Vec<TraceEvent>) -> Result<End, ReadError> {
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
            match self.value::<RawEvent>() {
                Ok(Item::Value(raw)) => events.push(raw.into_event()),
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

/// A `serde_json` error's message without its (slice-relative) position.
fn error_message(err: &serde_json::Error) -> String {
    let text = err.to_string();
    let position = format!(" at line {} column {}", err.line(), err.column());
    match text.strip_suffix(&position) {
        Some(message) => message.to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::TrackId;

    fn parse_ok(text: &str) -> Trace {
        match parse(text.as_bytes()) {
            Ok(trace) => trace,
            Err(err) => panic!("{text:?} should parse: {err}"),
        }
    }

    fn parse_err(bytes: &[u8]) -> ReadError {
        match parse(bytes) {
            Ok(trace) => panic!("{:?} should not parse: {trace:?}", String::from_utf8_lossy(bytes)),
            Err(err) => err,
        }
    }

    fn names(trace: &Trace) -> Vec<&str> {
        trace.events.iter().map(|ev| ev.name.as_str()).collect()
    }

    #[test]
    fn array_format() {
        let trace = parse_ok("[\n{\"ph\":\"B\",\"name\":\"a\",\"ts\":1},\n{\"ph\":\"E\",\"name\":\"a\",\"ts\":2}\n]\n");
        assert_eq!(trace.format, TraceFormat::Array);
        assert_eq!(names(&trace), ["a", "a"]);
        assert_eq!(trace.events[1].ph, "E");
        assert!(trace.metadata.is_empty());
        assert!(!trace.truncated);
        assert_eq!(trace.dropped_bytes, 0);
    }

    #[test]
    fn object_format_with_keys_in_any_order() {
        let first = r#"{"traceEvents":[{"name":"a"}],"displayTimeUnit":"ms","metadata":{"k":[1,2]}}"#;
        let last =
            r#"{"displayTimeUnit":"ns","metadata":{"k":[1,2]},"otherData":{"v":"1"},"traceEvents":[{"name":"a"}]}"#;
        for text in [first, last] {
            let trace = parse_ok(text);
            assert_eq!(trace.format, TraceFormat::Object);
            assert_eq!(names(&trace), ["a"]);
            assert_eq!(trace.metadata["metadata"], serde_json::json!({"k": [1, 2]}));
            assert!(!trace.metadata.contains_key("traceEvents"));
            assert!(!trace.truncated);
        }
        let trace = parse_ok(last);
        assert_eq!(trace.metadata["displayTimeUnit"], "ns");
        assert_eq!(trace.metadata["otherData"]["v"], "1");
        assert_eq!(trace.metadata.len(), 3);
    }

    #[test]
    fn empty_event_lists_are_valid() {
        for text in ["[]", " [ ] ", r#"{"traceEvents":[]}"#, "{ \"traceEvents\" : [ ] }\n"] {
            let trace = parse_ok(text);
            assert!(trace.events.is_empty(), "{text}");
            assert!(!trace.truncated, "{text}");
        }
    }

    #[test]
    fn byte_order_mark_and_surrounding_whitespace_are_skipped() {
        let trace = parse_ok("\u{feff}\r\n\t[{\"name\":\"a\"}]  \n");
        assert_eq!(names(&trace), ["a"]);
    }

    #[test]
    fn trailing_commas_are_tolerated_and_flagged() {
        let trace = parse_ok(r#"[{"name":"a"},{"name":"b"},]"#);
        assert_eq!(names(&trace), ["a", "b"]);
        assert!(trace.truncated);
        assert_eq!(trace.dropped_bytes, 0);
        for text in [r#"{"traceEvents":[{"name":"a"},]}"#, r#"{"traceEvents":[{"name":"a"}],"metadata":{},}"#] {
            let trace = parse_ok(text);
            assert_eq!(names(&trace), ["a"], "{text}");
            assert!(trace.truncated, "{text}");
        }
        let trace = parse_ok(r#"{"traceEvents":[{"name":"a"}],"metadata":{}}"#);
        assert!(!trace.truncated);
        let trace = parse_ok(r#"[{"name":"a"},"#);
        assert_eq!(names(&trace), ["a"]);
        assert!(trace.truncated);
        assert_eq!(trace.dropped_bytes, 0);
    }

    #[test]
    fn missing_closing_brackets_mean_truncated() {
        let cases: &[(&str, &[&str])] = &[
            ("[", &[]),
            ("[\n", &[]),
            (r#"[{"name":"a"}"#, &["a"]),
            ("[{\"name\":\"a\"},\n", &["a"]),
            (r#"{"traceEvents":[{"name":"a"}"#, &["a"]),
            (r#"{"traceEvents":[{"name":"a"}]"#, &["a"]),
            (r#"{"traceEvents":[{"name":"a"}],"#, &["a"]),
        ];
        for &(text, expected) in cases {
            let trace = parse_ok(text);
            assert_eq!(names(&trace), expected, "{text}");
            assert!(trace.truncated, "{text}");
            assert_eq!(trace.dropped_bytes, 0, "{text}");
        }
    }

    #[test]
    fn a_cut_off_last_event_is_dropped_and_counted() {
        let full = r#"[{"ph":"B","name":"a","ts":1},{"ph":"E","name":"a","ts":2.5,"args":{"x":"y\u00e9"}}]"#;
        let second = full.find(",{").unwrap() + 1;
        for cut in second + 1..full.len() - 1 {
            let text = &full[..cut];
            let trace = parse_ok(text);
            assert_eq!(names(&trace), ["a"], "{text}");
            assert!(trace.truncated, "{text}");
            assert_eq!(trace.dropped_bytes, cut - second, "{text}");
        }
    }

    #[test]
    fn a_cut_inside_a_multibyte_character_is_truncation() {
        let full = "[{\"name\":\"a\"},{\"name\":\"\u{1F600}\"}]";
        let bytes = full.as_bytes();
        let emoji = full.find('\u{1F600}').unwrap();
        let trace = parse(&bytes[..emoji + 2]).unwrap();
        assert_eq!(names(&trace), ["a"]);
        assert!(trace.truncated);
        assert_eq!(trace.dropped_bytes, emoji + 2 - full.find(",{").unwrap() - 1);
    }

    #[test]
    fn truncated_object_entries() {
        // Cut inside a metadata entry after the events.
        let trace = parse_ok(r#"{"traceEvents":[{"name":"a"}],"metadata":{"k":"#);
        assert_eq!(names(&trace), ["a"]);
        assert!(trace.truncated);
        assert_eq!(trace.dropped_bytes, r#""metadata":{"k":"#.len());
        assert!(trace.metadata.is_empty());
        // Cut inside a number, which could have gone on.
        let trace = parse_ok(r#"{"schemaVersion":1,"traceEvents":[],"n":12"#);
        assert_eq!(trace.metadata.get("n"), None);
        assert_eq!(trace.metadata["schemaVersion"], 1);
        assert_eq!(trace.dropped_bytes, 6);
        // Cut before the events were reached.
        for text in ["{", r#"{"meta"#, r#"{"metadata":"#, r#"{"metadata":{"a":1}}"#.trim_end_matches('}')] {
            let trace = parse_ok(text);
            assert!(trace.events.is_empty(), "{text}");
            assert!(trace.truncated, "{text}");
        }
        let trace = parse_ok(r#"{"traceEv"#);
        assert_eq!(trace.dropped_bytes, 8);
    }

    #[test]
    fn nul_padding_after_a_crash_is_dropped() {
        let mut bytes = br#"[{"name":"a"},{"na"#.to_vec();
        bytes.extend_from_slice(&[0; 100]);
        let trace = parse(&bytes).unwrap();
        assert_eq!(names(&trace), ["a"]);
        assert!(trace.truncated);
        assert_eq!(trace.dropped_bytes, 4 + 100);
        let err = parse_err(&[0; 16]);
        assert!(matches!(err.kind(), ReadErrorKind::Empty));
    }

    #[test]
    fn kineto_style_events() {
        let text = r#"{
          "schemaVersion": 1,
          "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}],
          "traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "void gemm<float>(int)", "pid": 0, "tid": "stream 7",
             "ts": "1712345678901.250", "dur": 12.5, "args": {"correlation": 42, "stream": 7}},
            {"ph": "f", "id": 42, "pid": 0, "tid": "stream 7", "ts": 1712345678901, "cat": "ac2g", "name": "ac2g", "bp": "e"},
            {"name": "process_name", "ph": "M", "pid": "Spans", "tid": 0, "args": {"name": "Spans"}}
          ],
          "traceName": "trace.json"
        }"#;
        let trace = parse_ok(text);
        assert_eq!(trace.events.len(), 3);
        assert_eq!(trace.events[0].ts, Some(1_712_345_678_901.25));
        assert_eq!(trace.events[0].tid, Some(TrackId::Str("stream 7".into())));
        assert_eq!(trace.events[1].id, Some(TrackId::Num(42)));
        assert_eq!(trace.events[2].pid, Some(TrackId::Str("Spans".into())));
        assert_eq!(trace.metadata["schemaVersion"], 1);
        assert_eq!(trace.metadata["traceName"], "trace.json");
        assert_eq!(trace.metadata["deviceProperties"][0]["name"], "NVIDIA H200");
    }

    #[test]
    fn errors_with_their_offsets() {
        let cases: &[(&[u8], usize, &str)] = &[
            (b"", 0, "empty file"),
            (b"  \n\t ", 0, "empty file"),
            (b"<html><body>", 0, "expected '{' or '[' at the start of a trace, found '<'"),
            (b"  5", 2, "found a number"),
            (b"\xff\xfe[", 0, "found byte 0xff"),
            (br#"{"traceEvents": 5}"#, 16, "\"traceEvents\" must be an array, found a number"),
            (br#"{"traceEvents": null}"#, 16, "must be an array, found null"),
            (br#"{"traceEvents": {}}"#, 16, "must be an array, found an object"),
            (br#"{"metadata": {}}"#, 15, "no \"traceEvents\" key"),
            (b"{}", 1, "no \"traceEvents\" key"),
            (br#"{"traceEvents":[],"traceEvents":[]}"#, 18, "duplicate \"traceEvents\" key"),
            (b"[1]", 1, "event 0 is not a JSON object (found a number)"),
            (br#"[{}, "x"]"#, 5, "event 1 is not a JSON object (found a string)"),
            (b"[{}, [{}]]", 5, "event 1 is not a JSON object (found an array)"),
            (b"[{}, null]", 5, "found null"),
            (b"[,]", 1, "expected an event or ']', found ','"),
            (b"[{},,{}]", 4, "expected an event or ']', found ','"),
            (b"[{} {}]", 4, "expected ',' or ']' after an event"),
            (b"[{}]x", 4, "unexpected characters after the end of the trace"),
            (br#"{"traceEvents":[]} {}"#, 19, "unexpected characters after the end of the trace"),
            (br#"{"traceEvents":[] "a":1}"#, 18, "expected ',' or '}' after a value"),
            (br#"{"traceEvents" []}"#, 15, "expected ':' after a key"),
            (br#"{traceEvents:[]}"#, 1, "expected a key or '}', found 't'"),
            (br#"{"a":tru,"traceEvents":[]}"#, 8, "expected ident"),
            (b"{\"a\":\"x\n\"}", 8, "control character"),
            (br#"[{"ph":5}]"#, 1, "event 0: invalid type: integer `5`, expected a string"),
            (br#"[{"ph":"B","ts":"soon"}]"#, 1, "event 0: invalid value: string \"soon\""),
            (br#"[{"ph":"B" "ts":1}]"#, 1, "event 0: expected `,` or `}`"),
            (br#"[{"ph":"B","ph":"E"}]"#, 1, "event 0: duplicate field `ph`"),
        ];
        for &(input, offset, message) in cases {
            let err = parse_err(input);
            let text = err.to_string();
            assert!(text.contains(message), "{:?}: {text}", String::from_utf8_lossy(input));
            match err.kind() {
                // `serde_json` reports positions inside an event: check the
                // offset lies within the event.
                ReadErrorKind::InvalidEvent { .. } => {
                    let at = err.offset().unwrap();
                    assert!(at >= offset && at < input.len(), "{text}");
                }
                _ => assert_eq!(err.offset(), Some(offset), "{text}"),
            }
            assert!(text.starts_with(&format!("invalid trace at byte {}: ", err.offset().unwrap())), "{text}");
        }
    }

    #[test]
    fn offsets_inside_events_point_at_the_problem() {
        let text = b"[\n{\"ph\":\"B\"},\n{\"ph\":\"B\" x}]";
        let err = parse_err(text);
        assert_eq!(err.offset(), Some(text.iter().position(|&b| b == b'x').unwrap()));
        assert!(matches!(err.kind(), ReadErrorKind::InvalidEvent { index: 1, .. }));
    }

    #[test]
    fn invalid_utf8_is_an_error_even_in_ignored_fields() {
        let err = parse_err(b"[{\"name\":\"a\xffb\"}]");
        assert!(matches!(err.kind(), ReadErrorKind::InvalidUtf8 | ReadErrorKind::InvalidEvent { .. }));
        assert_eq!(err.offset(), Some(11));
        let err = parse_err(b"[{\"unknown\":\"a\xc3\x28\"}]");
        assert!(matches!(err.kind(), ReadErrorKind::InvalidUtf8));
        assert_eq!(err.offset(), Some(14));
        let err = parse_err(b"{\"other\":\"\xed\xa0\x80\",\"traceEvents\":[]}");
        assert!(matches!(err.kind(), ReadErrorKind::InvalidUtf8));
        assert_eq!(err.offset(), Some(10));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = format!("[{{\"args\":{}{}}}]", "[".repeat(100_000), "]".repeat(100_000));
        let err = parse_err(deep.as_bytes());
        assert!(err.to_string().contains("recursion limit exceeded"), "{err}");
        let deep_meta = format!("{{\"m\":{}", "{\"a\":".repeat(100_000));
        let err = parse_err(deep_meta.as_bytes());
        assert!(err.to_string().contains("recursion limit exceeded"), "{err}");
        let err = parse_err("[".repeat(100_000).as_bytes());
        assert!(matches!(err.kind(), ReadErrorKind::EventNotObject { index: 0, .. }));
    }

    #[test]
    fn numbers_cut_short_in_skipped_fields_are_truncation() {
        for tail in ["-", "1.", "1e", "1.5E+", "-0.25e-"] {
            let text = format!(r#"[{{"name":"a"}},{{"name":"b","tts":{tail}"#);
            let trace = parse_ok(&text);
            assert_eq!(names(&trace), ["a"], "{text}");
            assert!(trace.truncated, "{text}");
            let text = format!(r#"[{{"name":"a","id2":{{"x":{tail}"#);
            assert!(parse_ok(&text).events.is_empty(), "{text}");
        }
        // A real error at the last byte stays an error.
        for text in [r#"[{"name":"a","tts":1x"#, r#"[{"name":"a","tts":01"#, r#"[{"name":"a"}x"#] {
            parse_err(text.as_bytes());
        }
    }

    #[test]
    fn error_message_strips_only_the_position() {
        let err = serde_json::from_str::<Value>("[1,").unwrap_err();
        assert_eq!(error_message(&err), "EOF while parsing a value");
        let err = serde_json::from_str::<Value>("\n\n  x").unwrap_err();
        assert_eq!(error_offset(b"\n\n  x", &err), 4);
    }
}
