//! `steptrace peaks` end to end on the CPU backend and on wgpu (lavapipe here): the figures
//! are measured, cached, reused, measured again on request or when the cache file cannot be
//! used; and a `train` run's traces carry them when they are cached, and only then. The
//! cache lives in a temporary `STEPTRACE_CACHE_DIR`. Behaviour only, never timings.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{flat, text};
use serde_json::Value;

/// `steptrace ARGS` in `dir`, with its caches under `dir/cache`.
fn run(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_steptrace"))
        .args(args)
        .current_dir(dir)
        .env("NODEVICE_SELECT", "1")
        .env("STEPTRACE_CACHE_DIR", dir.join("cache"))
        .output()
        .expect("run steptrace")
}

/// `steptrace peaks --backend BACKEND --json [EXTRA]`: the peaks and the console lines (stderr).
fn peaks(backend: &str, extra: &[&str], dir: &Path) -> (Value, String) {
    let mut args = vec!["peaks", "--backend", backend, "--json"];
    args.extend_from_slice(extra);
    let out = run(&args, dir);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "peaks failed:\n{stdout}\n{stderr}");
    let peaks: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}\n{stderr}"));
    (peaks, flat(&stderr))
}

/// The peaks files in `dir`'s cache.
fn cache_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir.join("cache/peaks")) else { return Vec::new() };
    entries.map(|e| e.expect("entry").path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect()
}

/// Every measured figure is positive and finite and says how it was measured; memory is read
/// at a sane rate for any machine that runs burn (100 MB/s); the figures are a CPU's.
fn assert_sane(p: &Value, backend: &str) {
    assert_eq!(p["backend"], backend, "{p:#}");
    assert_eq!(p["cpu"], true, "this machine's devices are CPUs: {p:#}");
    let figures = [&p["read"], &p["write"], &p["copy"], &p["flops"]["f32"], &p["launch_us"]];
    for m in figures {
        let value = m["value"].as_f64().unwrap_or_else(|| panic!("a figure is missing: {p:#}"));
        assert!(value.is_finite() && value > 0.0, "{m}");
        assert!(m["spread"].as_f64().is_some_and(|s| s.is_finite() && s >= 0.0), "{m}");
        assert!(m["method"].as_str().is_some_and(|s| s.contains("best of")), "{m}");
    }
    assert!(p["read"]["value"].as_f64().unwrap() >= 1e8, "read below 100 MB/s: {p:#}");
    assert!(p["flops"].get("bf16").is_none(), "half precision is measured on CUDA only: {p:#}");
    assert!(p["problems"].as_array().unwrap().iter().any(|x| x.as_str().unwrap().contains("CUDA only")), "{p:#}");
    assert_eq!(p["published"], serde_json::json!({}), "no datasheet is known for a CPU: {p:#}");
}

#[test]
fn cpu_peaks_are_measured_then_reused_then_measured_again_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let (first, said) = peaks("cpu", &[], dir.path());
    assert_sane(&first, "cpu");
    assert!(said.contains("measuring "), "{said}");
    assert!(!said.contains("from the cache"), "{said}");
    let files = cache_files(dir.path());
    assert_eq!(files.len(), 1, "one cache file: {files:?}");
    let stored: Value = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    assert_eq!(stored, first, "the cache file holds what was printed");
    assert!(said.contains(&files[0].display().to_string()), "the cache file is named: {said}");

    let (second, said) = peaks("cpu", &[], dir.path());
    assert!(said.contains("from the cache"), "{said}");
    assert!(!said.contains("measuring"), "{said}");
    assert_eq!(second, first, "the cached figures, as they were");

    let (third, said) = peaks("cpu", &["--remeasure"], dir.path());
    assert!(said.contains("measuring again (--remeasure)"), "{said}");
    assert_sane(&third, "cpu");
    let stored: Value = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    assert_eq!(stored, third, "the new measurement replaces the old one");
    assert_eq!(cache_files(dir.path()).len(), 1);

    // The table: every figure, labelled as a CPU's, and where the file is.
    let out = run(&["peaks", "--backend", "cpu"], dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let shown = flat(&stdout);
    for needle in [
        "backend: cpu",
        "CPU figures",
        "figure (CPU)",
        "read",
        "write",
        "copy",
        "f32 matmul",
        "launch",
        "from the cache",
    ] {
        assert!(shown.contains(needle), "{needle} missing:\n{stdout}");
    }
    assert!(shown.contains(&files[0].display().to_string()), "{stdout}");
}

