//! The one walk over a trace's JSON that the scan and the redaction both
//! follow, so that what one flags the other replaces.
//!
//! It visits every string of every event and of the metadata: each
//! object key, and each string value at any depth, whether steptrace reads
//! the field or not (`name`, `args`, but also `sf`, `stack`, `bp` or a
//! writer's own keys). The rules that make some strings special:
//!
//! - in events, arrays of [`NUMERIC_ARRAY`] numbers or more are input
//!   content; in the metadata they are settings;
//! - a string value under a secret-sounding key (`"api_key": "..."`) is a
//!   secret, whatever it looks like;
//! - in an array of strings, the items after one that opens a private key block
//!   (`-----BEGIN … PRIVATE KEY-----` without its end), up to the one that closes it,
//!   are lines of that key, whatever they look like (a short last line of base64
//!   included);
//! - a JSON number that is a payment card number (`4111111111111111`) is
//!   visited as its digits, unless it is one of the trace's own figures:
//!   an event's own field (`ts`, `dur`, `pid`, `id`, ...), or under a key
//!   that names a time, a duration, a size or a profiler's id;
//! - in the metadata, and in the `args` of the `steptrace_segment` header
//!   event that carries a partial file's run description, values under
//!   diagnostic keys (`fallback_reason`, `sync_meaning`, ...) are prose by
//!   design: the natural-language check is skipped there;
//! - steptrace's own descriptions are not input content (only secrets,
//!   private paths and personal numbers are looked for there): the
//!   metadata's `device_activity` (`metadata.device_activity.kinds[0]`,
//!   written whole by steptrace and its device collector), the manifest's
//!   measured limits (`peaks`: how each figure was measured) and cold-start
//!   breakdown (`startup.cold_start`), and the
//!   arguments of a device event that describe it in steptrace's words
//!   ([`DESCRIPTION_ARGS`]: `timing`, `attribution`); the same words
//!   anywhere else are read as what they look like;
//! - the `name` of a `thread_name` or `process_name` event is located as
//!   `thread name tid 4` rather than by its path.
//!
//! The walk reads; a [`Visit`] may answer any string (or numeric array)
//! with a replacement, and the walk then returns a rewritten copy of the
//! part that changed.

use serde_json::{Map, Value};

use super::card;
use super::check::Checks;
use super::location::{location, Base, Step};
use super::scan::{is_diagnostic, NUMERIC_ARRAY};
use super::{pem, token};
use crate::format::device::{is_device_work, DESCRIPTION_ARGS};
use crate::format::names::{is_segment_header, keys, meta};
use crate::format::peaks::PEAKS;

/// Where a visited string sits.
pub(super) struct Site<'p, 'a> {
    pub(super) base: Base<'a>,
    pub(super) path: &'p [Step<'a>],
    /// Whether the string is an object key.
    pub(super) is_key: bool,
}

impl Site<'_, '_> {
    /// `event 3 args.user`, `metadata.manifest.data_path`, ...
    pub(super) fn location(&self) -> String {
        location(self.base, self.path, self.is_key)
    }
}

/// What the walk asks at each string.
pub(super) trait Visit {
    /// A string to check with `checks`; its replacement, if any.
    fn text(&mut self, site: &Site<'_, '_>, text: &str, checks: Checks) -> Option<String>;
    /// A string `value` under the secret-sounding key `key`, to check with `checks` too
    /// (it is not visited as text besides); its replacement, if any.
    fn secret(&mut self, site: &Site<'_, '_>, key: &str, value: &str, checks: Checks) -> Option<String>;
    /// A string inside a private key block that an earlier item of its array opened; its
    /// replacement, if any.
    fn key_line(&mut self, site: &Site<'_, '_>, text: &str) -> Option<String>;
    /// An array of [`NUMERIC_ARRAY`] numbers or more in an event; its
    /// replacement, if any.
    fn numbers(&mut self, site: &Site<'_, '_>, items: &[Value]) -> Option<Value>;
    /// A JSON number that is a payment card number, as its `digits`; its
    /// replacement, if any.
    fn card_number(&mut self, site: &Site<'_, '_>, digits: &str) -> Option<Value>;
}

/// The top-level entry of a steptrace trace that holds its metadata.
const METADATA: &str = "metadata";

/// The entry of the metadata (and of a partial file's header) that holds
/// the run manifest.
const MANIFEST: &str = "manifest";

