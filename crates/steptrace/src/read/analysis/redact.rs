//! Sanitised copies of a trace: what [`hygiene`](crate::read::hygiene)
//! flags replaced, everything else kept, in the source's layout (its
//! top-level key order, gzip for a `.gz` name).

use std::fmt;
use std::fs::OpenOptions;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::format::DISTRIBUTED_INFO;
use crate::labels::{LabelScanner, Redaction};
use crate::read::reader::{read_json_events, JsonEvent, JsonTrace, ReadError, TraceFormat};

/// What [`redact_file`] did.
#[derive(Clone, Debug, Serialize)]
pub struct RedactOutcome {
    /// Strings (and numeric arrays) replaced, every occurrence counted: the
    /// [`Inventory::flagged`](super::Inventory::flagged) of the same trace.
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
    /// The trace could not be read again to write the copy (see
    /// [`SanitisedCopy`]; a partly written copy is removed).
    #[error("cannot read the trace again to write its sanitised copy {}: {source}", path.display())]
    Read {
        /// The output.
        path: PathBuf,
        /// Why.
        #[source]
        source: ReadError,
    },
    /// The trace read again for the copy is not the trace read first (see
    /// [`SanitisedCopy`]): the partly written copy is removed.
    #[error("the trace changed while its sanitised copy was made ({what}), so {} was not written", path.display())]
    Changed {
        /// The output.
        path: PathBuf,
        /// What differs between the two reads.
        what: String,
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
/// [`redact_trace`](crate::read::hygiene::redact_trace)), the copy is scanned
/// again with the same walk, and written only if nothing is left.
///
/// The copy is never held whole: a first pass redacts each event and scans
/// again what it changed (what it leaves as it was holds nothing flagged:
/// the scan and the redaction walk alike), a second redacts each event again
/// as it writes it. Beside `trace`, the memory spent is that of one event,
/// the metadata and the strings found clean (up to 2^20 of them).
/// [`SanitisedCopy`] makes the same copy of a file without holding its
/// events.
///
/// The copy is laid out as steptrace writes a rank's file: a
/// `distributedInfo` first (with a space after each colon, so that
/// Holistic Trace Analysis finds the rank), then `traceEvents`, then the
/// other top-level keys. [`redact_file_in_order`] keeps the source file's
/// order instead. An `out` ending in `.gz` is written gzip-compressed.
///
/// # Errors
///
/// When `out` exists (it is never overwritten), when the copy still flags
/// something, or when it cannot be written (a partly written copy is
/// removed).
pub fn redact_file(trace: &JsonTrace, out: &Path) -> Result<RedactOutcome, RedactError> {
    redact_file_in_order(trace, &[], out)
}

/// As [`redact_file`], with the copy's top-level keys in `order`: the
/// source file's order, as [`top_level_keys`] reads it (keys it does not
/// name follow, `traceEvents` among them when it is missing). An empty
/// `order` is [`redact_file`]'s layout.
///
/// # Errors
///
/// As for [`redact_file`].
///
/// # Examples
///
/// ```
/// use steptrace::analysis::{redact_file_in_order, top_level_keys};
/// use steptrace::reader::parse_json_trace;
///
/// let text = br#"{"schemaVersion": 1, "distributedInfo": {"rank": 1}, "traceEvents": [
///     {"ph": "X", "name": "a", "ts": 1, "dur": 1, "args": {"who": "bob@example.com"}}], "traceName": "t"}"#;
/// let order = top_level_keys(text);
/// assert_eq!(order, ["schemaVersion", "distributedInfo", "traceEvents", "traceName"]);
/// let dir = tempfile::tempdir()?;
/// let out = dir.path().join("shared.json");
/// redact_file_in_order(&parse_json_trace(text)?, &order, &out)?;
/// let copy = std::fs::read_to_string(&out)?;
/// assert!(copy.starts_with(r#"{"schemaVersion":1,"#) && copy.contains(r#""distributedInfo": {"rank": 1}"#));
/// assert!(!copy.contains("bob"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn redact_file_in_order(trace: &JsonTrace, order: &[String], out: &Path) -> Result<RedactOutcome, RedactError> {
    let mut redaction = Redaction::default();
    let mut again = LabelScanner::new();
    let metadata = redaction.metadata(&trace.metadata);
    if let Some(clean) = &metadata {
        again.trace_metadata(clean);
    }
    for (index, event) in trace.events.iter().enumerate() {
        if let Some(clean) = redaction.event(index, event) {
            again.trace_event(index, &clean);
        }
    }
    let replaced = redaction.take_replaced();
    if let Some(first) = again.findings().first() {
        return Err(RedactError::NotClean {
            path: out.to_path_buf(),
            count: again.findings().len(),
            first: first.to_string(),
        });
    }
    drop(again);
    let copy = Copy { format: trace.format, metadata: metadata.as_ref().unwrap_or(&trace.metadata), order };
    let bytes = write_new(out, |w| {
        copy.write(w, &mut |w| {
            for (index, event) in trace.events.iter().enumerate() {
                write_event(w, index, event, redaction.event(index, event))?;
            }
            Ok(())
        })
    })
    .map_err(|source| io_error(out, source))?;
    Ok(RedactOutcome { replaced, bytes, rebuilt: trace.truncated })
}

/// A sanitised copy of a trace file made without holding the trace: from
/// two reads of it, as [`redact_file_in_order`] makes one of a trace held
/// in memory, with the same redaction and the same layout.
///
/// The first read gives each event to [`event`](Self::event), which redacts
/// it and scans again what it changed (it can be the read that lists the
/// trace's [`Inventory`](super::Inventory) too); [`write`](Self::write) then refuses a copy
/// that would still flag something before any file is created, and writes
/// the copy from a second read of the file, redacting each event again and
/// scanning again what it changes before it is written: nothing flagged is
/// ever written, even when the file changes between the reads. A second
/// read that is not the first (another number of events, or of strings
/// replaced) is refused ([`RedactError::Changed`]) and the partly written
/// copy removed. The memory spent is that of one event, the metadata and
/// the strings found clean (up to 2^20 of them).
///
/// # Examples
///
/// ```
/// use steptrace::analysis::{InventoryBuilder, SanitisedCopy};
/// use steptrace::reader::{read_json_events, TraceFile};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("t.json");
/// std::fs::write(&path, r#"{"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":2,"args":{"who":"bob@example.com"}}]}"#)?;
/// let file = TraceFile::open(&path)?;
/// let size = file.len();
/// let (mut inventory, mut copy) = (InventoryBuilder::new(), SanitisedCopy::new());
/// let (trace, order) = read_json_events(file, size, |event| {
///     inventory.event(&event);
///     copy.event(&event);
/// })?;
/// assert_eq!(inventory.finish(&trace.metadata).flagged, 1);
/// let again = TraceFile::open(&path)?;
/// let out = dir.path().join("shared.json");
/// let outcome = copy.write(&trace, &order, again, size, &out)?;
/// assert_eq!(outcome.replaced, 1);
/// assert!(!std::fs::read_to_string(&out)?.contains("bob"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Default)]
pub struct SanitisedCopy {
    redaction: Redaction,
    again: LabelScanner,
    /// Events read so far.
    events: usize,
}

impl fmt::Debug for SanitisedCopy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SanitisedCopy").field("events", &self.events).finish_non_exhaustive()
    }
}

