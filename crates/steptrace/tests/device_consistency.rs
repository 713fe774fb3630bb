//! Device events that cannot be as written: kernels written twice, kernels that overlap on
//! one stream, kernels that start before their launch, a kernel of absurd length. Each is
//! named in a warning with its file; no figure built on them is a share above 100%, a
//! negative latency or an infinite ratio.
//!
//! The base trace: 10 ms steps, each with a 4000 µs `gemm` and three 5 µs `elementwise`
//! kernels on stream 7 of device 0, each launched 10 µs before it starts.

use serde_json::{json, Value};
use steptrace::analysis::{Report, ReportOptions};
use steptrace::reader::parse_trace;

const STEP_US: f64 = 10_000.0;

fn host(name: &str, ts: f64, dur: f64, args: Value) -> Value {
    json!({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args})
}

fn kernel(name: &str, ts: f64, dur: f64, correlation: u64) -> Value {
    json!({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
           "args": {"device": 0, "stream": 7, "correlation": correlation, "grid": [64, 1, 1], "block": [256, 1, 1]}})
}

/// `steps` steps of the base trace.
fn base(steps: u64) -> Vec<Value> {
    let mut ev = Vec::new();
    for n in 0..steps {
        let t = n as f64 * STEP_US;
        ev.push(json!({"ph": "X", "cat": "user_annotation", "name": format!("ProfilerStep#{n}"), "pid": 1, "tid": 1,
                       "ts": t, "dur": STEP_US}));
        let kernels = [
            ("gemm", 1000.0, 4000.0),
            ("elementwise", 6000.0, 5.0),
            ("elementwise", 6100.0, 5.0),
            ("elementwise", 6200.0, 5.0),
        ];
        for (k, (name, at, dur)) in kernels.into_iter().enumerate() {
            let c = n * 10 + k as u64 + 1;
            ev.push(host("cudaLaunchKernel", t + at - 10.0, 5.0, json!({"correlation": c})));
            ev.push(kernel(name, t + at, dur, c));
        }
    }
    ev
}

fn report_of(events: Vec<Value>) -> Report {
    let doc = json!({"schemaVersion": 1, "traceEvents": events});
    let trace = parse_trace(&serde_json::to_vec(&doc).unwrap()).unwrap();
    Report::build(
        &[("hostile.json".into(), trace)],
        &ReportOptions { batch_size: Some(64), ..ReportOptions::default() },
    )
    .unwrap()
}

/// Every percentage written in `text`, as a number.
fn percentages(text: &str) -> Vec<f64> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices('%') {
        let digits: String =
            text[..at].chars().rev().take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-').collect();
        if let Ok(v) = digits.chars().rev().collect::<String>().parse() {
            out.push(v);
        }
    }
    out
}

/// Asserts that nothing in the report, as JSON, is a share above 100%, a negative latency
/// or a non-finite figure, and that no hypothesis quotes one.
#[track_caller]
fn assert_no_impossible_figure(r: &Report) {
    let json = serde_json::to_value(r).unwrap();
    let k = &json["device"]["kernels"];
    for row in k["rows"].as_array().into_iter().flatten() {
        for key in ["share_of_busy", "share_of_step"] {
            let v = row[key].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&v), "{key} {v} in {row}");
        }
    }
    if let Some(l) = r.device.launch.as_ref().and_then(|l| l.launch_to_start_us.as_ref()) {
        assert!(l.min >= 0.0, "a negative launch-to-start time: {l:?}");
    }
    for h in &r.hypotheses {
        for v in percentages(&h.evidence) {
            assert!((0.0..=100.0).contains(&v), "{v}% in {}", h.evidence);
        }
        assert!(!h.evidence.contains("inf") && !h.evidence.contains("NaN"), "{}", h.evidence);
    }
}

fn warnings_with<'a>(r: &'a Report, needle: &str) -> Vec<&'a String> {
    r.warnings.iter().filter(|w| w.contains(needle)).collect()
}

