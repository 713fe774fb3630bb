//! `steptrace compare` at kernel level: two traces (burn on an H200
//! against PyTorch on the H200, a trace against itself), a side without
//! kernels, bench results with and without kernels, and a bench result
//! against a trace (refused); a trace cut short, said so per file, and
//! who wrote a trace, told from its content.

mod common;

use std::path::Path;

use common::{flat, steptrace, text};
use serde_json::Value;
use steptrace::bench::{BenchResult, KernelRecord, KernelSummary, KernelSummaryRow, RunRecord};

const BURN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/h200-cuda");
const TORCH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/torch-kineto-mlp-h200.json");
const HOST_ONLY: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/steptrace-v1-cuda-mlp-h200.trace.json");

fn compare(args: &[&str], dir: &Path) -> (String, String) {
    let out = steptrace(&[&["compare"], args].concat(), dir);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    (stdout, stderr)
}

fn compare_json(args: &[&str], dir: &Path) -> Value {
    let (stdout, _) = compare(&[args, &["--json"]].concat(), dir);
    serde_json::from_str(&stdout).unwrap()
}

/// Claims a comparison must not make about one run each.
fn claims_nothing(stdout: &str) {
    for word in ["verdict:", "faster", "slower", "speedup"] {
        assert!(!stdout.contains(word), "{word}: {stdout}");
    }
    assert!(stdout.contains("one run each, not a benchmark") && stdout.contains("steptrace bench"), "{stdout}");
}

#[test]
fn burn_against_pytorch_says_the_names_do_not_match_and_compares_classes() {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, _) = compare(&[BURN, TORCH], dir.path());
    claims_nothing(&stdout);
    assert!(stdout.contains("kernel names do NOT match") && stdout.contains("0 name(s) in common"), "{stdout}");
    assert!(flat(&stdout).contains("carrying 0% of A's and 0% of B's kernel time"), "{stdout}");
    for class in ["matmul/gemm", "elementwise/fused", "reduction/softmax/norm", "copy/fill/memset"] {
        assert!(stdout.lines().any(|l| l.starts_with(&format!("│ {class} "))), "{class}: {stdout}");
    }
    assert!(stdout.contains("│ steady ms/step (median)") && stdout.contains("│ device busy ms/step"), "{stdout}");
    assert!(stdout.contains("written by") && stdout.contains("torch.profiler"), "{stdout}");
    // The per-name table is not printed for names that cannot be paired.
    assert!(!stdout.lines().any(|l| l.starts_with("│ kernel") && l.contains("┆ class")), "{stdout}");

    let json = compare_json(&[BURN, TORCH], dir.path());
    assert_eq!(json["kind"], "traces");
    let c = &json["kernels"]["comparison"];
    assert_eq!(c["names"]["matched"], false);
    assert_eq!(c["names"]["common"], 0);
    assert_eq!((c["a"]["kernels_per_step"].as_f64(), c["b"]["kernels_per_step"].as_f64()), (Some(33.0), Some(35.0)));
    let class = |name: &str| c["classes"].as_array().unwrap().iter().find(|x| x["class"] == name).cloned().unwrap();
    // Both sides spend device time in matrix products; PyTorch's cuBLAS
    // kernels (with their split-K reductions and epilogues) more of it.
    let m = class("matmul");
    assert!(
        m["a_ms_per_step"].as_f64().unwrap() > 0.0
            && m["b_ms_per_step"].as_f64().unwrap() > m["a_ms_per_step"].as_f64().unwrap()
    );
    assert_eq!((m["a_names"].as_u64(), m["b_names"].as_u64()), (Some(3), Some(8)));
    // The classes add up to each side's listed kernel time.
    for side in ["a", "b"] {
        let classes: f64 =
            c["classes"].as_array().unwrap().iter().map(|x| x[format!("{side}_ms_per_step")].as_f64().unwrap()).sum();
        let total = c[side]["kernel_ms_per_step"].as_f64().unwrap();
        assert!((classes - total).abs() < 1e-9, "{side}: {classes} vs {total}");
    }
    let busy = |s: &str| json[s]["device_busy_ms_per_step"]["mean"].as_f64().unwrap();
    assert!((c["busy_change_ms_per_step"].as_f64().unwrap() - (busy("b") - busy("a"))).abs() < 1e-12);
}

#[test]
fn a_trace_against_itself_changes_no_kernel_and_claims_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, _) = compare(&[BURN, BURN], dir.path());
    claims_nothing(&stdout);
    assert!(stdout.contains("kernel names match: 15 in common"), "{stdout}");
    assert!(stdout.contains("no kernel's device time per step differs between A and B"), "{stdout}");
    let json = compare_json(&[BURN, BURN], dir.path());
    let c = &json["kernels"]["comparison"];
    let rows = c["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 15);
    for r in rows {
        assert_eq!(r["change_ms_per_step"].as_f64(), Some(0.0), "{r}");
        assert_eq!(r["a_ms_per_step"], r["b_ms_per_step"]);
    }
    assert!(c["classes"].as_array().unwrap().iter().all(|x| x["change_ms_per_step"].as_f64() == Some(0.0)));
    assert_eq!(c["busy_change_ms_per_step"].as_f64(), Some(0.0));
    assert_eq!(json["steady_median_change_ms"].as_f64(), Some(0.0));
    // The torch.profiler trace against itself: the same.
    let json = compare_json(&[TORCH, TORCH], dir.path());
    assert!(json["kernels"]["comparison"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["change_ms_per_step"].as_f64() == Some(0.0)));
}

