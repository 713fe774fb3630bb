//! The priced report ("how fast could it be") given inconsistent or extreme input: limits
//! of 0, negative, 1e308, 1e-300, NaN or infinite; work of 1e308 bytes or u64::MAX; kernels
//! of no time or far longer than their step; kernels that overlap. Every figure it gives is
//! finite, never a negative zero, and the step's parts add up to it, or the step is not
//! split and the report says which input is inconsistent.

use proptest::prelude::*;
use serde_json::{json, Value};
use steptrace::analysis::{rate, Report, ReportOptions, RooflineView};
use steptrace::format::peaks::{Measured, Peaks, PEAKS_VERSION};
use steptrace::reader::parse_trace;

const STEP_US: f64 = 10_000.0;

/// A kernel of block `block` in span `fc1`, priced with `flops` and `bytes`.
fn kernel(ts: f64, dur: f64, block: u64, flops: f64, bytes: f64) -> Value {
    kernel_on(7, ts, dur, block, flops, bytes)
}

/// The same, on stream `stream`.
fn kernel_on(stream: u64, ts: f64, dur: f64, block: u64, flops: f64, bytes: f64) -> Value {
    json!({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": stream, "ts": ts, "dur": dur,
           "args": {"device": 0, "stream": stream, "correlation": block, "attribution": "called in span",
                    "fused block": block, "span": "forward > fc1", "phase": "forward", "op kind": "matmul",
                    "min flops": flops, "min bytes": bytes, "compute dtype": "f32"}})
}

/// `steps` steps of 10 ms, each holding the kernels `per_step` makes from the step's start
/// and a block number.
fn trace(steps: u64, per_step: impl Fn(f64, u64) -> Vec<Value>) -> Vec<Value> {
    let mut ev = Vec::new();
    for n in 0..steps {
        let t = n as f64 * STEP_US;
        ev.push(json!({"ph": "X", "cat": "user_annotation", "name": format!("ProfilerStep#{n}"), "pid": 1, "tid": 1,
                       "ts": t, "dur": STEP_US}));
        ev.extend(per_step(t, n * 10));
    }
    ev
}

fn peaks(copy: f64, flops: f64) -> Peaks {
    let m = |value: f64| Measured { value, spread: 0.0, method: "test".into() };
    Peaks {
        version: PEAKS_VERSION,
        device: "Test GPU".into(),
        backend: "cuda".into(),
        software: "test".into(),
        measured_at: "2026-12-05T00:00:00Z".into(),
        read: None,
        write: None,
        copy: Some(m(copy)),
        flops: [("f32".to_owned(), m(flops))].into(),
        launch_us: None,
        published: Default::default(),
        problems: vec![],
        cpu: false,
    }
}

fn report(events: Vec<Value>, peaks: Option<Peaks>) -> Option<Report> {
    let doc = json!({"schemaVersion": 1, "traceEvents": events});
    let trace = parse_trace(&serde_json::to_vec(&doc).ok()?).ok()?;
    let options = ReportOptions { batch_size: Some(64), peaks, ..ReportOptions::default() };
    Report::build(&[("bounds.json".into(), trace)], &options).ok()
}

fn view(r: &Report) -> &RooflineView {
    r.device.roofline.as_ref().expect("a roofline view")
}

/// Every figure of the view.
fn figures(v: &RooflineView) -> Vec<f64> {
    let mut out = vec![v.kernel_ms_per_step, v.priced_ms_per_step, v.priced_share];
    for r in v.by_layer.iter().chain(&v.by_op_kind).chain(&v.by_phase).chain(&v.by_kernel) {
        out.extend([
            r.ms_per_step,
            r.flops_per_step,
            r.bytes_per_step,
            r.achieved_flops,
            r.achieved_bandwidth,
            r.intensity,
        ]);
        out.extend([r.floor_ms, r.above_floor_ms, r.efficiency].into_iter().flatten());
    }
    for r in &v.unpriced {
        out.extend([r.ms_per_step, r.share, r.kernels_per_step]);
    }
    if let Some(s) = &v.step {
        out.extend([s.step_ms, s.floor_ms, s.above_floor_ms, s.unpriced_ms, s.idle_other_ms, s.rest_ms]);
        out.extend([s.idle_input_ms, s.idle_sync_ms].into_iter().flatten());
    }
    if let Some(r) = &v.roofs {
        out.push(r.bandwidth);
        out.extend(r.throughput.values());
    }
    out
}

