//! Property tests of the reader: truncated and arbitrary input.

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::{parse_trace, validate};

fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-zA-Z_.:#0-9]{0,12}", any::<String>(), Just("é\u{1F600}\"\\\n\t\u{0}".to_owned()),]
}

fn id() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        text().prop_map(Value::from),
        Just(Value::Null),
    ]
}

fn time() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u32>().prop_map(Value::from),
        (-1e12f64..1e12).prop_map(Value::from),
        (0.0f64..1e9).prop_map(|t| Value::from(t.to_string())),
    ]
}

fn arg_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(text(), inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn event() -> impl Strategy<Value = Value> {
    let ph = prop::sample::select(vec!["B", "E", "X", "i", "I", "C", "M", "b", "e", "n", "s", "t", "f", "P", "?"]);
    (
        ph,
        text(),
        prop::option::of(text()),
        id(),
        id(),
        time(),
        prop::option::of(time()),
        id(),
        prop::option::of(arg_value()),
        prop::option::of(-1e6f64..1e6),
    )
        .prop_map(|(ph, name, cat, pid, tid, ts, dur, id, args, extra)| {
            let mut ev = Map::new();
            ev.insert("ph".into(), ph.into());
            ev.insert("name".into(), name.into());
            if let Some(cat) = cat {
                ev.insert("cat".into(), cat.into());
            }
            ev.insert("pid".into(), pid);
            ev.insert("tid".into(), tid);
            ev.insert("ts".into(), ts);
            if let Some(dur) = dur {
                ev.insert("dur".into(), dur);
            }
            ev.insert("id".into(), id);
            if let Some(args) = args {
                ev.insert("args".into(), args);
            }
            if let Some(tts) = extra {
                ev.insert("tts".into(), json!(tts));
                ev.insert("sf".into(), json!(-tts));
                ev.insert("stack".into(), json!([1, {"a": "b"}]));
            }
            Value::Object(ev)
        })
}

/// A valid trace file: its bytes and the number of events it holds.
fn trace_file() -> impl Strategy<Value = (Vec<u8>, usize)> {
    (
        prop::collection::vec(event(), 0..8),
        any::<bool>(),
        any::<bool>(),
        prop::collection::btree_map("[a-z]{1,8}", arg_value(), 0..3),
        any::<bool>(),
    )
        .prop_map(|(events, object, pretty, meta, events_last)| {
            let count = events.len();
            let events = Value::from(events);
            let doc = if object {
                let mut parts: Vec<String> =
                    meta.iter().map(|(key, value)| format!("{}:{}", json!(key), value)).collect();
                let list = format!("\"traceEvents\":{}", render(&events, pretty));
                if events_last {
                    parts.push(list);
                } else {
                    parts.insert(0, list);
                }
                format!("{{{}}}\n", parts.join(",\n"))
            } else {
                format!("{}\n", render(&events, pretty))
            };
            (doc.into_bytes(), count)
        })
}

fn render(value: &Value, pretty: bool) -> String {
    if pretty {
        serde_json::to_string_pretty(value).unwrap()
    } else {
        value.to_string()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn every_prefix_of_a_valid_trace_parses_to_a_prefix_of_its_events((bytes, count) in trace_file()) {
        let full = parse_trace(&bytes).unwrap();
        prop_assert!(!full.truncated);
        prop_assert_eq!(full.events.len(), count);
        let _ = validate(&full);
        let complete = bytes.trim_ascii_end().len();
        let mut seen = 0;
        for cut in 0..bytes.len() {
            let prefix = &bytes[..cut];
            match parse_trace(prefix) {
                Ok(trace) => {
                    prop_assert_eq!(trace.format, full.format);
                    prop_assert!(trace.events.len() <= full.events.len());
                    prop_assert_eq!(&trace.events[..], &full.events[..trace.events.len()]);
                    // Events only ever appear as the prefix grows.
                    prop_assert!(trace.events.len() >= seen);
                    seen = trace.events.len();
                    prop_assert_eq!(trace.truncated, cut < complete, "cut at {}", cut);
                    prop_assert!(trace.dropped_bytes <= cut);
                    let _ = validate(&trace);
                }
                Err(err) => {
                    // Only a prefix holding no value at all may fail.
                    prop_assert!(prefix.trim_ascii().is_empty(), "cut at {}: {}", cut, err);
                    prop_assert!(err.offset().is_some());
                }
            }
        }
        prop_assert_eq!(seen, count);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(trace) = parse_trace(&bytes) {
            let _ = validate(&trace);
        }
    }

    #[test]
    fn arbitrary_json_like_text_never_panics(text in r#"[\[\]{}",:0-9a-z \\.eE+\-]{0,200}"#) {
        match parse_trace(text.as_bytes()) {
            Ok(trace) => { let _ = validate(&trace); }
            Err(err) => prop_assert!(err.offset().is_some_and(|o| o <= text.len())),
        }
    }

    #[test]
    fn corrupted_traces_never_panic(
        (bytes, _) in trace_file(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut bytes = bytes;
        for (at, byte) in edits {
            let at = at.index(bytes.len());
            bytes[at] = byte;
        }
        match parse_trace(&bytes) {
            Ok(trace) => { let _ = validate(&trace); }
            Err(err) => prop_assert!(err.offset().is_some_and(|o| o <= bytes.len())),
        }
    }
}

// === reading through a window ===

/// What reading `bytes` through a window of `chunk` bytes gives, errors as
/// their text.
fn read_chunked(bytes: &[u8], chunk: usize) -> Result<super::Trace, String> {
    let mut events = Vec::new();
    let parsed = super::read_as::<super::RawEvent>(bytes, bytes.len() as u64, chunk, &mut |e| events.push(e));
    parsed.map(|p| super::Trace { events, ..p.trace }).map_err(|err| err.to_string())
}

/// `bytes` as a gzip file of `members` members.
fn gzipped(bytes: &[u8], members: usize) -> Vec<u8> {
    use std::io::Write;
    let mut out = Vec::new();
    let step = bytes.len().div_ceil(members.max(1)).max(1);
    for part in bytes.chunks(step) {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(part).unwrap();
        out.extend(enc.finish().unwrap());
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn any_window_reads_what_the_whole_input_reads(
        (bytes, _) in trace_file(),
        cut in any::<prop::sample::Index>(),
        nuls in prop_oneof![Just(0usize), 1usize..40],
        edits in prop::collection::vec((any::<prop::sample::Index>(), prop_oneof![Just(0u8), any::<u8>()]), 0..3),
        chunk in 1usize..9,
    ) {
        let mut bytes = bytes;
        for (at, byte) in edits {
            let at = at.index(bytes.len());
            bytes[at] = byte;
        }
        bytes.truncate(cut.index(bytes.len() + 1));
        bytes.extend(std::iter::repeat_n(0, nuls));
        let whole = read_chunked(&bytes, super::window::CHUNK);
        prop_assert_eq!(&read_chunked(&bytes, chunk), &whole, "chunk {}", chunk);
        // The same bytes gzip-compressed, in one member or several, read the same.
        for members in [1, 3].into_iter().filter(|_| !bytes.is_empty()) {
            let gz = gzipped(&bytes, members);
            match (read_chunked(&gz, chunk), &whole) {
                (Ok(trace), Ok(plain)) => prop_assert_eq!(&trace, plain),
                (Err(err), Err(plain)) => prop_assert_eq!(err, decompressed(plain)),
                (gz, plain) => prop_assert!(false, "gzip {:?} but plain {:?}", gz.map(|t| t.events.len()), plain.as_ref().map(|t| t.events.len())),
            }
        }
    }
}

/// An error's text as it reads for gzip input: its offset counts
/// decompressed bytes.
fn decompressed(text: &str) -> String {
    match text.split_once(": ") {
        Some((head, rest)) if head.starts_with("invalid trace at byte ") => {
            format!("{head} of the decompressed data: {rest}")
        }
        _ => text.to_owned(),
    }
}

// === mutations of real traces ===

/// A cycle steptrace wrote on an H200, and a torch.profiler trace.
const REAL: [&[u8]; 2] = [
    include_bytes!("../../../../../tests/fixtures/steptrace-v1-cuda-mlp-h200.trace.json"),
    include_bytes!("../../../../../tests/fixtures/torch-kineto-mlp-h200.json"),
];

/// One change to a file's bytes.
#[derive(Clone, Debug)]
enum Mutation {
    /// Sets the byte at a position.
    Flip(prop::sample::Index, u8),
    /// Cuts the file at a position.
    Truncate(prop::sample::Index),
    /// Copies a stretch of the file to another position.
    Splice(prop::sample::Index, prop::sample::Index, prop::sample::Index),
    /// Removes a stretch.
    Delete(prop::sample::Index, prop::sample::Index),
    /// Writes a token where something else was.
    Token(prop::sample::Index, &'static str),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let token = prop::sample::select(vec![
        "NaN",
        "-1e308",
        "1e999",
        "\"\\u001b[2J\"",
        "\"\\ud800\"",
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "null",
        "-0",
        "\u{0}",
        "\"ph\":\"E\"",
        "\"dur\":-5",
        "\"steptrace-chrome-trace/2\"",
        "\"alice@example.com\"",
        "\u{1f}",
    ]);
    prop_oneof![
        (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(at, b)| Mutation::Flip(at, b)),
        any::<prop::sample::Index>().prop_map(Mutation::Truncate),
        (any::<prop::sample::Index>(), any::<prop::sample::Index>(), any::<prop::sample::Index>())
            .prop_map(|(a, b, c)| Mutation::Splice(a, b, c)),
        (any::<prop::sample::Index>(), any::<prop::sample::Index>()).prop_map(|(a, b)| Mutation::Delete(a, b)),
        (any::<prop::sample::Index>(), token).prop_map(|(at, t)| Mutation::Token(at, t)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    if bytes.is_empty() {
        return;
    }
    let ordered = |a: &prop::sample::Index, b: &prop::sample::Index, len: usize| {
        let (a, b) = (a.index(len), b.index(len));
        (a.min(b), a.max(b).min(a.min(b) + 4096))
    };
    match m {
        Mutation::Flip(at, b) => {
            let at = at.index(bytes.len());
            bytes[at] = *b;
        }
        Mutation::Truncate(at) => bytes.truncate(at.index(bytes.len())),
        Mutation::Splice(a, b, to) => {
            let (from, until) = ordered(a, b, bytes.len());
            let piece = bytes[from..until].to_vec();
            let to = to.index(bytes.len());
            bytes.splice(to..to, piece);
        }
        Mutation::Delete(a, b) => {
            let (from, until) = ordered(a, b, bytes.len());
            bytes.drain(from..until);
        }
        Mutation::Token(at, token) => {
            let at = at.index(bytes.len());
            let end = (at + token.len()).min(bytes.len());
            bytes.splice(at..end, token.bytes());
        }
    }
}

/// Whatever the reader says of `bytes`: a trace, every part of which the
/// read side gets through, or an error that says where.
fn read_side_survives(bytes: &[u8]) -> Result<(), TestCaseError> {
    use crate::read::analysis::{Inventory, Report, ReportOptions};
    use crate::read::hygiene::{redact_trace, scan_trace};
    use crate::read::reader::{parse_json_trace, ReadErrorKind};

    let located = |err: &super::ReadError| {
        matches!(err.kind(), ReadErrorKind::Version(_) | ReadErrorKind::Gzip(_))
            || err.offset().is_some_and(|o| o <= bytes.len())
    };
    match parse_trace(bytes) {
        Ok(trace) => {
            let _ = validate(&trace);
            let _ = Report::build(&[("mutated.json".to_owned(), trace)], &ReportOptions::default());
        }
        Err(err) => prop_assert!(located(&err), "{}", err),
    }
    match parse_json_trace(bytes) {
        Ok(trace) => {
            let _ = Inventory::of(&trace);
            let (clean, _) = redact_trace(&trace);
            let left = scan_trace(&clean);
            prop_assert!(left.is_empty(), "left after redaction: {:?}", left);
        }
        Err(err) => prop_assert!(located(&err), "{}", err),
    }
    Ok(())
}

proptest! {
    // Bounded: each case reads, reports, inventories and redacts a real
    // trace; the cases run in seconds.
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn mutated_real_traces_read_or_fail_where_they_break(
        which in 0..REAL.len(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let mut bytes = REAL[which].to_vec();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        read_side_survives(&bytes)?;
        let whole = read_chunked(&bytes, super::window::CHUNK);
        for chunk in [7, 4093] {
            prop_assert_eq!(&read_chunked(&bytes, chunk), &whole, "chunk {}", chunk);
        }
    }
}

#[test]
fn the_real_traces_read_whole_and_clean_after_redaction() {
    for bytes in REAL {
        read_side_survives(bytes).unwrap();
        assert!(parse_trace(bytes).is_ok());
    }
}
