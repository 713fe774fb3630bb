//! `steptrace report --html FILE`: one self-contained page, from a
//! device-observed trace (the committed H200 CUDA trace, a torch.profiler
//! one) and from traces without device events (a fallback run).

mod common;

use std::path::Path;

use common::{steptrace, text};
use serde_json::{json, Value};

const H200: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/h200-cuda");
const KINETO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/torch-kineto-mlp-h200.json");

/// The hostile name planted in the traces below.
const EVIL: &str = r#"<script>alert("pwned")</script> & <b>bold</b>"#;
const EVIL_ESCAPED: &str = "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;";

/// Runs `report ARGS --html page.html` in `dir` and returns the page.
fn page(args: &[&str], dir: &Path) -> String {
    let out = steptrace(&[&["report"], args, &["--html", "page.html"]].concat(), dir);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stderr.contains("html report written to page.html"), "{stderr}");
    std::fs::read_to_string(dir.join("page.html")).unwrap()
}

/// The values of every `name="..."` attribute in `page`.
fn attributes<'a>(page: &'a str, name: &str) -> Vec<&'a str> {
    let needle = format!(" {name}=\"");
    page.match_indices(&needle)
        .map(|(at, _)| {
            let value = &page[at + needle.len()..];
            &value[..value.find('"').unwrap_or(value.len())]
        })
        .collect()
}

/// Loads nothing: no script, no stylesheet or frame, no URL in any
/// src/href, a policy that forbids loads.
fn assert_self_contained(page: &str) {
    assert!(page.starts_with("<!DOCTYPE html>"), "{}", &page[..80]);
    assert!(page.contains("http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';"));
    let lower = page.to_ascii_lowercase();
    for tag in ["<script", "<link", "<iframe", "<img", "<object", "<embed", "@import", "url("] {
        assert!(!lower.contains(tag), "the page holds {tag}");
    }
    for name in ["src", "href", "xlink:href", "srcset", "action"] {
        for value in attributes(page, name) {
            assert!(!value.contains("http://") && !value.contains("https://"), "{name}=\"{value}\"");
            assert!(value.starts_with('#'), "{name}=\"{value}\" is not an in-page anchor");
        }
    }
}

/// The part of `page` between `<section id="ID"` and its end.
fn section<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page.find(&format!("<section id=\"{id}\"")).unwrap_or_else(|| panic!("no section {id}"));
    let len = page[start..].find("</section>").unwrap();
    &page[start..start + len]
}

fn assert_sections_in_order(page: &str) {
    let at: Vec<usize> = ["run", "steps", "device", "spans", "hypotheses", "notes", "viewers"]
        .iter()
        .map(|id| page.find(&format!("<section id=\"{id}\"")).unwrap_or_else(|| panic!("no section {id}")))
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "sections out of order: {at:?}");
}

