//! Label hygiene: flags span names, argument keys and values, thread names
//! and metadata strings that look like secrets, private paths or input
//! content.
//!
//! Traces get shared: attached to issues, uploaded to viewers. A label that
//! carries an e-mail address, an API key, a home directory or a sample of
//! the training data leaks it. [`check_label`] inspects one string;
//! [`scan_trace`] inspects every string of a parsed trace, in every field
//! of every event whether steptrace reads it or not, and says where each
//! finding is; [`redact_trace`] replaces what it flags. Both it and the trace sink, which checks each file as it
//! finalises it, feed one [`LabelScanner`]: it reports each offending string
//! once, at its first location, counts every occurrence (as many as a
//! redaction replaces), and bounds the memory it spends.
//!
//! The checks are heuristics, tuned to stay quiet on ordinary labels
//! (`ProfilerStep#12`, `cubecl_runtime::client::launch_inner`,
//! `fusion<cubecl<cuda>>`, `0x7f3a2b1c`, `wait=1,warmup=1,active=2`):
//!
//! - [`FindingKind::Email`]: `local@domain.tld` with an alphabetic TLD.
//! - [`FindingKind::Token`]: `Bearer` tokens; AWS-style key ids
//!   (`AKIA…`, `ASIA…`); well-known token prefixes (`ghp_`, `github_pat_`,
//!   `glpat-`, `hf_`, `sk-`, `xoxb-`, `AIza`, …), also behind a prefix of
//!   their own (`key_AKIA…`, `extra_sk_live_…`: a token may start after any
//!   `_` or `-`); private keys in PEM form, the whole block from its
//!   `-----BEGIN … PRIVATE KEY-----` line to its end line (or, in an array
//!   of lines, every item up to the end line), and key bodies of 64- or
//!   76-character base64 lines without their header; JWTs (`eyJ….….…`) and
//!   other `a.b.c` runs of three long mixed segments; hex runs of 32 digits
//!   or more; base64 runs of 32 characters or more that mix cases and
//!   digits like random text does; `password=…`, `api_key: …` and similar
//!   assignments; credentials in URLs (`https://user:pass@host`).
//! - [`FindingKind::HomePath`]: `/home/USER`, `/Users/USER`, `/root/…`,
//!   `~/...`, `~USER/...`, `C:\Users\USER` (not generic paths such as
//!   `/usr/local/cuda/include`).
//! - [`FindingKind::NetworkPath`]: network shares, `\\server\share\…`,
//!   also JSON-escaped (`\\\\server\\share`); not device paths
//!   (`\\?\C:\…`, `\\.\pipe\…`).
//! - [`FindingKind::Card`]: payment card numbers, 13 to 19 digits in one
//!   run or in groups separated by spaces or dashes, as strings or as JSON
//!   numbers, with an issuer's prefix for their length and a valid Luhn
//!   check digit (so that timestamps and other large numbers stay quiet);
//!   a JSON number under the key of one of the trace's own figures (`ts`,
//!   `dur`, `pid`, `id`, a time, a duration, a seed, a size) is none.
//! - [`FindingKind::NationalId`]: US social security numbers,
//!   `ddd-dd-dddd`, but not the numbers never issued (area 000, 666 or
//!   900–999, group 00, serial 0000).
//! - [`FindingKind::Iban`]: IBANs, compact or in groups of four, of a
//!   known country's length, with valid mod-97 check digits.
//! - [`FindingKind::InputContent`]: natural-language text (more than 48
//!   characters, at least 8 words, mostly plain words, with several common
//!   English function words), and lists of 8 numbers or more (`[0.12, 0.5,
//!   0.33, …]`); in [`scan_trace`], also JSON arrays of 16 numbers or more
//!   in any field of an event (not in the metadata, where numbers are
//!   settings). steptrace's own descriptions are never input content: the
//!   metadata's `device_activity` (`kinds`, `source`, ...) and a device
//!   event's `timing` and `attribution` arguments; the same words elsewhere
//!   are.
//!
//! Each [`Finding`] carries a short excerpt with the sensitive part masked
//! (`al***@***.org`, `password=***`, `/home/al***/…`), so that findings can
//! be logged, or written to a trace's metadata, without leaking what they
//! flag; excerpts never trigger a finding themselves.
//!
//! The checks and the scanner live in the crate's `labels` module, beside
//! the trace format, so that the sink uses them without reading traces;
//! this module adds what needs a parsed trace: [`scan_trace`] and
//! [`redact_trace`].

pub use crate::labels::{
    check_label, redact_label, redact_trace_value, Finding, FindingKind, LabelScanner, LocatedFinding,
};

use crate::labels::Redaction;
use crate::read::reader::{JsonTrace, Trace};

