//! The partial file's lines, read twice and never held whole: a first pass
//! keeps 24 bytes per event (its phase, time, threads, length and label)
//! and where each recorded step begins; the begins and ends are paired per
//! thread; a second pass reads the lines again, in the same order, to cut
//! and write them, parsing only the few it cannot edit as bytes.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::labels::{LabelTable, NO_LABEL};
use crate::format::names::{step_name, step_number};

/// The fields of one event line that finalisation reads.
#[derive(Deserialize)]
struct Fields<'a> {
    #[serde(borrow)]
    ph: Cow<'a, str>,
    #[serde(default)]
    tid: Option<u64>,
    #[serde(default)]
    ts: Option<f64>,
    /// Kept as written: [`Line::name`] unescapes it when asked.
    #[serde(default, borrow)]
    name: Option<&'a RawValue>,
    /// Kept as written: [`tag_of`] reads the thread tag from it.
    #[serde(default, borrow)]
    cat: Option<&'a RawValue>,
    #[serde(default, borrow)]
    args: Option<&'a RawValue>,
}

/// An event's phase, as far as finalising tells them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ph {
    Begin,
    End,
    Meta,
    Instant,
    Other,
    /// A line that did not parse: kept in place so that both passes count
    /// lines alike, and skipped.
    Unread,
}

/// What the first pass keeps of one event: 24 bytes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rec {
    /// `ts` (NaN: none).
    ts: f64,
    /// steptrace's own thread id, from the category tag (see
    /// [`format::tag`](crate::format::tag)); tracing-chrome's tid + 1 for
    /// untagged lines.
    pub(super) thread: u32,
    /// The line's label in the index's [`LabelTable`] ([`NO_LABEL`]: the
    /// second pass parses the line).
    pub(super) label: u32,
    /// The line's length (the second pass checks that it reads the same line).
    len: u32,
    /// tracing-chrome's `tid` ([`NO_TID`]: none, or too large to keep).
    tid: u16,
    pub(super) ph: Ph,
    /// Whether it is an instant of steptrace's counter target.
    pub(super) counter: bool,
}

const NO_TID: u16 = u16::MAX;

impl Rec {
    pub(super) fn ts(&self) -> Option<f64> {
        (!self.ts.is_nan()).then_some(self.ts)
    }

    /// tracing-chrome's `tid`, when the first pass kept it.
    pub(super) fn tid(&self) -> Option<u64> {
        (self.tid != NO_TID).then_some(u64::from(self.tid))
    }

    /// Whether `text` is the line this record was made from, as far as its length tells.
    pub(super) fn same_length(&self, text: &[u8]) -> bool {
        self.len == line_length(text)
    }
}

fn line_length(text: &[u8]) -> u32 {
    u32::try_from(text.len()).unwrap_or(u32::MAX)
}

/// One event line of the second pass, parsed: its fields.
pub(super) struct Line<'a> {
    fields: Fields<'a>,
}

impl<'a> Line<'a> {
    /// The event line `text`, parsed (`None`: it does not parse).
    pub(super) fn parse(text: &'a [u8]) -> Option<Line<'a>> {
        parse(text).map(|fields| Line { fields })
    }

    /// tracing-chrome's `tid`.
    pub(super) fn tid(&self) -> Option<u64> {
        self.fields.tid
    }

    /// The event's name, unescaped.
    pub(super) fn name(&self) -> Option<Cow<'a, str>> {
        unescape(self.fields.name?.get())
    }

    /// The event's arguments as written (`None`: none, or empty).
    pub(super) fn raw_args(&self) -> Option<&'a str> {
        self.fields.args.map(RawValue::get).filter(|raw| *raw != "{}")
    }

    /// The event's arguments as a JSON value, parsed now (`None`: none, or empty).
    pub(super) fn args(&self) -> Option<Value> {
        self.fields.args.map(RawValue::get).filter(|raw| *raw != "{}").and_then(|raw| serde_json::from_str(raw).ok())
    }
}

/// A JSON string as written, unescaped (`None`: not a string).
pub(super) fn unescape(raw: &str) -> Option<Cow<'_, str>> {
    match raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
        Some(inner) if !inner.contains('\\') => Some(Cow::Borrowed(inner)),
        _ => serde_json::from_str::<String>(raw).ok().map(Cow::Owned),
    }
}

