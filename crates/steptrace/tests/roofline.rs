//! How fast could it be: each priced block against the device's limits, to the microsecond.
//!
//! The trace: 10 ms steps, each with
//! - `fc1`: one matmul kernel of 4 ms for a block of 2 GFLOP and 1 MB (compute floor 2 ms,
//!   memory floor 1 ms: floor 2 ms, compute-bound, 2 ms above);
//! - `act`: two kernels of 1.5 ms of one elementwise block of 2 MB (floor 2 ms, memory-bound,
//!   1 ms above: a block's kernels are priced together);
//! - a 0.5 ms kernel whose block holds an operation without a cost rule;
//! - a 0.25 ms kernel launched outside any fused block.
//!
//! Limits: 1 GB/s, 1 TFLOP/s in f32.

use serde_json::{json, Value};
use steptrace::analysis::{Report, ReportOptions};
use steptrace::format::peaks::{Measured, Peaks, PEAKS_VERSION};
use steptrace::reader::parse_trace;

const STEP_US: f64 = 10_000.0;

fn kernel(name: &str, ts: f64, dur: f64, correlation: u64, attribution: Value) -> Value {
    let mut args = json!({"device": 0, "stream": 7, "correlation": correlation});
    args.as_object_mut().unwrap().extend(attribution.as_object().unwrap().clone());
    json!({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args})
}

fn priced(block: u64, span: &str, kind: &str, flops: f64, bytes: f64) -> Value {
    json!({"attribution": "called in span", "fused block": block, "span": span, "phase": "forward", "op kind": kind,
           "min flops": flops, "min bytes": bytes, "compute dtype": "f32"})
}

fn trace(steps: u64) -> Vec<Value> {
    let mut ev = Vec::new();
    for n in 0..steps {
        let t = n as f64 * STEP_US;
        let b = n * 10;
        ev.push(json!({"ph": "X", "cat": "user_annotation", "name": format!("ProfilerStep#{n}"), "pid": 1, "tid": 1,
                       "ts": t, "dur": STEP_US}));
        ev.push(kernel("gemm", t + 100.0, 4000.0, b + 1, priced(b + 1, "forward > fc1", "matmul", 2e9, 1e6)));
        let act = priced(b + 2, "forward > act", "elementwise (fused)", 2e6, 2e6);
        ev.push(kernel("fused_a", t + 4200.0, 1500.0, b + 2, act.clone()));
        ev.push(kernel("fused_b", t + 5800.0, 1500.0, b + 3, act));
        let mut lossy = priced(b + 3, "forward > head", "elementwise", 10.0, 100.0);
        lossy["unpriced ops"] = json!(["CtcLoss"]);
        ev.push(kernel("ctc", t + 7400.0, 500.0, b + 4, lossy));
        let outside =
            json!({"attribution": "not attributed: launched outside any fused block (autotune, copies, ...)"});
        ev.push(kernel("copy_kernel", t + 8000.0, 250.0, b + 5, outside));
    }
    ev
}

fn peaks() -> Peaks {
    let m = |value: f64| Measured { value, spread: 0.0, method: "test".into() };
    Peaks {
        version: PEAKS_VERSION,
        device: "Test GPU".into(),
        backend: "cuda".into(),
        software: "test".into(),
        measured_at: "2026-12-05T00:00:00Z".into(),
        read: Some(m(1.2e9)),
        write: None,
        copy: Some(m(1e9)),
        flops: [("f32".to_owned(), m(1e12))].into(),
        launch_us: None,
        published: Default::default(),
        problems: vec![],
        cpu: false,
    }
}

fn report(events: Vec<Value>, peaks: Option<Peaks>) -> Report {
    let doc = json!({"schemaVersion": 1, "traceEvents": events});
    let trace = parse_trace(&serde_json::to_vec(&doc).unwrap()).unwrap();
    let options = ReportOptions { batch_size: Some(64), peaks, ..ReportOptions::default() };
    Report::build(&[("priced.json".into(), trace)], &options).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9 * b.abs().max(1.0)
}

