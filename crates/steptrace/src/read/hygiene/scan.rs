//! The label scanner, [`LabelScanner`]: it checks strings, remembers which
//! it has checked, and collects [`LocatedFinding`]s. [`scan_trace`] feeds it
//! a parsed trace; the trace sink feeds it each file as it finalises it.

use crate::format::names::{keys, meta};
use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::check::{check, Checks};
use super::finding::{Finding, FindingKind, LocatedFinding};
use super::location::{location, Base, Step};
use super::{text, token};
use crate::reader::{Trace, TraceEvent, TrackId};

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

/// Scans every label of a trace: event names, categories, string ids, arg
/// keys and string values (recursively), thread and process names, and the
/// keys and strings of the metadata.
///
/// Each distinct offending string is reported once, at its first location
/// (events in order, then the metadata). In the metadata, the natural-language
/// check is skipped for diagnostic entries (`partial_reason`,
/// `label_warnings`, `backend`, `error`, `reason`, ...), which are prose by
/// design.
///
/// This is a walk that feeds a [`LabelScanner`]:
/// [`trace_event`](LabelScanner::trace_event) for each event, then
/// [`trace_metadata`](LabelScanner::trace_metadata).
///
/// # Examples
///
/// ```
/// use steptrace::hygiene::{scan_trace, FindingKind};
/// use steptrace::reader::parse_trace;
///
/// let trace = parse_trace(br#"{"traceEvents":[
///     {"ph":"X","name":"train.step","ts":0,"dur":5,"args":{"user":"bob@corp.example.com"}},
///     {"ph":"M","name":"thread_name","tid":4,"args":{"name":"/home/bob/run"}}
/// ],"metadata":{"manifest":{"data_path":"~/datasets/private"}}}"#)?;
/// let findings = scan_trace(&trace);
/// let located: Vec<(&str, FindingKind)> =
///     findings.iter().map(|f| (f.location.as_str(), f.finding.kind)).collect();
/// assert_eq!(
///     located,
///     [
///         ("event 0 args.user", FindingKind::Email),
///         ("thread name tid 4", FindingKind::HomePath),
///         ("metadata.manifest.data_path", FindingKind::HomePath),
///     ]
/// );
/// # Ok::<(), steptrace::reader::ReadError>(())
/// ```
#[must_use]
pub fn scan_trace(trace: &Trace) -> Vec<LocatedFinding> {
    let mut scanner = LabelScanner::new();
    for (index, event) in trace.events.iter().enumerate() {
        scanner.trace_event(index, event);
    }
    scanner.trace_metadata(&trace.metadata);
    scanner.into_findings()
}