/// The first pass: every event's record, where each step's span begins,
/// the events' distinct labels, and how many lines did not parse.
pub(super) struct Index {
    pub(super) events: Vec<Rec>,
    /// The first begin of each `ProfilerStep#N` span, by `N`.
    pub(super) steps: HashMap<u64, usize>,
    pub(super) labels: LabelTable,
    pub(super) dropped: usize,
}

/// Files larger than this are indexed on several threads.
const PARALLEL_BYTES: u64 = 1 << 20;
/// Most threads an index uses.
const MAX_THREADS: u64 = 8;

impl Index {
    /// Reads the partial file at `path` once, in up to [`MAX_THREADS`]
    /// byte ranges read side by side (a line belongs to the range it starts
    /// in); the records keep the file's order.
    pub(super) fn read(path: &Path) -> io::Result<Index> {
        let size = std::fs::metadata(path)?.len();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get() as u64).min(MAX_THREADS);
        let parts = if size < PARALLEL_BYTES { 1 } else { threads.max(1) };
        let ranges: Vec<(u64, u64)> = (0..parts).map(|k| (size * k / parts, size * (k + 1) / parts)).collect();
        let indexed: Vec<io::Result<Index>> = if parts == 1 {
            vec![Index::read_range(path, 0, u64::MAX)]
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> =
                    ranges.iter().map(|&(from, to)| scope.spawn(move || Index::read_range(path, from, to))).collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Err(io::Error::other("a thread indexing the trace panicked"))))
                    .collect()
            })
        };
        let mut parts = indexed.into_iter().collect::<io::Result<Vec<Index>>>()?.into_iter();
        let Some(mut all) = parts.next() else {
            return Ok(Index { events: Vec::new(), steps: HashMap::new(), labels: LabelTable::default(), dropped: 0 });
        };
        // The first part grows in place to the final size (a large block is remapped, not
        // copied, and only the pages written count): at most the index and one part are held.
        let rest: Vec<Index> = parts.collect();
        all.events.reserve_exact(rest.iter().map(|p| p.events.len()).sum());
        for mut part in rest {
            let offset = all.events.len();
            for (step, at) in part.steps {
                all.steps.entry(step).or_insert(at + offset);
            }
            let ids = all.labels.absorb(part.labels);
            for ev in part.events.iter_mut().filter(|ev| ev.label != NO_LABEL) {
                ev.label = ids.get(ev.label as usize).copied().unwrap_or(NO_LABEL);
            }
            all.events.extend_from_slice(&part.events);
            all.dropped += part.dropped;
        }
        Ok(all)
    }

    /// Indexes the lines that start in `from..to`.
    fn read_range(path: &Path, from: u64, to: u64) -> io::Result<Index> {
        let mut index = Index { events: Vec::new(), steps: HashMap::new(), labels: LabelTable::default(), dropped: 0 };
        each_line_in(path, from, to, |text| {
            let len = line_length(text);
            let Some(fields) = parse(text) else {
                index.dropped += 1;
                let unread =
                    Rec { ts: f64::NAN, thread: 0, label: NO_LABEL, len, tid: NO_TID, ph: Ph::Unread, counter: false };
                index.events.push(unread);
                return Ok(());
            };
            let tag = fields.cat.and_then(|cat| tag_of(cat.get()));
            let thread = tag.map(|(_, id)| id).unwrap_or(fields.tid.unwrap_or(0).saturating_add(1));
            let ph = match fields.ph.as_ref() {
                "B" => Ph::Begin,
                "E" => Ph::End,
                "M" => Ph::Meta,
                "i" => Ph::Instant,
                _ => Ph::Other,
            };
            let counter = tag.is_some_and(|(counter, _)| counter);
            let ts = fields.ts.unwrap_or(f64::NAN);
            let tid = fields.tid.and_then(|t| u16::try_from(t).ok()).filter(|&t| t != NO_TID).unwrap_or(NO_TID);
            // A counter's values change at every sample: its line is parsed again instead.
            let label = match counter {
                true => NO_LABEL,
                false => index.labels.id(fields.name.map(RawValue::get), fields.args.map(RawValue::get)),
            };
            if ph == Ph::Begin {
                if let Some(step) = (Line { fields }).name().as_deref().and_then(step_of) {
                    index.steps.entry(step).or_insert(index.events.len());
                }
            }
            index.events.push(Rec { ts, thread: small(thread), label, len, tid, ph, counter });
            Ok(())
        })?;
        Ok(index)
    }
}

