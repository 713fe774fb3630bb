//! From the markers of one run's start to its [`ColdStart`]: pure, on times in ms from the
//! start of the capture.
//!
//! Compiles and autotunes become intervals; each phase's items are measures of disjoint sets
//! (device client, then autotune, then compilation outside autotune), so that they add up
//! to the phase's wall time with the rest (see [`steptrace::format::ColdStart`]).

use std::collections::{BTreeMap, BTreeSet};

use steptrace::format::{AutotuneItems, CacheUse, ColdStart, CompileItems, Figure, StartupPhase};

use super::marker::{ends_tune, Marker};

/// A time interval, ms.
pub(crate) type Span = (f64, f64);

/// One marker as it was seen.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    /// ms since the capture began.
    pub(crate) at: f64,
    /// The thread that wrote it (small numbers, in order of first appearance).
    pub(crate) thread: usize,
    /// What it marks.
    pub(crate) marker: Marker,
}

/// Everything captured during one run's start.
#[derive(Debug, Clone, Default)]
pub(crate) struct Timeline {
    /// Markers, in the order they were written.
    pub(crate) events: Vec<Event>,
    /// Device client creations timed by steptrace.
    pub(crate) clients: Vec<Span>,
    /// The set-up phase.
    pub(crate) setup: Span,
    /// Step 0.
    pub(crate) first_step: Span,
    /// The phases' wall times as the run measured them (so that the items add up to the
    /// very figures it reports); `None`: the windows' lengths.
    pub(crate) walls: Option<(f64, f64)>,
}

/// How a compile's time can be read on this backend.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CompileTiming {
    /// A start and an end record on the compiling thread (wgpu).
    Paired,
    /// A start record only (CUDA): the time is absent for this reason; an upper bound runs
    /// to the next record on the same thread.
    StartOnly(String),
}

/// What the backend and cubecl's configuration let the capture see.
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    /// Where the figures come from.
    pub(crate) source: String,
    /// What compiles, for `rest_includes`: `NVRTC`, `shader`.
    pub(crate) compiler: &'static str,
    /// How compile time is read.
    pub(crate) compile_timing: CompileTiming,
    /// The persistent compilation cache's name (`PTX cache`), or why there is none.
    pub(crate) compile_cache: Result<&'static str, String>,
    /// Whether autotune ends are logged where steptrace reads them, or why not.
    pub(crate) autotune_ends: Result<(), String>,
    /// Whether persistent autotune-cache hits are logged, or why not.
    pub(crate) autotune_hits: Result<(), String>,
}

/// The cold start of the run `t` describes.
pub(crate) fn cold_start(t: &Timeline, f: &Facts) -> ColdStart {
    let mut events = t.events.clone();
    events.sort_by(|a, b| a.at.total_cmp(&b.at));
    let end = t.first_step.1.max(t.setup.1);
    let compiles = compile_spans(&events, &f.compile_timing, end);
    let tunes = tune_spans(&events);
    let clients = union(t.clients.clone());
    let phase = |w: Span, wall: Option<f64>, with_client: bool| {
        let client = with_client.then(|| clients.clone());
        itemise(w, wall.unwrap_or(w.1 - w.0), &events, client, &compiles, &tunes, f)
    };
    ColdStart {
        source: f.source.clone(),
        setup: phase(t.setup, t.walls.map(|w| w.0), true),
        first_step: phase(t.first_step, t.walls.map(|w| w.1), false),
        cache: label(&events, &tunes, f),
    }
}

// === intervals ===

/// Sorted, disjoint, non-empty spans covering the same set as `v`.
pub(crate) fn union(mut v: Vec<Span>) -> Vec<Span> {
    v.retain(|s| s.1 > s.0);
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<Span> = Vec::with_capacity(v.len());
    for s in v {
        match out.last_mut() {
            Some(last) if s.0 <= last.1 => last.1 = last.1.max(s.1),
            _ => out.push(s),
        }
    }
    out
}

fn clip(v: &[Span], w: Span) -> Vec<Span> {
    union(v.iter().map(|s| (s.0.max(w.0), s.1.min(w.1))).collect())
}

fn length(v: &[Span]) -> f64 {
    // A fold from +0.0: `sum` starts from -0.0, which would print as "-0.0".
    v.iter().fold(0.0, |total, s| total + (s.1 - s.0))
}

/// `a` minus `b`, both unions.
fn subtract(a: &[Span], b: &[Span]) -> Vec<Span> {
    let mut out = Vec::new();
    for &(mut start, end) in a {
        for &(b0, b1) in b {
            if b1 <= start || b0 >= end {
                continue;
            }
            if b0 > start {
                out.push((start, b0));
            }
            start = start.max(b1);
            if start >= end {
                break;
            }
        }
        if start < end {
            out.push((start, end));
        }
    }
    out
}