#[test]
fn an_unusable_cache_file_is_a_warning_and_a_new_measurement() {
    let dir = tempfile::tempdir().unwrap();
    let (first, _) = peaks("cpu", &[], dir.path());
    let file = cache_files(dir.path()).pop().expect("cache file");

    std::fs::write(&file, "{\"version\": 1, \"device\": tru").unwrap();
    let (again, said) = peaks("cpu", &[], dir.path());
    assert!(said.contains("warning") && said.contains("corrupt") && said.contains("measuring again"), "{said}");
    assert_sane(&again, "cpu");
    let stored: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).expect("a valid file again");
    assert_eq!(stored, again);

    // A file of other software (an older burn): not used, said so, measured again.
    let mut foreign = first.clone();
    foreign["software"] = "burn 0.21.0 (burn-flex)".into();
    std::fs::write(&file, serde_json::to_vec(&foreign).unwrap()).unwrap();
    let (_, said) = peaks("cpu", &[], dir.path());
    assert!(said.contains("measured with burn 0.21.0") && said.contains("measuring again"), "{said}");

    // A file of a later layout.
    let mut later = first;
    later["version"] = 99.into();
    std::fs::write(&file, serde_json::to_vec(&later).unwrap()).unwrap();
    let (_, said) = peaks("cpu", &[], dir.path());
    assert!(said.contains("layout version 99") && said.contains("measuring again"), "{said}");
}

#[test]
fn wgpu_peaks_are_measured_and_reused() {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, _) = text(&run(&["backends"], dir.path()));
    if !stdout.lines().any(|l| l.contains("wgpu") && l.contains("yes")) {
        eprintln!("no wgpu adapter here: skipped");
        return;
    }
    let (first, said) = peaks("wgpu", &[], dir.path());
    assert_sane(&first, "wgpu");
    assert!(said.contains("CPU adapter, not a GPU"), "lavapipe is labelled as it is in every command: {said}");
    let (second, said) = peaks("wgpu", &[], dir.path());
    assert!(said.contains("from the cache"), "{said}");
    assert_eq!(second, first);
    let out = run(&["peaks", "--backend", "wgpu"], dir.path());
    assert!(flat(&text(&out).0).contains("CPU figures"), "{:?}", text(&out));
}

#[test]
fn a_train_run_carries_the_peaks_only_when_they_are_cached() {
    let dir = tempfile::tempdir().unwrap();
    let train = |out: &str| {
        let o = run(
            &["train", "--backend", "cpu", "--steps", "4", "--schedule", "wait=1,warmup=1,active=2", "--out", out],
            dir.path(),
        );
        let (stdout, stderr) = text(&o);
        assert!(o.status.success(), "train failed:\n{stdout}\n{stderr}");
        let traces: Vec<PathBuf> = std::fs::read_dir(dir.path().join(out))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".trace.json"))
            .collect();
        assert!(!traces.is_empty(), "no trace written:\n{stdout}");
        let manifests: Vec<Value> = traces
            .iter()
            .map(|t| {
                serde_json::from_slice::<Value>(&std::fs::read(t).unwrap()).unwrap()["metadata"]["manifest"].clone()
            })
            .collect();
        (flat(&format!("{stdout}\n{stderr}")), manifests)
    };

    let (said, manifests) = train("before");
    // The CPU backend runs no kernel to price: no line asks for limits it could not use.
    assert!(!said.contains("peaks:"), "{said}");
    assert!(manifests.iter().all(|m| m.get("peaks").is_none()), "no peaks without a cache file");
    assert!(cache_files(dir.path()).is_empty(), "a run never measures");

    let (measured, _) = peaks("cpu", &[], dir.path());
    let (said, manifests) = train("after");
    let file = cache_files(dir.path()).pop().unwrap();
    assert!(said.contains("peaks: this device's measured limits (CPU figures) from"), "{said}");
    assert!(said.contains(&file.display().to_string()), "{said}");
    for m in &manifests {
        assert_eq!(m["peaks"], measured, "every trace carries the cached peaks");
    }
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["peaks", "--backend", "tpu"], dir.path());
    assert_eq!(out.status.code(), Some(2), "{:?}", text(&out));
    assert!(text(&out).1.contains("invalid value 'tpu'"), "{:?}", text(&out));
    if !common::cuda_available(dir.path()) {
        let out = run(&["peaks", "--backend", "cuda"], dir.path());
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.starts_with("steptrace: error: ") && !stderr.contains("panicked"), "{stderr}");
        assert!(cache_files(dir.path()).is_empty());
    }
}
