//! `steptrace report` and `steptrace inspect` as a user runs them.

mod common;

use std::path::Path;

use common::{flat, steptrace, text};
use serde_json::Value;

const KINETO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/torch-kineto-mlp-h200.json");

fn report_json(args: &[&str], dir: &Path) -> Value {
    let out = steptrace(&[&["report", "--json"], args].concat(), dir);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

#[test]
fn a_fallback_run_is_labelled_and_device_time_is_not_observed() {
    let dir = tempfile::tempdir().unwrap();
    let train = steptrace(
        &[
            "train",
            "--steps",
            "12",
            "--batch",
            "32",
            "--schedule",
            "skip_first=6,wait=0,warmup=1,active=3,repeat=1",
            "--out",
            "t",
            "--quiet",
        ],
        dir.path(),
    );
    let (stdout, stderr) = text(&train);
    assert!(train.status.success(), "{stdout}{stderr}");
    let out = steptrace(&["report", "t"], dir.path());
    let (report, stderr) = text(&out);
    assert!(out.status.success(), "{report}{stderr}");
    let json = report_json(&["t"], dir.path());
    let kind = json["run"]["backend_kind"].as_str().unwrap().to_owned();
    if kind != "cuda" {
        // auto fell back: the report says so, with the reason, and never
        // prints a device figure.
        let reason = json["run"]["fallback_reason"].as_str().expect("a fallback reason");
        assert!(report.contains("FALLBACK") && flat(&report).contains(&flat(reason)), "{report}");
        assert!(flat(&report).contains("device time not observed"), "{report}");
    }
    assert_eq!(json["device"]["observed"], false);
    assert!(json["device"]["device_busy_ms_per_step"].is_null());
    assert!(json["device"]["not_observed_reason"].as_str().is_some());
    // Steps 7..=9 were recorded and all are past the declared startup (2 steps).
    let steps: Vec<u64> =
        json["timing"]["steps"].as_array().unwrap().iter().map(|s| s["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, [7, 8, 9]);
    assert_eq!(json["timing"]["steady_ms"]["n"], 3);
    assert_eq!(json["run"]["startup_steps"], 2);
    assert!(json["run"]["startup"]["first_step_ms"].as_f64().unwrap() > 0.0);
    assert!(report.contains("ms/step") && report.contains("not elapsed time"), "{report}");
    // steptrace's own traces pass the reader's validator: no warning.
    assert_eq!(json["warnings"], serde_json::json!([]), "{report}");
}

#[test]
fn a_slow_loader_yields_the_input_pipeline_hypothesis() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "train",
        "--backend",
        "cpu",
        "--steps",
        "8",
        "--batch",
        "16",
        "--loader-delay-ms",
        "40",
        "--schedule",
        "wait=0,warmup=1,active=4,repeat=1",
        "--out",
        "t",
        "--quiet",
    ];
    let train = steptrace(&args, dir.path());
    assert!(train.status.success(), "{:?}", text(&train));
    let json = report_json(&["t"], dir.path());
    let h = json["hypotheses"].as_array().unwrap().iter().find(|h| h["id"] == "input-pipeline").expect("hypothesis");
    let evidence = h["evidence"].as_str().unwrap();
    assert!(evidence.contains("reading input takes") && evidence.contains("% of the median step"), "{evidence}");
    let command = h["command"].as_str().unwrap();
    assert!(command.starts_with("steptrace train --model mlp") && command.ends_with("--prefetch 2"), "{command}");
    assert!(command.contains("--loader-delay-ms 40"), "{command}");
    // steptrace's own traces (manifest prose included) are clean to share.
    for entry in std::fs::read_dir(dir.path().join("t")).unwrap() {
        let path = entry.unwrap().path();
        let out = steptrace(&["inspect", path.to_str().unwrap()], dir.path());
        assert!(out.status.success(), "{:?}", text(&out));
    }
    // The planted delay is at least 40 ms of each recorded step.
    let load = json["spans"]["rows"].as_array().unwrap().iter().find(|r| r["name"] == "data.load").unwrap();
    assert!(load["mean_ms"].as_f64().unwrap() >= 40.0, "{load}");
}

#[test]
fn a_torch_profiler_trace_is_read_with_its_device_events() {
    let dir = tempfile::tempdir().unwrap();
    let json = report_json(&[KINETO, "--batch", "256"], dir.path());
    assert_eq!(json["sources"][0]["producer"], "torch_profiler");
    assert_eq!(json["warnings"], serde_json::json!([]));
    assert_eq!(json["timing"]["steady_ms"]["n"], 3);
    assert_eq!(json["device"]["observed"], true);
    assert!(json["device"]["device_busy_ms_per_step"]["median"].as_f64().unwrap() > 0.0);
    assert!(json["timing"]["window"]["samples_per_s"].as_f64().unwrap() > 0.0);

    let out = steptrace(&["report", KINETO, "--plot", "steps.svg"], dir.path());
    assert!(out.status.success(), "{:?}", text(&out));
    let svg = std::fs::read_to_string(dir.path().join("steps.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("steady median"), "{}", &svg[..200.min(svg.len())]);
    // A second plot to the same path is refused; the first is kept.
    let out = steptrace(&["report", KINETO, "--plot", "steps.svg"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).1.contains("never overwritten"), "{:?}", text(&out));
    assert_eq!(std::fs::read_to_string(dir.path().join("steps.svg")).unwrap(), svg);
}

#[test]
fn garbage_gets_a_clear_error_with_its_position() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.json"), b"[{\"ph\":\"X\",\"ts\":1} oops").unwrap();
    let out = steptrace(&["report", "bad.json"], dir.path());
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("bad.json") && stderr.contains("byte 19: expected"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn inspect_flags_planted_secrets_and_redacts_to_a_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let planted = r#"{"traceEvents":[
      {"ph":"X","name":"data.load","pid":1,"tid":1,"ts":0,"dur":5,"args":{"owner":"dana@example.org"}},
      {"ph":"X","name":"upload","pid":1,"tid":1,"ts":5,"dur":1,"args":{"note":"Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJlLXNpZ25hdHVyZQ"}},
      {"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"main /Users/dana/project"}}
    ]}"#;
    std::fs::write(dir.path().join("t.json"), planted).unwrap();
    let out = steptrace(&["inspect", "t.json"], dir.path());
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    for kind in ["e-mail address", "token or secret", "home directory path"] {
        assert!(stdout.contains(kind), "{kind} missing: {stdout}");
    }
    assert!(!stdout.contains("dana@example.org") && !stdout.contains("c2lnbmF0dXJl"), "{stdout}");

    let out = steptrace(&["inspect", "t.json", "--redact", "shared.json"], dir.path());
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out).1.contains("scans clean"), "{:?}", text(&out));
    let out = steptrace(&["inspect", "shared.json"], dir.path());
    assert!(out.status.success(), "{:?}", text(&out));
    let copy = std::fs::read(dir.path().join("shared.json")).unwrap();
    // Never overwritten.
    let out = steptrace(&["inspect", "t.json", "--redact", "shared.json"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read(dir.path().join("shared.json")).unwrap(), copy);
    assert_eq!(std::fs::read_to_string(dir.path().join("t.json")).unwrap(), planted);

    // The real torch.profiler trace leaks the output path of its machine.
    let out = steptrace(&["inspect", KINETO], dir.path());
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out).0.contains("traceName: home directory path"), "{:?}", text(&out));
}

#[test]
fn outputs_that_clash_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    for (plot, html) in [("x", "x"), ("./x", "x"), ("d/../x", "./x")] {
        let out = steptrace(&["report", KINETO, "--plot", plot, "--html", html], dir.path());
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{plot} {html}: {stdout}{stderr}");
        assert!(flat(&stderr).contains(&format!("--html {html} and --plot {plot} are the same file")), "{stderr}");
        assert!(!dir.path().join("x").exists(), "{plot} {html}: nothing is written");
    }
    // An existing output is found before the other one is written, too.
    std::fs::write(dir.path().join("old.html"), "kept").unwrap();
    let out = steptrace(&["report", KINETO, "--plot", "new.svg", "--html", "old.html"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).1.contains("old.html already exists"), "{:?}", text(&out));
    assert!(!dir.path().join("new.svg").exists());
    assert_eq!(std::fs::read_to_string(dir.path().join("old.html")).unwrap(), "kept");
    // Distinct outputs are both written.
    let out = steptrace(&["report", KINETO, "--plot", "d/x.svg", "--html", "x.html"], dir.path());
    assert!(out.status.success(), "{:?}", text(&out));
    assert!(dir.path().join("d/x.svg").exists() && dir.path().join("x.html").exists());
}