fn fixture_file() -> std::path::PathBuf {
    std::fs::read_dir(H200)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".trace.json"))
        .unwrap()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn an_h200_cuda_trace_gets_every_section_with_inline_charts() {
    let dir = tempfile::tempdir().unwrap();
    let page = page(&[H200], dir.path());
    assert_self_contained(&page);
    assert_sections_in_order(&page);
    let run = section(&page, "run");
    assert!(run.contains("cuda (NVIDIA H200)") && run.contains("mlp") && run.contains("digits"), "{run}");
    assert!(
        run.contains("64 samples per step") && run.contains("skip_first=10,wait=1,warmup=1,active=3,repeat=2"),
        "{run}"
    );
    assert!(run.contains("mlp-cuda.cycle0.20261201T104254.501Z.trace.json"), "{run}");
    assert!(!page.contains("banner fallback") && !page.contains("banner unobserved"), "no banner on a CUDA run");

    let steps = section(&page, "steps");
    assert!(
        steps.contains("class=\"headline\"") && steps.contains("ms/step = ") && steps.contains("samples/s"),
        "{steps}"
    );
    assert!(steps.contains("no startup step in these traces (steps 0..8 declared startup by the run)"), "{steps}");
    assert!(steps.contains("first step 50248 ms"), "startup measured by the run, apart: {steps}");
    assert_eq!(steps.matches("<svg").count(), 1, "the step plot");

    let device = section(&page, "device");
    // Per-step stacked bars for the H200, and the top-kernels chart.
    assert_eq!(device.matches("<svg").count(), 2, "{device}");
    assert!(device.contains("GPU 0: NVIDIA H200") && device.contains("idle while the host waited in sync"), "{device}");
    assert!(
        device.contains("idle: host reading input") && device.contains("#12") && device.contains("#14"),
        "legend and steps"
    );
    for figure in
        ["launches per step", "launch to kernel start", "host ahead", "host waiting for the device", "% of the step"]
    {
        assert!(device.contains(figure), "{figure}: {device}");
    }
    assert!(
        device.contains("<td class=\"name\">HtoD</td>") && device.contains("16384 B (16.0 KiB)"),
        "copies: {device}"
    );
    assert!(device.contains(">batch</td>") && device.contains(">not the batch</td>"), "batch told apart: {device}");
    assert!(
        device.contains("matmul_entry_lhs_f32") && device.contains("share of busy") && device.contains("32×2×1"),
        "{device}"
    );
    // Everything is observed but kernel attribution, which this trace (recorded without
    // `--detail ops`) does not carry: said once, with the reason.
    let (observed, attribution) = device.split_once("<h3>Which op, which layer</h3>").expect("the attribution part");
    assert!(!observed.contains("not observed"), "everything else is observed on this trace: {device}");
    assert!(attribution.contains("not observed") && attribution.contains("--detail ops"), "{attribution}");

    let spans = section(&page, "spans");
    assert!(
        spans.contains(">optimizer</span>") && spans.contains("host launch") && spans.contains(">waiting</span>"),
        "{spans}"
    );
    assert!(spans.contains("Sums are not elapsed time") && spans.contains("not elapsed time"), "{spans}");

    let hypotheses = section(&page, "hypotheses");
    assert!(hypotheses.contains("Evidence:") && hypotheses.contains("Next experiment:"), "{hypotheses}");
    assert!(hypotheses.contains("<pre>steptrace train --model mlp"), "the exact command: {hypotheses}");

    let viewers = section(&page, "viewers");
    assert!(
        viewers.contains("ui.perfetto.dev") && viewers.contains("Open trace") && viewers.contains("speedscope"),
        "{viewers}"
    );
    assert!(viewers.contains("mlp-cuda.cycle0.20261201T104254.501Z.trace.json"), "{viewers}");
}

#[test]
fn a_torch_profiler_trace_gets_its_device_view() {
    let dir = tempfile::tempdir().unwrap();
    let page = page(&[KINETO, "--batch", "256"], dir.path());
    assert_self_contained(&page);
    assert_sections_in_order(&page);
    assert!(section(&page, "run").contains("torch.profiler; "), "{}", section(&page, "run"));
    assert!(section(&page, "steps").contains("samples/s"));
    let device = section(&page, "device");
    assert!(device.matches("<svg").count() >= 2, "per-step bars and kernels: {device}");
    assert!(device.contains("Top kernels") && device.contains("mean µs"), "{device}");
    assert!(section(&page, "viewers").contains("torch-kineto-mlp-h200.json"));
}

/// The H200 trace as a fallback run would write it: no device event, the
/// manifest saying CUDA was not used and why (with markup in the reason).
fn fallback_trace(dir: &Path) -> String {
    let mut doc = read_json(&fixture_file());
    let device_cats = ["kernel", "gpu_memcpy", "gpu_memset", "cuda_driver", "ac2g"];
    let events = doc["traceEvents"].as_array_mut().unwrap();
    events.retain(|e| !e["cat"].as_str().is_some_and(|c| device_cats.contains(&c)) && e["pid"] != 100);
    let meta = &mut doc["metadata"];
    let reason = format!("CUDA unavailable: libcuda.so not found {EVIL}");
    meta["manifest"]["backend"] = json!(format!("wgpu (FALLBACK: {reason}) on llvmpipe"));
    meta["manifest"]["backend_kind"] = json!("wgpu");
    meta["manifest"]["device"] = json!("llvmpipe");
    meta["manifest"]["fallback_reason"] = json!(reason);
    meta["device_activity"] =
        json!({"status": "not_observed", "reason": "device activity is recorded on CUDA only, through CUPTI"});
    let name = "mlp-wgpu.cycle0.trace.json";
    std::fs::write(dir.join(name), serde_json::to_vec(&doc).unwrap()).unwrap();
    name.to_owned()
}

#[test]
fn a_fallback_trace_has_its_banner_and_no_device_figure() {
    let dir = tempfile::tempdir().unwrap();
    let name = fallback_trace(dir.path());
    let page = page(&[&name], dir.path());
    assert_self_contained(&page);
    assert_sections_in_order(&page);
    let run = section(&page, "run");
    assert!(
        run.contains(&format!("class=\"banner fallback\">FALLBACK: not the requested backend (CUDA unavailable: libcuda.so not found {EVIL_ESCAPED})")),
        "{run}"
    );
    assert!(
        run.contains(
            "class=\"banner unobserved\">Device activity not observed: device activity is recorded on CUDA only"
        ),
        "{run}"
    );
    assert!(!page.contains("<script") && !page.contains("<b>bold"), "escaped everywhere");

    let device = section(&page, "device");
    assert!(!device.contains("<svg"), "never an empty chart: {device}");
    for part in ["device busy and idle: not observed", "copies: not observed", "kernels: not observed"] {
        assert!(device.contains(part), "{part}: {device}");
    }
    assert!(device.contains("recorded on CUDA only, through CUPTI"), "with the reason: {device}");
    assert!(device.contains("launch to kernel start, host ahead</dt><dd><strong>not observed</strong>"), "{device}");
    assert!(!device.contains("median ms"), "no busy/idle figure, not even a zero: {device}");
    // The step plot is still there: step time does not need the device.
    assert_eq!(page.matches("<svg").count(), 1);
}