/// Which rules apply.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Event,
    /// The `args` object of a device event (a kernel, a copy, a memset).
    DeviceArgs,
    Metadata,
    /// Written by steptrace itself: no input-content check.
    Tool,
}

impl Place {
    /// The place of the entry under `key` of an object in this place, at `path` (which ends
    /// with `key`) from `base`.
    fn child(self, base: Base<'_>, path: &[Step<'_>], key: &str) -> Place {
        match self {
            Place::DeviceArgs if DESCRIPTION_ARGS.contains(&key) => Place::Tool,
            Place::DeviceArgs => Place::Event,
            Place::Metadata if is_tool_written(base, path) => Place::Tool,
            other => other,
        }
    }
}

/// Whether `path` from `base` is a part of the metadata steptrace writes
/// whole in its own words: `metadata.device_activity`, and the manifest's
/// measured limits (`metadata.manifest.peaks`, whose `method` and `source`
/// describe how each figure was measured) and cold-start breakdown
/// (`metadata.manifest.startup.cold_start`), also in a partial file's
/// header (`args.manifest.peaks`, ...).
fn is_tool_written(base: Base<'_>, path: &[Step<'_>]) -> bool {
    let manifest = match (base, path) {
        (Base::Metadata, [Step::Key(METADATA), Step::Key(key)]) if *key == keys::DEVICE_ACTIVITY => return true,
        (Base::Metadata, [Step::Key(METADATA), Step::Key(MANIFEST), rest @ ..]) => rest,
        (Base::Event(_), [Step::Key("args"), Step::Key(MANIFEST), rest @ ..]) => rest,
        _ => return false,
    };
    matches!(manifest, [Step::Key(key)] if *key == PEAKS)
        || matches!(manifest, [Step::Key("startup"), Step::Key("cold_start")])
}

/// Walks event number `index`; the rewritten event if anything was
/// replaced.
pub(super) fn event(visit: &mut impl Visit, index: usize, event: &Map<String, Value>) -> Option<Map<String, Value>> {
    let field = |key: &str| event.get(key).and_then(Value::as_str);
    let named = match (field("ph"), field("name")) {
        (Some("M"), Some(meta::THREAD_NAME)) => Some(Base::ThreadName(event.get("tid"))),
        (Some("M"), Some(meta::PROCESS_NAME)) => Some(Base::ProcessName(event.get("pid"))),
        _ => None,
    };
    let args_place = if is_segment_header(event) {
        Place::Metadata
    } else if is_device_work(field("cat")) {
        Place::DeviceArgs
    } else {
        Place::Event
    };
    let mut walker = Walker { visit };
    let base = Base::Event(index);
    let mut changes = Vec::new();
    let mut path = Vec::new();
    for (key, item) in event {
        path.push(Step::Key(key.as_str()));
        let new_key = walker.key(base, Place::Event, &path, key);
        let new_value = match (key.as_str(), item) {
            ("args", Value::Object(args)) => walker.object(base, args_place, &mut path, args, named).map(Value::Object),
            ("args", _) => walker.value(base, args_place, &mut path, item),
            _ => walker.value(base, Place::Event, &mut path, item),
        };
        path.pop();
        if new_key.is_some() || new_value.is_some() {
            changes.push((key.as_str(), new_key, new_value));
        }
    }
    apply(event, changes)
}

/// Walks the metadata of a trace (its top-level entries but
/// `traceEvents`); the rewritten metadata if anything was replaced.
pub(super) fn metadata(visit: &mut impl Visit, metadata: &Map<String, Value>) -> Option<Map<String, Value>> {
    Walker { visit }.object(Base::Metadata, Place::Metadata, &mut Vec::new(), metadata, None)
}

struct Walker<'v, V> {
    visit: &'v mut V,
}