impl SanitisedCopy {
    /// A copy to make, before the first read.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Redacts the next event of the first read, and scans again what it changed.
    pub fn event(&mut self, event: &JsonEvent) {
        if let Some(clean) = self.redaction.event(self.events, event) {
            self.again.trace_event(self.events, &clean);
        }
        self.events += 1;
    }

    /// Writes the copy to `out`, which must not exist, from a second read of
    /// the trace (`src`, at most `size` bytes, as
    /// [`read_json_events`](crate::read::reader::read_json_events) reads it):
    /// with the metadata of `trace`, the first read, and its top-level keys
    /// in `order`, as [`redact_file_in_order`] lays them out.
    ///
    /// # Errors
    ///
    /// As for [`redact_file_in_order`]; [`RedactError::Read`] when the
    /// second read fails, [`RedactError::Changed`] when it is not the first.
    pub fn write(
        mut self,
        trace: &JsonTrace,
        order: &[String],
        src: impl Read,
        size: u64,
        out: &Path,
    ) -> Result<RedactOutcome, RedactError> {
        let replaced_in_events = self.redaction.take_replaced();
        let metadata = self.redaction.metadata(&trace.metadata);
        if let Some(clean) = &metadata {
            self.again.trace_metadata(clean);
        }
        let replaced = replaced_in_events + self.redaction.take_replaced();
        let not_clean = |again: &LabelScanner| {
            again.findings().first().map(|first| RedactError::NotClean {
                path: out.to_path_buf(),
                count: again.findings().len(),
                first: first.to_string(),
            })
        };
        if let Some(err) = not_clean(&self.again) {
            return Err(err);
        }
        let copy = Copy { format: trace.format, metadata: metadata.as_ref().unwrap_or(&trace.metadata), order };
        let (mut redaction, mut again, expected) = (self.redaction, self.again, self.events);
        // Why the second read stopped the copy, when it did.
        let mut failed: Option<RedactError> = None;
        let mut src = Some(src);
        let written = write_new(out, |w| {
            copy.write(w, &mut |w| {
                let Some(src) = src.take() else { return Ok(()) };
                let (mut index, mut broken) = (0, None);
                let read = read_json_events(src, size, |event| {
                    if broken.is_some() || failed.is_some() {
                        return;
                    }
                    let clean = redaction.event(index, &event);
                    if let Some(clean) = &clean {
                        again.trace_event(index, clean);
                        failed = not_clean(&again);
                    }
                    if failed.is_none() {
                        broken = write_event(w, index, &event, clean).err();
                    }
                    index += 1;
                });
                if let Some(err) = broken {
                    return Err(err);
                }
                let changed = |what: String| Some(RedactError::Changed { path: out.to_path_buf(), what });
                failed = match read {
                    _ if failed.is_some() => failed.take(),
                    Err(source) => Some(RedactError::Read { path: out.to_path_buf(), source }),
                    Ok(_) if index != expected => changed(format!("{expected} events, then {index}")),
                    Ok(_) => match redaction.take_replaced() {
                        again if again != replaced_in_events => {
                            changed(format!("{replaced_in_events} strings to replace in the events, then {again}"))
                        }
                        _ => None,
                    },
                };
                match failed {
                    Some(_) => Err(io::Error::other("the second read stopped the copy")),
                    None => Ok(()),
                }
            })
        });
        match (written, failed) {
            (Ok(bytes), _) => Ok(RedactOutcome { replaced, bytes, rebuilt: trace.truncated }),
            (Err(_), Some(err)) => Err(err),
            (Err(source), None) => Err(io_error(out, source)),
        }
    }
}