#[test]
fn the_base_trace_is_consistent() {
    let r = report_of(base(4));
    assert_eq!(r.warnings, Vec::<String>::new());
    let k = r.device.kernels.as_ref().unwrap();
    assert_eq!((k.kernels_per_step.median, k.inconsistent_kernels), (4.0, 0));
    assert!((k.rows[0].share_of_busy - 4.0 / 4.015).abs() < 1e-9, "{}", k.rows[0].share_of_busy);
    assert!((k.rows[0].share_of_step - 0.4).abs() < 1e-9);
    assert_no_impossible_figure(&r);
}

#[test]
fn kernels_duplicated_with_new_ids_are_counted_once_and_named() {
    let clean = report_of(base(4));
    let mut ev = base(4);
    // Every kernel written again under a new correlation id and a new `id`.
    let copies: Vec<Value> = ev
        .iter()
        .filter(|e| e["cat"] == "kernel")
        .map(|e| {
            let mut c = e.clone();
            c["args"]["correlation"] = json!(e["args"]["correlation"].as_u64().unwrap() + 1_000_000);
            c["id"] = json!(7);
            c
        })
        .collect();
    ev.extend(copies);
    // And one copy of a step's gemm moved in time under the same correlation id.
    let mut moved = kernel("gemm", 5500.0, 4000.0, 1);
    moved["args"]["stream"] = json!(8);
    ev.push(moved);
    let r = report_of(ev);
    let w = warnings_with(&r, "repeat an earlier one");
    assert_eq!(w.len(), 1, "{:#?}", r.warnings);
    assert!(w[0].starts_with("hostile.json: 17 kernel event(s) repeat an earlier one"), "{}", w[0]);
    assert!(w[0].contains("the copies are left out of every figure"), "{}", w[0]);
    let (k, k0) = (r.device.kernels.as_ref().unwrap(), clean.device.kernels.as_ref().unwrap());
    assert_eq!(k.kernels_per_step.median, 4.0, "38 per step, not 76");
    assert!(
        (k.kernel_ms - k0.kernel_ms).abs() < 1e-9 && k.kernel_ms <= k.busy_ms + 1e-9,
        "{} against {}",
        k.kernel_ms,
        k.busy_ms
    );
    assert_eq!(k.rows[0].share_of_busy, k0.rows[0].share_of_busy);
    assert_eq!(r.device.launch.as_ref().unwrap().unmatched_kernels, 0);
    // The warning is in the JSON output too.
    let json = serde_json::to_value(&r).unwrap();
    assert!(json["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().contains("repeat an earlier one")));
    assert_no_impossible_figure(&r);
}

#[test]
fn kernels_overlapping_on_one_stream_are_flagged_and_no_share_exceeds_the_whole() {
    let mut ev = base(3);
    // 99 kernels of 2000 µs, 1 µs apart on stream 7 in every step, each launched 2 ms after
    // it starts.
    for n in 0..3u64 {
        let t = n as f64 * STEP_US;
        for i in 0..99u64 {
            let (at, c) = (t + 1200.0 + i as f64, 500_000 + n * 1000 + i);
            ev.push(kernel("overlapper", at, 2000.0, c));
            ev.push(host("cudaLaunchKernel", at + 2000.0, 5.0, json!({"correlation": c})));
        }
    }
    let r = report_of(ev);
    let w = warnings_with(&r, "start before the previous kernel on their stream ended");
    assert_eq!(w.len(), 1, "{:#?}", r.warnings);
    assert!(w[0].starts_with("hostile.json: "), "{}", w[0]);
    assert!(w[0].contains("rest on inconsistent input") && w[0].contains("first `overlapper`"), "{}", w[0]);
    let before = warnings_with(&r, "start before the call that launched them");
    assert_eq!(before.len(), 1, "{:#?}", r.warnings);
    assert!(before[0].starts_with("hostile.json: 297 kernel(s)") && before[0].contains("2000.0 µs"), "{}", before[0]);

    // The first step is startup: two steps are counted.
    let k = r.device.kernels.as_ref().unwrap();
    assert!(k.inconsistent_kernels >= 99 * 2, "{}", k.inconsistent_kernels);
    let top = &k.rows[0];
    assert_eq!(top.label, "overlapper");
    // 99 calls of 2 ms over one 2.098 ms stretch of a 10 ms step: not 9,900% of it.
    assert!((top.share_of_step - 0.2098).abs() < 1e-9, "{}", top.share_of_step);
    assert!(top.share_of_busy <= 1.0);
    let l = r.device.launch.as_ref().unwrap();
    assert_eq!(l.before_launch, 198);
    assert!((l.launch_to_start_us.as_ref().unwrap().median - 10.0).abs() < 1e-9);
    assert!(r.device.notes.iter().any(|n| n.contains("rest on inconsistent input")), "{:?}", r.device.notes);
    let dominant = r.hypotheses.iter().find(|h| h.id == "dominant-kernel").expect("the overlapper dominates");
    assert!(dominant.evidence.contains("rest on inconsistent input"), "{}", dominant.evidence);
    assert_no_impossible_figure(&r);
}

#[test]
fn only_kernels_launched_before_they_start_give_launch_to_start() {
    // Every kernel starts 3 µs before its launch call.
    let ev: Vec<Value> = base(3)
        .into_iter()
        .map(|mut e| {
            if e["name"] == "cudaLaunchKernel" {
                e["ts"] = json!(e["ts"].as_f64().unwrap() + 13.0);
            }
            e
        })
        .collect();
    let r = report_of(ev);
    let l = r.device.launch.as_ref().unwrap();
    // The first step is startup: two steps are counted.
    assert_eq!((l.matched_kernels, l.before_launch), (8, 8));
    assert!(l.launch_to_start_us.is_none(), "no negative latency is a measurement");
    assert_eq!(warnings_with(&r, "start before the call that launched them").len(), 1, "{:#?}", r.warnings);
    assert_no_impossible_figure(&r);
}

#[test]
fn a_kernel_of_absurd_length_gives_no_infinite_ratio_nor_a_share_over_the_whole() {
    // Without steps: the span table's comparison.
    let r = report_of(vec![kernel("absurd", 0.0, 1e14, 1), kernel("instant", 1e14 + 1.0, 0.0, 2)]);
    let h = r.hypotheses.iter().find(|h| h.id == "dominant-operation").unwrap();
    assert!(h.evidence.ends_with("over 1 calls, the next one takes 0"), "{}", h.evidence);
    let alone = report_of(vec![kernel("absurd", 0.0, 1e14, 1)]);
    let h = alone.hypotheses.iter().find(|h| h.id == "dominant-operation").unwrap();
    assert!(h.evidence.ends_with("over 1 calls"), "{}", h.evidence);
    // Within the counted step: it runs far past the step, and the next kernels overlap it.
    let mut ev = base(2);
    ev.push(kernel("absurd", STEP_US + 500.0, 1e14, 99));
    let r = report_of(ev);
    let k = r.device.kernels.as_ref().unwrap();
    let absurd = k.rows.iter().find(|row| row.label == "absurd").unwrap();
    assert!(absurd.share_of_step <= 1.0 && absurd.share_of_busy <= 1.0, "{absurd:?}");
    assert!(
        !warnings_with(&r, "start before the previous kernel on their stream ended").is_empty(),
        "{:#?}",
        r.warnings
    );
    assert_no_impossible_figure(&r);
}

#[test]
fn real_traces_hold_nothing_impossible() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    for name in [
        "torch-kineto-mlp-h200.json",
        "steptrace-v1-cuda-mlp-h200.trace.json",
        "h200-cuda/mlp-cuda.cycle0.20261201T104254.501Z.trace.json",
    ] {
        let trace = steptrace::reader::read_trace_file(&dir.join(name)).unwrap();
        let r = Report::build(&[(name.to_owned(), trace)], &ReportOptions::default()).unwrap();
        assert_eq!(r.warnings, Vec::<String>::new(), "{name}");
        assert_eq!(r.device.kernels.as_ref().map_or(0, |k| k.inconsistent_kernels), 0, "{name}");
        assert_no_impossible_figure(&r);
    }
}
