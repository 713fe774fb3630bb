//! The window: from the first recorded step's begin to the last one's end.
//! Events outside it are dropped, spans across its edges are clipped.
//!
//! Which spans are collected is the gate's decision alone; here the
//! collected stream is only cut to the window.

use std::collections::{BTreeSet, HashMap};

use crate::format::names::STEP_SPAN;

use serde_json::json;

use super::edit::{clip, counter};
use super::lines::{Pairs, Parsed};
use crate::format::names::{meta, step_name, COUNTER_TARGET};
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
    pub(super) fn find(info: &SegmentInfo, events: &[Parsed<'_>], pairs: &Pairs) -> Option<Window> {
        // One pass: the first begin of each name (a step's span is unique).
        let mut begins: HashMap<&str, usize> = HashMap::new();
        for (i, e) in events.iter().enumerate() {
            if e.line.ph == "B" {
                if let Some(name) = e.line.name.as_deref().filter(|n| n.starts_with(STEP_SPAN)) {
                    begins.entry(name).or_insert(i);
                }
            }
        }
        let mut present: Vec<(u64, usize, Option<usize>)> = info
            .steps
            .iter()
            .filter_map(|&step| {
                let b = *begins.get(step_name(step).as_str())?;
                Some((step, b, pairs.end_of(b, events)))
            })
            .collect();
        // A step opened by the last `step()` call and closed by `finish()`
        // with nothing inside it never ran: it is not part of the trace.
        if info.ended_by_finish {
            if let Some(&(_, b, Some(e))) = present.last() {
                let tid = events[b].thread;
                if !events[b + 1..e].iter().any(|ev| ev.thread == tid && ev.line.ph != "M") {
                    present.pop();
                }
            }
        }
        let (first, last) = (present.first()?, present.last()?);
        let start = events[first.1].line.ts.unwrap_or(0.0);
        let end = match last.2 {
            Some(e) => events[e].line.ts.unwrap_or(start),
            None => events.iter().filter_map(|e| e.line.ts).fold(start, f64::max),
        };
        Some(Window { steps: present.iter().map(|p| p.0).collect(), start, end })
    }
}

/// An output line: raw from the partial file (still to be re-tagged), or
/// already final.
pub(super) enum Out<'a> {
    Raw(&'a [u8], Option<u64>, u64),
    /// A begin whose end is in the window: written as one complete event
    /// of this duration.
    Complete(&'a [u8], Option<u64>, u64, f64),
    Done(Vec<u8>),
}

/// The events cut to the window.
pub(super) struct Cut<'a> {
    pub(super) out: Vec<Out<'a>>,
    pub(super) threads: BTreeSet<u64>,
    pub(super) clipped: usize,
}

/// Keeps what lies in the window, clips what crosses its edges, closes
/// what is still open at its end, and scans every kept label.
pub(super) fn cut<'a>(events: &'a [Parsed<'a>], pairs: &Pairs, w: &Window, labels: &mut LabelScanner) -> Cut<'a> {
    let mut cut = Cut { out: Vec::with_capacity(events.len()), threads: BTreeSet::new(), clipped: 0 };
    let mut dropped_end = vec![false; events.len()];
    let mut open: Vec<usize> = Vec::new();
    let mut last_thread = None;
    for (i, ev) in events.iter().enumerate() {
        let ts = ev.line.ts.unwrap_or(w.start);
        let inside = ts >= w.start && ts <= w.end;
        let raw = Out::Raw(ev.text, ev.line.tid, ev.thread);
        let is_counter = || ev.line.cat.as_deref().and_then(crate::format::tag::split).map(|(t, _)| t) == Some(COUNTER_TARGET);
        let keep: Option<Out<'_>> = match ev.line.ph.as_ref() {
            // Thread names are written from steptrace's own registry.
            "M" if ev.line.name.as_deref() == Some(meta::PROCESS_NAME) => Some(Out::Done(ev.text.to_vec())),
            "M" => None,
            "B" => begin(events, pairs, w, i, &mut dropped_end, &mut open, &mut cut.clipped),
            "E" => (pairs.is_paired_end(i) && !dropped_end[i]).then_some(raw),
            "i" if is_counter() => inside.then(|| Out::Done(counter(&ev.line, ts, ev.thread))),
            _ => inside.then_some(raw),
        };
        if let Some(line) = keep {
            labels.event(ev.line.name.as_deref(), ev.line.args.as_ref());
            if ev.line.ph != "M" && last_thread != Some(ev.thread) {
                cut.threads.insert(ev.thread);
                last_thread = Some(ev.thread);
            }
            cut.out.push(line);
        }
    }
    // Close spans still open at the window's end, innermost first.
    for &i in open.iter().rev() {
        cut.clipped += 1;
        let close = json!({
            "ph": "E", "pid": 1, "tid": events[i].thread, "ts": w.end,
            "name": events[i].line.name.as_deref().unwrap_or(""),
            "args": { meta::CLIPPED_ARG: "end" },
        });
        cut.out.push(Out::Done(close.to_string().into_bytes()));
    }
    cut
}

/// A begin: dropped outside the window (with its end), moved to the start
/// when it began before, noted as open when it ends after.
fn begin<'a>(
    events: &'a [Parsed<'a>],
    pairs: &Pairs,
    w: &Window,
    i: usize,
    dropped_end: &mut [bool],
    open: &mut Vec<usize>,
    clipped: &mut usize,
) -> Option<Out<'a>> {
    let ev = &events[i];
    let ts = ev.line.ts.unwrap_or(w.start);
    let end_idx = pairs.end_of(i, events);
    let end_ts = end_idx.and_then(|e| events[e].line.ts);
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
        return Some(Out::Done(clip(ev.text, w.start, "begin", ev.thread)));
    }
    match (end_idx, end_ts) {
        // Wholly inside: one complete event (HTA reads only those), and its
        // end is not written.
        (Some(e), Some(t)) if t <= w.end => {
            dropped_end[e] = true;
            Some(Out::Complete(ev.text, ev.line.tid, ev.thread, t - ts))
        }
        _ => Some(Out::Raw(ev.text, ev.line.tid, ev.thread)),
    }
}