#[test]
fn a_side_without_kernels_is_not_observed_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, _) = compare(&[HOST_ONLY, BURN], dir.path());
    assert!(stdout.contains("kernels A: not observed: the trace has no device timestamps"), "{stdout}");
    assert!(stdout.contains("no kernel comparison: it needs kernels on both sides"), "{stdout}");
    assert!(stdout.contains("device A: not observed"), "{stdout}");
    let json = compare_json(&[HOST_ONLY, BURN], dir.path());
    assert_eq!(json["kernels"]["a"]["status"], "not_observed");
    assert_eq!(json["kernels"]["b"]["status"], "observed");
    assert!(json["kernels"]["comparison"].is_null());
}

fn run(m: f64) -> RunRecord {
    RunRecord {
        time_to_first_step_ms: 100.0,
        first_step_ms: 50.0,
        cache: "warm".into(),
        step_ms: vec![m, m * 1.01, m * 0.99],
        median_ms: m,
        first_loss: Some(2.0),
        final_loss: Some(1.0),
        held_out: None,
    }
}

fn summary(rows: &[(&str, f64, f64)]) -> KernelRecord {
    let rows: Vec<KernelSummaryRow> = rows
        .iter()
        .map(|&(name, calls, ms)| KernelSummaryRow {
            name: name.into(),
            label: name.into(),
            calls_per_step: calls,
            ms_per_step: ms,
            mean_us: ms * 1000.0 / calls,
            grid: None,
            block: None,
            share_of_busy: ms,
        })
        .collect();
    KernelRecord::Observed(KernelSummary {
        steps: 10,
        kernels_per_step: rows.iter().map(|r| r.calls_per_step).sum(),
        busy_ms_per_step: 1.0,
        kernel_ms_per_step: rows.iter().map(|r| r.ms_per_step).sum(),
        rows,
        others_ms_per_step: 0.0,
        others: 0,
    })
}

fn write(dir: &Path, name: &str, r: &BenchResult) {
    std::fs::write(dir.join(name), serde_json::to_vec_pretty(r).unwrap()).unwrap();
}

#[test]
fn bench_results_compare_kernels_after_the_verdict_and_old_results_say_not_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let bench = |medians: &[f64]| {
        BenchResult::new(Default::default(), "cuda".into(), 2, 3, 64, medians.iter().map(|&m| run(m)).collect())
            .unwrap()
    };
    let a = bench(&[2.0, 2.1]).with_kernels(vec![
        summary(&[("matmul_a", 2.0, 0.5), ("elemwise_fuse", 10.0, 0.25)]),
        summary(&[("matmul_a", 2.0, 0.5), ("elemwise_fuse", 10.0, 0.25)]),
    ]);
    // B: the fused kernel doubles (+0.25), the matmul loses 0.125.
    let b = bench(&[2.0, 2.1]).with_kernels(vec![
        summary(&[("matmul_a", 2.0, 0.375), ("elemwise_fuse", 20.0, 0.5)]),
        summary(&[("matmul_a", 2.0, 0.375), ("elemwise_fuse", 20.0, 0.5)]),
    ]);
    write(dir.path(), "a.json", &a);
    write(dir.path(), "b.json", &b);
    write(dir.path(), "old.json", &bench(&[2.0, 2.1]));
    let (stdout, _) = compare(&["a.json", "b.json"], dir.path());
    let (verdict, kernels) = (stdout.find("verdict: ").unwrap(), stdout.find("== Kernels").unwrap());
    assert!(verdict < kernels, "{stdout}");
    let fuse = stdout.lines().position(|l| l.starts_with("│ elemwise_fuse ")).unwrap();
    let matmul = stdout.lines().position(|l| l.starts_with("│ matmul_a ")).unwrap();
    assert!(fuse < matmul, "ranked by absolute change: {stdout}");
    let line = stdout.lines().nth(fuse).unwrap();
    assert!(line.contains("+0.2500") && line.contains("10.0→20.0"), "{line}");

    let json = compare_json(&["a.json", "b.json"], dir.path());
    assert!(json["ratio"].as_f64().is_some(), "the timing comparison stays at the top level");
    let rows = json["kernels"]["comparison"]["rows"].as_array().unwrap();
    let changes: Vec<(&str, f64)> =
        rows.iter().map(|r| (r["name"].as_str().unwrap(), r["change_ms_per_step"].as_f64().unwrap())).collect();
    assert_eq!(changes, [("elemwise_fuse", 0.25), ("matmul_a", -0.125)]);

    let (stdout, _) = compare(&["old.json", "a.json"], dir.path());
    assert!(
        stdout.contains("kernels A: not observed: not recorded: the bench ran without --profile active"),
        "{stdout}"
    );
    let json = compare_json(&["old.json", "a.json"], dir.path());
    assert_eq!(json["kernels"]["a"]["status"], "not_observed");
    assert!(json["kernels"]["comparison"].is_null());
}