#[test]
fn each_block_is_priced_against_its_floor() {
    let r = report(trace(6), Some(peaks()));
    let v = r.device.roofline.as_ref().expect("a roofline view");
    assert_eq!(v.steps, r.device.devices[0].busy_ms.n, "the device view's counted steps");
    assert!(v.steps >= 4, "{}", v.steps);
    assert!(close(v.kernel_ms_per_step, 7.75), "{}", v.kernel_ms_per_step);
    assert!(close(v.priced_ms_per_step, 7.0), "{}", v.priced_ms_per_step);
    assert!(close(v.priced_share, 7.0 / 7.75));
    let row =
        |name: &str| v.by_layer.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("{name}: {:?}", v.by_layer));
    let fc1 = row("forward > fc1");
    assert!(close(fc1.floor_ms.unwrap(), 2.0) && close(fc1.above_floor_ms.unwrap(), 2.0), "{fc1:?}");
    assert_eq!(fc1.bound, Some("compute"));
    assert!(close(fc1.efficiency.unwrap(), 0.5) && close(fc1.intensity, 2000.0));
    assert!(close(fc1.achieved_flops, 2e9 / 4e-3) && close(fc1.achieved_bandwidth, 1e6 / 4e-3));
    // Two kernels of one block: priced once, against their summed 3 ms.
    let act = row("forward > act");
    assert!(
        close(act.ms_per_step, 3.0) && close(act.floor_ms.unwrap(), 2.0) && close(act.above_floor_ms.unwrap(), 1.0)
    );
    assert_eq!(act.bound, Some("memory"));
    // Ranked by time above the floor.
    assert_eq!(v.by_layer[0].name, "forward > fc1");
    // By kernel: a block's work shared among its kernels by their time (half each here).
    let kernel =
        |name: &str| v.by_kernel.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("{name}: {:?}", v.by_kernel));
    let (a, b) = (kernel("fused_a"), kernel("fused_b"));
    assert!(close(a.bytes_per_step, 1e6) && close(b.bytes_per_step, 1e6) && close(a.floor_ms.unwrap(), 1.0), "{a:?}");
    assert!(close(a.above_floor_ms.unwrap(), 0.5) && a.bound == Some("memory"));
    assert!(close(kernel("gemm").floor_ms.unwrap(), 2.0));
    // Nothing dropped: what is not priced is listed by reason.
    let reasons: Vec<(&str, f64)> = v.unpriced.iter().map(|t| (t.name.as_str(), t.ms_per_step)).collect();
    assert!(reasons.iter().any(|(n, ms)| *n == "no cost rule for CtcLoss" && close(*ms, 0.5)), "{reasons:?}");
    assert!(reasons.iter().any(|(n, ms)| n.contains("outside any fused block") && close(*ms, 0.25)), "{reasons:?}");
    // The step, split: the floor, above it, unpriced, idle; the parts make up the step.
    let s = v.step.as_ref().expect("a step split");
    assert!(
        close(s.step_ms, 10.0) && close(s.floor_ms, 4.0) && close(s.above_floor_ms, 3.0) && close(s.unpriced_ms, 0.75)
    );
    let idle = s.idle_input_ms.unwrap_or(0.0) + s.idle_sync_ms.unwrap_or(0.0) + s.idle_other_ms;
    assert!(close(idle, 10.0 - 7.75), "{s:?}");
    assert!(close(s.floor_ms + s.above_floor_ms + s.unpriced_ms + idle + s.rest_ms, s.step_ms));
}

#[test]
fn a_layer_far_above_its_floor_is_named_with_its_bound_and_next_experiment() {
    let r = report(trace(4), Some(peaks()));
    let h = r.hypotheses.iter().find(|h| h.id == "above-floor").expect("the rule fires");
    assert!(h.evidence.contains("`forward > fc1`") && h.evidence.contains("compute-bound"), "{}", h.evidence);
    assert!(h.evidence.contains("50.0% of the roof") && h.evidence.contains("1.00 TFLOP/s in f32"), "{}", h.evidence);
    assert!(h.next.contains("steptrace bench"), "confirmed outside the profiler: {}", h.next);
}

#[test]
fn without_limits_there_is_no_floor_but_the_work_is_still_shown() {
    let r = report(trace(3), None);
    let v = r.device.roofline.as_ref().expect("a roofline view");
    assert!(v.roofs.is_none() && v.step.is_none());
    assert!(v.no_floor.as_deref().is_some_and(|w| w.contains("steptrace peaks")), "{:?}", v.no_floor);
    let fc1 = v.by_layer.iter().find(|r| r.name == "forward > fc1").unwrap();
    assert!(fc1.floor_ms.is_none() && fc1.bound.is_none() && close(fc1.intensity, 2000.0));
    assert!(r.hypotheses.iter().all(|h| h.id != "above-floor"));
    assert!(r.not_examined.iter().any(|n| n.check == "time above the device floor"));
}

#[test]
fn traces_without_attribution_have_no_roofline() {
    let events: Vec<Value> = trace(2)
        .into_iter()
        .map(|mut e| {
            if let Some(args) = e.get_mut("args").and_then(Value::as_object_mut) {
                args.retain(|k, _| ["device", "stream", "correlation"].contains(&k.as_str()));
            }
            e
        })
        .collect();
    assert!(report(events, Some(peaks())).device.roofline.is_none());
}

#[test]
fn kernels_of_older_traces_are_listed_as_carrying_no_cost() {
    let events: Vec<Value> = trace(2)
        .into_iter()
        .map(|mut e| {
            if let Some(args) = e.get_mut("args").and_then(Value::as_object_mut) {
                args.retain(|k, _| !k.starts_with("min ") && k != "unpriced ops");
            }
            e
        })
        .collect();
    let r = report(events, Some(peaks()));
    let v = r.device.roofline.as_ref().unwrap();
    assert_eq!(v.priced_share, 0.0);
    assert!(v.unpriced.iter().any(|t| t.name.contains("no cost figures")), "{:?}", v.unpriced);
}
