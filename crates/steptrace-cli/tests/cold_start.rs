//! The cold start itemised, and the cubecl cache labelled per run: `steptrace train` on
//! wgpu (lavapipe here), three fresh processes into one fresh cache directory.

mod common;

use std::path::Path;

use common::{flat, steptrace, text};
use serde_json::Value;

fn wgpu_available(dir: &Path) -> bool {
    let (stdout, _) = text(&steptrace(&["backends"], dir));
    stdout.lines().any(|l| l.trim_start_matches(['│', ' ']).starts_with("wgpu") && l.contains("yes"))
}

/// One two-step run of `model` into the cache `cache`; its summary and its trace's manifest.
fn train(dir: &Path, n: usize, model: &str, backend: &str, extra: &[&str]) -> (Value, Value, String) {
    let out = format!("t{n}");
    let json = format!("s{n}.json");
    let mut args = vec![
        "train",
        "--backend",
        backend,
        "--model",
        model,
        "--steps",
        "2",
        "--schedule",
        "wait=1,warmup=0,active=1,repeat=1",
        "--cache-dir",
        "cubecl",
        "--out",
        &out,
        "--json",
        &json,
        "--quiet",
    ];
    args.extend_from_slice(extra);
    let run = steptrace(&args, dir);
    let (stdout, stderr) = text(&run);
    assert!(run.status.success(), "{stdout}{stderr}");
    let summary: Value = serde_json::from_slice(&std::fs::read(dir.join(&json)).unwrap()).unwrap();
    let trace = std::fs::read_dir(dir.join(&out))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".trace.json"))
        .unwrap();
    let trace: Value = serde_json::from_slice(&std::fs::read(trace).unwrap()).unwrap();
    (summary, trace["metadata"]["manifest"].clone(), stdout)
}

fn ms(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("a figure, not a reason: {v}"))
}

/// The items of a phase add up to its wall time (absent items are in the rest).
fn adds_up(phase: &Value) {
    let known = |v: &Value| v.as_f64().unwrap_or(0.0);
    let sum = phase.get("client_ms").map_or(0.0, known)
        + known(&phase["autotune"]["ms"])
        + known(&phase["compile"]["outside_autotune_ms"])
        + ms(&phase["rest_ms"]);
    assert!((sum - ms(&phase["ms"])).abs() < 1e-6, "{phase:#}");
}

/// What the run's start compiled and tuned, checked; its label.
fn checked(summary: &Value, manifest: &Value, stdout: &str) -> String {
    let cold = &summary["cold_start"];
    let label = cold["cache"]["label"].as_str().unwrap().to_owned();
    assert!(summary["cache"].as_str().unwrap().ends_with(&format!("({label})")), "{summary:#}");
    for phase in [&cold["setup"], &cold["first_step"]] {
        adds_up(phase);
    }
    let first = &cold["first_step"];
    assert_eq!(ms(&first["ms"]), ms(&summary["first_step_ms"]));
    assert!(ms(&cold["setup"]["client_ms"]) > 0.0, "{cold:#}");
    // wgpu: every shader compiles, timed from cubecl-wgpu's record to wgpu-core's.
    assert!(first["compile"]["kernels"].as_u64().unwrap() > 0, "{cold:#}");
    assert!(ms(&first["compile"]["ms"]) > 0.0, "{cold:#}");
    assert!(first["compile"]["cache_hits"].as_str().unwrap().starts_with("not applicable"), "{cold:#}");
    assert!(cold["source"].as_str().unwrap().contains("compiling WGSL module"));
    // The manifest says the same, in the startup and in the cache's state.
    assert_eq!(manifest["startup"]["cubecl_cache"], label.as_str());
    assert_eq!(manifest["cubecl_cache"]["state"], label.as_str());
    let written = &manifest["startup"]["cold_start"];
    assert_eq!(
        (&written["cache"], &written["first_step"]["compile"]["kernels"]),
        (&cold["cache"], &first["compile"]["kernels"])
    );
    assert!(stdout.contains("cold start: first step "), "{stdout}");
    label
}

/// A ConvNet after an MLP in one cache directory is not warm; the MLP again is.
#[test]
fn mlp_then_convnet_then_mlp_in_one_cache_dir_are_cold_partly_warm_then_warm() {
    let dir = tempfile::tempdir().unwrap();
    if !wgpu_available(dir.path()) {
        eprintln!("no wgpu adapter here: skipped");
        return;
    }
    let (s, m, out) = train(dir.path(), 1, "mlp", "wgpu", &[]);
    assert_eq!(checked(&s, &m, &out), "cold");
    let tune = &s["cold_start"]["first_step"]["autotune"];
    assert!(tune["runs"].as_u64().unwrap() > 0 && tune["cache_hits"] == 0, "{tune}");
    assert_eq!(m["autotune_level"]["source"], "cubecl configuration");

    // The directory now has files, but not the ConvNet's results: some come from the
    // cache, the rest is tuned.
    let (s, m, out) = train(dir.path(), 2, "convnet", "wgpu", &["--autotune-level", "balanced"]);
    assert_eq!(checked(&s, &m, &out), "partly warm", "{:#}", s["cold_start"]);
    let tune = &s["cold_start"]["first_step"]["autotune"];
    assert!(tune["runs"].as_u64().unwrap() > 0, "{tune}");
    assert_eq!(m["autotune_level"], serde_json::json!({"level": "balanced", "source": "steptrace --autotune-level"}));
    assert!(flat(&out).contains("autotune level balanced (steptrace --autotune-level)"), "{out}");

    let (s, m, out) = train(dir.path(), 3, "mlp", "wgpu", &[]);
    assert_eq!(checked(&s, &m, &out), "warm", "{:#}", s["cold_start"]);
    let tune = &s["cold_start"]["first_step"]["autotune"];
    assert!(tune["runs"] == 0 && tune["cache_hits"].as_u64().unwrap() > 0, "{tune}");
    assert_eq!(tune["ms"], 0.0);

    // The report reads the breakdown back.
    let report = steptrace(&["report", "t3"], dir.path());
    let (stdout, stderr) = text(&report);
    assert!(report.status.success(), "{stderr}");
    assert!(
        stdout.contains("cold start: first step ") && stdout.contains("cold start: cubecl cache for this run: warm"),
        "{stdout}"
    );
}

#[test]
fn on_the_cpu_the_cold_start_is_not_applicable() {
    let dir = tempfile::tempdir().unwrap();
    let (s, m, out) = train(dir.path(), 1, "mlp", "cpu", &[]);
    assert_eq!(s["cold_start"], "not applicable: burn-flex does not use cubecl");
    assert_eq!(m["startup"]["cold_start"], "not applicable: burn-flex does not use cubecl");
    assert_eq!(m["startup"]["cubecl_cache"], "not applicable: burn-flex does not use cubecl");
    assert_eq!(m["autotune_level"], "not applicable: burn-flex does not use cubecl");
    assert!(out.contains("cold start: not applicable: burn-flex does not use cubecl"), "{out}");
}