#[test]
fn a_bench_result_against_a_trace_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let r = BenchResult::new(Default::default(), "cuda".into(), 2, 3, 64, vec![run(2.0)]).unwrap();
    write(dir.path(), "a.json", &r);
    for args in [["a.json", TORCH], [BURN, "a.json"]] {
        let out = steptrace(&["compare", args[0], args[1]], dir.path());
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
        assert!(
            stderr.contains("cannot compare a bench result with a trace")
                || stderr.contains("cannot compare a trace with a bench result"),
            "{stderr}"
        );
        assert!(stderr.contains("Compare two bench results") && stderr.contains("or two traces"), "{stderr}");
        assert!(stdout.is_empty(), "{stdout}");
    }
}

#[test]
fn bench_with_profile_active_records_why_a_run_has_no_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "bench",
        "--backend",
        "cpu",
        "--warmup",
        "1",
        "--steps",
        "3",
        "--runs",
        "2",
        "--profile",
        "active",
        "--trace-dir",
        "t",
        "--json",
        "a.json",
    ];
    let out = steptrace(&args, dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("│ kernels per run") && stdout.contains("every run: not observed: "), "{stdout}");
    let r: Value = serde_json::from_slice(&std::fs::read(dir.path().join("a.json")).unwrap()).unwrap();
    let kernels = r["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 2);
    for k in kernels {
        // Absent is not zero: the CPU has no separate device, and says so.
        assert_eq!(k["status"], "not_observed", "{k}");
        assert!(k["reason"].as_str().unwrap().contains("CPU backend has no separate device"), "{k}");
    }
    let (stdout, _) = compare(&["a.json", "a.json"], dir.path());
    assert!(stdout.contains("kernels A: not observed: device activity not observed"), "{stdout}");
}

/// `bytes` as gzip (stored deflate blocks, written by hand), cut after
/// `keep` bytes of content: what a copy stopped midway leaves.
fn gzip_cut(bytes: &[u8], keep: usize) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];
    let mut content = 0;
    for block in bytes.chunks(65_535) {
        out.push(0);
        let len = block.len() as u16;
        out.extend(len.to_le_bytes());
        out.extend((!len).to_le_bytes());
        let take = block.len().min(keep - content);
        out.extend(&block[..take]);
        content += take;
        if content == keep {
            break;
        }
    }
    out
}

#[test]
fn a_trace_cut_short_is_said_so_per_file_and_a_steptrace_file_is_not_taken_for_torchs() {
    let dir = tempfile::tempdir().unwrap();
    let name = "mlp-cuda.cycle0.20261201T104254.501Z.trace.json";
    let bytes = std::fs::read(Path::new(BURN).join(name)).unwrap();
    // Cut before its metadata: what is left holds CUPTI's kernel categories, as Kineto's traces do.
    std::fs::write(dir.path().join("cut.trace.json.gz"), gzip_cut(&bytes, bytes.len() * 3 / 4)).unwrap();
    let note = "cut short (crash mid-window): complete events only";

    let out = steptrace(&["report", "cut.trace.json.gz"], dir.path());
    let (report, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(flat(&report).contains(note) && report.contains("from steptrace"), "{report}");

    let (stdout, _) = compare(&["cut.trace.json.gz", BURN], dir.path());
    assert!(flat(&stdout).contains(&format!("A: cut.trace.json.gz: {note}")), "{stdout}");
    assert!(!stdout.lines().any(|l| l.starts_with("B: ")), "B is whole: {stdout}");
    let written = stdout.lines().find(|l| l.starts_with("│ written by")).unwrap();
    assert_eq!(written.matches("steptrace").count(), 2, "{written}");
    assert!(!stdout.contains("torch.profiler"), "{stdout}");

    let json = compare_json(&["cut.trace.json.gz", BURN], dir.path());
    assert_eq!(
        (&json["a"]["producer"], &json["b"]["producer"]),
        (&Value::from("steptrace"), &Value::from("steptrace"))
    );
    assert_eq!(
        (&json["a"]["sources"][0]["truncated"], &json["b"]["sources"][0]["truncated"]),
        (&Value::from(true), &Value::from(false))
    );
    assert_eq!(json["a"]["file_notes"][0], format!("cut.trace.json.gz: {note}"));
    assert_eq!(json["b"]["file_notes"], serde_json::json!([]));
}