// === compiles and autotunes ===

/// Compile intervals: exact ones, or upper bounds, with the number of starts that have no
/// end.
struct Compiles {
    spans: Vec<Span>,
    exact: bool,
    unpaired: usize,
}

fn compile_spans(events: &[Event], timing: &CompileTiming, end: f64) -> Compiles {
    let mut spans = Vec::new();
    let mut unpaired = 0;
    let mut by_thread: BTreeMap<usize, Vec<&Event>> = BTreeMap::new();
    for e in events {
        by_thread.entry(e.thread).or_default().push(e);
    }
    for list in by_thread.values() {
        match timing {
            CompileTiming::Paired => {
                let mut open = None;
                for e in list {
                    match e.marker {
                        // A start while one is open: that one never ended.
                        Marker::CompileStart => unpaired += usize::from(open.replace(e.at).is_some()),
                        Marker::CompileEnd => {
                            if let Some(start) = open.take() {
                                spans.push((start, e.at));
                            }
                        }
                        _ => {}
                    }
                }
                unpaired += usize::from(open.is_some());
            }
            CompileTiming::StartOnly(_) => {
                for (i, e) in list.iter().enumerate() {
                    if e.marker == Marker::CompileStart {
                        let next = list.get(i + 1).map_or(end, |n| n.at);
                        spans.push((e.at, next.max(e.at)));
                    }
                }
            }
        }
    }
    Compiles { spans: union(spans), exact: matches!(timing, CompileTiming::Paired), unpaired }
}

/// Autotune runs that ended (benchmarked), keys tuned at all, and keys validated.
#[derive(Default)]
struct Tunes {
    /// `(start, end)` of each run that benchmarked.
    runs: Vec<Span>,
    /// Every key a `Tuning` record named (misses, with or without benchmarks).
    tuned: BTreeSet<String>,
    /// `(at, key)` of each persistent-cache check.
    validated: Vec<(f64, String)>,
}

fn tune_spans(events: &[Event]) -> Tunes {
    let mut tunes = Tunes::default();
    let mut open: BTreeMap<usize, Vec<(String, f64)>> = BTreeMap::new();
    for e in events {
        match &e.marker {
            Marker::TuneStart(key) => {
                tunes.tuned.insert(key.clone());
                open.entry(e.thread).or_default().push((key.clone(), e.at));
            }
            Marker::TuneEnd(line) => {
                let stack = open.entry(e.thread).or_default();
                // The innermost open autotune this line names; any opened after it had a
                // single candidate (cubecl returns without benchmarking or logging an end).
                if let Some(i) = stack.iter().rposition(|(key, _)| ends_tune(line, key)) {
                    tunes.runs.push((stack[i].1, e.at));
                    stack.truncate(i);
                }
            }
            Marker::TuneValidate(key) => tunes.validated.push((e.at, key.clone())),
            _ => {}
        }
    }
    tunes
}

// === one phase ===

fn within(at: f64, w: Span) -> bool {
    at >= w.0 && at <= w.1
}

fn count(events: &[Event], w: Span, marker: &Marker) -> u64 {
    events.iter().filter(|e| within(e.at, w) && &e.marker == marker).count() as u64
}

