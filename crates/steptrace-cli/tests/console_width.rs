//! What `steptrace train` prints fits a 100-column terminal, fallback label included.

mod common;

use std::process::Command;

use common::text;

/// Runs `train` on the CPU and returns stdout and stderr. With `hide_wgpu`, Vulkan finds no
/// driver, so `--backend auto` falls back past CUDA and wgpu to the CPU: the longest label.
fn train(dir: &std::path::Path, backend: &str, hide_wgpu: bool) -> (String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_steptrace"));
    cmd.args(["train", "--backend", backend, "--steps", "20", "--quiet", "--memory", "--json", "s.json"])
        .current_dir(dir)
        .env("NODEVICE_SELECT", "1");
    if hide_wgpu {
        cmd.env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
            .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
            .env_remove("CUBECL_WGPU_DEFAULT_DEVICE");
    }
    let out = cmd.output().expect("run steptrace");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    (stdout, stderr)
}

fn assert_narrow(stdout: &str, stderr: &str) {
    for line in stdout.lines().chain(stderr.lines()) {
        let width = line.chars().count();
        assert!(width <= 100, "a {width}-column line:\n{line}\n\nwhole output:\n{stdout}{stderr}");
    }
}

#[test]
fn a_cpu_run_fits_100_columns() {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, stderr) = train(dir.path(), "cpu", false);
    assert!(stdout.starts_with("backend: cpu (") && stdout.contains("wrote traces/"), "{stdout}");
    assert_narrow(&stdout, &stderr);
}

#[test]
fn a_fallback_run_fits_100_columns_and_still_says_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, stderr) = train(dir.path(), "auto", true);
    if !stdout.starts_with("backend: cpu (FALLBACK: ") {
        // CUDA is here: auto does not fall back, there is no fallback label to check.
        assert!(stdout.starts_with("backend: cuda"), "{stdout}");
        return;
    }
    assert_narrow(&stdout, &stderr);
    // The label is long: it wraps, and its fallback reason is said once, on the first
    // line; above the summary table the label says FALLBACK again and points to it, and
    // the table does not hold it.
    let label = stdout.lines().next().unwrap();
    assert!(label.chars().count() > 60, "{label}");
    let flat = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(flat.matches("CUDA unavailable").count(), 1, "the reason once:\n{stdout}");
    let above_table =
        stdout.lines().filter(|l| l.starts_with("backend: cpu (FALLBACK: the reason on the first line)")).count();
    assert_eq!(above_table, 1, "the label above the table points to the first line:\n{stdout}");
    assert!(stdout.contains("NOTE: this run is NOT on CUDA"), "{stdout}");
    assert!(!stdout.lines().any(|l| l.starts_with('│') && l.contains("FALLBACK")), "{stdout}");
}
