//! Words a trace supplies (who asked for a capture, why a backend fell back, the device
//! limits' device name) reach the report's own sentences as one escaped line of bounded
//! length, so that a shared trace cannot forge a line of the report or bloat it.

use serde_json::{json, Value};
use steptrace::analysis::{Report, ReportOptions};
use steptrace::format::peaks::{Measured, Peaks, PEAKS_VERSION};
use steptrace::reader::parse_trace;

const FORGED: &str = "x\n== Hypotheses\n1. forged";

fn report(manifest: Value, events: Vec<Value>) -> Report {
    let doc = json!({"traceEvents": events, "metadata": {"format": "steptrace-chrome-trace/1", "cycle": 0, "manifest": manifest}});
    let trace = parse_trace(&serde_json::to_vec(&doc).unwrap()).unwrap();
    Report::build(&[("text.json".into(), trace)], &ReportOptions::default()).unwrap()
}

fn steps() -> Vec<Value> {
    (0..4)
        .map(
            |n| json!({"ph": "X", "name": format!("ProfilerStep#{n}"), "pid": 1, "tid": 1, "ts": n * 1000, "dur": 900}),
        )
        .collect()
}

fn one_bounded_line(text: &str) {
    assert!(!text.contains('\n') && !text.contains('\u{1b}'), "{text}");
    assert!(text.contains("x\\n== Hypotheses\\n1. forged") || text.contains("… ("), "{text}");
    assert!(text.len() < 1000, "{} bytes", text.len());
}

#[test]
fn a_capture_record_and_a_fallback_reason_are_one_line_each() {
    let manifest = json!({
        "backend_kind": "cuda",
        "fallback_reason": FORGED,
        "capture": {"requested_by": FORGED, "requested_at": format!("\u{1b}[2J{}", "y".repeat(5_000_000))},
    });
    let r = report(manifest, steps());
    let captured = r.sources[0].captured.as_deref().expect("the capture record");
    one_bounded_line(captured);
    let why = r.device.not_observed_reason.as_deref().expect("no device events");
    one_bounded_line(why);
}

#[test]
fn the_device_of_given_limits_is_one_line_in_the_warning() {
    let m = |value: f64| Measured { value, spread: 0.0, method: FORGED.into() };
    let peaks = Peaks {
        version: PEAKS_VERSION,
        device: FORGED.into(),
        backend: "cuda".into(),
        software: String::new(),
        measured_at: FORGED.into(),
        read: None,
        write: None,
        copy: Some(m(1e12)),
        flops: [("f32".to_owned(), m(1e13))].into(),
        launch_us: None,
        published: Default::default(),
        problems: vec![],
        cpu: false,
    };
    let doc = json!({"traceEvents": steps(), "metadata": {"format": "steptrace-chrome-trace/1", "cycle": 0, "manifest": {"device": "NVIDIA H200"}}});
    let trace = parse_trace(&serde_json::to_vec(&doc).unwrap()).unwrap();
    let options = ReportOptions { peaks: Some(peaks), ..ReportOptions::default() };
    let r = Report::build(&[("text.json".into(), trace)], &options).unwrap();
    let warning = r.warnings.iter().find(|w| w.contains("measured on")).expect("the device mismatch is said");
    one_bounded_line(warning);
}

#[test]
fn limits_that_do_not_read_are_said_on_one_line() {
    // The reason quotes the value that does not read: bounded, however long it is.
    let r = report(json!({"peaks": {"version": format!("{FORGED}{}", "x".repeat(1_000_000)), "device": "d"}}), steps());
    let problem = r.run.peaks_problem.as_deref().expect("the limits do not read");
    assert!(problem.starts_with("the manifest's device limits do not read (") && !problem.contains('\n'), "{problem}");
    assert!(problem.len() < 1000, "{} bytes", problem.len());
}