#[test]
fn a_real_fallback_or_cpu_run_says_not_observed() {
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
    assert!(train.status.success(), "{:?}", text(&train));
    let json: Value = {
        let out = steptrace(&["report", "--json", "t"], dir.path());
        serde_json::from_str(&text(&out).0).unwrap()
    };
    let page = page(&["t"], dir.path());
    assert_self_contained(&page);
    assert_sections_in_order(&page);
    if json["run"]["backend_kind"] != "cuda" {
        let reason = json["run"]["fallback_reason"].as_str().expect("auto fell back: a reason");
        let banner = format!(
            "FALLBACK: not the requested backend ({}",
            reason
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('\'', "&#39;")
                .replace('"', "&quot;")
        );
        assert!(section(&page, "run").contains(&banner), "{}", section(&page, "run"));
        assert!(section(&page, "device").contains("device busy and idle: not observed"));
        assert!(!section(&page, "device").contains("<svg"));
    }
    assert_eq!(section(&page, "steps").matches("<svg").count(), 1);
}

#[test]
fn hostile_kernel_span_and_file_names_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let mut doc = read_json(&fixture_file());
    for e in doc["traceEvents"].as_array_mut().unwrap() {
        let name = e["name"].as_str().unwrap_or_default().to_owned();
        if name == "elemwise_fuse" || name == "optimizer" {
            e["name"] = json!(format!("{EVIL} {name}"));
        }
    }
    doc["metadata"]["manifest"]["model"] = json!(format!("mlp {EVIL}"));
    let file = "a&b<i>.trace.json";
    std::fs::write(dir.path().join(file), serde_json::to_vec(&doc).unwrap()).unwrap();
    let page = page(&[file], dir.path());
    assert_self_contained(&page);
    assert!(!page.contains("<script") && !page.contains("<b>") && !page.contains("<i>"), "raw markup from the trace");
    assert!(page.contains(&format!("{EVIL_ESCAPED} elemwise_fuse")), "the kernel's full name, escaped");
    assert!(page.contains(&format!("{EVIL_ESCAPED} optimizer")), "the span's name, escaped");
    assert!(section(&page, "run").contains(&format!("mlp {EVIL_ESCAPED}")), "the manifest's model, escaped");
    assert!(page.contains("a&amp;b&lt;i&gt;.trace.json"), "the file name, escaped");
    // The kernel chart's labels come through plotters, escaped too.
    let device = section(&page, "device");
    assert!(device.contains("&lt;script&gt;alert"), "{device}");
}

#[test]
fn an_existing_file_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("page.html"), "keep me").unwrap();
    let out = steptrace(&["report", H200, "--html", "page.html"], dir.path());
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("page.html already exists: an existing file is never overwritten"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(std::fs::read_to_string(dir.path().join("page.html")).unwrap(), "keep me");

    let out = steptrace(&["report", H200, "--html", "no/such/folder/page.html"], dir.path());
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot create no/such/folder/page.html: the folder no/such/folder does not exist"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn an_idle_cause_the_trace_cannot_see_is_not_observed() {
    let dir = tempfile::tempdir().unwrap();
    let mut doc = read_json(&fixture_file());
    // Without data.load spans, the device's idle time while the host read
    // input cannot be told: not observed, not zero.
    doc["traceEvents"].as_array_mut().unwrap().retain(|e| e["name"] != "data.load");
    std::fs::write(dir.path().join("t.trace.json"), serde_json::to_vec(&doc).unwrap()).unwrap();
    let page = page(&["t.trace.json"], dir.path());
    let device = section(&page, "device");
    assert!(
        device.contains("idle while the host read input</td><td class=\"name\" colspan=\"3\"><strong>not observed</strong> — no input span"),
        "{device}"
    );
    assert!(device.contains("idle: host reading input (not observed)"), "the chart's legend says so too");
    assert!(
        device.contains("idle while the host waited in sync</td><td class=\"n\">"),
        "waiting is observed: {device}"
    );
}