/// The error of a copy that could not be written to `out`.
fn io_error(out: &Path, source: io::Error) -> RedactError {
    match source.kind() {
        io::ErrorKind::AlreadyExists => RedactError::Exists { path: out.to_path_buf() },
        _ => RedactError::Io { path: out.to_path_buf(), source },
    }
}

/// Creates `out`, which must not exist, and writes it with `write`
/// (gzip-compressed for a `.gz` name), synced; its size. A partly written
/// file is removed.
fn write_new(out: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<u64> {
    let gzip = out.extension().is_some_and(|e| e.eq_ignore_ascii_case("gz"));
    let file = OpenOptions::new().write(true).create_new(true).open(out)?;
    let written = (|| -> io::Result<u64> {
        let mut buffered = BufWriter::with_capacity(1 << 16, file);
        if gzip {
            let mut encoder = GzEncoder::new(buffered, Compression::default());
            write(&mut encoder)?;
            buffered = encoder.finish()?;
        } else {
            write(&mut buffered)?;
        }
        let file = buffered.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.sync_all()?;
        Ok(file.metadata()?.len())
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(out);
    }
    written
}

/// Writes event number `index`: its redacted copy `clean`, or the event
/// itself when nothing in it is flagged; a line of its own after the first.
fn write_event(w: &mut dyn Write, index: usize, event: &JsonEvent, clean: Option<JsonEvent>) -> io::Result<()> {
    if index > 0 {
        w.write_all(b",\n")?;
    }
    match clean {
        Some(clean) => serde_json::to_writer(&mut *w, &clean)?,
        None => serde_json::to_writer(&mut *w, event)?,
    }
    Ok(())
}

/// The top-level keys of the trace file held in `bytes` (gzip-compressed
/// or not), in the file's order; empty for the array layout or bytes that
/// do not start as a JSON object. A file cut short gives the keys before
/// the cut.
///
/// # Examples
///
/// ```
/// use steptrace::analysis::top_level_keys;
///
/// assert_eq!(top_level_keys(br#"{"b": 1, "traceEvents": [], "a": {"c": 2}}"#), ["b", "traceEvents", "a"]);
/// assert_eq!(top_level_keys(br#"{"distributedInfo": {"rank": 0}, "traceEvents": [{"ph""#), ["distributedInfo", "traceEvents"]);
/// assert!(top_level_keys(b"[]").is_empty());
/// ```
#[must_use]
pub fn top_level_keys(bytes: &[u8]) -> Vec<String> {
    let mut keys = Vec::new();
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let reader = io::BufReader::new(MultiGzDecoder::new(bytes));
        let _ = Keys(&mut keys).deserialize(&mut serde_json::Deserializer::from_reader(reader));
    } else {
        let _ = Keys(&mut keys).deserialize(&mut serde_json::Deserializer::from_slice(bytes));
    }
    keys
}

/// Collects the keys of a JSON object, skipping their values.
struct Keys<'a>(&'a mut Vec<String>);

