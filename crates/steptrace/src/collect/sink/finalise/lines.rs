//! The partial file's lines, parsed as far as finalising needs, and its
//! begins and ends paired per thread.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// The fields of one event line that finalisation reads.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    ph: Cow<'a, str>,
    #[serde(default)]
    tid: Option<u64>,
    #[serde(default)]
    ts: Option<f64>,
    /// Kept as written: [`Lines::name`] unescapes it when asked.
    #[serde(default, borrow)]
    name: Option<&'a RawValue>,
    #[serde(default, borrow)]
    cat: Option<Cow<'a, str>>,
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
    /// Not an event (only while parsing).
    Hole,
}

/// One parsed line, kept small (a window holds millions, each a few dozen
/// bytes long): where its bytes, its name and its arguments lie in the
/// file, and the few fields finalising reads. [`Lines`] resolves them.
pub(super) struct Parsed {
    /// The line's first byte in the file.
    start: u64,
    len: u32,
    /// The name's JSON string in the line, quotes included (length 0: none).
    name: (u32, u32),
    /// The `args` object's JSON in the line (length 0: none).
    args: (u32, u32),
    /// `ts` (NaN: none).
    ts: f64,
    /// tracing-chrome's `tid` (`u32::MAX`: none).
    tid: u32,
    /// steptrace's own thread id, from the category tag (see
    /// [`format::tag`](crate::format::tag)); tracing-chrome's tid + 1 for
    /// untagged lines.
    pub(super) thread: u32,
    pub(super) ph: Ph,
    /// Whether it is an instant of steptrace's counter target.
    pub(super) counter: bool,
}

impl Parsed {
    /// An empty slot: a line that is not an event.
    fn hole() -> Parsed {
        Parsed { start: 0, len: 0, name: (0, 0), args: (0, 0), ts: f64::NAN, tid: u32::MAX, thread: 0, ph: Ph::Hole, counter: false }
    }

    pub(super) fn ts(&self) -> Option<f64> {
        (!self.ts.is_nan()).then_some(self.ts)
    }

    pub(super) fn tid(&self) -> Option<u64> {
        (self.tid != u32::MAX).then_some(u64::from(self.tid))
    }
}

/// Where `part` lies in `whole` (a slice of it): `(offset, length)`.
fn place(whole: &[u8], part: &[u8]) -> (usize, usize) {
    (part.as_ptr() as usize - whole.as_ptr() as usize, part.len())
}

/// Every line of a partial file that parses, and how many did not.
pub(super) struct Lines<'a> {
    bytes: &'a [u8],
    pub(super) events: Vec<Parsed>,
    pub(super) dropped: usize,
}

/// Files larger than this are parsed on several threads.
const PARALLEL_BYTES: usize = 1 << 20;
/// Most threads a parse uses.
const MAX_THREADS: usize = 4;

impl<'a> Lines<'a> {
    /// Parses every line, on up to [`MAX_THREADS`] threads for large files
    /// (the lines are independent; their order is kept). Each thread fills
    /// its own part of one list, so the parse holds no second copy.
    pub(super) fn parse(bytes: &'a [u8]) -> Lines<'a> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_THREADS);
        let chunks = if bytes.len() < PARALLEL_BYTES || threads < 2 { vec![bytes] } else { split_lines(bytes, threads) };
        // Each chunk's lines, counted first: one slot per line.
        let counts: Vec<usize> = chunks.iter().map(|c| memchr::memchr_iter(b'\n', c).count() + 1).collect();
        let mut events: Vec<Parsed> = Vec::new();
        events.resize_with(counts.iter().sum(), Parsed::hole);
        let mut slots: Vec<&mut [Parsed]> = Vec::with_capacity(chunks.len());
        let mut rest = &mut events[..];
        for &n in &counts {
            let (part, tail) = rest.split_at_mut(n);
            slots.push(part);
            rest = tail;
        }
        let dropped: usize = if chunks.len() == 1 {
            slots.into_iter().zip(&chunks).map(|(slot, &chunk)| parse_chunk(bytes, chunk, slot)).sum()
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = slots
                    .into_iter()
                    .zip(&chunks)
                    .map(|(slot, &chunk)| scope.spawn(move || parse_chunk(bytes, chunk, slot)))
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
            })
        };
        // Blank lines, the array's brackets and lines that did not parse go, in place.
        events.retain(|e| e.ph != Ph::Hole);
        Lines { bytes, events, dropped }
    }

    /// The line's bytes.
    pub(super) fn text(&self, e: &Parsed) -> &'a [u8] {
        let start = e.start as usize;
        &self.bytes[start..start + e.len as usize]
    }

    /// The event's name, unescaped.
    pub(super) fn name(&self, e: &Parsed) -> Option<Cow<'a, str>> {
        let raw = self.field(e, e.name)?;
        match raw.strip_prefix(b"\"").and_then(|r| r.strip_suffix(b"\"")) {
            Some(inner) if !inner.contains(&b'\\') => std::str::from_utf8(inner).ok().map(Cow::Borrowed),
            _ => serde_json::from_slice::<String>(raw).ok().map(Cow::Owned),
        }
    }

    /// The event's arguments as a JSON value, parsed now (`None`: none, or empty).
    pub(super) fn args(&self, e: &Parsed) -> Option<Value> {
        self.field(e, e.args).filter(|raw| *raw != b"{}").and_then(|raw| serde_json::from_slice(raw).ok())
    }

    fn field(&self, e: &Parsed, (at, len): (u32, u32)) -> Option<&'a [u8]> {
        let text = self.text(e);
        (len > 0).then(|| text.get(at as usize..(at as usize + len as usize))).flatten()
    }
}

