//! The label scanner, [`LabelScanner`]: it checks strings, remembers which
//! it has checked, and collects [`LocatedFinding`]s. [`scan_trace`](crate::read::hygiene::scan_trace) feeds it
//! a parsed trace through the walk of every string ([`walk`](super::walk));
//! the trace sink feeds it each file as it finalises it.

use crate::format::names::keys;
use std::collections::HashMap;

use serde_json::{Map, Value};

use super::card;
use super::check::{check, Checks};
use super::finding::{Finding, FindingKind, LocatedFinding};
use super::input;
use super::location::{location, Base};
use super::text;
use super::walk::{self, Site, Visit};

/// Metadata keys whose values are diagnostics written by tools (ours among
/// them), which read like prose without being input.
const DIAGNOSTIC_KEYS: &[&str] = &[
    keys::PARTIAL_REASON,
    keys::LABEL_WARNINGS,
    keys::PROBLEMS,
    "backend",
    "reason",
    "error",
    "errors",
    "warning",
    "warnings",
    "note",
    "notes",
    "message",
    "description",
    "meaning",
    "not_observed",
    "not_known",
];

/// Whether a metadata key names a diagnostic: one of [`DIAGNOSTIC_KEYS`],
/// alone or as a suffix (`fallback_reason`, `sync_meaning`).
pub(super) fn is_diagnostic(key: &str) -> bool {
    DIAGNOSTIC_KEYS
        .iter()
        .any(|k| key == *k || key.strip_suffix(k).is_some_and(|head| head.ends_with('_') || head.ends_with('.')))
}

/// Arrays of this many numbers or more in event arguments are input
/// content.
pub(super) const NUMERIC_ARRAY: usize = 16;

/// By default, the most distinct strings a scanner remembers: it bounds the
/// memory spent remembering strings already checked.
const SEEN_CAP: usize = 1 << 20;

/// Checks labels one after another, and collects what they seem to leak,
/// with where each was found.
///
/// The scanner remembers every distinct string it has checked, and with
/// which checks, so that each offending string is reported once, at its
/// first location, however often it recurs; it counts every occurrence
/// ([`occurrences`](LabelScanner::occurrences), and
/// [`flagged`](LabelScanner::flagged) for the strings in all, as many as a
/// redaction replaces). How many strings it remembers
/// is capped: past the cap, a [`new`](LabelScanner::new) scanner still
/// checks new strings (and may report one again), a
/// [`with_limit`](LabelScanner::with_limit) scanner skips them.
///
/// Its entry points:
///
/// - [`label`](LabelScanner::label): one label, at a location the caller
///   names;
/// - [`event`](LabelScanner::event): an event's name and its arguments, as
///   the trace sink checks each event it keeps;
/// - [`tool_value`](LabelScanner::tool_value): a JSON value written by the
///   tool itself, such as the run manifest, where the input-content check
///   is skipped;
/// - [`trace_event`](LabelScanner::trace_event) and
///   [`trace_metadata`](LabelScanner::trace_metadata): the parts of a
///   parsed trace, as [`scan_trace`](crate::read::hygiene::scan_trace) walks them.
///
/// # Examples
///
/// ```
/// use serde_json::json;
/// use steptrace::hygiene::{FindingKind, LabelScanner};
///
/// let mut scanner = LabelScanner::with_limit(4096);
/// for _ in 0..3 {
///     scanner.event(Some("data.load"), Some(&json!({ "user": "alice@example.org", "step": 3 })));
/// }
/// scanner.label("thread name", "worker-0");
/// // Written by the tool: a list of numbers here is not input content.
/// scanner.tool_value("manifest", &json!({ "cache": "/home/alice/.cache", "steps": "1 2 3 4 5 6 7 8" }));
///
/// let kinds: Vec<(&str, FindingKind)> =
///     scanner.findings().iter().map(|f| (f.location.as_str(), f.finding.kind)).collect();
/// assert_eq!(kinds, [("user", FindingKind::Email), ("manifest.cache", FindingKind::HomePath)]);
/// assert_eq!(
///     scanner.into_warnings(),
///     ["user looks like Email: al***@***.org", "manifest.cache looks like HomePath: /home/al***/…"]
/// );
/// ```
#[derive(Clone, Debug)]
pub struct LabelScanner {
    /// Each string checked: with which checks, and what it was found to be.
    seen: HashMap<String, Seen>,
    /// Most strings remembered in `seen`.
    cap: usize,
    /// Whether strings met past the cap are skipped rather than checked.
    skip_past_cap: bool,
    /// Findings reported once each by what makes them: a secret-sounding key and its
    /// value, a place of numeric arrays, a line of a private key.
    once: HashMap<Once, usize>,
    found: Vec<LocatedFinding>,
    /// How often each finding of `found` occurs.
    counts: Vec<usize>,
    /// Strings, card numbers and numeric arrays flagged, every occurrence counted.
    flagged: usize,
}

/// A string checked: with which checks, and its findings (indices into `found`).
#[derive(Clone, Debug)]
struct Seen {
    checks: Checks,
    findings: Vec<usize>,
}