impl<'de> DeserializeSeed<'de> for Keys<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Keys<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            self.0.push(key);
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }
}

/// A sanitised copy to write: its layout and its metadata, already redacted; its events
/// come from a writer of the event list.
struct Copy<'a> {
    format: TraceFormat,
    metadata: &'a Map<String, Value>,
    order: &'a [String],
}

impl Copy<'_> {
    /// The top-level keys in the order they are written.
    fn layout(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = Vec::with_capacity(self.metadata.len() + 1);
        let mut add = |key: &str| {
            if (key == EVENTS || self.metadata.contains_key(key)) && !keys.contains(&key) {
                keys.push(self.metadata.get_key_value(key).map_or(EVENTS, |(k, _)| k.as_str()));
            }
        };
        for key in self.order {
            add(key);
        }
        if self.order.is_empty() {
            add(DISTRIBUTED_INFO);
            add(EVENTS);
        }
        for key in self.metadata.keys() {
            add(key);
        }
        add(EVENTS);
        keys
    }

    /// Writes the copy in the source's layout, one event a line; in the object layout its
    /// keys in the order of [`layout`](Self::layout), `distributedInfo` with a space after
    /// each colon and comma. `events` writes the events, each redacted, one a line, with
    /// a comma and a line break before each but the first.
    fn write(&self, w: &mut dyn Write, events: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
        let mut list = |w: &mut dyn Write| -> io::Result<()> {
            w.write_all(b"[\n")?;
            events(w)?;
            w.write_all(b"\n]")
        };
        if self.format == TraceFormat::Array {
            list(w)?;
            return w.write_all(b"\n");
        }
        w.write_all(b"{")?;
        for (i, key) in self.layout().into_iter().enumerate() {
            if i > 0 {
                w.write_all(b",\n")?;
            }
            serde_json::to_writer(&mut *w, key)?;
            match self.metadata.get(key) {
                _ if key == EVENTS => {
                    w.write_all(b":")?;
                    list(w)?;
                }
                Some(value) if key == DISTRIBUTED_INFO => {
                    w.write_all(b": ")?;
                    value.serialize(&mut serde_json::Serializer::with_formatter(&mut *w, Spaced))?;
                }
                Some(value) => {
                    w.write_all(b":")?;
                    serde_json::to_writer(&mut *w, value)?;
                }
                None => w.write_all(b":null")?,
            }
        }
        w.write_all(b"}\n")
    }
}

const EVENTS: &str = "traceEvents";

/// Compact JSON with a space after each colon and comma: `{"rank": 1,
/// "world_size": 2}`, as HTA's rank pattern (`"rank":\s+(\d+)`) needs.
struct Spaced;

impl serde_json::ser::Formatter for Spaced {
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }
}