/// Parses the lines of `chunk`, a piece of `bytes` that ends at a line
/// break, into `slots` (one per line; a line that is blank or does not
/// parse stays a hole): how many lines did not parse.
fn parse_chunk(bytes: &[u8], chunk: &[u8], slots: &mut [Parsed]) -> usize {
    let mut dropped = 0usize;
    for (raw, slot) in chunk.split(|b| *b == b'\n').zip(slots.iter_mut()) {
        let text = trim(raw);
        if text.is_empty() || text == b"[" || text == b"]" {
            continue;
        }
        match serde_json::from_slice::<Line<'_>>(text).ok().and_then(|line| compact(bytes, text, &line)) {
            Some(parsed) => *slot = parsed,
            None => dropped += 1,
        }
    }
    dropped
}

/// The compact form of `line`, parsed from `text` (a slice of `bytes`);
/// `None` for a line too long to place (over 4 GiB).
fn compact(bytes: &[u8], text: &[u8], line: &Line<'_>) -> Option<Parsed> {
    let tag = line.cat.as_deref().and_then(crate::format::tag::split);
    let thread = tag.map(|(_, id)| id).unwrap_or(line.tid.unwrap_or(0).saturating_add(1));
    let ph = match line.ph.as_ref() {
        "B" => Ph::Begin,
        "E" => Ph::End,
        "M" => Ph::Meta,
        "i" => Ph::Instant,
        _ => Ph::Other,
    };
    let within = |raw: Option<&RawValue>| -> Option<(u32, u32)> {
        let Some(raw) = raw else { return Some((0, 0)) };
        let (at, len) = place(text, raw.get().as_bytes());
        Some((u32::try_from(at).ok()?, u32::try_from(len).ok()?))
    };
    let (start, len) = place(bytes, text);
    Some(Parsed {
        start: start as u64,
        len: u32::try_from(len).ok()?,
        name: within(line.name)?,
        args: within(line.args)?,
        ts: line.ts.unwrap_or(f64::NAN),
        tid: line.tid.and_then(|t| u32::try_from(t).ok()).filter(|&t| t != u32::MAX).unwrap_or(u32::MAX),
        thread: u32::try_from(thread).unwrap_or(u32::MAX),
        ph,
        counter: tag.is_some_and(|(target, _)| target == crate::format::names::COUNTER_TARGET),
    })
}

/// `bytes` cut into about `n` pieces, each ending at a line break (or at
/// the end).
fn split_lines(bytes: &[u8], n: usize) -> Vec<&[u8]> {
    let mut pieces = Vec::with_capacity(n);
    let mut rest = bytes;
    for i in (1..n).rev() {
        let target = rest.len() / (i + 1);
        match memchr::memchr(b'\n', &rest[target..]) {
            Some(at) => {
                let (piece, tail) = rest.split_at(target + at + 1);
                pieces.push(piece);
                rest = tail;
            }
            None => break,
        }
    }
    pieces.push(rest);
    pieces
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
    pub(super) fn of(events: &[Parsed]) -> Pairs {
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
    pub(super) fn end_of(&self, begin: usize, events: &[Parsed]) -> Option<usize> {
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
    fn pieces_end_at_line_breaks_and_cover_everything() {
        let text = b"[\n{\"ph\":\"B\"},\n{\"ph\":\"E\"},\n{\"ph\":\"i\"}\nnot json\n";
        for n in 1..8 {
            let pieces = split_lines(text, n);
            assert_eq!(pieces.concat(), text.to_vec(), "n = {n}");
            for piece in &pieces[..pieces.len() - 1] {
                assert_eq!(piece.last(), Some(&b'\n'), "n = {n}");
            }
            let mut slots: Vec<Parsed> = Vec::new();
            for piece in &pieces {
                let mut part: Vec<Parsed> = std::iter::repeat_with(Parsed::hole).take(piece.split(|b| *b == b'\n').count()).collect();
                parse_chunk(text, piece, &mut part);
                slots.extend(part);
            }
            let lines: Vec<_> = slots.iter().map(|e| e.ph).filter(|&p| p != Ph::Hole).collect();
            assert_eq!(lines, [Ph::Begin, Ph::End, Ph::Instant], "n = {n}");
        }
    }

    #[test]
    fn a_large_file_parses_to_the_same_lines_in_order() {
        let mut text = b"[\n".to_vec();
        let mut n = 0;
        while text.len() < 3 * PARALLEL_BYTES {
            text.extend_from_slice(format!("{{\"ph\":\"B\",\"tid\":1,\"ts\":{n}}},\n").as_bytes());
            text.extend_from_slice(b"garbage\n");
            n += 1;
        }
        let lines = Lines::parse(&text);
        assert_eq!(lines.events.len(), n);
        assert_eq!(lines.dropped, n);
        assert!(lines.events.iter().enumerate().all(|(i, e)| e.ts() == Some(i as f64)));
    }
}
