//! Edits of single event lines: clipping, re-tagging, counters.

use std::sync::LazyLock;

use memchr::memmem::Finder;
use serde_json::{json, Map, Value};

use crate::format::names::meta;
use crate::format::tag::SEPARATOR_ESCAPED;

/// Moves an event to `ts` and marks it clipped.
pub(super) fn clip(text: &[u8], ts: f64, edge: &str, thread: u64) -> Vec<u8> {
    let Ok(Value::Object(mut event)) = serde_json::from_slice::<Value>(text) else {
        return text.to_vec();
    };
    untag(&mut event, thread);
    event.insert("ts".into(), json!(ts));
    let args = event.entry("args").or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(args) = args {
        args.insert(meta::CLIPPED_ARG.into(), json!(edge));
    }
    Value::Object(event).to_string().into_bytes()
}

/// Writes into `out` a raw tracing-chrome line with steptrace's thread id
/// as its `tid` and the thread tag removed from its `cat` (`out` is reused
/// from line to line: no allocation per line).
///
/// Fast path: byte edits when each pattern occurs exactly once. Otherwise
/// (for example a span field also named `tid`), the event is re-serialised.
pub(super) fn retag(out: &mut Vec<u8>, text: &[u8], tid: Option<u64>, thread: u64) {
    out.clear();
    if retag_bytes(out, text, &[], tid, thread) {
        return;
    }
    out.clear();
    match serde_json::from_slice::<Value>(text) {
        Ok(Value::Object(mut event)) => {
            untag(&mut event, thread);
            write_value(out, &Value::Object(event), text);
        }
        _ => out.extend_from_slice(text),
    }
}

/// The byte-edit fast path of [`retag`], with extra edits (`(at, len,
/// replacement)`, not overlapping the tag or the `tid`), into `out`: false
/// (and `out` unusable) unless the tag and the `tid` each occur exactly once.
fn retag_bytes(out: &mut Vec<u8>, text: &[u8], extra: &[(usize, usize, &[u8])], tid: Option<u64>, thread: u64) -> bool {
    static SEPARATOR: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(SEPARATOR_ESCAPED.as_bytes()));
    static TID: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"tid\":"));
    let Some(tag) = only(text, &SEPARATOR, |_| true) else { return false };
    let Some(tid) = tid else { return false };
    let mut tid_pattern = [0u8; 32];
    let p = pattern(&mut tid_pattern, tid);
    let is_tid = |i: usize| text[i..].starts_with(p) && matches!(text.get(i + p.len()), Some(b',' | b'}'));
    let Some(at) = only(text, &TID, is_tid) else { return false };
    let tag_end = crate::format::tag::escaped_tag_end(text, tag);
    let mut new_tid = [0u8; 32];
    let new_tid = pattern(&mut new_tid, thread);
    let mut edits: [(usize, usize, &[u8]); 3] =
        [(tag, tag_end, b""), (at, at + p.len(), new_tid), (usize::MAX, usize::MAX, b"")];
    let n = match extra {
        [] => 2,
        [(from, len, with)] => {
            edits[2] = (*from, from + len, with);
            3
        }
        _ => return false,
    };
    let edits = &mut edits[..n];
    edits.sort_by_key(|e| e.0);
    if edits.windows(2).any(|w| w[0].1 > w[1].0) {
        return false;
    }
    out.reserve(text.len() + 32);
    let mut cursor = 0;
    for &(from, to, with) in edits.iter() {
        out.extend_from_slice(&text[cursor..from]);
        out.extend_from_slice(with);
        cursor = to;
    }
    out.extend_from_slice(&text[cursor..]);
    true
}

/// `"tid":N` in `buf`.
fn pattern(buf: &mut [u8; 32], n: u64) -> &[u8] {
    const TID: &[u8] = b"\"tid\":";
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(n).as_bytes();
    let len = TID.len() + digits.len();
    buf[..TID.len()].copy_from_slice(TID);
    buf[TID.len()..len].copy_from_slice(digits);
    &buf[..len]
}