/// The second pass: calls `f` with each line's position (as in the
/// [`Index`] of the same file, which says what it is) and its bytes, to be
/// parsed only if it is kept.
pub(super) fn each_event(path: &Path, mut f: impl FnMut(usize, &[u8]) -> io::Result<()>) -> io::Result<()> {
    let mut i = 0;
    each_line(path, |text| {
        f(i, text)?;
        i += 1;
        Ok(())
    })
}

/// Calls `f` with each line of the file that may be an event (trimmed; not
/// blank, not the array's brackets), reading it a buffer at a time.
fn each_line(path: &Path, f: impl FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
    each_line_in(path, 0, u64::MAX, f)
}

/// [`each_line`] for the lines that start at a byte in `from..to`.
fn each_line_in(path: &Path, from: u64, to: u64, mut f: impl FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
    let mut file = File::open(path)?;
    let mut at = from;
    if from > 0 {
        // The line under way at `from` belongs to the range before: start after it.
        file.seek(SeekFrom::Start(from - 1))?;
    }
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut buf = Vec::with_capacity(1 << 10);
    if from > 0 {
        let skipped = reader.read_until(b'\n', &mut buf)? as u64;
        at = from - 1 + skipped;
    }
    while at < to {
        buf.clear();
        let read = reader.read_until(b'\n', &mut buf)? as u64;
        if read == 0 {
            return Ok(());
        }
        at += read;
        let text = trim(&buf);
        if text.is_empty() || text == b"[" || text == b"]" {
            continue;
        }
        f(text)?;
    }
    Ok(())
}

/// Whether a category, as written in JSON (`"steptrace\u001f7"`), is
/// tagged with a thread id, and then whether its target is the counter
/// target, and the id. Read from the escaped text without decoding it,
/// unless the target holds other escapes.
fn tag_of(raw: &str) -> Option<(bool, u64)> {
    use crate::format::{names::COUNTER_TARGET, tag};
    static SEPARATOR: std::sync::LazyLock<memchr::memmem::FinderRev<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::FinderRev::new(tag::SEPARATOR_ESCAPED));
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    let at = SEPARATOR.rfind(inner.as_bytes())?;
    // The separator is ASCII: both sides are at character boundaries.
    let (target, id) = (&inner[..at], &inner[at + tag::SEPARATOR_ESCAPED.len()..]);
    if target.contains('\\') {
        let cat: String = serde_json::from_str(raw).ok()?;
        let (target, id) = tag::split(&cat)?;
        return Some((target == COUNTER_TARGET, id));
    }
    Some((target == COUNTER_TARGET, id.parse().ok()?))
}

fn parse(text: &[u8]) -> Option<Fields<'_>> {
    serde_json::from_slice::<Fields<'_>>(text).ok()
}

/// A thread id as the records keep it (ids past `u32::MAX` share the last).
fn small(thread: u64) -> u32 {
    u32::try_from(thread).unwrap_or(u32::MAX)
}

/// `N` of a `ProfilerStep#N` name exactly as [`step_name`] writes it.
fn step_of(name: &str) -> Option<u64> {
    step_number(name).filter(|&n| step_name(n) == name)
}

/// Begins and ends paired per thread: an end closes the innermost open
/// begin of its thread. Indexed by event position.
pub(super) struct Pairs {
    /// For each event: the end of a paired begin, or the begin of a paired
    /// end (`NONE` otherwise).
    other: Vec<u32>,
}

const NONE: u32 = u32::MAX;

impl Pairs {
    pub(super) fn of(events: &[Rec]) -> Pairs {
        let mut other = vec![NONE; events.len()];
        let mut stacks: HashMap<u32, Vec<usize>> = HashMap::new();
        // Consecutive events mostly share a thread: keep its stack at hand.
        let mut current: Option<(u32, Vec<usize>)> = None;
        for (i, ev) in events.iter().enumerate() {
            if ev.ph != Ph::Begin && ev.ph != Ph::End {
                continue;
            }
            if current.as_ref().is_none_or(|(t, _)| *t != ev.thread) {
                if let Some((t, stack)) = current.take() {
                    stacks.insert(t, stack);
                }
                current = Some((ev.thread, stacks.remove(&ev.thread).unwrap_or_default()));
            }
            let Some((_, stack)) = current.as_mut() else { continue };
            if ev.ph == Ph::Begin {
                stack.push(i);
            } else if let Some(begin) = stack.pop() {
                // Files hold far fewer than u32::MAX events (the size cap).
                other[begin] = i as u32;
                other[i] = begin as u32;
            }
        }
        Pairs { other }
    }