/// Scans every string of a trace: in each event, every key and every
/// string value of every field, known or not (names, categories, string
/// ids, arguments, `sf`, `stack`, a writer's own fields), at any depth;
/// thread and process names; and the keys and strings of the metadata.
///
/// Each distinct offending string is reported once, at its first location
/// (events in order, then the metadata). In the metadata (and in a partial
/// file's `steptrace_segment` header, which carries the same run
/// description), the natural-language check is skipped for diagnostic
/// entries (`partial_reason`, `label_warnings`, `backend`, `error`,
/// `fallback_reason`, `sync_meaning`, ...), which are prose by design. What
/// steptrace writes in its own words is not read as input content at all
/// (secrets, private paths and personal numbers are still looked for): the
/// metadata's `device_activity`, and a device event's `timing` and
/// `attribution` arguments
/// ([`DESCRIPTION_ARGS`](crate::format::device::DESCRIPTION_ARGS)).
///
/// This is a walk that feeds a [`LabelScanner`]:
/// [`trace_event`](LabelScanner::trace_event) for each event, then
/// [`trace_metadata`](LabelScanner::trace_metadata).
///
/// # Examples
///
/// ```
/// use steptrace::hygiene::{scan_trace, FindingKind};
/// use steptrace::reader::parse_json_trace;
///
/// let trace = parse_json_trace(br#"{"traceEvents":[
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
///
/// A typed [`Trace`] holds only the fields the reader keeps: to check every
/// field of a file, scan what [`parse_json_trace`] or
/// [`read_json_trace_file`] read, or each event [`read_json_events`] reads
/// (with an [`InventoryBuilder`], as `steptrace inspect` does: no event is
/// held).
///
/// [`parse_json_trace`]: crate::read::reader::parse_json_trace
/// [`read_json_trace_file`]: crate::read::reader::read_json_trace_file
/// [`read_json_events`]: crate::read::reader::read_json_events
/// [`InventoryBuilder`]: crate::read::analysis::InventoryBuilder
#[must_use]
pub fn scan_trace(trace: &impl ScanSource) -> Vec<LocatedFinding> {
    let mut scanner = LabelScanner::new();
    trace.scan_into(&mut scanner);
    scanner.into_findings()
}

/// A parsed trace [`scan_trace`] can walk: a [`JsonTrace`] (every field of
/// every event) or a typed [`Trace`] (the fields the reader keeps).
pub trait ScanSource {
    /// Feeds every event, then the metadata, to `scanner`.
    fn scan_into(&self, scanner: &mut LabelScanner);
}

impl ScanSource for JsonTrace {
    fn scan_into(&self, scanner: &mut LabelScanner) {
        for (index, event) in self.events.iter().enumerate() {
            scanner.trace_event(index, event);
        }
        scanner.trace_metadata(&self.metadata);
    }
}

impl ScanSource for Trace {
    fn scan_into(&self, scanner: &mut LabelScanner) {
        for (index, event) in self.events.iter().enumerate() {
            scanner.trace_event(index, &event.to_json());
        }
        scanner.trace_metadata(&self.metadata);
    }
}

/// A sanitised copy of a parsed trace, and how many strings (or numeric
/// arrays) were replaced: what [`scan_trace`] flags,
/// replaced by `[*** redacted KIND ***]` markers; everything else, every
/// field of every event included, is kept.
///
/// # Examples
///
/// ```
/// use steptrace::hygiene::{redact_trace, scan_trace};
/// use steptrace::reader::parse_json_trace;
///
/// let trace = parse_json_trace(br#"[{"ph":"X","name":"a","ts":1,"dur":1,"bp":{"k":"bob@example.com"}}]"#)?;
/// let (clean, replaced) = redact_trace(&trace);
/// assert_eq!(replaced, 1);
/// assert!(scan_trace(&clean).is_empty());
/// assert_eq!(clean.events[0]["dur"], 1);
/// # Ok::<(), steptrace::reader::ReadError>(())
/// ```
#[must_use]
pub fn redact_trace(trace: &JsonTrace) -> (JsonTrace, usize) {
    let mut redaction = Redaction::default();
    let events = trace
        .events
        .iter()
        .enumerate()
        .map(|(index, event)| redaction.event(index, event).unwrap_or_else(|| event.clone()))
        .collect();
    let metadata = redaction.metadata(&trace.metadata).unwrap_or_else(|| trace.metadata.clone());
    let clean = Trace {
        format: trace.format,
        events,
        metadata,
        truncated: trace.truncated,
        dropped_bytes: trace.dropped_bytes,
    };
    (clean, redaction.take_replaced())
}

/// What [`scan_trace`] finds in a trace's JSON text, and where, sorted.
#[cfg(test)]
pub(super) fn located(json: &str) -> Vec<(String, FindingKind)> {
    let trace = crate::read::reader::parse_json_trace(json.as_bytes()).expect("a trace");
    let mut found: Vec<(String, FindingKind)> =
        scan_trace(&trace).into_iter().map(|f| (f.location, f.finding.kind)).collect();
    // Arguments come in the order of the JSON map, which depends on
    // serde_json's features.
    found.sort();
    found
}

/// Asserts what [`scan_trace`] finds in a trace's JSON text, and where, in
/// any order.
#[cfg(test)]
#[track_caller]
pub(super) fn assert_located(json: &str, expected: &[(&str, FindingKind)]) {
    let mut expected: Vec<(String, FindingKind)> = expected.iter().map(|&(l, k)| (l.to_owned(), k)).collect();
    expected.sort();
    assert_eq!(located(json), expected);
}

#[cfg(test)]
#[path = "scan_tests.rs"]
mod scan_tests;

#[cfg(test)]
#[path = "walk_tests.rs"]
mod walk_tests;
