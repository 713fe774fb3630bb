//! `steptrace bench` and `steptrace compare` as a user runs them.

mod common;

use std::path::Path;

use common::{cuda_available, steptrace, text};
use serde_json::Value;

fn bench(dir: &Path, out: &str, extra: &[&str]) -> Value {
    let args =
        [&["bench", "--backend", "cpu", "--warmup", "2", "--steps", "6", "--runs", "3", "--json", out], extra].concat();
    let run = steptrace(&args, dir);
    assert!(run.status.success(), "{:?}", text(&run));
    serde_json::from_slice(&std::fs::read(dir.join(out)).unwrap()).unwrap()
}

#[test]
fn bench_records_raw_steps_spread_startup_and_quality_from_one_starting_state() {
    let dir = tempfile::tempdir().unwrap();
    let r = bench(dir.path(), "a.json", &[]);
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for run in runs {
        assert_eq!(run["step_ms"].as_array().unwrap().len(), 6);
        assert!(run["time_to_first_step_ms"].as_f64().unwrap() >= run["first_step_ms"].as_f64().unwrap());
        assert_eq!(run["held_out"][0], "accuracy");
        // Same seed, same starting state: the same first-step loss.
        assert_eq!(run["first_loss"], runs[0]["first_loss"]);
        assert!(run["final_loss"].as_f64().is_some());
    }
    assert_eq!(r["summary"]["same_first_loss"], true);
    for key in ["min", "median", "max", "std", "iqr"] {
        assert!(r["summary"]["run_medians_ms"][key].as_f64().is_some(), "{key}");
    }
    let fp = &r["fingerprint"];
    for key in [
        "model",
        "input_shape",
        "batch",
        "precision",
        "dataset",
        "seed",
        "backend",
        "device",
        "fusion",
        "autotune",
        "sync",
        "steptrace_version",
        "burn_version",
    ] {
        assert!(!fp[key].is_null(), "fingerprint lacks {key}");
    }
    assert_eq!(fp["input_shape"], serde_json::json!([64, 64]));

    // Another seed is another starting state.
    let other = bench(dir.path(), "seed7.json", &["--seed", "7"]);
    assert_ne!(other["runs"][0]["first_loss"], runs[0]["first_loss"]);

    // A result is never overwritten.
    let before = std::fs::read(dir.path().join("a.json")).unwrap();
    let again =
        steptrace(&["bench", "--backend", "cpu", "--runs", "1", "--steps", "2", "--json", "a.json"], dir.path());
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(std::fs::read(dir.path().join("a.json")).unwrap(), before);
}

#[test]
fn compare_refuses_other_differences_accepts_the_declared_one_and_claims_nothing_for_a_result_against_itself() {
    let dir = tempfile::tempdir().unwrap();
    bench(dir.path(), "a.json", &[]);
    bench(dir.path(), "b.json", &[]);
    bench(dir.path(), "lr.json", &["--lr", "0.01"]);

    // Twins (two benches of one command) are compared, not refused: nothing
    // differs but timing. Which verdict the timing gives is the machine's
    // business (two processes on a loaded CI runner can differ by a third),
    // so only the rendering is checked here; the verdict rules are unit
    // tests of `steptrace::bench::compare`.
    let out = steptrace(&["compare", "a.json", "b.json"], dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("verdict: ") && stdout.contains("95% bootstrap interval"), "{stdout}");
    // A result against itself: the ratio is exactly 1 and nothing is claimed.
    let out = steptrace(&["compare", "a.json", "a.json", "--json"], dir.path());
    assert!(out.status.success(), "{:?}", text(&out));
    let same: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(same["ratio"], 1.0);
    assert_eq!(same["verdict"]["kind"], "no_measurable_difference", "{same}");
    assert_eq!(same["differences"], serde_json::json!({}));

    let out = steptrace(&["compare", "a.json", "lr.json", "--vary", "batch"], dir.path());
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("refusing to compare") && stderr.contains("lr (0.001 vs 0.01)"), "{stderr}");

    let out = steptrace(&["compare", "a.json", "lr.json", "--vary", "lr", "--json"], dir.path());
    assert!(out.status.success(), "{:?}", text(&out));
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(c["differences"]["lr"], serde_json::json!([0.001, 0.01]));
    // Quality stays in the decision: both losses are reported.
    assert!(c["final_loss"][0].as_f64().is_some() && c["final_loss"][1].as_f64().is_some());
    assert!(c["interval"][0].as_f64().unwrap() <= c["ratio"].as_f64().unwrap());
}

#[test]
fn compare_backends_runs_each_and_reports_a_missing_one_without_substituting() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["compare", "--backends", "cpu,wgpu,cuda", "--warmup", "2", "--steps", "4", "--runs", "2"];
    let out = steptrace(&args, dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    // Each backend's whole label, above the table, and its row in the table.
    let ran_on =
        |name: &str| stdout.lines().find(|l| l.starts_with(&format!("  {name:<5} "))).unwrap_or_default().to_owned();
    let row = |name: &str| stdout.lines().find(|l| l.starts_with(&format!("│ {name} "))).unwrap_or_default().to_owned();
    assert!(ran_on("cpu").contains("cpu (") && row("cpu").contains("┆ cpu "), "{stdout}");
    // wgpu explicitly requested: it runs on whatever adapter there is, and
    // says which (lavapipe in CI), or is reported missing.
    let wgpu = ran_on("wgpu");
    assert!(wgpu.contains("wgpu") || wgpu.contains("not available"), "{stdout}");
    assert!(row("wgpu").contains("┆ wgpu ") || row("wgpu").contains("┆ none "), "{stdout}");
    if !cuda_available(dir.path()) {
        let cuda = ran_on("cuda");
        assert!(cuda.contains("not available"), "{stdout}");
        assert!(!cuda.contains("cpu (") && !cuda.contains("wgpu ("), "{stdout}");
        assert!(row("cuda").contains("┆ none "), "{stdout}");
        assert!(stdout.contains("not replaced by another"), "{stdout}");
    }
    assert!(stdout.lines().all(|l| l.chars().count() <= 100), "{stdout}");
}

#[test]
fn a_json_path_that_cannot_be_written_is_refused_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("taken.json"), "keep me").unwrap();
    // A missing folder, and an existing file, in both modes: refused at once,
    // before the first run's progress line (the steps are many, so a run
    // would show).
    for profile in ["off", "interleaved"] {
        for (path, expected) in [("no/such/dir/r.json", "does not exist"), ("taken.json", "already exists")] {
            let args =
                ["bench", "--backend", "cpu", "--profile", profile, "--runs", "3", "--steps", "100000", "--json", path];
            let out = steptrace(&args, dir.path());
            let (stdout, stderr) = text(&out);
            assert_eq!(out.status.code(), Some(1), "{profile} {path}: {stdout}{stderr}");
            assert!(stderr.contains(expected), "{profile} {path}: {stderr}");
            assert!(
                !stderr.contains("run 1/") && !stderr.contains("process 1 ("),
                "{profile} {path}: a run started: {stderr}"
            );
        }
    }
    assert!(!dir.path().join("no").exists());
    assert_eq!(std::fs::read_to_string(dir.path().join("taken.json")).unwrap(), "keep me");
}
