//! The window: from the first recorded step's begin to the last one's end.
//! Events outside it are dropped, spans across its edges are clipped.
//!
//! Which spans are collected is the gate's decision alone; here the
//! collected stream is only cut to the window.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;

use serde_json::json;

use std::io;

use super::edit::{clip, complete, counter, retag};
use super::labels::NO_LABEL;
use super::lines::{each_event, Index, Line, Pairs, Ph, Rec};
use crate::collect::sink::segment::SegmentInfo;
use crate::format::names::meta;
use crate::labels::LabelScanner;

/// The recorded steps found in the file, and the window they span.
pub(super) struct Window {
    pub(super) steps: Vec<u64>,
    pub(super) start: f64,
    pub(super) end: f64,
}

impl Window {
    /// The window of the steps the profiler recorded, or `None` when none
    /// of them is in the file (the run ended during warmup).
    /// The steps the profiler recorded in this segment when none of them has a begin in the
    /// file (empty otherwise, and when no step was recorded).
    pub(super) fn lost_steps(info: &SegmentInfo, index: &Index) -> Vec<u64> {
        if info.steps.iter().any(|step| index.steps.contains_key(step)) {
            return Vec::new();
        }
        info.steps.clone()
    }

    pub(super) fn find(info: &SegmentInfo, index: &Index, pairs: &Pairs) -> Option<Window> {
        let (events, begins) = (&index.events[..], &index.steps);
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
                if !events[b + 1..e].iter().any(|ev| ev.thread == tid && !matches!(ev.ph, Ph::Meta | Ph::Unread)) {
                    present.pop();
                }
            }
        }
        let (first, last) = (present.first()?, present.last()?);
        let start = events[first.1].ts().unwrap_or(0.0);
        let end = match last.2 {
            Some(e) => events[e].ts().unwrap_or(start),
            None => events.iter().filter_map(Rec::ts).fold(start, f64::max),
        };
        Some(Window { steps: present.iter().map(|p| p.0).collect(), start, end })
    }
}

/// Most distinct `args` objects remembered as scanned (past it, each is scanned).
const SEEN_ARGS: usize = 4096;

/// What cutting the events to the window found.
pub(super) struct Cut {
    /// steptrace's thread ids of the kept events.
    pub(super) threads: BTreeSet<u64>,
    /// Spans moved to or closed at the window's edges.
    pub(super) clipped: usize,
}

