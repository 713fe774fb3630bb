//! Turns a cycle's partial array-format file into its final object-format file.
//!
//! See the [sink docs](crate::sink) for what is kept, clipped and dropped.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::names::finishing_path;
use super::segment::{SegmentInfo, SinkContext};
use super::SavedTrace;
use crate::error::Error;
use crate::gate::STEP_SPAN;

/// The fields of one event line that finalisation needs.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    ph: Cow<'a, str>,
    #[serde(default)]
    tid: Option<u64>,
    #[serde(default)]
    ts: Option<f64>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    cat: Option<Cow<'a, str>>,
    #[serde(default)]
    args: Option<Value>,
}

struct Parsed<'a> {
    text: &'a [u8],
    line: Line<'a>,
    /// steptrace's own thread id, from the category tag (see
    /// [`crate::gate`]); tracing-chrome's tid + 1 for untagged lines.
    thread: u64,
}

/// An output line: raw from the partial file (still to be re-tagged), or
/// already final.
enum Out<'a> {
    Raw(&'a [u8], Option<u64>, u64),
    Done(Vec<u8>),
}

/// Events of this target become counter ("C") events: the event's message
/// names the counter track, and its numeric fields are the series.
pub const COUNTER_TARGET: &str = "steptrace::counter";

/// Most distinct strings checked for label hygiene per file.
const HYGIENE_CAP: usize = 4096;