/// Whether `text` holds a word `inf` or `NaN`.
fn says_infinite(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w.eq_ignore_ascii_case("inf") || w == "NaN")
}

/// What a reader of the view is shown: its words, and each figure as the report prints a
/// rate or a share.
fn shown(v: &RooflineView) -> String {
    let mut text: Vec<String> = v.notes.clone();
    text.extend(v.no_floor.clone());
    text.extend(v.step_problem.clone());
    text.extend(figures(v).into_iter().map(|f| format!("{} {:.1}%", rate(f, "B/s"), f * 100.0)));
    text.push(serde_json::to_string(v).expect("JSON"));
    text.join("\n")
}

/// The checks every view must pass.
fn assert_bounded(v: &RooflineView) {
    for f in figures(v) {
        assert!(f.is_finite(), "a figure is not finite: {v:#?}");
        assert!(!(f == 0.0 && f.is_sign_negative()), "a negative zero: {v:#?}");
    }
    let text = shown(v);
    assert!(!says_infinite(&text), "{text}");
    if let Some(s) = &v.step {
        let parts = [
            s.floor_ms,
            s.above_floor_ms,
            s.unpriced_ms,
            s.idle_input_ms.unwrap_or(0.0),
            s.idle_sync_ms.unwrap_or(0.0),
            s.idle_other_ms,
            s.rest_ms,
        ];
        assert!(parts.iter().all(|p| *p >= 0.0), "{s:?}");
        // The split shows the floor and the time above it in place of the priced time.
        let priced = v.priced_ms_per_step;
        let sum: f64 = parts.iter().sum::<f64>() - (s.floor_ms + s.above_floor_ms) + priced;
        assert!((sum - s.step_ms).abs() <= s.step_ms * 0.005 + 1e-6, "parts {sum} of step {}: {s:?}", s.step_ms);
        assert!(s.floor_ms <= priced + s.step_ms * 0.005 + 1e-6, "{s:?} priced {priced}");
    }
    if v.roofs.is_some() && v.step.is_none() {
        // A missing split with limits is said, unless the steps had no device view.
        if let Some(why) = &v.step_problem {
            assert!(v.notes.contains(why), "{:?}", v.notes);
        }
    }
}

#[test]
fn overlapping_kernels_are_named_instead_of_split() {
    // Three 4 ms kernels at once on three streams: 12 ms of kernels in each 10 ms step.
    let events = trace(5, |t, b| (0..3).map(|i| kernel_on(7 + i, t + 100.0, 4000.0, b + i + 1, 2e9, 1e6)).collect());
    let r = report(events, Some(peaks(1e9, 1e12))).expect("a report");
    let v = view(&r);
    assert!(v.step.is_none(), "{:?}", v.step);
    let why = v.step_problem.as_deref().expect("the reason");
    assert!(why.contains("kernels overlap or are duplicated"), "{why}");
    assert_bounded(v);
}

#[test]
fn kernels_that_overlap_on_their_stream_are_named_even_when_they_fit_the_step() {
    // Two 2 ms kernels on one stream, the second starting before the first ends: 4 ms of
    // kernels in a 10 ms step, but one stream cannot run them at once.
    let events =
        trace(5, |t, b| vec![kernel(t + 100.0, 2000.0, b + 1, 2e9, 1e6), kernel(t + 1000.0, 2000.0, b + 2, 2e9, 1e6)]);
    let r = report(events, Some(peaks(1e9, 1e12))).expect("a report");
    let v = view(&r);
    assert!(v.step.is_none(), "{:?}", v.step);
    let why = v.step_problem.as_deref().expect("the reason");
    assert!(why.contains("start before the previous kernel on their stream ended"), "{why}");
    assert_bounded(v);
    // The rule on time above the floor says why it did not run.
    assert!(r.hypotheses.iter().all(|h| h.id != "above-floor"));
    assert!(
        r.not_examined.iter().any(|n| n.check == "time above the device floor" && n.why == why),
        "{:?}",
        r.not_examined
    );
}

