//! What a trace would reveal if shared: its labels, with counts, and what
//! label hygiene finds in them. Sanitised copies are in `redact`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::format::names::meta;
use crate::format::tag;
use crate::labels::{LabelScanner, LocatedFinding};
use crate::read::reader::{JsonEvent, JsonTrace};

/// The labels of a trace, with counts, and the findings of label hygiene.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Inventory {
    /// Event names (spans, instants, counters; not metadata events) and how
    /// many events carry each.
    pub names: BTreeMap<String, usize>,
    /// Categories and their counts (without the thread tag of a partial
    /// file: see [`format::tag`](crate::format::tag)).
    pub categories: BTreeMap<String, usize>,
    /// Argument keys (nested keys as `a.b`) and their counts.
    pub arg_keys: BTreeMap<String, usize>,
    /// Event fields other than those of the format that steptrace reads
    /// (`ph`, `name`, `cat`, `pid`, `tid`, `ts`, `dur`, `id`, `id2`, `s`,
    /// `args`), and their counts: `sf`, `stack`, `bp`, a writer's own.
    pub other_fields: BTreeMap<String, usize>,
    /// Thread names.
    pub thread_names: Vec<String>,
    /// Process names.
    pub process_names: Vec<String>,
    /// Metadata fields, as paths (`metadata.manifest.model`).
    pub metadata_fields: Vec<String>,
    /// What looks like a secret, a private path or input content: each once, at its first
    /// location, with how often it occurs.
    pub findings: Vec<Finding>,
    /// How many strings (keys and values), card numbers and numeric arrays are flagged,
    /// every occurrence counted: as many as a sanitised copy replaces
    /// ([`RedactOutcome::replaced`](super::RedactOutcome::replaced)). A string with two findings counts once.
    pub flagged: usize,
}

/// A finding, as shown and serialised.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    /// Where it is.
    pub location: String,
    /// What it seems to be.
    pub kind: String,
    /// A masked excerpt.
    pub excerpt: String,
    /// How often it occurs in the trace (the string that makes it, the key and its value,
    /// the place of a numeric array), this first location included.
    pub occurrences: usize,
}

impl From<LocatedFinding> for Finding {
    fn from(f: LocatedFinding) -> Self {
        Finding { location: f.location, kind: f.finding.kind.to_string(), excerpt: f.finding.excerpt, occurrences: 1 }
    }
}

/// The event fields the reader types.
const READ_FIELDS: &[&str] = &["ph", "name", "cat", "pid", "tid", "ts", "dur", "id", "id2", "s", "args"];

impl Inventory {
    /// Lists the labels of `trace` and scans every string in it (see
    /// [`scan_trace`](crate::read::hygiene::scan_trace)), and counts every occurrence of what it flags.
    #[must_use]
    pub fn of(trace: &JsonTrace) -> Inventory {
        let mut builder = InventoryBuilder::new();
        for event in &trace.events {
            builder.event(event);
        }
        builder.finish(&trace.metadata)
    }
}

/// Builds an [`Inventory`] one event at a time, as a trace is read
/// ([`read_json_events`](crate::read::reader::read_json_events)): what it keeps is
/// the inventory's counts and the scanner's memory of the strings it
/// checked, never the events.
///
/// # Examples
///
/// ```
/// use steptrace::analysis::InventoryBuilder;
/// use steptrace::reader::read_json_events;
///
/// let text = br#"{"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":2,"args":{"who":"bob@example.com"}}],"metadata":{}}"#;
/// let mut builder = InventoryBuilder::new();
/// let (trace, _) = read_json_events(&text[..], text.len() as u64, |event| builder.event(&event))?;
/// let inv = builder.finish(&trace.metadata);
/// assert_eq!((inv.names["a"], inv.findings.len()), (1, 1));
/// # Ok::<(), steptrace::reader::ReadError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct InventoryBuilder {
    inv: Inventory,
    scanner: LabelScanner,
    /// The index of the next event.
    index: usize,
}

impl InventoryBuilder {
    /// An empty inventory.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Lists the labels of the trace's next event and scans it.
    pub fn event(&mut self, event: &JsonEvent) {
        let inv = &mut self.inv;
        let text = |value: Option<&Value>| match value {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Null) | None => None,
            Some(other) => Some(other.to_string()),
        };
        self.scanner.trace_event(self.index, event);
        self.index += 1;
        let name = text(event.get("name")).unwrap_or_default();
        if event.get("ph").and_then(Value::as_str) == Some("M") {
            let label = text(event.get("args").and_then(|a| a.get("name")));
            match (name.as_str(), label) {
                (meta::THREAD_NAME, Some(n)) if !inv.thread_names.contains(&n) => inv.thread_names.push(n),
                (meta::PROCESS_NAME, Some(n)) if !inv.process_names.contains(&n) => inv.process_names.push(n),
                _ => {}
            }
            return;
        }
        *inv.names.entry(name).or_default() += 1;
        if let Some(cat) = text(event.get("cat")) {
            let cat = tag::split(&cat).map_or(cat.clone(), |(target, _)| target.to_owned());
            *inv.categories.entry(cat).or_default() += 1;
        }
        if let Some(Value::Object(args)) = event.get("args") {
            let mut keys = Vec::new();
            key_paths(args, "", &mut keys);
            for key in keys {
                *inv.arg_keys.entry(key).or_default() += 1;
            }
        }
        for key in event.keys().filter(|k| !READ_FIELDS.contains(&k.as_str())) {
            *inv.other_fields.entry(key.clone()).or_default() += 1;
        }
    }

    /// The inventory, with the trace's `metadata` (every top-level entry
    /// but `traceEvents`) listed and scanned after the events.
    #[must_use]
    pub fn finish(self, metadata: &Map<String, Value>) -> Inventory {
        let (mut inv, mut scanner) = (self.inv, self.scanner);
        let mut fields = Vec::new();
        key_paths(metadata, "", &mut fields);
        inv.metadata_fields = fields;
        scanner.trace_metadata(metadata);
        inv.flagged = scanner.flagged();
        let counts = scanner.occurrences().to_vec();
        inv.findings = scanner
            .into_findings()
            .into_iter()
            .zip(counts)
            .map(|(f, occurrences)| Finding { occurrences, ..Finding::from(f) })
            .collect();
        inv
    }
}

fn key_paths(map: &Map<String, Value>, prefix: &str, out: &mut Vec<String>) {
    for (key, value) in map {
        let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
        match value {
            Value::Object(inner) if !inner.is_empty() => key_paths(inner, &path, out),
            _ => out.push(path),
        }
    }
}