/// Reads the partial file at `path` again and keeps what lies in the
/// window, clips what crosses its edges, closes what is still open at its
/// end, and scans every kept label. Each kept line goes to `write` as soon
/// as it is final, in the file's order, so that no copy of the window is
/// held.
pub(super) fn cut(
    path: &Path,
    index: &Index,
    pairs: &Pairs,
    w: &Window,
    labels: &mut LabelScanner,
    write: &mut dyn FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<Cut> {
    let events = &index.events[..];
    let mut cut = Cut { threads: BTreeSet::new(), clipped: 0 };
    let mut dropped_end = vec![false; events.len()];
    // Spans still open at the window's end, with their names.
    let mut open: Vec<(u32, String)> = Vec::new();
    let mut last_thread = None;
    // The index's labels scanned so far (each once), and, for lines without one, the
    // arguments scanned so far.
    let mut scanned = vec![false; index.labels.len()];
    let mut seen_args: HashSet<String> = HashSet::new();
    // Each kept line, edited: one buffer for all of them.
    let mut out = Vec::with_capacity(1 << 10);
    let changed = || io::Error::other("the partial file changed while it was finalised");
    each_event(path, |i, text| {
        // The second pass reads what the first read; a file changed in between ends here.
        let Some(ev) = events.get(i).filter(|ev| ev.same_length(text)) else { return Err(changed()) };
        let ts = ev.ts().unwrap_or(w.start);
        let inside = ts >= w.start && ts <= w.end;
        // What is kept is decided from the index.
        let kept = match ev.ph {
            Ph::Unread => false,
            Ph::Meta => true,
            Ph::Begin => begin_kept(events, pairs, w, i, &mut dropped_end),
            Ph::End => pairs.is_paired_end(i) && !dropped_end[i],
            Ph::Instant | Ph::Other => inside,
        };
        if !kept {
            return Ok(());
        }
        // A kept line is parsed again only where byte edits cannot do: no label or thread kept
        // by the index, a metadata line, a counter (a begin clipped at the window's start is
        // rewritten from its text by `clip`).
        let parse = ev.label == NO_LABEL
            || ev.tid().is_none()
            || matches!(ev.ph, Ph::Meta)
            || (ev.ph == Ph::Instant && ev.counter);
        let line = match parse {
            true => Some(Line::parse(text).ok_or_else(changed)?),
            false => None,
        };
        let name = || match &line {
            Some(line) => line.name(),
            None => index.labels.name(ev.label),
        };
        let thread = u64::from(ev.thread);
        let tid = line.as_ref().map_or(ev.tid(), Line::tid);
        match ev.ph {
            // Thread names are written from steptrace's own registry.
            Ph::Meta if name().as_deref() == Some(meta::PROCESS_NAME) => {
                out.clear();
                out.extend_from_slice(text);
            }
            Ph::Meta => return Ok(()),
            Ph::Begin => {
                if begin(&mut out, events, pairs, w, i, text, tid, &mut cut.clipped) {
                    open.push((ev.thread, name().as_deref().unwrap_or("").to_owned()));
                }
            }
            Ph::Instant if ev.counter => {
                out = counter(name().as_deref(), line.as_ref().and_then(Line::args), ts, thread)
            }
            _ => retag(&mut out, text, tid, thread),
        }
        match (&line, ev.label) {
            // A label the index kept is scanned once, the first time a kept line has it.
            (_, label) if label != NO_LABEL => {
                if let Some(first) = scanned.get_mut(label as usize).filter(|seen| !**seen) {
                    *first = true;
                    let args = index.labels.raw_args(label).and_then(|raw| serde_json::from_str(raw).ok());
                    labels.event(index.labels.name(label).as_deref(), args.as_ref());
                }
            }
            // Arguments written alike (most are) are read for their labels once.
            (Some(line), _) => {
                let args =
                    line.raw_args().filter(|raw| seen_args.len() >= SEEN_ARGS || seen_args.insert((*raw).to_owned()));
                labels.event(line.name().as_deref(), args.and_then(|raw| serde_json::from_str(raw).ok()).as_ref());
            }
            (None, _) => {}
        }
        if ev.ph != Ph::Meta && last_thread != Some(thread) {
            cut.threads.insert(thread);
            last_thread = Some(thread);
        }
        write(&out)
    })?;
    // Close spans still open at the window's end, innermost first.
    for (thread, name) in open.iter().rev() {
        cut.clipped += 1;
        let close = json!({
            "ph": "E", "pid": 1, "tid": thread, "ts": w.end,
            "name": name,
            "args": { meta::CLIPPED_ARG: "end" },
        });
        write(close.to_string().as_bytes())?;
    }
    Ok(cut)
}

/// Whether a begin is kept: not when it lies wholly outside the window
/// (its end then goes too). A begin whose end falls inside the window
/// becomes one complete event, and its end is not written either; one
/// still open at the window's end has its end dropped and is closed there.
fn begin_kept(events: &[Rec], pairs: &Pairs, w: &Window, i: usize, dropped_end: &mut [bool]) -> bool {
    let ts = events[i].ts().unwrap_or(w.start);
    let end_idx = pairs.end_of(i, events);
    let end_ts = end_idx.and_then(|e| events[e].ts());
    let outside = ts > w.end || end_ts.is_some_and(|t| t < w.start);
    let complete = ts >= w.start && end_ts.is_some_and(|t| t <= w.end);
    if let Some(e) = end_idx.filter(|_| outside || complete || end_ts.is_none_or(|t| t > w.end)) {
        dropped_end[e] = true;
    }
    !outside
}

/// A kept begin's line, into `out`: moved to the window's start when it
/// began before, one complete event when its end is inside the window,
/// else as it is; whether it is still open at the window's end.
/// `tid` is tracing-chrome's thread id of the line.
#[allow(clippy::too_many_arguments)]
fn begin(
    out: &mut Vec<u8>,
    events: &[Rec],
    pairs: &Pairs,
    w: &Window,
    i: usize,
    text: &[u8],
    tid: Option<u64>,
    clipped: &mut usize,
) -> bool {
    let thread = u64::from(events[i].thread);
    let ts = events[i].ts().unwrap_or(w.start);
    let end_ts = pairs.end_of(i, events).and_then(|e| events[e].ts());
    let open = end_ts.is_none_or(|t| t > w.end);
    if ts < w.start {
        *clipped += 1;
        *out = clip(text, w.start, "begin", thread);
        return open;
    }
    match end_ts {
        // Wholly inside: one complete event (HTA reads only those).
        Some(t) if t <= w.end => {
            complete(out, text, tid, thread, t - ts);
            false
        }
        _ => {
            retag(out, text, tid, thread);
            open
        }
    }
}
