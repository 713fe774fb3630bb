//! Device memory per step (`--memory`) on a synthetic trace whose answers are computed by hand:
//! in use and reserved at each point of the step, the highest sample and where it fell, the
//! categories there, headroom, and the growth rule.
//!
//! Each 10 ms step holds `train.step` > forward, loss, backward, optimizer (2 ms each from
//! 1 ms), and a sample after each phase and at the step's boundary (MB): at its start, before
//! any phase, as steptrace samples it now, or after `train.step` ended, as earlier traces did:
//! in use 100 after forward, 110 after loss, 150 after backward, 60 after the optimizer, 50 at
//! the boundary; reserved 200 (+`growth` MB per step). At the highest sample (after backward):
//! parameters 20, optimizer state 40, gradients 20, input batch 0, other 70.

use serde_json::{json, Value};
use steptrace::analysis::{Report, ReportOptions};
use steptrace::format::names::counters;
use steptrace::reader::parse_trace;

const MB: f64 = 1024.0 * 1024.0;

fn trace(steps: u64, growth: f64, boundary_at_start: bool) -> Value {
    let mut ev = Vec::new();
    let x = |name: &str, ts: f64, dur: f64| json!({"ph": "X", "cat": "steptrace", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {}});
    for n in 0..steps {
        let t = n as f64 * 10_000.0;
        ev.push(x(&format!("ProfilerStep#{n}"), t, 10_000.0));
        ev.push(x("train.step", t + 500.0, 8_600.0));
        let reserved = (200.0 + growth * n as f64) * MB;
        let samples = [
            ("forward", 100.0, 0.0, 20.0),
            ("loss", 110.0, 0.0, 20.0),
            ("backward", 150.0, 20.0, 0.0),
            ("optimizer", 60.0, 0.0, 0.0),
        ];
        for (k, (phase, in_use, grads, batch)) in samples.iter().enumerate() {
            let start = t + 1000.0 + k as f64 * 2000.0;
            ev.push(x(phase, start, 1900.0));
            let at = start + 1950.0;
            ev.push(json!({"ph": "C", "name": counters::DEVICE_MEMORY, "pid": 1, "tid": 1, "ts": at,
                "args": {"in_use": in_use * MB, "reserved": reserved}}));
            let known = 20.0 + 40.0 + grads + batch;
            ev.push(json!({"ph": "C", "name": counters::MEMORY_CATEGORIES, "pid": 1, "tid": 1, "ts": at,
                "args": {"parameters": 20.0 * MB, "optimizer_state": 40.0 * MB, "gradients": grads * MB,
                         "input_batch": batch * MB, "other": (in_use - known) * MB}}));
        }
        let boundary = if boundary_at_start { t + 200.0 } else { t + 9_500.0 };
        ev.push(json!({"ph": "C", "name": counters::DEVICE_MEMORY, "pid": 1, "tid": 1, "ts": boundary,
            "args": {"in_use": 50.0 * MB, "reserved": reserved}}));
    }
    json!({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU", "totalGlobalMem": 1000.0 * MB}],
           "traceEvents": ev})
}

fn report(growth: f64) -> Report {
    report_of(growth, false)
}

fn report_of(growth: f64, boundary_at_start: bool) -> Report {
    let trace = parse_trace(&serde_json::to_vec(&trace(6, growth, boundary_at_start)).unwrap()).unwrap();
    Report::build(&[("memory.json".into(), trace)], &ReportOptions::default()).unwrap()
}

#[test]
fn points_highest_categories_and_headroom_to_the_megabyte() {
    let r = report(0.0);
    let m = r.memory.as_ref().expect("memory view");
    let points: Vec<(&str, f64, f64)> = m
        .points
        .iter()
        .map(|p| (p.after.as_str(), p.in_use_mb.median, p.reserved_mb.as_ref().unwrap().median))
        .collect();
    assert_eq!(
        points,
        [
            ("forward", 100.0, 200.0),
            ("loss", 110.0, 200.0),
            ("backward", 150.0, 200.0),
            ("optimizer", 60.0, 200.0),
            ("step end", 50.0, 200.0)
        ]
    );
    assert_eq!((m.highest_mb.median, m.highest_after.as_str()), (150.0, "backward"));
    assert_eq!(m.pool_overhead_mb.as_ref().unwrap().median, 50.0);
    let cats: Vec<(&str, f64)> = m.categories.iter().map(|c| (c.name.as_str(), c.mb)).collect();
    assert_eq!(
        cats,
        [("parameters", 20.0), ("optimizer_state", 40.0), ("gradients", 20.0), ("input_batch", 0.0), ("other", 70.0)]
    );
    let sum: f64 = m.categories.iter().map(|c| c.mb).sum();
    assert_eq!(sum, m.highest_mb.median, "the categories add up to in use");
    assert!(m.not_observed.is_empty(), "{:?}", m.not_observed);
    assert_eq!((m.device_mb, m.headroom_mb), (Some(1000.0), Some(800.0)));
    assert!(r.hypotheses.iter().all(|h| h.id != "memory-growth"), "flat reserved memory is no leak");
}

#[test]
fn reserved_memory_that_grows_every_step_is_a_hypothesis() {
    let r = report(10.0);
    let g = r.memory.as_ref().unwrap().reserved_growth.as_ref().unwrap();
    assert_eq!((g.rising_steps, g.compared), (g.compared, 4), "steady steps 2..6 compared pairwise");
    let h = r.hypotheses.iter().find(|h| h.id == "memory-growth").expect("memory-growth");
    assert!(h.evidence.contains("grew in 4 of 4 steps"), "{}", h.evidence);
    assert!(h.experiment.is_some());
}

#[test]
fn a_sample_before_any_phase_ended_is_the_step_start_and_comes_first() {
    let r = report_of(10.0, true);
    let m = r.memory.as_ref().expect("memory view");
    let points: Vec<(&str, f64, f64)> = m
        .points
        .iter()
        .map(|p| (p.after.as_str(), p.in_use_mb.median, p.reserved_mb.as_ref().unwrap().median))
        .collect();
    // Reserved grows by 10 MB a step: the steady steps 1..=5 are counted, their median is step 3's 230.
    assert_eq!(
        points,
        [
            ("step start", 50.0, 230.0),
            ("forward", 100.0, 230.0),
            ("loss", 110.0, 230.0),
            ("backward", 150.0, 230.0),
            ("optimizer", 60.0, 230.0)
        ]
    );
    assert_eq!((m.highest_mb.median, m.highest_after.as_str()), (150.0, "backward"));
    let g = m.reserved_growth.as_ref().expect("growth read at the step starts");
    assert_eq!((g.first_mb, g.last_mb, g.rising_steps, g.compared), (210.0, 250.0, 4, 4));
}

#[test]
fn a_trace_without_samples_has_no_memory_view() {
    let trace = parse_trace(
        br#"{"traceEvents": [{"ph": "X", "name": "ProfilerStep#0", "pid": 1, "tid": 1, "ts": 0, "dur": 5}]}"#,
    )
    .unwrap();
    let r = Report::build(&[("plain.json".into(), trace)], &ReportOptions::default()).unwrap();
    assert!(r.memory.is_none());
}
