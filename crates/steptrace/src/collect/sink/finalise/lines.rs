//! The partial file's lines, parsed as far as finalising needs, and its
//! begins and ends paired per thread.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

/// The fields of one event line that finalisation needs.
#[derive(Deserialize)]
pub(super) struct Line<'a> {
    #[serde(borrow)]
    pub(super) ph: Cow<'a, str>,
    #[serde(default)]
    pub(super) tid: Option<u64>,
    #[serde(default)]
    pub(super) ts: Option<f64>,
    #[serde(default, borrow)]
    pub(super) name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) cat: Option<Cow<'a, str>>,
    #[serde(default)]
    pub(super) args: Option<Value>,
}

/// One parsed line and the bytes it came from.
pub(super) struct Parsed<'a> {
    pub(super) text: &'a [u8],
    pub(super) line: Line<'a>,
    /// steptrace's own thread id, from the category tag (see
    /// [`format::tag`](crate::format::tag)); tracing-chrome's tid + 1 for
    /// untagged lines.
    pub(super) thread: u64,
}

/// Every line of a partial file that parses, and how many did not.
pub(super) struct Lines<'a> {
    pub(super) events: Vec<Parsed<'a>>,
    pub(super) dropped: usize,
}

/// Files larger than this are parsed on several threads.
const PARALLEL_BYTES: usize = 1 << 20;
/// Most threads a parse uses.
const MAX_THREADS: usize = 4;

impl<'a> Lines<'a> {
    /// Parses every line, on up to [`MAX_THREADS`] threads for large files
    /// (the lines are independent; their order is kept).
    pub(super) fn parse(bytes: &'a [u8]) -> Lines<'a> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_THREADS);
        if bytes.len() < PARALLEL_BYTES || threads < 2 {
            return Lines::parse_chunk(bytes);
        }
        let chunks = split_lines(bytes, threads);
        let parsed: Vec<Lines<'a>> = std::thread::scope(|scope| {
            let handles: Vec<_> = chunks.iter().map(|&chunk| scope.spawn(move || Lines::parse_chunk(chunk))).collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Lines { events: Vec::new(), dropped: 0 })).collect()
        });
        let mut all = Lines { events: Vec::with_capacity(parsed.iter().map(|l| l.events.len()).sum()), dropped: 0 };
        for mut part in parsed {
            all.events.append(&mut part.events);
            all.dropped += part.dropped;
        }
        all
    }

    fn parse_chunk(bytes: &'a [u8]) -> Lines<'a> {
        let mut dropped = 0usize;
        let events = bytes
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
                            .and_then(crate::format::tag::split)
                            .map(|(_, id)| id)
                            .unwrap_or(line.tid.unwrap_or(0) + 1);
                        Some(Parsed { text, line, thread })
                    }
                    Err(_) => {
                        dropped += 1;
                        None
                    }
                }
            })
            .collect();
        Lines { events, dropped }
    }
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
    pub(super) fn of(events: &[Parsed<'_>]) -> Pairs {
        let mut other = vec![NONE; events.len()];
        let mut stacks: HashMap<u64, Vec<usize>> = HashMap::new();
        // Consecutive events mostly share a thread: keep its stack at hand.
        let mut current: Option<(u64, Vec<usize>)> = None;
        for (i, ev) in events.iter().enumerate() {
            let ph = ev.line.ph.as_ref();
            if ph != "B" && ph != "E" {
                continue;
            }
            if current.as_ref().is_none_or(|(t, _)| *t != ev.thread) {
                if let Some((t, stack)) = current.take() {
                    stacks.insert(t, stack);
                }
                current = Some((ev.thread, stacks.remove(&ev.thread).unwrap_or_default()));
            }
            let Some((_, stack)) = current.as_mut() else { continue };
            if ph == "B" {
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
    pub(super) fn end_of(&self, begin: usize, events: &[Parsed<'_>]) -> Option<usize> {
        match self.other.get(begin) {
            Some(&o) if o != NONE && o as usize > begin && events[begin].line.ph == "B" => Some(o as usize),
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
            let lines: Vec<_> = pieces.iter().flat_map(|p| Lines::parse_chunk(p).events).map(|e| e.line.ph.into_owned()).collect();
            assert_eq!(lines, ["B", "E", "i"], "n = {n}");
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
        assert!(lines.events.iter().enumerate().all(|(i, e)| e.line.ts == Some(i as f64)));
    }
}