impl<V: Visit> Walker<'_, V> {
    /// A key of an object in `place`.
    fn key<'a>(&mut self, base: Base<'a>, place: Place, path: &[Step<'a>], key: &str) -> Option<String> {
        let checks = if place == Place::Tool { Checks::TOOL } else { Checks::ALL };
        self.visit.text(&Site { base, path, is_key: true }, key, checks)
    }

    /// An object's keys and values; `named` locates its `name` string
    /// (the args of a `thread_name` or `process_name` event).
    fn object<'a>(
        &mut self,
        base: Base<'a>,
        place: Place,
        path: &mut Vec<Step<'a>>,
        map: &'a Map<String, Value>,
        named: Option<Base<'a>>,
    ) -> Option<Map<String, Value>> {
        let mut changes = Vec::new();
        for (key, item) in map {
            path.push(Step::Key(key.as_str()));
            let new_key = self.key(base, place, path, key);
            let new_value = match (named, key.as_str(), item) {
                (Some(named), "name", Value::String(text)) => self
                    .visit
                    .text(&Site { base: named, path: &[], is_key: false }, text, Checks::ALL)
                    .map(Value::String),
                _ => self.value(base, place.child(base, path, key), path, item),
            };
            path.pop();
            if new_key.is_some() || new_value.is_some() {
                changes.push((key.as_str(), new_key, new_value));
            }
        }
        apply(map, changes)
    }

    fn value<'a>(&mut self, base: Base<'a>, place: Place, path: &mut Vec<Step<'a>>, value: &'a Value) -> Option<Value> {
        match value {
            Value::String(text) => {
                let key = nearest_key(path);
                let site = Site { base, path, is_key: false };
                let checks = match key {
                    _ if place == Place::Tool => Checks::TOOL,
                    Some(key) if place == Place::Metadata && is_diagnostic(key) => Checks::DIAGNOSTIC,
                    _ => Checks::ALL,
                };
                match key.filter(|key| token::secret_assignment(key, text) == Some(true)) {
                    Some(key) => self.visit.secret(&site, key, text, checks),
                    None => self.visit.text(&site, text, checks),
                }
                .map(Value::String)
            }
            Value::Array(items) => {
                let in_event = matches!(place, Place::Event | Place::DeviceArgs);
                if in_event && items.len() >= NUMERIC_ARRAY && items.iter().all(Value::is_number) {
                    if let Some(clean) = self.visit.numbers(&Site { base, path, is_key: false }, items) {
                        return Some(clean);
                    }
                }
                let mut out: Option<Vec<Value>> = None;
                // Whether an earlier item opened a private key block not yet closed.
                let mut in_key = false;
                for (i, item) in items.iter().enumerate() {
                    path.push(Step::Index(i));
                    let new = match item {
                        Value::String(text) if in_key => {
                            in_key = !pem::closes_block(text);
                            self.visit.key_line(&Site { base, path, is_key: false }, text).map(Value::String)
                        }
                        _ => {
                            in_key = matches!(item, Value::String(text) if pem::opens_block(text));
                            self.value(base, place, path, item)
                        }
                    };
                    path.pop();
                    if let Some(new) = new {
                        if let Some(slot) = out.get_or_insert_with(|| items.clone()).get_mut(i) {
                            *slot = new;
                        }
                    }
                }
                out.map(Value::Array)
            }
            Value::Object(map) => self.object(base, place, path, map, None).map(Value::Object),
            Value::Number(number)
                if card::is_card_value(
                    nearest_key(path),
                    matches!((base, &path[..]), (Base::Event(_), [Step::Key(_)])),
                    number,
                ) =>
            {
                self.visit.card_number(&Site { base, path, is_key: false }, &number.to_string())
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => None,
        }
    }
}

/// The key nearest above a value at `path` (`card` for `args.card` and
/// `args.card[2]`).
fn nearest_key<'a>(path: &[Step<'a>]) -> Option<&'a str> {
    path.iter().rev().find_map(|step| match step {
        Step::Key(key) => Some(*key),
        Step::Index(_) => None,
    })
}

/// `map` with `changes` applied: each `(key, new key, new value)`. A
/// replaced key becomes `NEW#i`, distinct from every other key.
fn apply(map: &Map<String, Value>, changes: Vec<(&str, Option<String>, Option<Value>)>) -> Option<Map<String, Value>> {
    if changes.is_empty() {
        return None;
    }
    let mut out = map.clone();
    let mut renamed = 0;
    for (key, new_key, new_value) in changes {
        let Some(old) = out.remove(key) else { continue };
        let value = new_value.unwrap_or(old);
        let key = match new_key {
            Some(clean) => loop {
                let candidate = format!("{clean}#{renamed}");
                renamed += 1;
                if !out.contains_key(&candidate) && !map.contains_key(&candidate) {
                    break candidate;
                }
            },
            None => key.to_owned(),
        };
        out.insert(key, value);
    }
    Some(out)
}