#[test]
fn a_kernel_far_longer_than_its_step_is_named() {
    let events = trace(4, |t, b| vec![kernel(t + 100.0, if b == 20 { 1e12 } else { 4000.0 }, b + 1, 2e9, 1e6)]);
    if let Some(r) = report(events, Some(peaks(1e9, 1e12))) {
        let v = view(&r);
        assert_bounded(v);
        if v.step.is_none() && v.roofs.is_some() {
            assert!(v.step_problem.is_some(), "{v:#?}");
        }
    }
}

#[test]
fn implausible_work_and_timeless_kernels_are_not_priced() {
    let events = trace(4, |t, b| {
        vec![
            kernel(t + 100.0, 4000.0, b + 1, 2e9, 1e308),
            kernel(t + 4200.0, 0.0, b + 2, 2e9, 1e6),
            kernel(t + 4300.0, 1000.0, b + 3, 1e-300, 1e6),
        ]
    });
    let r = report(events, Some(peaks(1e9, 1e12))).expect("a report");
    let v = view(&r);
    assert_bounded(v);
    let reasons: Vec<&str> = v.unpriced.iter().map(|t| t.name.as_str()).collect();
    assert!(reasons.iter().any(|n| n.contains("not plausible")), "{reasons:?}");
    assert!(reasons.iter().any(|n| n.contains("under 1 ns")), "{reasons:?}");
    assert!(v.by_layer.is_empty(), "{:?}", v.by_layer);
    // Nothing priced: a share of exactly 0, not -0.
    assert!(v.priced_share == 0.0 && v.priced_share.is_sign_positive());
    assert_eq!(format!("{:.1}%", v.priced_share * 100.0), "0.0%");
}

#[test]
fn unusable_limits_are_named() {
    for (copy, flops, named) in [
        (0.0, 1e12, "copy bandwidth 0 B/s: not positive"),
        (1e9, -1.0, "f32 throughput -1 FLOP/s"),
        (1e308, 1e12, "implausibly large"),
        (1e-300, 1e12, "implausibly small"),
        (f64::NAN, 1e12, "not a finite number"),
    ] {
        let r = report(trace(3, |t, b| vec![kernel(t + 100.0, 4000.0, b + 1, 2e9, 1e6)]), Some(peaks(copy, flops)))
            .unwrap();
        let v = view(&r);
        assert!(v.roofs.is_none());
        let why = v.no_floor.as_deref().unwrap();
        assert!(why.contains("report --peaks are unusable") && why.contains(named), "{copy} {flops}: {why}");
        assert_bounded(v);
    }
}

/// Special values, and any other.
fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(-1.0),
        Just(1e308),
        Just(1e-300),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(u64::MAX as f64),
        Just(1.0),
        Just(1e9),
        Just(1e12),
        any::<f64>(),
        0.0..1e16,
    ]
}

/// A duration in µs: special values, and any other in or past a step.
fn duration() -> impl Strategy<Value = f64> {
    prop_oneof![Just(0.0), Just(1e-300), Just(1e-3), Just(1e12), Just(1e308), 0.0..30_000.0]
}

/// Mostly a plausible figure in `range`, else any value: so that the step is often split
/// and the sum of its parts is checked too.
fn mostly(range: std::ops::Range<f64>, any: impl Strategy<Value = f64> + 'static) -> impl Strategy<Value = f64> {
    prop_oneof![3 => range, 1 => any]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_priced_report_is_bounded_whatever_its_input(
        copy in mostly(1e8..1e13, value()),
        flops in mostly(1e9..1e15, value()),
        kernels in prop::collection::vec(
            (0.0..8_000.0f64, mostly(1.0..2_000.0, duration()), mostly(1.0..1e12, value()), mostly(1.0..1e10, value())),
            1..5,
        ),
    ) {
        // Each kernel on a stream of its own: kernels of different streams may overlap.
        let events = trace(4, |t, b| {
            kernels
                .iter()
                .enumerate()
                .map(|(i, (at, dur, work, bytes))| kernel_on(7 + i as u64, t + at, *dur, b + i as u64 + 1, *work, *bytes))
                .collect()
        });
        // JSON cannot hold every value: such a trace is refused with an error, which is fine.
        if let Some(r) = report(events, Some(peaks(copy, flops))) {
            if let Some(v) = r.device.roofline.as_ref() {
                assert_bounded(v);
            }
        }
    }
}