/// Checks labels one after another, and collects what they seem to leak,
/// with where each was found.
///
/// The scanner remembers every distinct string it has checked, and with
/// which checks, so that each offending string is reported once, at its
/// first location, however often it recurs. How many strings it remembers
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
///   parsed trace, as [`scan_trace`] walks them.
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
    /// Each string checked, and with which checks.
    seen: HashMap<String, Checks>,
    /// Most strings remembered in `seen`.
    cap: usize,
    /// Whether strings met past the cap are skipped rather than checked.
    skip_past_cap: bool,
    /// Secret-sounding keys and their values, reported once each.
    seen_pairs: HashSet<(String, String)>,
    /// Places in event arguments where a numeric array was reported.
    seen_arrays: HashSet<String>,
    found: Vec<LocatedFinding>,
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
            seen_pairs: HashSet::new(),
            seen_arrays: HashSet::new(),
            found: Vec::new(),
        }
    }

    /// Checks one label found at `location`, with every check.
    pub fn label(&mut self, location: &str, text: &str) {
        self.check_at(text, Checks::ALL, || location.to_owned());
    }

    /// Checks an event as the trace sink does each event it keeps: its name
    /// (at location `name`) and, when `args` is an object, each argument key
    /// (at `argument key`) and each string value (at the argument's key).
    pub fn event(&mut self, name: Option<&str>, args: Option<&Value>) {
        if let Some(name) = name {
            self.label("name", name);
        }
        if let Some(Value::Object(args)) = args {
            for (key, value) in args {
                self.label("argument key", key);
                if let Value::String(text) = value {
                    self.label(key, text);
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
            Value::String(text) => self.check_at(text, Checks::TOOL, || path.to_owned()),
            Value::Array(items) => items.iter().for_each(|item| self.tool_value(path, item)),
            Value::Object(map) => {
                for (key, item) in map {
                    self.tool_value(&format!("{path}.{key}"), item);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// Checks event number `index` of a parsed trace, as [`scan_trace`]
    /// does: its name, category and string ids; its argument keys and
    /// string values, recursively; string values under secret-sounding keys
    /// (`"api_key": "..."`); arrays of 16 numbers or more; and, for
    /// `thread_name` and `process_name` metadata events, the name.
    pub fn trace_event(&mut self, index: usize, event: &TraceEvent) {
        let base = Base::Event(index);
        self.field(base, "name", &event.name);
        if let Some(cat) = &event.cat {
            self.field(base, "cat", cat);
        }
        for (field, id) in [("pid", &event.pid), ("tid", &event.tid), ("id", &event.id)] {
            if let Some(TrackId::Str(id)) = id {
                self.field(base, field, id);
            }
        }
        let Some(args) = &event.args else { return };
        let mut path = vec![Step::Key("args")];
        let Value::Object(map) = args else {
            self.value(base, &mut path, args);
            return;
        };
        for (key, value) in map {
            let name_base = match (event.ph.as_str(), event.name.as_str(), key.as_str()) {
                ("M", meta::THREAD_NAME, "name") => Some(Base::ThreadName(event.tid.as_ref())),
                ("M", meta::PROCESS_NAME, "name") => Some(Base::ProcessName(event.pid.as_ref())),
                _ => None,
            };
            if let (Some(name_base), Value::String(name)) = (name_base, value) {
                self.trace_text(name_base, &[], name, Checks::ALL, false);
                continue;
            }
            path.push(Step::Key(key.as_str()));
            self.key(base, &path, key);
            self.value(base, &mut path, value);
            path.pop();
        }
    }

    /// Checks the metadata of a parsed trace (every top-level entry but
    /// `traceEvents`), as [`scan_trace`] does: keys and strings,
    /// recursively, at `metadata.manifest.data_path`, `otherData.note`, ...
    /// The natural-language check is skipped under diagnostic keys
    /// (`partial_reason`, `label_warnings`, `backend`, `error`,
    /// `fallback_reason`, ...), which hold prose by design.
    pub fn trace_metadata(&mut self, metadata: &Map<String, Value>) {
        let mut path = Vec::new();
        for (key, value) in metadata {
            path.push(Step::Key(key.as_str()));
            self.key(Base::Metadata, &path, key);
            self.value(Base::Metadata, &mut path, value);
            path.pop();
        }
    }

    /// What was found so far, in the order found.
    #[must_use]
    pub fn findings(&self) -> &[LocatedFinding] {
        &self.found
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

    /// Checks `text` with `checks`, unless it was checked with those checks
    /// (or more) before; `at` says where it is.
    fn check_at(&mut self, text: &str, checks: Checks, at: impl FnOnce() -> String) {
        let before = match self.seen.get(text) {
            Some(done) if done.covers(checks) => return,
            Some(&done) => {
                if let Some(now) = self.seen.get_mut(text) {
                    *now = done.with(checks);
                }
                Some(done)
            }
            None if self.seen.len() < self.cap => {
                self.seen.insert(text.to_owned(), checks);
                None
            }
            None if self.skip_past_cap => return,
            None => None,
        };
        let mut findings = check(text, checks);
        if let Some(before) = before {
            // What the earlier checks found was reported then.
            let old = check(text, before);
            findings.retain(|finding| !old.contains(finding));
        }
        if findings.is_empty() {
            return;
        }
        let location = at();
        for finding in findings {
            self.found.push(LocatedFinding { location: location.clone(), finding });
        }
    }

    fn field(&mut self, base: Base<'_>, field: &str, text: &str) {
        self.trace_text(base, &[Step::Key(field)], text, Checks::ALL, false);
    }

    fn key(&mut self, base: Base<'_>, path: &[Step<'_>], key: &str) {
        self.trace_text(base, path, key, Checks::ALL, true);
    }

    fn value<'t>(&mut self, base: Base<'t>, path: &mut Vec<Step<'t>>, value: &'t Value) {
        match value {
            Value::String(s) => {
                let mut checks = Checks::ALL;
                let key = path.iter().rev().find_map(|step| match step {
                    Step::Key(key) => Some(*key),
                    Step::Index(_) => None,
                });
                if let Some(key) = key {
                    if matches!(base, Base::Metadata) && is_diagnostic(key) {
                        checks = Checks::DIAGNOSTIC;
                    }
                    self.pair(base, path, key, s);
                }
                self.trace_text(base, path, s, checks, false);
            }
            Value::Array(items) => {
                if !matches!(base, Base::Metadata) {
                    self.numeric_array(base, path, items);
                }
                for (i, item) in items.iter().enumerate() {
                    path.push(Step::Index(i));
                    self.value(base, path, item);
                    path.pop();
                }
            }
            Value::Object(map) => {
                for (key, item) in map {
                    path.push(Step::Key(key.as_str()));
                    self.key(base, path, key);
                    self.value(base, path, item);
                    path.pop();
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// A string value under a secret-sounding key: `"api_key": "..."`.
    fn pair(&mut self, base: Base<'_>, path: &[Step<'_>], key: &str, value: &str) {
        if token::secret_assignment(key, value) != Some(true)
            || !self.seen_pairs.insert((key.to_owned(), value.to_owned()))
        {
            return;
        }
        let excerpt = format!("{}=***", text::prefix(key, 32));
        self.push(base, path, Finding { kind: FindingKind::Token, excerpt });
    }

    fn numeric_array(&mut self, base: Base<'_>, path: &[Step<'_>], items: &[Value]) {
        if items.len() < NUMERIC_ARRAY || !items.iter().all(Value::is_number) {
            return;
        }
        // Once per place in the arguments, not once per event.
        let place = location(Base::Metadata, path, false);
        if !self.seen_arrays.insert(place) {
            return;
        }
        let shown: Vec<String> = items.iter().take(2).map(ToString::to_string).collect();
        let excerpt = format!("[{}, …] ({} numbers)", shown.join(", "), items.len());
        self.push(base, path, Finding { kind: FindingKind::InputContent, excerpt });
    }

    fn trace_text(&mut self, base: Base<'_>, path: &[Step<'_>], text: &str, checks: Checks, is_key: bool) {
        self.check_at(text, checks, || location(base, path, is_key));
    }

    fn push(&mut self, base: Base<'_>, path: &[Step<'_>], finding: Finding) {
        self.found.push(LocatedFinding { location: location(base, path, false), finding });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::reader::parse_trace;

    #[test]
    fn scan_trace_locates_findings() {
        let json = r#"{"traceEvents":[
            {"ph":"M","name":"process_name","pid":1,"args":{"name":"steptrace: worker-0"}},
            {"ph":"M","name":"thread_name","pid":1,"tid":4,"args":{"name":"/home/alice/worker"}},
            {"ph":"B","name":"load alice@example.org","cat":"io","pid":1,"tid":4,"ts":1,
             "args":{"user":"bob@example.com","nested":{"list":["ok","/Users/carol/x"]},"api_key":"zzz123",
                     "/root/secret.txt":1,"embedding":[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0,1.1,1.2,1.3,1.4,1.5,1.6]}},
            {"ph":"E","name":"load alice@example.org","pid":1,"tid":"/home/dan/t","ts":2,
             "args":{"embedding":[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0,1.1,1.2,1.3,1.4,1.5,1.6]}}
        ],
        "metadata":{"manifest":{"data_path":"/home/erin/data","backend":"wgpu (FALLBACK: CUDA unavailable: libcuda.so not found)"},
                    "partial_reason":"the profiler finished early because the user pressed the stop button in the window",
                    "steps":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18],
                    "label_warnings":["name looks like Email: al***@***.org"]},
        "otherData":{"note":"see ~/notes.txt"}}"#;
        let trace = parse_trace(json.as_bytes()).unwrap();
        let mut found: Vec<(String, FindingKind)> =
            scan_trace(&trace).into_iter().map(|f| (f.location, f.finding.kind)).collect();
        // Arguments come in the order of the JSON map, which depends on
        // serde_json's features.
        found.sort();
        let expected = [
            ("event 2 args./root/secret.txt (key)", FindingKind::HomePath),
            ("event 2 args.api_key", FindingKind::Token),
            ("event 2 args.embedding", FindingKind::InputContent),
            ("event 2 args.nested.list[1]", FindingKind::HomePath),
            ("event 2 args.user", FindingKind::Email),
            ("event 2 name", FindingKind::Email),
            ("event 3 tid", FindingKind::HomePath),
            ("metadata.manifest.data_path", FindingKind::HomePath),
            ("otherData.note", FindingKind::HomePath),
            ("thread name tid 4", FindingKind::HomePath),
        ];
        let expected: Vec<(String, FindingKind)> = expected.iter().map(|&(l, k)| (l.to_owned(), k)).collect();
        assert_eq!(found, expected);
    }

    #[test]
    fn scan_trace_reports_each_string_once_and_masks_it() {
        let events: Vec<String> = (0..50)
            .map(|i| format!(r#"{{"ph":"X","name":"user alice@example.org","ts":{i},"dur":1,"args":{{"step":{i}}}}}"#))
            .collect();
        let json = format!("[{}]", events.join(","));
        let trace = parse_trace(json.as_bytes()).unwrap();
        let found = scan_trace(&trace);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].location, "event 0 name");
        assert_eq!(found[0].to_string(), "event 0 name: e-mail address: al***@***.org");
    }

    #[test]
    fn scan_trace_of_a_clean_trace_is_empty() {
        let json = r#"{"traceEvents":[
            {"ph":"M","name":"process_name","pid":1,"tid":0,"args":{"name":"steptrace: worker-0"}},
            {"ph":"M","name":"steptrace_segment","pid":1,"tid":0,"args":{"worker":"worker-0","cycle":0,
              "schedule":"wait=1,warmup=1,active=2,repeat=2","steptrace_version":"0.1.0","manifest":{"model":"mlp"}}},
            {"ph":"B","name":"ProfilerStep#2","cat":"steptrace","pid":1,"tid":1,"ts":10,"args":{"step":2}},
            {"ph":"X","name":"cubecl_runtime::client::launch_inner","pid":1,"tid":1,"ts":11,"dur":3,
             "args":{"kernel.name":"fusion<cubecl<cuda>>","shape":"[32, 128, 768]"}},
            {"ph":"E","name":"ProfilerStep#2","pid":1,"tid":1,"ts":20,"args":{"steptrace.clipped":"end"}}
        ],"displayTimeUnit":"ms","metadata":{
            "steptrace_version":"0.1.0","format":"steptrace-chrome-trace/1","host_os":"linux","host_arch":"x86_64",
            "schedule":{"text":"wait=1,warmup=1,active=2,repeat=2","wait":1},
            "steps":[2,3],"expected_steps":[2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20],
            "partial":true,"partial_reason":"the profiler finished inside the cycle: 1 of 2 active steps recorded",
            "clock":{"ts_unit":"us","epoch_unix_ms":1714567890123},
            "label_warnings":["name looks like Email: al***@***.org","args.path looks like HomePath: /home/al***/…"],
            "manifest":{"model":"mlp","backend":"wgpu (FALLBACK: CUDA unavailable: libcuda.so not found)"}}}"#;
        let trace = parse_trace(json.as_bytes()).unwrap();
        assert_eq!(scan_trace(&trace), []);
    }

    #[test]
    fn the_sink_entry_points_name_their_locations() {
        let mut scanner = LabelScanner::with_limit(4096);
        scanner.event(
            Some("load alice@example.org"),
            Some(&json!({ "/home/bob/x": 1, "path": "C:\\Users\\carol\\x", "nested": { "user": "dan@example.com" } })),
        );
        scanner.event(None, Some(&json!(["erin@example.com"])));
        scanner.label("thread name", "/root/worker");
        scanner.tool_value(
            "manifest",
            &json!({ "cache": "/home/frank/.cache", "list": ["ok", "~/x"], "text": "The quick brown fox jumps over the lazy dog and then runs into the forest" }),
        );
        let mut warnings = scanner.into_warnings();
        // Arguments come in the order of the JSON map.
        warnings.sort();
        assert_eq!(
            warnings,
            [
                "argument key looks like HomePath: /home/b***/…",
                "manifest.cache looks like HomePath: /home/fr***/…",
                "manifest.list looks like HomePath: ~/***",
                "name looks like Email: al***@***.org",
                r"path looks like HomePath: C:\Users\ca***",
                "thread name looks like HomePath: /root/***",
            ]
        );
    }

    #[test]
    fn each_string_is_reported_once_for_each_check() {
        let prose = "The quick brown fox jumps over the lazy dog and then runs into the forest";
        let mut scanner = LabelScanner::new();
        // Fewer checks after more: nothing new.
        scanner.label("a", "alice@example.org");
        scanner.tool_value("b", &json!("alice@example.org"));
        // More checks after fewer: only what the new checks find.
        scanner.tool_value("c", &json!(format!("{prose} ~/x")));
        scanner.label("d", &format!("{prose} ~/x"));
        scanner.label("e", &format!("{prose} ~/x"));
        let found: Vec<(&str, FindingKind)> =
            scanner.findings().iter().map(|f| (f.location.as_str(), f.finding.kind)).collect();
        assert_eq!(found, [("a", FindingKind::Email), ("c", FindingKind::HomePath), ("d", FindingKind::InputContent)]);
    }

    #[test]
    fn past_the_cap_strings_are_checked_or_skipped() {
        let labels = ["alice@example.org", "bob@example.org", "carol@example.org", "carol@example.org"];
        let mut limited = LabelScanner::with_limit(2);
        let mut capped = LabelScanner::capped(2, false);
        for label in labels {
            limited.label("x", label);
            capped.label("x", label);
        }
        assert_eq!(limited.findings().len(), 2);
        // Not remembered, so reported each time.
        assert_eq!(capped.findings().len(), 4);
        // What was remembered is still not reported twice.
        capped.label("x", "alice@example.org");
        limited.label("x", "alice@example.org");
        assert_eq!((limited.findings().len(), capped.findings().len()), (2, 4));
    }
}
