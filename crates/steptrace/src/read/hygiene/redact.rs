//! Sanitised copies: every flagged stretch of a label replaced by a marker.
//!
//! The walk mirrors [`scan_trace`](super::scan_trace), so that a redacted
//! trace scans clean.

use crate::format::names::meta;
use serde_json::{Map, Value};

use super::check::{hits, Checks};
use super::finding::FindingKind;
use super::scan::{is_diagnostic, NUMERIC_ARRAY};
use super::token;

fn marker(kind: FindingKind) -> String {
    format!("[*** redacted {kind} ***]")
}

fn redact_with(text: &str, checks: Checks) -> Option<String> {
    let hits = hits(text, checks);
    if hits.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for hit in hits {
        if hit.end <= at {
            continue;
        }
        if hit.start >= at {
            out.push_str(&text[at..hit.start]);
            out.push_str(&marker(hit.kind));
        }
        at = hit.end;
    }
    out.push_str(&text[at..]);
    Some(out)
}

/// `text` with every flagged stretch replaced by `[*** redacted KIND ***]`;
/// `None` when nothing is flagged.
///
/// # Examples
///
/// ```
/// use steptrace::hygiene::{check_label, redact_label};
///
/// let clean = redact_label("read /home/alice/x.csv for alice@example.org").unwrap();
/// assert!(!clean.contains("alice"));
/// assert!(check_label(&clean).is_empty());
/// assert_eq!(redact_label("ProfilerStep#3"), None);
/// ```
#[must_use]
pub fn redact_label(text: &str) -> Option<String> {
    redact_with(text, Checks::ALL)
}

/// Redacts a whole trace file held as JSON (object or array layout) in
/// place, as [`scan_trace`](super::scan_trace) would flag it: event names,
/// categories, string ids, argument keys and values, thread and process
/// names, and the metadata. Returns how many strings were changed.
pub fn redact_trace_value(value: &mut Value) -> usize {
    let mut changed = 0;
    match value {
        Value::Array(events) => events.iter_mut().for_each(|e| changed += event(e)),
        Value::Object(top) => {
            for (key, item) in top.iter_mut() {
                if key == "traceEvents" {
                    if let Value::Array(events) = item {
                        events.iter_mut().for_each(|e| changed += event(e));
                    }
                } else {
                    changed += walk(item, Some(key), Place::Metadata);
                }
            }
            changed += keys(top);
        }
        _ => {}
    }
    changed
}

#[derive(Clone, Copy, PartialEq)]
enum Place {
    Event,
    Metadata,
}

fn string(s: &mut String, checks: Checks) -> usize {
    match redact_with(s, checks) {
        Some(clean) => {
            *s = clean;
            1
        }
        None => 0,
    }
}

fn event(value: &mut Value) -> usize {
    let Value::Object(map) = value else { return 0 };
    let mut changed = 0;
    let ph = map.get("ph").and_then(Value::as_str).unwrap_or_default().to_owned();
    let name = map.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
    for field in ["name", "cat", "pid", "tid", "id"] {
        if let Some(Value::String(s)) = map.get_mut(field) {
            changed += string(s, Checks::ALL);
        }
    }
    let Some(args) = map.get_mut("args") else { return changed };
    let Value::Object(args) = args else { return changed + walk(args, None, Place::Event) };
    for (key, item) in args.iter_mut() {
        let is_name = ph == "M" && (name == meta::THREAD_NAME || name == meta::PROCESS_NAME) && key == "name";
        if let (true, Value::String(s)) = (is_name, &mut *item) {
            changed += string(s, Checks::ALL);
            continue;
        }
        changed += walk(item, Some(key), Place::Event);
    }
    changed + keys(args)
}

/// Renames flagged keys (keeping them distinct).
fn keys(map: &mut Map<String, Value>) -> usize {
    let flagged: Vec<String> = map.keys().filter(|k| !hits(k, Checks::ALL).is_empty()).cloned().collect();
    for (i, key) in flagged.iter().enumerate() {
        if let Some(item) = map.remove(key) {
            let clean = redact_label(key).unwrap_or_default();
            map.insert(format!("{clean}#{i}"), item);
        }
    }
    flagged.len()
}

fn walk(value: &mut Value, key: Option<&str>, place: Place) -> usize {
    let checks = match (place, key) {
        (Place::Metadata, Some(k)) if is_diagnostic(k) => Checks::DIAGNOSTIC,
        _ => Checks::ALL,
    };
    match value {
        Value::String(s) => {
            if key.is_some_and(|k| token::secret_assignment(k, s) == Some(true)) {
                *s = marker(FindingKind::Token);
                return 1;
            }
            string(s, checks)
        }
        Value::Array(items) => {
            if place == Place::Event && items.len() >= NUMERIC_ARRAY && items.iter().all(Value::is_number) {
                *value = Value::String(format!("{} ({} numbers)", marker(FindingKind::InputContent), items.len()));
                return 1;
            }
            items.iter_mut().map(|item| walk(item, key, place)).sum()
        }
        Value::Object(map) => {
            let mut changed = 0;
            for (k, item) in map.iter_mut() {
                changed += walk(item, Some(k), place);
            }
            changed + keys(map)
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
    }
}
