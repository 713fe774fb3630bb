//! What a trace would reveal if shared, and sanitised copies.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::format::names::meta;
use crate::hygiene::{redact_trace_value, scan_trace, LocatedFinding};
use crate::reader::{Trace, TraceFormat, TrackId};

/// The labels of a trace, with counts, and the findings of label hygiene.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Inventory {
    /// Event names (spans, instants, counters; not metadata events) and how
    /// many events carry each.
    pub names: BTreeMap<String, usize>,
    /// Categories and their counts.
    pub categories: BTreeMap<String, usize>,
    /// Argument keys (nested keys as `a.b`) and their counts.
    pub arg_keys: BTreeMap<String, usize>,
    /// Thread names.
    pub thread_names: Vec<String>,
    /// Process names.
    pub process_names: Vec<String>,
    /// Metadata fields, as paths (`metadata.manifest.model`).
    pub metadata_fields: Vec<String>,
    /// What looks like a secret, a private path or input content.
    pub findings: Vec<Finding>,
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
}

impl From<LocatedFinding> for Finding {
    fn from(f: LocatedFinding) -> Self {
        Finding { location: f.location, kind: f.finding.kind.to_string(), excerpt: f.finding.excerpt }
    }
}

impl Inventory {
    /// Lists the labels of `trace` and scans them.
    #[must_use]
    pub fn of(trace: &Trace) -> Inventory {
        let mut inv = Inventory::default();
        for event in &trace.events {
            if event.ph == "M" {
                let name = event.arg("name").and_then(Value::as_str).map(str::to_owned);
                match (event.name.as_str(), name) {
                    (meta::THREAD_NAME, Some(n)) if !inv.thread_names.contains(&n) => inv.thread_names.push(n),
                    (meta::PROCESS_NAME, Some(n)) if !inv.process_names.contains(&n) => inv.process_names.push(n),
                    _ => {}
                }
                continue;
            }
            *inv.names.entry(event.name.clone()).or_default() += 1;
            if let Some(cat) = &event.cat {
                *inv.categories.entry(cat.clone()).or_default() += 1;
            }
            if let Some(Value::Object(args)) = &event.args {
                let mut keys = Vec::new();
                key_paths(args, "", &mut keys);
                for key in keys {
                    *inv.arg_keys.entry(key).or_default() += 1;
                }
            }
        }
        let mut fields = Vec::new();
        key_paths(&trace.metadata, "", &mut fields);
        inv.metadata_fields = fields;
        inv.findings = scan_trace(trace).into_iter().map(Finding::from).collect();
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

/// What [`redact_file`] did.
#[derive(Clone, Debug, Serialize)]
pub struct RedactOutcome {
    /// Strings replaced.
    pub replaced: usize,
    /// Bytes written.
    pub bytes: u64,
    /// Whether the copy was rebuilt from the parsed events because the
    /// input was not complete JSON (a cut file): fields steptrace does not
    /// read are not carried over then.
    pub rebuilt: bool,
}

/// Writes a sanitised copy of the trace file `bytes` (already parsed as
/// `trace`) to `out`, which must not exist.
///
/// # Errors
///
/// When `out` exists (it is never overwritten) or cannot be written; a
/// partly written copy is removed.
pub fn redact_file(bytes: &[u8], trace: &Trace, out: &Path) -> io::Result<RedactOutcome> {
    let (mut value, rebuilt) = match serde_json::from_slice::<Value>(bytes) {
        Ok(v) if !trace.truncated => (v, false),
        _ => (rebuild(trace), true),
    };
    let replaced = redact_trace_value(&mut value);
    let text = serde_json::to_vec(&value).map_err(io::Error::other)?;
    let mut file = OpenOptions::new().write(true).create_new(true).open(out)?;
    let written = file.write_all(&text).and_then(|()| file.sync_all());
    if let Err(err) = written {
        drop(file);
        let _ = std::fs::remove_file(out);
        return Err(err);
    }
    Ok(RedactOutcome { replaced, bytes: text.len() as u64, rebuilt })
}

/// A JSON trace from parsed events (the fields steptrace reads).
fn rebuild(trace: &Trace) -> Value {
    let id = |t: &Option<TrackId>| match t {
        Some(TrackId::Num(n)) => json!(n),
        Some(TrackId::Str(s)) => json!(s),
        None => Value::Null,
    };
    let events: Vec<Value> = trace
        .events
        .iter()
        .map(|e| {
            let mut m = Map::new();
            m.insert("ph".into(), json!(e.ph));
            m.insert("name".into(), json!(e.name));
            let optional = [
                ("cat", e.cat.as_ref().map(|c| json!(c))),
                ("pid", e.pid.as_ref().map(|_| id(&e.pid))),
                ("tid", e.tid.as_ref().map(|_| id(&e.tid))),
                ("ts", e.ts.map(|t| json!(t))),
                ("dur", e.dur.map(|d| json!(d))),
                ("id", e.id.as_ref().map(|_| id(&e.id))),
                ("s", e.scope.as_ref().map(|s| json!(s))),
                ("args", e.args.clone()),
            ];
            for (key, value) in optional {
                if let Some(value) = value {
                    m.insert(key.into(), value);
                }
            }
            Value::Object(m)
        })
        .collect();
    match trace.format {
        TraceFormat::Array => Value::Array(events),
        TraceFormat::Object => {
            let mut top = trace.metadata.clone();
            top.insert("traceEvents".into(), Value::Array(events));
            Value::Object(top)
        }
    }
}