pub(crate) fn finalise(
    info: &SegmentInfo,
    partial: &Path,
    context: &SinkContext,
) -> Result<Option<SavedTrace>, Error> {
    let write_err = |source: io::Error| Error::Write {
        path: info.final_path.clone(),
        kept: partial.exists().then(|| partial.to_path_buf()),
        source,
    };
    let bytes = fs::read(partial).map_err(write_err)?;
    let mut dropped_lines = 0usize;
    let events: Vec<Parsed<'_>> = bytes
        .split(|b| *b == b'\n')
        .filter_map(|raw| {
            let text = trim(raw);
            if text.is_empty() || text == b"[" || text == b"]" {
                return None;
            }
            match serde_json::from_slice::<Line<'_>>(text) {
                Ok(line) => {
                    let thread = line
                        .cat
                        .as_deref()
                        .and_then(crate::gate::split_tag)
                        .map(|(_, id)| id)
                        .unwrap_or(line.tid.unwrap_or(0) + 1);
                    Some(Parsed { text, line, thread })
                }
                Err(_) => {
                    dropped_lines += 1;
                    None
                }
            }
        })
        .collect();

    // Pair begins and ends per thread.
    let mut end_of: HashMap<usize, usize> = HashMap::new();
    let mut paired_end: BTreeSet<usize> = BTreeSet::new();
    let mut stacks: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, ev) in events.iter().enumerate() {
        let tid = ev.thread;
        match ev.line.ph.as_ref() {
            "B" => stacks.entry(tid).or_default().push(i),
            "E" => {
                if let Some(begin) = stacks.get_mut(&tid).and_then(Vec::pop) {
                    end_of.insert(begin, i);
                    paired_end.insert(i);
                }
            }
            _ => {}
        }
    }

    // Find each recorded step's span.
    let step_name = |n: u64| format!("{STEP_SPAN}#{n}");
    let mut present: Vec<(u64, usize, Option<usize>)> = Vec::new();
    for &step in &info.steps {
        let name = step_name(step);
        if let Some(b) = events
            .iter()
            .position(|e| e.line.ph == "B" && e.line.name.as_deref() == Some(name.as_str()))
        {
            present.push((step, b, end_of.get(&b).copied()));
        }
    }
    // A step opened by the last `step()` call and closed by `finish()` with
    // nothing inside it never ran: it is not part of the trace.
    if info.ended_by_finish {
        if let Some(&(_, b, Some(e))) = present.last() {
            let tid = events[b].thread;
            if !events[b + 1..e].iter().any(|ev| ev.thread == tid && ev.line.ph != "M") {
                present.pop();
            }
        }
    }
    let (Some(first), Some(last)) = (present.first(), present.last()) else {
        // Nothing was recorded (the run ended during warmup): no file.
        let _ = fs::remove_file(partial);
        return Ok(None);
    };
    let start = events[first.1].line.ts.unwrap_or(0.0);
    let end = match last.2 {
        Some(e) => events[e].line.ts.unwrap_or(start),
        None => events.iter().filter_map(|e| e.line.ts).fold(start, f64::max),
    };
    let steps: Vec<u64> = present.iter().map(|p| p.0).collect();

    // Select, clip and close.
    let mut out: Vec<Out<'_>> = Vec::with_capacity(events.len());
    let mut threads: BTreeSet<u64> = BTreeSet::new();
    let mut dropped_end: BTreeSet<usize> = BTreeSet::new();
    let mut open: Vec<usize> = Vec::new();
    let mut clipped = 0usize;
    let mut hygiene = Hygiene::default();
    for (i, ev) in events.iter().enumerate() {
        let ts = ev.line.ts.unwrap_or(start);
        let raw = Out::Raw(ev.text, ev.line.tid, ev.thread);
        let keep: Option<Out<'_>> = match ev.line.ph.as_ref() {
            // Thread names are written from steptrace's own registry below.
            "M" if ev.line.name.as_deref() == Some("process_name") => Some(Out::Done(ev.text.to_vec())),
            "M" => None,
            "B" => {
                let end_idx = end_of.get(&i).copied();
                let end_ts = end_idx.and_then(|e| events[e].line.ts);
                let outside = ts > end || end_ts.is_some_and(|t| t < start);
                if outside {
                    if let Some(e) = end_idx {
                        dropped_end.insert(e);
                    }
                    None
                } else {
                    if end_ts.is_none_or(|t| t > end) {
                        if let Some(e) = end_idx {
                            dropped_end.insert(e);
                        }
                        open.push(i);
                    }
                    if ts < start {
                        clipped += 1;
                        Some(Out::Done(clip(ev.text, start, "begin", ev.thread)))
                    } else {
                        Some(raw)
                    }
                }
            }
            "E" => (paired_end.contains(&i) && !dropped_end.contains(&i)).then_some(raw),
            "i" if ev.line.cat.as_deref().and_then(crate::gate::split_tag).map(|(t, _)| t) == Some(COUNTER_TARGET) => {
                (ts >= start && ts <= end).then(|| Out::Done(counter(&ev.line, ts, ev.thread)))
            }
            _ => (ts >= start && ts <= end).then_some(raw),
        };
        if let Some(line) = keep {
            hygiene.check(&ev.line);
            if ev.line.ph != "M" {
                threads.insert(ev.thread);
            }
            out.push(line);
        }
    }
    // Close spans still open at the window's end, innermost first.
    for &i in open.iter().rev() {
        let ev = &events[i].line;
        clipped += 1;
        let close = json!({
            "ph": "E", "pid": 1, "tid": events[i].thread, "ts": end,
            "name": ev.name.as_deref().unwrap_or(""),
            "args": { "steptrace.clipped": "end" },
        });
        out.push(Out::Done(close.to_string().into_bytes()));
    }
    for &thread in &threads {
        let name = crate::gate::thread_name(thread).unwrap_or_else(|| format!("thread {thread}"));
        hygiene.check_str("thread name", &name);
        let meta = json!({ "ph": "M", "pid": 1, "tid": thread, "name": "thread_name", "args": { "name": name } });
        out.push(Out::Done(meta.to_string().into_bytes()));
    }
    let out: Vec<Cow<'_, [u8]>> = out
        .into_iter()
        .map(|line| match line {
            Out::Raw(text, tid, thread) => retag(text, tid, thread),
            Out::Done(bytes) => Cow::Owned(bytes),
        })
        .collect();

    let manifest = context.manifest();
    hygiene.check_value("manifest", &Value::Object(manifest.clone()));
    let active = context.schedule.active();
    let expected: Vec<u64> = info.steps.first().map(|&s| (s..s + active).collect()).unwrap_or_default();
    let partial_cycle = (steps.len() as u64) < active;
    let partial_reason = partial_cycle.then(|| {
        format!(
            "the profiler finished inside the cycle: {} of {} active steps recorded",
            steps.len(),
            active
        )
    });
    let warnings = hygiene.warnings;
    let metadata = json!({
        "steptrace_version": env!("CARGO_PKG_VERSION"),
        "format": "steptrace-chrome-trace/1",
        "host_os": std::env::consts::OS,
        "host_arch": std::env::consts::ARCH,
        "worker": context.worker,
        "cycle": info.cycle,
        "schedule": schedule_json(context),
        "steps": steps,
        "expected_steps": expected,
        "partial": partial_cycle,
        "partial_reason": partial_reason,
        "window_us": { "start": start, "end": end },
        "clock": { "ts_unit": "us", "epoch_unix_ms": context.epoch_unix_ms as u64 },
        "targets": context.targets,
        "clipped_spans": clipped,
        "dropped_lines": dropped_lines,
        "lost_events_other_sink": context.shared.lost_events(),
        "label_warnings": warnings,
        "manifest": Value::Object(manifest),
    });

    // Write the final file next to it, then link it into place without
    // replacing anything.
    let tmp = finishing_path(&info.final_path);
    let written = write_final(&tmp, &out, &metadata).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        write_err(e)
    })?;
    if let Err(err) = link_no_clobber(&tmp, &info.final_path) {
        let _ = fs::remove_file(&tmp);
        return Err(if err.kind() == io::ErrorKind::AlreadyExists {
            Error::Exists { path: info.final_path.clone() }
        } else {
            write_err(err)
        });
    }
    let _ = fs::remove_file(&tmp);
    let _ = fs::remove_file(partial);
    Ok(Some(SavedTrace {
        path: info.final_path.clone(),
        cycle: info.cycle,
        steps,
        partial: partial_cycle,
        events: out.len(),
        bytes: written,
        label_warnings: warnings,
    }))
}

