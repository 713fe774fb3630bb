//! The window: from the first recorded step's begin to the last one's end.
//! Events outside it are dropped, spans across its edges are clipped.
//!
//! Which spans are collected is the gate's decision alone; here the
//! collected stream is only cut to the window.

use std::collections::{BTreeSet, HashMap};


use serde_json::json;

use std::borrow::Cow;
use std::io;

use super::edit::{clip, complete, counter, retag};
use super::lines::{Lines, Pairs, Parsed, Ph};
use crate::format::names::{meta, step_name, step_number};
use crate::hygiene::LabelScanner;
use crate::sink::segment::SegmentInfo;

/// The recorded steps found in the file, and the window they span.
pub(super) struct Window {
    pub(super) steps: Vec<u64>,
    pub(super) start: f64,
    pub(super) end: f64,
}

impl Window {
    /// The window of the steps the profiler recorded, or `None` when none
    /// of them is in the file (the run ended during warmup).
    pub(super) fn find(info: &SegmentInfo, lines: &Lines<'_>, pairs: &Pairs) -> Option<Window> {
        let events = &lines.events[..];
        // One pass: the first begin of each step's span (its name is unique).
        let mut begins: HashMap<u64, usize> = HashMap::new();
        for (i, e) in events.iter().enumerate() {
            if e.ph == Ph::Begin {
                if let Some(step) = lines.name(e).as_deref().and_then(step_of) {
                    begins.entry(step).or_insert(i);
                }
            }
        }
        let mut present: Vec<(u64, usize, Option<usize>)> = info
            .steps
            .iter()
            .filter_map(|&step| {
                let b = *begins.get(&step)?;
                Some((step, b, pairs.end_of(b, events)))
            })
            .collect();
        // A step opened by the last `step()` call and closed by `finish()`
        // with nothing inside it never ran: it is not part of the trace.
        if info.ended_by_finish {
            if let Some(&(_, b, Some(e))) = present.last() {
                let tid = events[b].thread;
                if !events[b + 1..e].iter().any(|ev| ev.thread == tid && ev.ph != Ph::Meta) {
                    present.pop();
                }
            }
        }
        let (first, last) = (present.first()?, present.last()?);
        let start = events[first.1].ts().unwrap_or(0.0);
        let end = match last.2 {
            Some(e) => events[e].ts().unwrap_or(start),
            None => events.iter().filter_map(Parsed::ts).fold(start, f64::max),
        };
        Some(Window { steps: present.iter().map(|p| p.0).collect(), start, end })
    }
}

/// `N` of a `ProfilerStep#N` name exactly as [`step_name`] writes it.
fn step_of(name: &str) -> Option<u64> {
    step_number(name).filter(|&n| step_name(n) == name)
}

/// What cutting the events to the window found.
pub(super) struct Cut {
    /// steptrace's thread ids of the kept events.
    pub(super) threads: BTreeSet<u64>,
    /// Spans moved to or closed at the window's edges.
    pub(super) clipped: usize,
}

/// Keeps what lies in the window, clips what crosses its edges, closes
/// what is still open at its end, and scans every kept label. Each kept
/// line goes to `write` as soon as it is final, in the file's order, so
/// that no copy of the window is held.
pub(super) fn cut(
    lines: &Lines<'_>,
    pairs: &Pairs,
    w: &Window,
    labels: &mut LabelScanner,
    write: &mut dyn FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<Cut> {
    let events = &lines.events[..];
    let mut cut = Cut { threads: BTreeSet::new(), clipped: 0 };
    let mut dropped_end = vec![false; events.len()];
    let mut open: Vec<usize> = Vec::new();
    let mut last_thread = None;
    for (i, ev) in events.iter().enumerate() {
        let ts = ev.ts().unwrap_or(w.start);
        let inside = ts >= w.start && ts <= w.end;
        let (text, thread) = (lines.text(ev), u64::from(ev.thread));
        let raw = || retag(text, ev.tid(), thread);
        let name = lines.name(ev);
        let keep: Option<Cow<'_, [u8]>> = match ev.ph {
            // Thread names are written from steptrace's own registry.
            Ph::Meta if name.as_deref() == Some(meta::PROCESS_NAME) => Some(Cow::Borrowed(text)),
            Ph::Meta => None,
            Ph::Begin => begin(lines, pairs, w, i, &mut dropped_end, &mut open, &mut cut.clipped),
            Ph::End => (pairs.is_paired_end(i) && !dropped_end[i]).then(raw),
            Ph::Instant if ev.counter => inside.then(|| Cow::Owned(counter(name.as_deref(), lines.args(ev), ts, thread))),
            _ => inside.then(raw),
        };
        if let Some(line) = keep {
            labels.event(name.as_deref(), lines.args(ev).as_ref());
            if ev.ph != Ph::Meta && last_thread != Some(thread) {
                cut.threads.insert(thread);
                last_thread = Some(thread);
            }
            write(&line)?;
        }
    }
    // Close spans still open at the window's end, innermost first.
    for &i in open.iter().rev() {
        cut.clipped += 1;
        let close = json!({
            "ph": "E", "pid": 1, "tid": events[i].thread, "ts": w.end,
            "name": lines.name(&events[i]).as_deref().unwrap_or(""),
            "args": { meta::CLIPPED_ARG: "end" },
        });
        write(close.to_string().as_bytes())?;
    }
    Ok(cut)
}

/// A begin: dropped outside the window (with its end), moved to the start
/// when it began before, noted as open when it ends after; else the line to
/// write.
fn begin<'a>(
    lines: &Lines<'a>,
    pairs: &Pairs,
    w: &Window,
    i: usize,
    dropped_end: &mut [bool],
    open: &mut Vec<usize>,
    clipped: &mut usize,
) -> Option<Cow<'a, [u8]>> {
    let events = &lines.events[..];
    let ev = &events[i];
    let (text, thread) = (lines.text(ev), u64::from(ev.thread));
    let ts = ev.ts().unwrap_or(w.start);
    let end_idx = pairs.end_of(i, events);
    let end_ts = end_idx.and_then(|e| events[e].ts());
    if ts > w.end || end_ts.is_some_and(|t| t < w.start) {
        if let Some(e) = end_idx {
            dropped_end[e] = true;
        }
        return None;
    }
    if end_ts.is_none_or(|t| t > w.end) {
        if let Some(e) = end_idx {
            dropped_end[e] = true;
        }
        open.push(i);
    }
    if ts < w.start {
        *clipped += 1;
        return Some(Cow::Owned(clip(text, w.start, "begin", thread)));
    }
    match (end_idx, end_ts) {
        // Wholly inside: one complete event (HTA reads only those), and its
        // end is not written.
        (Some(e), Some(t)) if t <= w.end => {
            dropped_end[e] = true;
            Some(complete(text, ev.tid(), thread, t - ts))
        }
        _ => Some(retag(text, ev.tid(), thread)),
    }
}
