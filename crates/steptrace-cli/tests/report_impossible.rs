//! `steptrace report` on device events that cannot be as written (kernels written twice,
//! kernels overlapping on one stream, kernels starting before their launch, a kernel of
//! absurd length): the text, `--json` and `--html` outputs name the file in a warning and
//! never print a share above 100%, a negative latency or an infinite ratio.

mod common;

use common::{flat, steptrace, text};
use serde_json::{json, Value};

const STEP_US: f64 = 10_000.0;

fn kernel(name: &str, ts: f64, dur: f64, correlation: u64) -> Value {
    json!({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
           "args": {"device": 0, "stream": 7, "correlation": correlation}})
}

fn launch(ts: f64, correlation: u64) -> Value {
    json!({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts, "dur": 5.0,
           "args": {"correlation": correlation}})
}

/// Four 10 ms steps, each with a 4 ms `gemm` and a 5 µs `elementwise`; `plant` adds to a step.
fn trace(plant: impl Fn(u64, f64, &mut Vec<Value>)) -> String {
    let mut ev = Vec::new();
    for n in 0..4u64 {
        let t = n as f64 * STEP_US;
        ev.push(json!({"ph": "X", "cat": "user_annotation", "name": format!("ProfilerStep#{n}"), "pid": 1, "tid": 1,
                       "ts": t, "dur": STEP_US}));
        for (k, (name, at, dur)) in [("gemm", 1000.0, 4000.0), ("elementwise", 6000.0, 5.0)].into_iter().enumerate() {
            let c = n * 10 + k as u64 + 1;
            ev.push(launch(t + at - 10.0, c));
            ev.push(kernel(name, t + at, dur, c));
        }
        plant(n, t, &mut ev);
    }
    json!({"schemaVersion": 1, "traceEvents": ev}).to_string()
}

/// Every percentage written in `text`.
fn percentages(text: &str) -> Vec<f64> {
    text.match_indices('%')
        .filter_map(|(at, _)| {
            let digits: String = text[..at]
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-' || *c == ',')
                .collect();
            digits.chars().rev().filter(|c| *c != ',').collect::<String>().parse().ok()
        })
        .collect()
}

/// The report of `trace` as text, JSON and HTML, written to `name` in a new folder.
fn reports(name: &str, trace: &str) -> (String, Value, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(name), trace).unwrap();
    let out = steptrace(&["report", name, "--html", "page.html"], dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    let out = steptrace(&["report", name, "--json"], dir.path());
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let page = std::fs::read_to_string(dir.path().join("page.html")).unwrap();
    (flat(&stdout), json, page)
}

#[track_caller]
fn assert_no_impossible_figure(text: &str, page: &str) {
    for v in percentages(text).into_iter().chain(percentages(page)) {
        assert!((0.0..=100.0).contains(&v), "{v}% in {text}");
    }
    assert!(!text.contains("inf×") && !text.contains("NaN") && !page.contains("inf×"), "{text}");
    assert!(!text.contains("launch→start median -"), "{text}");
}

#[test]
fn duplicated_kernels_are_named_and_counted_once() {
    let dup = trace(|n, t, ev| {
        // Both kernels of the step written again under new correlation ids.
        ev.push(kernel("gemm", t + 1000.0, 4000.0, 1_000_000 + n));
        ev.push(kernel("elementwise", t + 6000.0, 5.0, 2_000_000 + n));
    });
    let (text, json, page) = reports("dup.json", &dup);
    assert!(text.contains("warning: dup.json: 8 kernel event(s) repeat an earlier one"), "{text}");
    assert!(text.contains("the copies are left out of every figure"), "{text}");
    assert!(text.contains("kernels median 2 per step"), "{text}");
    assert!(json["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().starts_with("dup.json: 8 kernel event(s)")));
    assert!(page.contains("dup.json: 8 kernel event(s) repeat an earlier one"));
    assert_no_impossible_figure(&text, &page);
}

#[test]
fn kernels_overlapping_on_one_stream_give_no_share_over_the_whole_nor_a_negative_latency() {
    let overlap = trace(|n, t, ev| {
        for i in 0..99u64 {
            let (at, c) = (t + 1200.0 + i as f64, 500_000 + n * 1000 + i);
            ev.push(kernel("overlapper", at, 2000.0, c));
            ev.push(launch(at + 2200.0, c));
        }
    });
    let (text, json, page) = reports("overlap.json", &overlap);
    assert!(text.contains("warning: overlap.json: "), "{text}");
    assert!(text.contains("start before the previous kernel on their stream ended"), "{text}");
    assert!(text.contains("start before the call that launched them"), "{text}");
    assert!(text.contains("rest on inconsistent input"), "{text}");
    let warnings = json["warnings"].as_array().unwrap();
    assert!(warnings.iter().any(|w| w.as_str().unwrap().contains("on their stream ended")), "{warnings:?}");
    assert!(json["device"]["launch"]["launch_to_start_us"]["min"].as_f64().unwrap() >= 0.0);
    assert!(json["device"]["kernels"]["rows"][0]["share_of_busy"].as_f64().unwrap() <= 1.0);
    assert!(page.contains("inconsistent input"), "the HTML page says so too");
    assert_no_impossible_figure(&text, &page);
}

#[test]
fn a_kernel_of_absurd_length_gives_no_infinite_ratio() {
    let absurd =
        json!({"traceEvents": [kernel("absurd", 0.0, 1e14, 1), kernel("instant", 1e14 + 1.0, 0.0, 2)]}).to_string();
    let (text, _, page) = reports("absurd.json", &absurd);
    assert!(text.contains("over 1 calls, the next one takes 0"), "{text}");
    assert_no_impossible_figure(&text, &page);
    let in_step = trace(|n, t, ev| {
        if n == 2 {
            ev.push(kernel("absurd", t + 100.0, 1e14, 99));
        }
    });
    let (text, _, page) = reports("absurd.json", &in_step);
    assert_no_impossible_figure(&text, &page);
}