fn schedule_json(context: &SinkContext) -> Value {
    let s = &context.schedule;
    json!({
        "text": s.to_string(),
        "skip_first": s.skip_first(), "wait": s.wait(), "warmup": s.warmup(),
        "active": s.active(), "repeat": s.repeat(), "skip_first_wait": s.skip_first_wait(),
    })
}

fn trim(raw: &[u8]) -> &[u8] {
    let mut text = raw;
    while let [rest @ .., last] = text {
        if last.is_ascii_whitespace() || *last == b',' {
            text = rest;
        } else {
            break;
        }
    }
    while let [first, rest @ ..] = text {
        if first.is_ascii_whitespace() {
            text = rest;
        } else {
            break;
        }
    }
    text
}

/// Moves an event to `ts` and marks it clipped.
fn clip(text: &[u8], ts: f64, edge: &str, thread: u64) -> Vec<u8> {
    let Ok(Value::Object(mut event)) = serde_json::from_slice::<Value>(text) else {
        return text.to_vec();
    };
    untag(&mut event, thread);
    event.insert("ts".into(), json!(ts));
    let args = event.entry("args").or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(args) = args {
        args.insert("steptrace.clipped".into(), json!(edge));
    }
    Value::Object(event).to_string().into_bytes()
}

/// Writes a raw tracing-chrome line with steptrace's thread id as its
/// `tid` and the thread tag removed from its `cat`.
///
/// Fast path: byte edits when each pattern occurs exactly once. Otherwise
/// (for example a span field also named `tid`), the event is re-serialised.
fn retag(text: &[u8], tid: Option<u64>, thread: u64) -> Cow<'_, [u8]> {
    let tag_at = find_all(text, crate::gate::TAG_ESCAPED.as_bytes());
    let tid_pattern = tid.map(|t| format!("\"tid\":{t}"));
    let tid_at: Vec<usize> = match &tid_pattern {
        Some(p) => find_all(text, p.as_bytes())
            .into_iter()
            .filter(|i| matches!(text.get(i + p.len()), Some(b',' | b'}')))
            .collect(),
        None => Vec::new(),
    };
    if let ([tag], [at], Some(p)) = (&tag_at[..], &tid_at[..], &tid_pattern) {
        let tag_end = tag + crate::gate::TAG_ESCAPED.len()
            + text[tag + crate::gate::TAG_ESCAPED.len()..].iter().take_while(|b| b.is_ascii_digit()).count();
        let new_tid = format!("\"tid\":{thread}");
        let mut out = Vec::with_capacity(text.len());
        let mut cursor = 0;
        let mut edits = [(*tag, tag_end, ""), (*at, at + p.len(), new_tid.as_str())];
        edits.sort_by_key(|e| e.0);
        for (from, to, with) in edits {
            out.extend_from_slice(&text[cursor..from]);
            out.extend_from_slice(with.as_bytes());
            cursor = to;
        }
        out.extend_from_slice(&text[cursor..]);
        return Cow::Owned(out);
    }
    match serde_json::from_slice::<Value>(text) {
        Ok(Value::Object(mut event)) => {
            untag(&mut event, thread);
            Cow::Owned(Value::Object(event).to_string().into_bytes())
        }
        _ => Cow::Borrowed(text),
    }
}

