//! The `steptrace` command as a user runs it.

mod common;

use common::{cuda_available, steptrace, text};

#[test]
fn backends_lists_every_backend_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let out = steptrace(&["backends"], dir.path());
    assert!(out.status.success());
    let (stdout, _) = text(&out);
    for name in ["cuda", "wgpu", "cpu", "--backend auto would use"] {
        assert!(stdout.contains(name), "{stdout}");
    }
    if !cuda_available(dir.path()) {
        assert!(stdout.contains("FALLBACK"), "{stdout}");
    }
}

#[test]
fn explicit_cuda_without_cuda_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    if cuda_available(dir.path()) {
        return;
    }
    let out = steptrace(&["train", "--backend", "cuda", "--steps", "2"], dir.path());
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("CUDA") && stderr.contains("unavailable"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        !dir.path().join("traces").exists() || std::fs::read_dir(dir.path().join("traces")).unwrap().next().is_none()
    );
}

#[test]
fn a_bad_schedule_names_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let out = steptrace(&["train", "--backend", "cpu", "--schedule", "wait=1,warmpu=1,active=2"], dir.path());
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("warmpu"), "{stderr}");
    let out = steptrace(&["train", "--backend", "cpu", "--schedule", "wait=1,active=0"], dir.path());
    assert!(text(&out).1.contains("active must be at least 1"));
}

#[test]
fn a_cpu_run_writes_labelled_traces_and_refuses_to_overwrite_its_summary() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "train",
        "--backend",
        "cpu",
        "--steps",
        "6",
        "--schedule",
        "wait=1,warmup=1,active=2,repeat=1",
        "--out",
        "t",
        "--json",
        "summary.json",
        "--quiet",
    ];
    let out = steptrace(&args, dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.starts_with("backend: cpu"), "{stdout}");
    assert!(stdout.contains("steady ms/step") && stdout.contains("wrote t/"), "{stdout}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["traces"][0]["steps"], serde_json::json!([2, 3]));
    // A second run with the same --json path is refused before training, and
    // the first summary is untouched.
    let before = std::fs::read(dir.path().join("summary.json")).unwrap();
    let out = steptrace(&args, dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).1.contains("already exists"));
    assert_eq!(std::fs::read(dir.path().join("summary.json")).unwrap(), before);
}

#[test]
fn a_mismatched_model_and_dataset_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = steptrace(&["train", "--backend", "cpu", "--model", "transformer", "--dataset", "digits"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).1.contains("shakespeare"));
}

#[test]
fn report_and_inspect_refuse_a_newer_trace_format_naming_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/steptrace-v1-cuda-mlp-h200.trace.json");
    let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&fixture).unwrap()).unwrap();
    doc["metadata"]["format"] = "steptrace-chrome-trace/2".into();
    std::fs::write(dir.path().join("newer.json"), serde_json::to_vec(&doc).unwrap()).unwrap();
    for args in [["report", "newer.json"], ["inspect", "newer.json"]] {
        let out = steptrace(&args, dir.path());
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stdout}{stderr}");
        assert!(stderr.contains("steptrace-chrome-trace/2") && stderr.contains("steptrace-chrome-trace/1"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // The same file in today's format reads.
    doc["metadata"]["format"] = "steptrace-chrome-trace/1".into();
    std::fs::write(dir.path().join("today.json"), serde_json::to_vec(&doc).unwrap()).unwrap();
    assert!(steptrace(&["report", "today.json"], dir.path()).status.success());
}

#[test]
fn on_the_cpu_cubecl_settings_are_not_applicable_not_claimed() {
    let dir = tempfile::tempdir().unwrap();
    let out = steptrace(&["train", "--backend", "cpu", "--quiet", "--steps", "20", "--json", "run.json"], dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("cubecl cache: not applicable"), "{stdout}");
    assert!(!stdout.contains("(warm)") && !stdout.contains("(cold"), "{stdout}");
    let trace = std::fs::read_dir(dir.path().join("traces")).unwrap().next().unwrap().unwrap().path();
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(trace).unwrap()).unwrap();
    let manifest = &doc["metadata"]["manifest"];
    for key in ["fusion", "autotune", "cubecl_cache"] {
        assert!(manifest[key].as_str().is_some_and(|v| v.starts_with("not applicable")), "{key}: {manifest}");
    }
    assert!(
        manifest["startup"]["cubecl_cache"].as_str().is_some_and(|v| v.starts_with("not applicable")),
        "{manifest}"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("run.json")).unwrap()).unwrap();
    assert!(summary["cache"].as_str().unwrap().starts_with("not applicable"), "{summary}");
}
