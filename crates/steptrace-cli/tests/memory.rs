//! `train --memory` end to end on wgpu (lavapipe here and in CI): samples at the start of every
//! recorded step with parameters and optimizer state that match the model's own count, the
//! report's memory section in text, JSON and HTML; on the CPU backend, "not observed".

mod common;

use common::{flat, steptrace, text};
use serde_json::Value;

#[test]
fn memory_on_wgpu_is_sampled_by_category_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let out = steptrace(
        &[
            "train",
            "--backend",
            "wgpu",
            "--steps",
            "8",
            "--schedule",
            "wait=1,warmup=1,active=3",
            "--memory",
            "--json",
            "run.json",
            "--out",
            "traces",
        ],
        dir.path(),
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "train failed:\n{stdout}\n{stderr}");
    let run: Value = serde_json::from_slice(&std::fs::read(dir.path().join("run.json")).unwrap()).unwrap();
    let parameters = run["parameters"].as_f64().expect("parameters");
    assert!(run["memory"].as_str().is_some_and(|m| m.starts_with("observed")), "{}", run["memory"]);

    let out = steptrace(&["report", "traces", "--json"], dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let m = &report["memory"];
    let points: Vec<&str> =
        m["points"].as_array().expect("points").iter().map(|p| p["after"].as_str().unwrap()).collect();
    assert_eq!(points, ["step start"], "without --memory-phases, the step's start only");
    let category = |name: &str| {
        m["categories"].as_array().unwrap().iter().find(|c| c["name"] == name).map(|c| c["mb"].as_f64().unwrap())
    };
    let mb = 1024.0 * 1024.0;
    // The MLP is f32: 4 bytes a parameter; Adam keeps two moments of each.
    assert!((category("parameters").unwrap() * mb - parameters * 4.0).abs() < 0.5, "{m}");
    assert!((category("optimizer_state").unwrap() * mb - parameters * 8.0).abs() < 0.5, "{m}");
    let sum: f64 = m["categories"].as_array().unwrap().iter().map(|c| c["mb"].as_f64().unwrap()).sum();
    assert!((sum - m["highest_mb"]["median"].as_f64().unwrap()).abs() < 1e-6, "categories add up to in use: {m}");

    let out = steptrace(&["report", "traces"], dir.path());
    let (stdout, _) = text(&out);
    assert!(flat(&stdout).contains("== Device memory"), "{stdout}");
    let out = steptrace(&["report", "traces", "--html", "page.html"], dir.path());
    assert!(out.status.success(), "{:?}", text(&out));
    let page = std::fs::read_to_string(dir.path().join("page.html")).unwrap();
    assert!(page.contains("<h3>Device memory</h3>") && page.contains("optimizer state"), "the HTML memory section");
}

#[test]
fn memory_on_the_cpu_is_not_observed() {
    let dir = tempfile::tempdir().unwrap();
    let out = steptrace(
        &[
            "train",
            "--backend",
            "cpu",
            "--steps",
            "6",
            "--schedule",
            "wait=1,warmup=1,active=2",
            "--memory",
            "--json",
            "run.json",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{:?}", text(&out));
    let run: Value = serde_json::from_slice(&std::fs::read(dir.path().join("run.json")).unwrap()).unwrap();
    assert_eq!(run["memory"], "not observed: cpu does not report memory in use");
    let out = steptrace(&["report", "traces", "--json"], dir.path());
    let report: Value = serde_json::from_str(&text(&out).0).unwrap();
    assert!(report["memory"].is_null(), "no samples, no memory section");
}
