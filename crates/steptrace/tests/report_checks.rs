//! The report checks what it reads: events it cannot use are left out
//! with a warning, steps are counted once, figures are never negative,
//! and deep nesting costs no more than shallow.

use serde_json::{json, Value};
use steptrace::analysis::{Report, ReportOptions, Timing};
use steptrace::reader::{parse_trace, Trace};

fn trace(events: Vec<Value>) -> Trace {
    let doc = json!({
        "traceEvents": events,
        "metadata": {"format": "steptrace-chrome-trace/1", "cycle": 0,
                     "manifest": {"startup_steps": 0, "backend_kind": "cuda", "sync_policy": "step"}},
    });
    parse_trace(&serde_json::to_vec(&doc).unwrap()).unwrap()
}

fn step(n: u64, ts_ms: f64, dur_ms: f64) -> Value {
    json!({"ph": "X", "name": format!("ProfilerStep#{n}"), "pid": 1, "tid": 1, "ts": ts_ms * 1000.0, "dur": dur_ms * 1000.0})
}

fn build(files: &[(&str, Trace)]) -> Report {
    let files: Vec<(String, Trace)> = files.iter().map(|(p, t)| ((*p).to_owned(), t.clone())).collect();
    Report::build(&files, &ReportOptions::default()).unwrap()
}

#[test]
fn a_clean_trace_has_no_warnings() {
    let r = build(&[("a.json", trace((0..4).map(|n| step(n, n as f64 * 10.0, 10.0)).collect()))]);
    assert_eq!(r.warnings, Vec::<String>::new());
    let w = r.timing.window.unwrap();
    assert_eq!((w.steps, w.ms_per_step), (4, 10.0));
}

#[test]
fn unusable_events_are_left_out_and_named() {
    let events = vec![
        step(0, 0.0, 10.0),
        step(1, 10.0, -0.889),
        json!({"ph": "X", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 1e308, "dur": 1}),
        step(3, 20.0, 10.0),
    ];
    let r = build(&[("a.json", trace(events))]);
    let steps: Vec<u64> = r.timing.steps.iter().map(|s| s.step).collect();
    assert_eq!(steps, [0, 3]);
    assert_eq!(r.warnings.len(), 2, "{:#?}", r.warnings);
    assert!(
        r.warnings[0].starts_with("a.json: 1 event(s) with a missing, negative or non-finite duration"),
        "{}",
        r.warnings[0]
    );
    assert!(r.warnings[1].contains("with a time no trace can hold"), "{}", r.warnings[1]);
    // Steps 0 and 3 span 30 ms of wall time: 15 ms/step, never negative.
    assert_eq!(r.timing.window.unwrap().ms_per_step, 15.0);
}

#[test]
fn steps_out_of_time_order_give_the_extent_not_a_negative_window() {
    let r = build(&[("a.json", trace(vec![step(1, 50.0, 10.0), step(2, 0.0, 10.0)]))]);
    let w = r.timing.window.unwrap();
    assert_eq!((w.wall_ms, w.ms_per_step), (60.0, 30.0));
    assert!(r.warnings.iter().any(|w| w.contains("do not follow time order")), "{:?}", r.warnings);
}

#[test]
fn duplicate_steps_are_counted_once_within_and_across_files() {
    let a = trace(vec![step(0, 0.0, 10.0), step(1, 10.0, 10.0), step(1, 10.0, 12.0)]);
    let b = trace(vec![step(1, 100.0, 30.0), step(2, 130.0, 10.0)]);
    let r = build(&[("a.json", a), ("b.json", b)]);
    let steps: Vec<(u64, f64)> = r.timing.steps.iter().map(|s| (s.step, s.ms)).collect();
    assert_eq!(steps, [(0, 10.0), (1, 12.0), (2, 10.0)]);
    assert!(r.warnings[0].contains("a.json: 1 step number(s) written more than once (#1 ×2)"), "{:?}", r.warnings);
    assert!(
        r.warnings[1].contains("b.json holds 1 step(s) that a.json also holds (#1): counted once, from a.json"),
        "{:?}",
        r.warnings
    );
}

#[test]
fn nested_step_markers_are_not_steps() {
    let events = vec![step(0, 0.0, 100.0), step(1, 10.0, 10.0), step(2, 100.0, 10.0)];
    let r = build(&[("a.json", trace(events))]);
    let steps: Vec<u64> = r.timing.steps.iter().map(|s| s.step).collect();
    assert_eq!(steps, [0, 2]);
    assert!(
        r.warnings[0].contains("1 ProfilerStep span(s) start inside an earlier step on their thread (#1)"),
        "{:?}",
        r.warnings
    );
}

#[test]
fn a_hundred_thousand_nested_spans_give_exact_figures() {
    // step > s0 > s1 > ... > s99999 > sync, each 1 µs inside its parent.
    let depth = 100_000;
    let mut events = vec![json!({"ph": "B", "name": "ProfilerStep#0", "pid": 1, "tid": 1, "ts": 0})];
    for i in 0..depth {
        events.push(json!({"ph": "B", "name": format!("s{}", i % 3), "pid": 1, "tid": 1, "ts": i + 1}));
    }
    events.push(json!({"ph": "X", "name": "sync", "pid": 1, "tid": 1, "ts": depth + 1, "dur": 1}));
    for i in 0..=depth {
        events.push(json!({"ph": "E", "pid": 1, "tid": 1, "ts": depth + 3 + i}));
    }
    let r = build(&[("deep.json", trace(events))]);
    assert_eq!(r.warnings, Vec::<String>::new());
    let row = |name: &str| r.spans.rows.iter().find(|row| row.name == name).unwrap();
    let s0 = row("s0");
    assert_eq!(s0.calls, 33_334);
    // Every span holds the sync: all are synced.
    assert_eq!(s0.timing, Timing::Synced);
    assert_eq!(row("ProfilerStep#*").timing, Timing::Synced);
    // Own time: 1 µs before the child and 1 µs after it, for every span
    // (the innermost holds the 1 µs sync inside its 3 µs).
    let self_us: f64 = r
        .spans
        .rows
        .iter()
        .filter(|row| row.name.starts_with('s') && row.name != "sync")
        .map(|row| row.self_ms * 1000.0)
        .sum();
    assert!((self_us - 2.0 * depth as f64).abs() < 1e-3, "{self_us}");
    assert_eq!(r.timing.steps.len(), 1);
}

#[test]
fn long_names_are_cut_in_hypotheses() {
    let name = "k".repeat(1 << 20);
    let events = vec![
        step(0, 0.0, 10.0),
        json!({"ph": "X", "name": name, "cat": "kernel", "pid": 1, "tid": 7, "ts": 0, "dur": 9000}),
        json!({"ph": "X", "name": "small", "cat": "kernel", "pid": 1, "tid": 7, "ts": 9000, "dur": 100}),
    ];
    let r = build(&[("a.json", trace(events))]);
    let h = r.hypotheses.iter().find(|h| h.id == "dominant-kernel").expect("the long kernel dominates");
    assert!(h.evidence.len() < 1000 && h.evidence.contains("… (1048576 bytes)"), "{}", &h.evidence[..200]);
    // The table row keeps the whole name: the JSON output has it.
    assert!(r.spans.rows.iter().any(|row| row.name.len() == 1 << 20));
}