fn itemise(
    w: Span,
    wall: f64,
    events: &[Event],
    clients: Option<Vec<Span>>,
    c: &Compiles,
    t: &Tunes,
    f: &Facts,
) -> StartupPhase {
    let wall = wall.max(0.0);
    let client = clients.as_ref().map(|k| clip(k, w)).unwrap_or_default();
    let client_ms = clients.map(|k| {
        if k.is_empty() {
            Figure::absent("not measured: the device client existed before this run (created earlier in this process)")
        } else {
            Figure::Known(length(&client))
        }
    });

    // Autotune: its runs' union, outside the client's creation.
    let (tune_set, runs, tune_ms) = match &f.autotune_ends {
        Ok(()) => {
            let set = subtract(&clip(&t.runs, w), &client);
            let runs = t.runs.iter().filter(|r| within(r.0, w)).count() as u64;
            let ms = length(&set);
            (set, Figure::Known(runs), Figure::Known(ms))
        }
        Err(why) => (Vec::new(), Figure::absent(why.clone()), Figure::absent(why.clone())),
    };
    let tune_hits = match &f.autotune_hits {
        Ok(()) => {
            Figure::Known(t.validated.iter().filter(|(at, key)| within(*at, w) && !t.tuned.contains(key)).count() as u64)
        }
        Err(why) => Figure::absent(why.clone()),
    };

    // Compilation: inside autotune, and outside both autotune and the client.
    let kernels = count(events, w, &Marker::CompileStart);
    let compile_set = subtract(&clip(&c.spans, w), &client);
    let cache_hits = match &f.compile_cache {
        Ok(_) => Figure::Known(count(events, w, &Marker::CompileCacheHit)),
        Err(why) => Figure::absent(why.clone()),
    };
    let not_exact = match (&f.compile_timing, c.exact, c.unpaired) {
        (CompileTiming::StartOnly(why), _, _) => Some(why.clone()),
        (_, true, 0) => None,
        (_, _, n) => Some(format!("not measured: {n} compiles have no end record (a failed compile?)")),
    };
    let mut rest_includes = Vec::new();
    let compile = match not_exact {
        None => {
            let outside = length(&subtract(&compile_set, &tune_set));
            let total = length(&compile_set);
            CompileItems {
                kernels: Figure::Known(kernels),
                cache_hits,
                ms: Figure::Known(total),
                ms_upper_bound: None,
                in_autotune_ms: match &tune_ms {
                    Figure::Known(_) => Figure::Known(total - outside),
                    Figure::Absent(why) => Figure::absent(why.clone()),
                },
                outside_autotune_ms: Figure::Known(outside),
            }
        }
        Some(why) => {
            let bound = (!c.exact).then(|| length(&compile_set));
            if kernels > 0 || bound.is_some_and(|b| b > 0.0) {
                let at_most = bound.map_or_else(String::new, |b| format!("; at most {b:.1} ms"));
                rest_includes
                    .push(format!("the {} compilation of {kernels} kernels (not measured{at_most})", f.compiler));
            }
            CompileItems {
                kernels: Figure::Known(kernels),
                cache_hits,
                ms: Figure::absent(why.clone()),
                ms_upper_bound: bound,
                in_autotune_ms: Figure::absent(why.clone()),
                outside_autotune_ms: Figure::absent(why),
            }
        }
    };
    if tune_ms.known().is_none() {
        rest_includes.push("autotune (not measured)".to_owned());
    }
    let known = |f: &Figure<f64>| f.known().copied().unwrap_or(0.0);
    let items = client_ms.as_ref().map_or(0.0, known) + known(&tune_ms) + known(&compile.outside_autotune_ms);
    StartupPhase {
        ms: wall,
        client_ms,
        compile,
        autotune: AutotuneItems { runs, cache_hits: tune_hits, ms: tune_ms },
        rest_ms: (wall - items).max(0.0),
        rest_includes,
    }
}

// === the run's cache label ===

fn label(events: &[Event], t: &Tunes, f: &Facts) -> CacheUse {
    let compiled = events.iter().filter(|e| e.marker == Marker::CompileStart).count();
    let from_cache = events.iter().filter(|e| e.marker == Marker::CompileCacheHit).count();
    let mut basis = Vec::new();
    let (mut hits, mut misses) = (0usize, 0usize);
    let mut unknown = None;
    match &f.compile_cache {
        Ok(name) => {
            hits += from_cache;
            misses += compiled;
            basis.push(format!("kernels: {from_cache} of {} from the {name}", from_cache + compiled));
        }
        Err(why) => basis.push(format!("kernels: {compiled} compiled ({why})")),
    }
    let runs = t.runs.len();
    match (&f.autotune_ends, &f.autotune_hits) {
        (Ok(()), Ok(())) => {
            let tune_hits = t.validated.iter().filter(|(_, key)| !t.tuned.contains(key)).count();
            hits += tune_hits;
            misses += runs;
            basis.push(format!("autotune results: {tune_hits} of {} from the cache", tune_hits + runs));
        }
        (Ok(()), Err(why)) => {
            misses += runs;
            basis.push(format!("autotune: {runs} runs, cache hits {why}"));
            unknown = Some(why.clone());
        }
        (Err(why), _) => {
            basis.push(format!("autotune: {why}"));
            unknown = Some(why.clone());
        }
    }
    let label = match (unknown, hits, misses) {
        (Some(why), _, _) => format!("not observed: {}", why.trim_start_matches("not observed: ")),
        // Every kernel of a fresh process is either compiled or read from a cache: nothing
        // at all means this process already held them (an earlier run in it).
        (None, 0, 0) if compiled == 0 && runs == 0 => {
            basis.push(
                "nothing was compiled, tuned or read from a cache: this process already held it in memory".to_owned(),
            );
            "warm".to_owned()
        }
        (None, 0, 0) => "not observed: nothing was compiled or tuned that cubecl keeps on disk".to_owned(),
        (None, 0, _) => "cold".to_owned(),
        (None, _, 0) => "warm".to_owned(),
        (None, _, _) => "partly warm".to_owned(),
    };
    CacheUse { label, basis: format!("set-up and step 0: {}", basis.join("; ")) }
}

#[cfg(test)]
#[path = "breakdown_tests.rs"]
mod tests;
