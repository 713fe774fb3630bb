//! Kernel attribution end to end on wgpu (lavapipe here and in CI): `train --detail ops` times
//! every kernel by cubecl's timestamp queries and ties it to its burn ops and span; `report`
//! answers "which op, which layer" from the trace alone.

mod common;

use common::{flat, steptrace, text};
use serde_json::Value;

fn train(dir: &std::path::Path, detail: &str) {
    let out = steptrace(
        &[
            "train",
            "--backend",
            "wgpu",
            "--model",
            "convnet",
            "--batch",
            "16",
            "--steps",
            "6",
            "--schedule",
            "wait=1,warmup=1,active=3",
            "--detail",
            detail,
            "--out",
            "traces",
        ],
        dir,
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "train failed:\n{stdout}\n{stderr}");
}

fn kernels(dir: &std::path::Path) -> Vec<Value> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir.join("traces")).unwrap() {
        let doc: Value = serde_json::from_slice(&std::fs::read(entry.unwrap().path()).unwrap()).unwrap();
        found.extend(doc["traceEvents"].as_array().unwrap().iter().filter(|e| e["cat"] == "kernel").cloned());
    }
    found
}

#[test]
fn detail_ops_times_and_attributes_every_kernel_on_wgpu() {
    let dir = tempfile::tempdir().unwrap();
    train(dir.path(), "ops");
    let kernels = kernels(dir.path());
    assert!(!kernels.is_empty(), "kernels are timed by timestamp queries on wgpu");
    for k in &kernels {
        let args = &k["args"];
        assert_eq!(args["timing"], "timestamp queries", "{k}");
        assert!(args.get("stream").is_some() && args.get("correlation").is_some(), "HTA's fields: {k}");
        assert!(args["attribution"].is_string(), "every kernel says how it was attributed, or why not: {k}");
        assert!(k["dur"].as_f64().is_some_and(|d| d > 0.0), "{k}");
    }
    let spans: Vec<&str> = kernels.iter().filter_map(|k| k["args"]["span"].as_str()).collect();
    for layer in ["forward > conv1", "forward > conv2", "forward > head"] {
        assert!(spans.contains(&layer), "a kernel of {layer}: {spans:?}");
    }
    assert!(spans.iter().any(|s| s.starts_with("backward")) && spans.iter().any(|s| s.starts_with("optimizer")));

    let out = steptrace(&["report", "traces", "--json"], dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let a = &report["device"]["attribution"];
    assert!(a["attributed_share"].as_f64().is_some_and(|s| s >= 0.95), "{a}");
    assert_eq!(a["timing"][0]["name"], "timestamp queries");
    let tree: Vec<&str> = a["by_span"].as_array().unwrap().iter().map(|r| r["path"].as_str().unwrap()).collect();
    assert!(tree.contains(&"forward") && tree.contains(&"forward > conv1"), "{tree:?}");
    let kinds: Vec<&str> = a["by_op_kind"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert!(kinds.iter().any(|k| k.starts_with("conv")), "{kinds:?}");

    let out = steptrace(&["report", "traces"], dir.path());
    let (stdout, _) = text(&out);
    let flat = flat(&stdout);
    assert!(flat.contains("== Which op, which layer"), "{stdout}");
    assert!(flat.contains("timed by timestamp queries"), "{stdout}");

    let out = steptrace(&["report", "traces", "--html", "page.html"], dir.path());
    assert!(out.status.success(), "{}", text(&out).1);
    let page = std::fs::read_to_string(dir.path().join("page.html")).unwrap();
    assert!(page.contains("<h3>Which op, which layer</h3>"), "the HTML page has the section");
    assert!(page.contains("title=\"forward &gt; conv1\"") || page.contains("title=\"forward > conv1\""), "the tree");
}

#[test]
fn without_detail_ops_wgpu_kernels_are_not_observed_and_say_why() {
    let dir = tempfile::tempdir().unwrap();
    train(dir.path(), "steps");
    assert!(kernels(dir.path()).is_empty());
    let out = steptrace(&["report", "traces"], dir.path());
    let (stdout, _) = text(&out);
    let flat = flat(&stdout);
    assert!(flat.contains("not observed") && flat.contains("recorded on CUDA only"), "{stdout}");
    assert!(!flat.contains("== Which op, which layer"), "no attribution section without kernels: {stdout}");
}
