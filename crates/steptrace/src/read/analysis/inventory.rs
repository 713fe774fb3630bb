//! What a trace would reveal if shared, and sanitised copies.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::format::names::meta;
use crate::format::tag;
use crate::hygiene::{redact_trace, scan_trace, LocatedFinding};
use crate::reader::JsonTrace;

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

/// The event fields the reader types.
const READ_FIELDS: &[&str] = &["ph", "name", "cat", "pid", "tid", "ts", "dur", "id", "id2", "s", "args"];

impl Inventory {
    /// Lists the labels of `trace` and scans every string in it (see
    /// [`scan_trace`]).
    #[must_use]
    pub fn of(trace: &JsonTrace) -> Inventory {
        let mut inv = Inventory::default();
        let text = |value: Option<&Value>| match value {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Null) | None => None,
            Some(other) => Some(other.to_string()),
        };
        for event in &trace.events {
            let name = text(event.get("name")).unwrap_or_default();
            if event.get("ph").and_then(Value::as_str) == Some("M") {
                let label = text(event.get("args").and_then(|a| a.get("name")));
                match (name.as_str(), label) {
                    (meta::THREAD_NAME, Some(n)) if !inv.thread_names.contains(&n) => inv.thread_names.push(n),
                    (meta::PROCESS_NAME, Some(n)) if !inv.process_names.contains(&n) => inv.process_names.push(n),
                    _ => {}
                }
                continue;
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
    /// Strings (and numeric arrays) replaced.
    pub replaced: usize,
    /// Bytes written.
    pub bytes: u64,
    /// Whether the input was cut short: the copy then holds its complete
    /// events (every field of each), closed as a complete file.
    pub rebuilt: bool,
}

/// Why [`redact_file`] wrote nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedactError {
    /// The output exists: a sanitised copy never overwrites a file.
    #[error("{} already exists: a sanitised copy never overwrites a file", path.display())]
    Exists {
        /// The output.
        path: PathBuf,
    },
    /// The output could not be written (a partly written copy is removed).
    #[error("cannot write the sanitised copy {}: {source}", path.display())]
    Io {
        /// The output.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Scanned again, the sanitised copy still holds something flagged: it
    /// is not written.
    #[error("the sanitised copy still flags {count} string(s) (first: {first}), so {} was not written", path.display())]
    NotClean {
        /// The output.
        path: PathBuf,
        /// How many findings remain.
        count: usize,
        /// The first of them.
        first: String,
    },
}

/// Writes a sanitised copy of `trace` to `out`, which must not exist: what
/// label hygiene flags is replaced (see
/// [`redact_trace`](crate::hygiene::redact_trace)), the copy is scanned
/// again with the same walk, and written only if nothing is left.
///
/// # Errors
///
/// When `out` exists (it is never overwritten), when the copy still flags
/// something, or when it cannot be written (a partly written copy is
/// removed).
pub fn redact_file(trace: &JsonTrace, out: &Path) -> Result<RedactOutcome, RedactError> {
    let (clean, replaced) = redact_trace(trace);
    let left = scan_trace(&clean);
    if let Some(first) = left.first() {
        return Err(RedactError::NotClean { path: out.to_path_buf(), count: left.len(), first: first.to_string() });
    }
    let io = |source: io::Error| match source.kind() {
        io::ErrorKind::AlreadyExists => RedactError::Exists { path: out.to_path_buf() },
        _ => RedactError::Io { path: out.to_path_buf(), source },
    };
    let text = serde_json::to_vec(&clean.to_value()).map_err(|e| io(io::Error::other(e)))?;
    let mut file = OpenOptions::new().write(true).create_new(true).open(out).map_err(io)?;
    if let Err(err) = file.write_all(&text).and_then(|()| file.sync_all()) {
        drop(file);
        let _ = std::fs::remove_file(out);
        return Err(io(err));
    }
    Ok(RedactOutcome { replaced, bytes: text.len() as u64, rebuilt: trace.truncated })
}
