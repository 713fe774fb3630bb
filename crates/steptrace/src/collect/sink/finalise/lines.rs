//! The partial file's lines, parsed as far as finalising needs, and its
//! begins and ends paired per thread.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

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

impl<'a> Lines<'a> {
    pub(super) fn parse(bytes: &'a [u8]) -> Lines<'a> {
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

/// Begins and ends paired per thread: an end closes the innermost open
/// begin of its thread.
#[derive(Default)]
pub(super) struct Pairs {
    /// The end of each paired begin.
    pub(super) end_of: HashMap<usize, usize>,
    /// Ends that close a begin of this file.
    pub(super) paired_end: BTreeSet<usize>,
}

impl Pairs {
    pub(super) fn of(events: &[Parsed<'_>]) -> Pairs {
        let mut pairs = Pairs::default();
        let mut stacks: HashMap<u64, Vec<usize>> = HashMap::new();
        for (i, ev) in events.iter().enumerate() {
            match ev.line.ph.as_ref() {
                "B" => stacks.entry(ev.thread).or_default().push(i),
                "E" => {
                    if let Some(begin) = stacks.get_mut(&ev.thread).and_then(Vec::pop) {
                        pairs.end_of.insert(begin, i);
                        pairs.paired_end.insert(i);
                    }
                }
                _ => {}
            }
        }
        pairs
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