/// The one position of `needle` in `text` that passes `keep`, or `None`
/// when there is none or more than one (the finders are built once: building
/// one costs more than searching a line).
fn only(text: &[u8], needle: &Finder<'_>, keep: impl Fn(usize) -> bool) -> Option<usize> {
    let mut found = needle.find_iter(text).filter(|&i| keep(i));
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// Writes into `out` a begin line as a complete event of `dur` µs,
/// re-tagged.
pub(super) fn complete(out: &mut Vec<u8>, text: &[u8], tid: Option<u64>, thread: u64, dur: f64) {
    const BEGIN: &[u8] = br#""ph":"B""#;
    static FIND_BEGIN: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(BEGIN));
    out.clear();
    if let Some(at) = only(text, &FIND_BEGIN, |_| true) {
        // `dur` as serde_json writes a number (`null` when not finite), without allocating.
        let mut with = [0u8; 64];
        let len = {
            let mut cursor = std::io::Cursor::new(&mut with[..]);
            let written = std::io::Write::write_all(&mut cursor, br#""ph":"X","dur":"#).is_ok()
                && serde_json::to_writer(&mut cursor, &dur).is_ok();
            written.then(|| cursor.position() as usize)
        };
        if let Some(len) = len {
            if retag_bytes(out, text, &[(at, BEGIN.len(), &with[..len])], tid, thread) {
                return;
            }
        }
    }
    out.clear();
    match serde_json::from_slice::<Value>(text) {
        Ok(Value::Object(mut event)) => {
            untag(&mut event, thread);
            event.insert("ph".into(), json!("X"));
            event.insert("dur".into(), json!(dur));
            write_value(out, &Value::Object(event), text);
        }
        _ => out.extend_from_slice(text),
    }
}

/// `value` as JSON into `out`, or `fallback` as it was if that fails.
fn write_value(out: &mut Vec<u8>, value: &Value, fallback: &[u8]) {
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.clear();
        out.extend_from_slice(fallback);
    }
}

/// Sets `tid` to steptrace's thread id and removes the tag from `cat`.
fn untag(event: &mut Map<String, Value>, thread: u64) {
    event.insert("tid".into(), json!(thread));
    if let Some(Value::String(cat)) = event.get("cat") {
        if let Some((target, _)) = crate::format::tag::split(cat) {
            let target = target.to_owned();
            event.insert("cat".into(), json!(target));
        }
    }
}

/// An instant event of [`COUNTER_TARGET`](crate::format::names::COUNTER_TARGET) as a counter event.
pub(super) fn counter(name: Option<&str>, args: Option<Value>, ts: f64, thread: u64) -> Vec<u8> {
    let mut series = Map::new();
    if let Some(Value::Object(args)) = args {
        for (key, value) in args.into_iter().filter(|(k, _)| k.as_str() != "message") {
            let number = match value {
                Value::Number(n) => n.as_f64(),
                Value::String(s) => s.parse::<f64>().ok(),
                _ => None,
            };
            if let Some(n) = number {
                series.insert(key, json!(n));
            }
        }
    }
    json!({
        "ph": "C", "pid": 1, "tid": thread, "ts": ts,
        "name": name.unwrap_or("counter"),
        "args": series,
    })
    .to_string()
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(tid: u64, args: &str) -> Vec<u8> {
        let cat = serde_json::to_string(&crate::format::tag::encode("steptrace", 7)).unwrap();
        format!(r#"{{"args":{args},"cat":{cat},"name":"forward","ph":"B","pid":1,"tid":{tid},"ts":10.5}}"#).into_bytes()
    }

    fn edited(text: &[u8], tid: u64, dur: f64) -> Value {
        let mut out = Vec::new();
        complete(&mut out, text, Some(tid), 7, dur);
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn a_begin_becomes_a_complete_event_on_steptraces_thread() {
        let v = edited(&line(12, "{}"), 12, 3.25);
        assert_eq!((v["ph"].as_str(), v["dur"].as_f64(), v["tid"].as_u64()), (Some("X"), Some(3.25), Some(7)));
        assert_eq!(v["cat"], "steptrace");
        // A field that looks like the tid, inside the args: the line is re-serialised instead.
        let v = edited(&line(12, r#"{"x":"\"tid\":12,"}"#), 12, 1.0);
        assert_eq!(
            (v["ph"].as_str(), v["tid"].as_u64(), v["args"]["x"].as_str()),
            (Some("X"), Some(7), Some("\"tid\":12,"))
        );
        // A duration that is not a number is written as JSON writes one: null.
        assert!(edited(&line(1, "{}"), 1, f64::NAN)["dur"].is_null());
        // A tid that only starts like the one asked for is not it.
        let v = edited(&line(123, "{}"), 12, 2.0);
        assert_eq!((v["ph"].as_str(), v["tid"].as_u64()), (Some("X"), Some(7)));
    }
}