/// Sets `tid` to steptrace's thread id and removes the tag from `cat`.
fn untag(event: &mut Map<String, Value>, thread: u64) {
    event.insert("tid".into(), json!(thread));
    if let Some(Value::String(cat)) = event.get("cat") {
        if let Some((target, _)) = crate::gate::split_tag(cat) {
            let target = target.to_owned();
            event.insert("cat".into(), json!(target));
        }
    }
}

fn find_all(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return Vec::new();
    }
    haystack.windows(needle.len()).enumerate().filter(|(_, w)| *w == needle).map(|(i, _)| i).collect()
}

/// An instant event of [`COUNTER_TARGET`] as a counter event.
fn counter(line: &Line<'_>, ts: f64, thread: u64) -> Vec<u8> {
    let mut series = Map::new();
    if let Some(Value::Object(args)) = &line.args {
        for (key, value) in args.iter().filter(|(k, _)| k.as_str() != "message") {
            let number = match value {
                Value::Number(n) => n.as_f64(),
                Value::String(s) => s.parse::<f64>().ok(),
                _ => None,
            };
            if let Some(n) = number {
                series.insert(key.clone(), json!(n));
            }
        }
    }
    json!({
        "ph": "C", "pid": 1, "tid": thread, "ts": ts,
        "name": line.name.as_deref().unwrap_or("counter"),
        "args": series,
    })
    .to_string()
    .into_bytes()
}

fn write_final(path: &Path, events: &[Cow<'_, [u8]>], metadata: &Value) -> io::Result<u64> {
    let file = OpenOptions::new().write(true).create_new(true).open(path)?;
    let mut out = io::BufWriter::with_capacity(1 << 16, file);
    out.write_all(b"{\"traceEvents\":[\n")?;
    for (i, event) in events.iter().enumerate() {
        if i > 0 {
            out.write_all(b",\n")?;
        }
        out.write_all(event)?;
    }
    out.write_all(b"\n],\n\"displayTimeUnit\":\"ms\",\n\"metadata\":")?;
    serde_json::to_writer_pretty(&mut out, metadata)?;
    out.write_all(b"}\n")?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(file.metadata()?.len())
}

/// Links `from` to `to` only if `to` does not exist.
fn link_no_clobber(from: &Path, to: &Path) -> io::Result<()> {
    match fs::hard_link(from, to) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Err(err),
        // Filesystems without hard links: check, then rename.
        Err(_) if !to.exists() => fs::rename(from, to),
        Err(_) => Err(io::Error::new(io::ErrorKind::AlreadyExists, "destination exists")),
    }
}

/// Collects label-hygiene warnings over distinct names and argument strings.
#[derive(Default)]
struct Hygiene {
    seen: std::collections::HashSet<String>,
    warnings: Vec<String>,
}

impl Hygiene {
    fn check(&mut self, line: &Line<'_>) {
        if let Some(name) = &line.name {
            self.check_str("name", name);
        }
        if let Some(Value::Object(args)) = &line.args {
            for (key, value) in args {
                self.check_str("argument key", key);
                if let Value::String(s) = value {
                    self.check_str(key, s);
                }
            }
        }
    }

    /// Checks every string in a JSON value, naming it by its path. The
    /// manifest is written by the tool, not taken from input: prose there
    /// is description, so only secrets and private paths are flagged.
    fn check_value(&mut self, path: &str, value: &Value) {
        match value {
            Value::String(s) => self.check_kinds(path, s, false),
            Value::Array(items) => items.iter().for_each(|v| self.check_value(path, v)),
            Value::Object(map) => {
                for (key, v) in map {
                    self.check_value(&format!("{path}.{key}"), v);
                }
            }
            _ => {}
        }
    }

    pub(super) fn check_str(&mut self, what: &str, text: &str) {
        self.check_kinds(what, text, true);
    }

    fn check_kinds(&mut self, what: &str, text: &str, prose: bool) {
        if self.seen.len() >= HYGIENE_CAP || self.seen.contains(text) {
            return;
        }
        self.seen.insert(text.to_owned());
        for finding in crate::hygiene::check_label(text) {
            if !prose && finding.kind == crate::hygiene::FindingKind::InputContent {
                continue;
            }
            self.warnings.push(format!("{what} looks like {:?}: {}", finding.kind, finding.excerpt));
        }
    }
}