/// What makes a finding reported once.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Once {
    Pair(String, String),
    Array(String),
    KeyLine(String),
}

impl Default for LabelScanner {
    fn default() -> Self {
        Self::new()
    }
}

impl LabelScanner {
    /// A scanner that checks every string it is given. It remembers up to
    /// 2^20 distinct strings; past that, new strings are still checked, but
    /// not remembered.
    #[must_use]
    pub fn new() -> Self {
        Self::capped(SEEN_CAP, false)
    }

    /// A scanner that checks at most `strings` distinct strings and skips
    /// any others: the work it does is bounded, whatever it is given. The
    /// trace sink checks each file it finalises with `with_limit(4096)`.
    #[must_use]
    pub fn with_limit(strings: usize) -> Self {
        Self::capped(strings, true)
    }

    fn capped(cap: usize, skip_past_cap: bool) -> Self {
        Self {
            seen: HashMap::new(),
            cap,
            skip_past_cap,
            once: HashMap::new(),
            found: Vec::new(),
            counts: Vec::new(),
            flagged: 0,
        }
    }

    /// Checks one label found at `location`, with every check.
    pub fn label(&mut self, location: &str, text: &str) {
        self.check_text(text, Checks::ALL, || location.to_owned());
    }

    /// Checks an event as the trace sink does each event it keeps: its name
    /// (at location `name`) and, when `args` is an object, each argument key
    /// (at `argument key`) and each string value, or number that is a card
    /// number (at the argument's key; not under the keys of times,
    /// durations and ids).
    pub fn event(&mut self, name: Option<&str>, args: Option<&Value>) {
        if let Some(name) = name {
            self.label("name", name);
        }
        if let Some(Value::Object(args)) = args {
            for (key, value) in args {
                self.label("argument key", key);
                match value {
                    Value::String(text) => self.label(key, text),
                    Value::Number(number) if card::is_card_value(Some(key), false, number) => {
                        self.label(key, &number.to_string());
                    }
                    _ => {}
                }
            }
        }
    }

