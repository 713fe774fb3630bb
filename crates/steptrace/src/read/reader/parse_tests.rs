//! Tests of the streaming parser.

use super::*;
use crate::read::reader::TrackId;

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
    let last = r#"{"displayTimeUnit":"ns","metadata":{"k":[1,2]},"otherData":{"v":"1"},"traceEvents":[{"name":"a"}]}"#;
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
}

#[test]
fn nul_bytes_are_named_as_such() {
    let err = parse_err(&[0; 16]);
    assert!(matches!(err.kind(), ReadErrorKind::NulBytes { count: 16, only: true }), "{err}");
    assert_eq!(
        err.to_string(),
        "invalid trace at byte 0: NUL bytes, not JSON: the file holds 16 NUL bytes and nothing else (what a crash \
         can leave of a file whose data never reached the disk)"
    );
    let err = parse_err(b" \n\0\0\0");
    assert!(matches!(err.kind(), ReadErrorKind::NulBytes { count: 3, only: true }), "{err}");
    assert_eq!(err.offset(), Some(2));
    let err = parse_err(b"\0\0[]");
    assert!(matches!(err.kind(), ReadErrorKind::NulBytes { count: 2, only: false }), "{err}");
    assert!(err.to_string().ends_with("NUL bytes, not JSON: the file starts with 2 NUL bytes"), "{err}");
    // NUL bytes inside the content stop it where they start.
    let err = parse_err(b"[{}\0\0{}]");
    assert_eq!(err.offset(), Some(3));
    assert!(err.to_string().contains("expected ',' or ']' after an event"), "{err}");
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
    // A bad sequence just before the closing quote, in a field the typed
    // reader skips and in one the JSON reader keeps.
    let err = parse_err(b"[{\"sf\":\"\xc3\",\"ts\":1}]");
    assert!(matches!(err.kind(), ReadErrorKind::InvalidUtf8), "{err}");
    assert_eq!(err.offset(), Some(8));
    let err = super::parse_as::<JsonEvent>(b"[{\"sf\":\"\xc3\",\"ts\":1}]").unwrap_err();
    assert!(matches!(err.kind(), ReadErrorKind::InvalidUtf8), "{err}");
    let err = parse_err(b"{\"other\":\"\xed\xa0\x80\",\"traceEvents\":[]}");
    assert!(matches!(err.kind(), ReadErrorKind::InvalidUtf8));
    assert_eq!(err.offset(), Some(10));
}

#[test]
fn quoted_input_in_messages_is_escaped_and_cut() {
    let huge = format!("[{{\"ph\":\"X\",\"ts\":\"\\u001b{}\"}}]", "9".repeat(1 << 20));
    let text = parse_err(huge.as_bytes()).to_string();
    assert!(
        text.len() < 400 && !text.contains('\u{1b}') && text.contains(" bytes)"),
        "{}",
        &text[..text.len().min(400)]
    );
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
