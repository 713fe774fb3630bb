//! Sanitised copies: every flagged stretch of a label replaced by a marker.
//!
//! The redaction follows the scan's own walk ([`walk`](super::walk)), so
//! that it replaces what the scan flags; a caller checks the copy with the
//! scan again before sharing it (as [`redact_file`] does). [`Redaction`]
//! does it one event at a time, so that a copy can be written without a
//! second trace in memory.
//!
//! [`redact_file`]: crate::read::analysis::redact_file

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::check::{hits, Checks};
use super::finding::FindingKind;
use super::walk::{self, Site, Visit};

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
/// place, replacing what [`scan_trace`](super::scan_trace) would flag:
/// every string of every event, known field or not, thread and process
/// names, and the metadata. Returns how many strings (or numeric arrays)
/// were replaced.
///
/// # Examples
///
/// ```
/// use serde_json::json;
/// use steptrace::hygiene::redact_trace_value;
///
/// let mut doc = json!([{"ph":"X","name":"a","ts":1,"dur":1,"sf":"/home/alice/x","alice@example.org":1}]);
/// assert_eq!(redact_trace_value(&mut doc), 2);
/// assert!(!doc.to_string().contains("alice"));
/// ```
pub fn redact_trace_value(value: &mut Value) -> usize {
    let mut redactor = Redactor::default();
    match value {
        Value::Array(events) => redact_events(&mut redactor, events),
        Value::Object(top) => {
            let events = top.remove("traceEvents");
            if let Some(clean) = walk::metadata(&mut redactor, top) {
                *top = clean;
            }
            if let Some(mut events) = events {
                if let Value::Array(list) = &mut events {
                    redact_events(&mut redactor, list);
                }
                top.insert("traceEvents".into(), events);
            }
        }
        _ => {}
    }
    redactor.replaced
}

fn redact_events(redactor: &mut Redactor, events: &mut [Value]) {
    for (index, event) in events.iter_mut().enumerate() {
        if let Value::Object(map) = event {
            if let Some(clean) = walk::event(redactor, index, map) {
                *map = clean;
            }
        }
    }
}

/// Redacts a trace one part at a time: each event, and the metadata, as
/// [`redact_trace`](crate::read::hygiene::redact_trace) does, each part rewritten only where something is
/// replaced. Strings found clean are remembered (up to 2^20 distinct ones),
/// so that a string that recurs in every event is checked once.
#[derive(Default)]
pub(crate) struct Redaction {
    redactor: Redactor,
}

impl Redaction {
    /// Event number `index`, redacted; `None` when nothing in it is flagged.
    pub(crate) fn event(&mut self, index: usize, event: &Map<String, Value>) -> Option<Map<String, Value>> {
        walk::event(&mut self.redactor, index, event)
    }

    /// The metadata, redacted; `None` when nothing in it is flagged.
    pub(crate) fn metadata(&mut self, metadata: &Map<String, Value>) -> Option<Map<String, Value>> {
        walk::metadata(&mut self.redactor, metadata)
    }

    /// How many strings (or numeric arrays) were replaced since the last call, which
    /// starts the count again.
    pub(crate) fn take_replaced(&mut self) -> usize {
        std::mem::take(&mut self.redactor.replaced)
    }
}

/// The most distinct clean strings a redaction remembers.
const CLEAN_CAP: usize = 1 << 20;

/// The redaction: each flagged stretch replaced by its marker.
#[derive(Default)]
struct Redactor {
    replaced: usize,
    /// Strings found clean, and with which checks.
    clean: HashMap<String, Checks>,
}

impl Redactor {
    fn count(&mut self, clean: Option<String>) -> Option<String> {
        self.replaced += usize::from(clean.is_some());
        clean
    }
}

impl Visit for Redactor {
    fn text(&mut self, _: &Site<'_, '_>, text: &str, checks: Checks) -> Option<String> {
        if self.clean.get(text).is_some_and(|done| done.covers(checks)) {
            return None;
        }
        let clean = redact_with(text, checks);
        if clean.is_none() && self.clean.len() < CLEAN_CAP {
            let done = self.clean.get(text).map_or(checks, |done| done.with(checks));
            self.clean.insert(text.to_owned(), done);
        }
        self.count(clean)
    }

    fn secret(&mut self, _: &Site<'_, '_>, _key: &str, _value: &str, _: Checks) -> Option<String> {
        self.count(Some(marker(FindingKind::Token)))
    }

    fn key_line(&mut self, _: &Site<'_, '_>, _text: &str) -> Option<String> {
        self.count(Some(marker(FindingKind::Token)))
    }

    fn card_number(&mut self, _: &Site<'_, '_>, _digits: &str) -> Option<Value> {
        self.replaced += 1;
        Some(Value::String(marker(FindingKind::Card)))
    }

    fn numbers(&mut self, _: &Site<'_, '_>, items: &[Value]) -> Option<Value> {
        self.replaced += 1;
        Some(Value::String(format!("{} ({} numbers)", marker(FindingKind::InputContent), items.len())))
    }
}