    /// Checks every string in `value`, a JSON value written by the tool
    /// itself (the run manifest), at `path`, `path.key`, `path.key.key`, ...
    /// (array items share their array's path). Such a value is not taken
    /// from the program's input: prose there is description, and numbers
    /// are settings, so only secrets and private paths are flagged.
    pub fn tool_value(&mut self, path: &str, value: &Value) {
        match value {
            Value::String(text) => self.check_text(text, Checks::TOOL, || path.to_owned()),
            Value::Array(items) => items.iter().for_each(|item| self.tool_value(path, item)),
            Value::Object(map) => {
                for (key, item) in map {
                    self.tool_value(&format!("{path}.{key}"), item);
                }
            }
            Value::Number(number) if card::is_card_value(path.rsplit('.').next(), false, number) => {
                self.check_text(&number.to_string(), Checks::TOOL, || path.to_owned());
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// Checks event number `index` of a parsed trace, as [`scan_trace`](crate::read::hygiene::scan_trace)
    /// does: every key and string value of every field, at any depth;
    /// string values under secret-sounding keys (`"api_key": "..."`);
    /// arrays of 16 numbers or more; and, for `thread_name` and
    /// `process_name` metadata events, the name. A device event's `timing`
    /// and `attribution`, steptrace's own words, are not read as input
    /// content.
    pub fn trace_event(&mut self, index: usize, event: &Map<String, Value>) {
        let _ = walk::event(self, index, event);
    }

    /// Checks the metadata of a parsed trace (every top-level entry but
    /// `traceEvents`), as [`scan_trace`](crate::read::hygiene::scan_trace) does: keys and strings,
    /// recursively, at `metadata.manifest.data_path`, `otherData.note`, ...
    /// The natural-language check is skipped under diagnostic keys
    /// (`partial_reason`, `label_warnings`, `backend`, `error`,
    /// `fallback_reason`, ...), which hold prose by design, and no
    /// input-content check runs in `metadata.device_activity`, which
    /// steptrace writes whole.
    pub fn trace_metadata(&mut self, metadata: &Map<String, Value>) {
        let _ = walk::metadata(self, metadata);
    }

    /// What was found so far, in the order found.
    #[must_use]
    pub fn findings(&self) -> &[LocatedFinding] {
        &self.found
    }

    /// How often each of [`findings`](Self::findings) occurs, in the same order: every
    /// occurrence of the string that made it (of the key and its value, of the place of a
    /// numeric array), the first included.
    #[must_use]
    pub fn occurrences(&self) -> &[usize] {
        &self.counts
    }

    /// How many strings (keys and values), card numbers and numeric arrays were flagged,
    /// every occurrence counted: as many as
    /// [`redact_trace`](crate::read::hygiene::redact_trace) replaces in the same trace. A string with
    /// two findings counts once.
    #[must_use]
    pub fn flagged(&self) -> usize {
        self.flagged
    }

    /// What was found, in the order found.
    #[must_use]
    pub fn into_findings(self) -> Vec<LocatedFinding> {
        self.found
    }

    /// What was found, as the lines the trace sink writes to a file's
    /// `metadata.label_warnings`: `LOCATION looks like KIND: EXCERPT`, for
    /// example `user looks like Email: al***@***.org`.
    #[must_use]
    pub fn into_warnings(self) -> Vec<String> {
        self.found
            .into_iter()
            .map(|f| format!("{} looks like {:?}: {}", f.location, f.finding.kind, f.finding.excerpt))
            .collect()
    }

    /// [`check_at`](Self::check_at), counting `text` as flagged if it is.
    fn check_text(&mut self, text: &str, checks: Checks, at: impl FnOnce() -> String) {
        if self.check_at(text, checks, at) {
            self.flagged += 1;
        }
    }

    /// Checks `text` with `checks`, unless it was checked with those checks (or more)
    /// before; `at` says where it is. Each finding is recorded once, at its first
    /// location, and counted each time it recurs. Whether `text` is flagged.
    fn check_at(&mut self, text: &str, checks: Checks, at: impl FnOnce() -> String) -> bool {
        let known = self.seen.get(text).map(|seen| (seen.checks, seen.findings.clone()));
        let (again, new) = match known {
            // The same checks find what they found before.
            Some((done, old)) if done == checks || (done.covers(checks) && old.is_empty()) => (old, Vec::new()),
            Some((done, old)) => {
                let now = check(text, checks);
                let again: Vec<usize> = old.iter().copied().filter(|&i| now.contains(&self.found[i].finding)).collect();
                let mut new = Vec::new();
                if !done.covers(checks) {
                    // What the earlier checks found was reported then.
                    new = now.into_iter().filter(|f| !old.iter().any(|&i| self.found[i].finding == *f)).collect();
                    if let Some(seen) = self.seen.get_mut(text) {
                        seen.checks = done.with(checks);
                    }
                }
                (again, new)
            }
            None if self.seen.len() < self.cap => {
                self.seen.insert(text.to_owned(), Seen { checks, findings: Vec::new() });
                (Vec::new(), check(text, checks))
            }
            None if self.skip_past_cap => return false,
            None => (Vec::new(), check(text, checks)),
        };
        for &i in &again {
            self.counts[i] += 1;
        }
        let flagged = !again.is_empty() || !new.is_empty();
        if !new.is_empty() {
            let location = at();
            for finding in new {
                if let Some(seen) = self.seen.get_mut(text) {
                    seen.findings.push(self.found.len());
                }
                self.found.push(LocatedFinding { location: location.clone(), finding });
                self.counts.push(1);
            }
        }
        flagged
    }

    /// Records the finding `make` gives, once for `key`, counting each time `key` recurs.
    fn once(&mut self, key: Once, make: impl FnOnce() -> LocatedFinding) {
        match self.once.get(&key) {
            Some(&i) => self.counts[i] += 1,
            None => {
                self.once.insert(key, self.found.len());
                self.found.push(make());
                self.counts.push(1);
            }
        }
    }
}

// === impl Visit for LabelScanner ===

/// The scan: it records what it finds and replaces nothing.
impl Visit for LabelScanner {
    fn text(&mut self, site: &Site<'_, '_>, text: &str, checks: Checks) -> Option<String> {
        self.check_text(text, checks, || site.location());
        None
    }

    fn secret(&mut self, site: &Site<'_, '_>, key: &str, value: &str, checks: Checks) -> Option<String> {
        self.once(Once::Pair(key.to_owned(), value.to_owned()), || {
            let excerpt = format!("{}=***", text::prefix(key, 32));
            LocatedFinding { location: site.location(), finding: Finding { kind: FindingKind::Token, excerpt } }
        });
        // What else the value looks like; the string counts once.
        let _ = self.check_at(value, checks, || site.location());
        self.flagged += 1;
        None
    }

    fn key_line(&mut self, site: &Site<'_, '_>, text: &str) -> Option<String> {
        self.once(Once::KeyLine(text.to_owned()), || {
            let excerpt = "a line of a private key block".to_owned();
            LocatedFinding { location: site.location(), finding: Finding { kind: FindingKind::Token, excerpt } }
        });
        self.flagged += 1;
        None
    }

    fn card_number(&mut self, site: &Site<'_, '_>, digits: &str) -> Option<Value> {
        self.check_text(digits, Checks::TOOL, || site.location());
        None
    }

    fn numbers(&mut self, site: &Site<'_, '_>, items: &[Value]) -> Option<Value> {
        // Once per place in the arguments, not once per event.
        let place = location(Base::Metadata, site.path, false);
        self.once(Once::Array(place), || {
            let shown: Vec<String> =
                items.iter().take(2).map(|n| input::shown_number(&n.to_string()).to_owned()).collect();
            let excerpt = format!("[{}, …] ({} numbers)", shown.join(", "), items.len());
            LocatedFinding { location: site.location(), finding: Finding { kind: FindingKind::InputContent, excerpt } }
        });
        self.flagged += 1;
        None
    }
}

#[cfg(test)]
#[path = "scan_tests.rs"]
mod tests;
