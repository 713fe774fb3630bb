//! How fast could it be, end to end on lavapipe: `peaks` measures the device, a `--detail ops`
//! run carries the limits in its traces, and `report` prices the bundled models' kernels
//! against them, in text, JSON and HTML. Behaviour only, never timings.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{flat, text};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_steptrace");

fn run(args: &[&str], dir: &Path) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env("NODEVICE_SELECT", "1")
        .env("STEPTRACE_CACHE_DIR", dir.join("cache"))
        .output()
        .unwrap()
}

fn ok(args: &[&str], dir: &Path) -> String {
    let out = run(args, dir);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{args:?}:\n{stdout}\n{stderr}");
    stdout
}

#[test]
fn the_bundled_models_are_priced_against_the_measured_limits() {
    let dir = tempfile::tempdir().unwrap();
    if !ok(&["backends"], dir.path()).lines().any(|l| l.contains("wgpu") && l.contains("yes")) {
        eprintln!("no wgpu adapter here: skipped");
        return;
    }
    let measured: Value = serde_json::from_str(&ok(&["peaks", "--backend", "wgpu", "--json"], dir.path())).unwrap();
    for (model, dataset) in [("mlp", "digits"), ("convnet", "digits")] {
        let out = format!("{model}-ops");
        let said = ok(
            &[
                "train",
                "--backend",
                "wgpu",
                "--model",
                model,
                "--dataset",
                dataset,
                "--batch",
                "16",
                "--steps",
                "6",
                "--schedule",
                "wait=1,warmup=1,active=3",
                "--detail",
                "ops",
                "--out",
                &out,
            ],
            dir.path(),
        );
        assert!(flat(&said).contains("every trace of this run carries them"), "{said}");
        let report: Value = serde_json::from_str(&ok(&["report", &out, "--json"], dir.path())).unwrap();
        let r = &report["device"]["roofline"];
        assert_eq!(r["roofs"]["from"], "the trace's manifest", "{model}: {r}");
        assert_eq!(r["roofs"]["bandwidth"], measured["copy"]["value"], "priced against the copy bandwidth");
        let share = r["priced_share"].as_f64().unwrap();
        assert!(share >= 0.9, "{model}: {share} of kernel time priced; not priced: {}", r["unpriced"]);
        let layers = r["by_layer"].as_array().unwrap();
        assert!(layers.iter().any(|l| l["name"].as_str().is_some_and(|n| n.starts_with("forward > "))), "{model}: {r}");
        for row in layers {
            let (floor, ms) = (row["floor_ms"].as_f64().unwrap(), row["ms_per_step"].as_f64().unwrap());
            assert!(floor > 0.0 || row["flops_per_step"] == 0.0 && row["bytes_per_step"] == 0.0, "{row}");
            assert!(["memory", "compute"].contains(&row["bound"].as_str().unwrap()), "{row}");
            let above = row["above_floor_ms"].as_f64().unwrap();
            assert!((above - (ms - floor).max(0.0)).abs() < 1e-9, "{row}");
        }
        let step = &r["step"];
        let parts: f64 =
            ["floor_ms", "above_floor_ms", "unpriced_ms", "idle_input_ms", "idle_sync_ms", "idle_other_ms", "rest_ms"]
                .iter()
                .map(|k| step[k].as_f64().unwrap_or(0.0))
                .sum();
        let step_ms = step["step_ms"].as_f64().unwrap();
        assert!((parts - step_ms).abs() < 1e-6 * step_ms.max(1.0), "{model}: the parts make up the step: {step}");
        let text = ok(&["report", &out], dir.path());
        assert!(text.contains("== How fast could it be"), "{text}");
        assert!(text.contains("CPU figures"), "lavapipe's limits are labelled: {text}");
        let html = dir.path().join(format!("{model}.html"));
        ok(&["report", &out, "--html", html.to_str().unwrap()], dir.path());
        let page = std::fs::read_to_string(&html).unwrap();
        assert!(page.contains("How fast could it be") && page.contains("roofline ("), "the roofline chart is drawn");
    }
}

#[test]
fn report_peaks_reads_only_a_file_of_limits() {
    let dir = tempfile::tempdir().unwrap();
    let trace = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/steptrace-v1-cuda-mlp-h200.trace.json");
    std::fs::write(dir.path().join("junk.json"), "{\"not\": \"peaks\"}").unwrap();
    let out = run(&["report", trace, "--peaks", "junk.json"], dir.path());
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("holds no device limits") && !stderr.contains("panicked"), "{stderr}");
    let out = run(&["report", trace, "--peaks", "/dev/zero"], dir.path());
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "a device is refused unread: {stderr}");
}