    /// The end paired with the begin at `begin`.
    pub(super) fn end_of(&self, begin: usize, events: &[Rec]) -> Option<usize> {
        match self.other.get(begin) {
            Some(&o) if o != NONE && o as usize > begin && events[begin].ph == Ph::Begin => Some(o as usize),
            _ => None,
        }
    }

    /// Whether the end at `end` closes a begin of this file.
    pub(super) fn is_paired_end(&self, end: usize) -> bool {
        matches!(self.other.get(end), Some(&o) if o != NONE && (o as usize) < end)
    }
}

pub(super) fn trim(raw: &[u8]) -> &[u8] {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_passes_see_the_same_events_in_the_same_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p");
        let mut text = b"[\n".to_vec();
        let n = 50_000;
        for i in 0..n {
            text.extend_from_slice(
                format!("{{\"ph\":\"B\",\"tid\":1,\"ts\":{i},\"name\":\"ProfilerStep#{i}\"}},\n").as_bytes(),
            );
            text.extend_from_slice(b"garbage\n\n");
        }
        // A last line cut short, with no line break.
        text.extend_from_slice(b"{\"ph\":\"E\",\"ti");
        std::fs::write(&path, &text).unwrap();
        let index = Index::read(&path).unwrap();
        assert_eq!((index.events.len(), index.dropped), (2 * n + 1, n + 1));
        let read: Vec<&Rec> = index.events.iter().filter(|e| e.ph != Ph::Unread).collect();
        assert!(read.iter().enumerate().all(|(i, e)| e.ts() == Some(i as f64) && e.ph == Ph::Begin));
        assert_eq!(index.steps.get(&49_999), Some(&(2 * 49_999)));
        // Each range's labels were merged into one table: every event's label names its line,
        // and its tid was kept.
        for (i, e) in read.iter().enumerate() {
            assert_eq!(index.labels.name(e.label).as_deref(), Some(step_name(i as u64).as_str()));
            assert_eq!(e.tid(), Some(1));
        }
        let mut seen = 0;
        each_event(&path, |i, text| {
            let line = Line::parse(text);
            assert_eq!(line.is_none(), index.events[i].ph == Ph::Unread, "line {i}");
            if let Some(line) = line {
                assert_eq!(line.name().as_deref(), Some(step_name(i as u64 / 2).as_str()));
            }
            seen += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, 2 * n + 1);
    }

    #[test]
    fn tags_are_read_from_the_escaped_category() {
        use crate::format::names::COUNTER_TARGET;
        let written = |cat: &str| serde_json::to_string(cat).unwrap();
        assert_eq!(tag_of(&written(&crate::format::tag::encode("steptrace", 42))), Some((false, 42)));
        assert_eq!(tag_of(&written(&crate::format::tag::encode(COUNTER_TARGET, 3))), Some((true, 3)));
        assert_eq!(tag_of(&written("steptrace")), None);
        assert_eq!(tag_of(&written("a\\u001f7")), None, "an escaped backslash is not a separator");
        assert_eq!(tag_of(&written("b\"q\u{1f}9")), Some((false, 9)));
        assert_eq!(tag_of(&written("x\u{1f}y")), None);
    }

    #[test]
    fn names_are_unescaped_and_args_parsed_when_asked() {
        let text = br#"{"ph":"i","name":"a \"quoted\" name","args":{"k":1},"cat":"c"}"#;
        let line = Line { fields: parse(text).unwrap() };
        assert_eq!(line.name().as_deref(), Some("a \"quoted\" name"));
        assert_eq!(line.args().unwrap()["k"], 1);
        let text = br#"{"ph":"E","args":{}}"#;
        let line = Line { fields: parse(text).unwrap() };
        assert!(line.name().is_none() && line.args().is_none());
    }
}
