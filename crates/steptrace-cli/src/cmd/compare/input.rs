//! What `compare` was given: two bench results, or two traces.
//!
//! A directory is a trace folder (its most recent run, as `report` reads
//! it). A file is a bench result when its top level holds `fingerprint` or
//! `runs`, or a `format` tag without `traceEvents`; any other JSON object
//! or array, and any gzip file, is a trace. A file that is neither (not
//! JSON at all) takes the other side's kind, so that its error is the one
//! that kind gives.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use anyhow::{bail, Context};
use serde::de::IgnoredAny;
use steptrace::display::escape;
use steptrace::reader::TraceFile;

/// What one side is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// A `steptrace bench --json` result.
    Bench,
    /// A trace file or a trace directory.
    Trace,
}

impl Kind {
    fn what(self) -> &'static str {
        match self {
            Kind::Bench => "a bench result",
            Kind::Trace => "a trace",
        }
    }
}

/// The kind both sides share; a bench result against a trace is refused.
pub(super) fn kinds(a: &Path, b: &Path) -> anyhow::Result<Kind> {
    match (sniff(a)?, sniff(b)?) {
        (Some(x), Some(y)) if x != y => bail!(
            "cannot compare {} with {}: {} is {}, {} is {}. A bench result holds several fresh runs of one \
             fingerprinted workload; a trace holds one run. Compare two bench results (`steptrace bench --profile active \
             --json FILE` for each side) or two traces (files or directories)",
            x.what(),
            y.what(),
            shown(a),
            x.what(),
            shown(b),
            y.what()
        ),
        (Some(x), _) | (None, Some(x)) => Ok(x),
        (None, None) => Ok(Kind::Bench),
    }
}

/// The kind of `path`, or `None` when its content is no JSON at all.
///
/// A file is read as a [`TraceFile`] (a regular file, never a FIFO or a
/// device) and streamed: its top-level keys are collected, its values
/// skipped, so that a large trace is never held.
fn sniff(path: &Path) -> anyhow::Result<Option<Kind>> {
    if path.is_dir() {
        return Ok(Some(Kind::Trace));
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if [".gz", ".trace.json", ".partial"].iter().any(|end| name.ends_with(end)) {
        return Ok(Some(Kind::Trace));
    }
    let mut file = BufReader::new(TraceFile::open(path)?);
    let cannot = || format!("cannot read {}", shown(path));
    if file.fill_buf().with_context(cannot)?.starts_with(&[0x1f, 0x8b]) {
        return Ok(Some(Kind::Trace));
    }
    loop {
        let buf = file.fill_buf().with_context(cannot)?;
        let blank = buf.iter().take_while(|b| b.is_ascii_whitespace()).count();
        match buf.get(blank) {
            Some(b'[') => return Ok(Some(Kind::Trace)),
            Some(_) | None if blank == 0 => break,
            _ => file.consume(blank),
        }
    }
    Ok(serde_json::from_reader::<_, HashMap<String, IgnoredAny>>(file).ok().map(|keys| {
        let bench = keys.contains_key("fingerprint")
            || keys.contains_key("runs")
            || (keys.contains_key("format") && !keys.contains_key("traceEvents"));
        if bench {
            Kind::Bench
        } else {
            Kind::Trace
        }
    }))
}

/// The bytes of the bench result at `path`: a regular file, read to the
/// size it had when opened.
pub(super) fn read_bench(path: &Path) -> anyhow::Result<Vec<u8>> {
    let mut file = TraceFile::open(path)?;
    let mut bytes = Vec::with_capacity(usize::try_from(file.len()).unwrap_or(0).min(64 << 20));
    file.read_to_end(&mut bytes).with_context(|| format!("cannot read {}", shown(path)))?;
    Ok(bytes)
}

/// A path as the user gave it, terminal-safe.
pub(super) fn shown(path: &Path) -> String {
    escape(&path.display().to_string()).into_owned()
}
