//! `--save-init` and `--init` as a user runs them: train saves and starts
//! from a record, never overwriting a file; bench saves once and starts its
//! later runs from it; `compare --backends` starts every backend from one
//! saved state and says so.

mod common;

use std::path::Path;

use common::{flat, steptrace, text};
use serde_json::Value;

fn train(dir: &Path, extra: &[&str]) -> std::process::Output {
    let args =
        [
            &[
                "train",
                "--backend",
                "cpu",
                "--steps",
                "3",
                "--schedule",
                "wait=0,warmup=1,active=1,repeat=1",
                "--quiet",
            ][..],
            extra,
        ]
        .concat();
    steptrace(&args, dir)
}

/// The manifest of the one trace under `dir/out`.
fn manifest(dir: &Path, out: &str) -> Value {
    let entry = std::fs::read_dir(dir.join(out))
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with(".trace.json"));
    let trace: Value = serde_json::from_slice(&std::fs::read(entry.expect("a trace").path()).unwrap()).unwrap();
    trace["metadata"]["manifest"].clone()
}

#[test]
fn train_saves_once_starts_from_the_record_and_never_overwrites_it() {
    let dir = tempfile::tempdir().unwrap();
    let saved = train(dir.path(), &["--save-init", "start.bin", "--out", "a"]);
    assert!(saved.status.success(), "{:?}", text(&saved));
    // The path given is the path written: no extension added or replaced.
    assert!(dir.path().join("start.bin").is_file());
    assert!(!dir.path().join("start.mpk").exists());
    let m = manifest(dir.path(), "a");
    assert_eq!(m["init"], "seed 42");
    // The record that holds the start is named by its SHA-256, as sha256sum prints it.
    let sha256sum = std::process::Command::new("sha256sum").arg(dir.path().join("start.bin")).output().unwrap();
    let file_sha256 = String::from_utf8_lossy(&sha256sum.stdout).split_whitespace().next().unwrap().to_owned();
    assert_eq!(m["init_sha256"], file_sha256.as_str());
    let weights_sha256 = m["init_weights_sha256"].as_str().unwrap().to_owned();
    assert_eq!(weights_sha256.len(), 64);
    // The reproducing command starts from the record it saved.
    let command = m["command"].as_str().unwrap();
    assert!(command.contains("--init start.bin"), "{command}");
    assert!(!command.contains("--save-init"), "{command}");

    // Saving onto it again is refused before anything runs, naming the path; the file is untouched.
    let before = std::fs::read(dir.path().join("start.bin")).unwrap();
    let again = train(dir.path(), &["--save-init", "start.bin", "--out", "b"]);
    let (stdout, stderr) = text(&again);
    assert!(!again.status.success(), "{stdout}{stderr}");
    assert!(stderr.contains("--save-init start.bin: the file already exists"), "{stderr}");
    assert!(!stdout.contains("backend:"), "refused only after the backend started: {stdout}");
    assert_eq!(std::fs::read(dir.path().join("start.bin")).unwrap(), before);

    // Started from the record, from a directory of its own: the label and the
    // command name the file only, never the directory.
    let sub = dir.path().join("private-dir");
    std::fs::create_dir(&sub).unwrap();
    std::fs::rename(dir.path().join("start.bin"), sub.join("start.bin")).unwrap();
    let record = sub.join("start.bin");
    let loaded = train(dir.path(), &["--init", record.to_str().unwrap(), "--out", "c"]);
    assert!(loaded.status.success(), "{:?}", text(&loaded));
    let m = manifest(dir.path(), "c");
    assert_eq!(m["init"], "record start.bin");
    assert_eq!(
        (m["init_sha256"].as_str(), m["init_weights_sha256"].as_str()),
        (Some(file_sha256.as_str()), Some(weights_sha256.as_str()))
    );
    let command = m["command"].as_str().unwrap();
    assert!(command.contains("--init start.bin") && !command.contains("private-dir"), "{command}");

    // A record of another model is refused with what it holds against what the run needs.
    let other = train(dir.path(), &["--init", record.to_str().unwrap(), "--model", "convnet", "--out", "d"]);
    let (_, stderr) = text(&other);
    assert!(!other.status.success());
    assert!(stderr.contains("does not fit this run") && stderr.contains("model: record mlp, run convnet"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn bench_saves_the_starting_state_once_and_starts_every_later_run_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "bench",
        "--backend",
        "cpu",
        "--warmup",
        "1",
        "--steps",
        "2",
        "--runs",
        "3",
        "--save-init",
        "s.mpk",
        "--json",
        "r.json",
    ];
    let out = steptrace(&args, dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(dir.path().join("s.mpk").is_file());
    let r: Value = serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(r["summary"]["same_first_loss"], true, "{stdout}");
    assert_eq!(r["fingerprint"]["init"], "record s.mpk");
    // Started from the record, the same first loss as the seed's run that saved it.
    let from = steptrace(
        &[
            "bench",
            "--backend",
            "cpu",
            "--warmup",
            "1",
            "--steps",
            "2",
            "--runs",
            "1",
            "--init",
            "s.mpk",
            "--json",
            "i.json",
        ],
        dir.path(),
    );
    assert!(from.status.success(), "{:?}", text(&from));
    let i: Value = serde_json::from_slice(&std::fs::read(dir.path().join("i.json")).unwrap()).unwrap();
    assert_eq!(i["runs"][0]["first_loss"], r["runs"][0]["first_loss"]);
    // A bench onto an existing record is refused before any run.
    let again =
        steptrace(&["bench", "--backend", "cpu", "--runs", "1", "--steps", "1", "--save-init", "s.mpk"], dir.path());
    assert!(!again.status.success());
    assert!(text(&again).1.contains("--save-init s.mpk: the file already exists"), "{:?}", text(&again));
}

#[test]
fn compare_backends_starts_every_backend_from_one_saved_state() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "compare",
        "--backends",
        "cpu,wgpu",
        "--warmup",
        "1",
        "--steps",
        "2",
        "--runs",
        "1",
        "--save-init",
        "shared.mpk",
    ];
    let out = steptrace(&args, dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(dir.path().join("shared.mpk").is_file(), "{stdout}{stderr}");
    assert!(
        flat(&stdout).contains("every backend started from one initial state, saved by cpu's first run to shared.mpk"),
        "{stdout}"
    );
    assert!(flat(&stdout).contains("identical weights and the same data order"), "{stdout}");
    assert!(flat(&stdout).contains("starting weights: the same on every backend (sha256 of the weights "), "{stdout}");
    // Without --save-init, the shared record is temporary, and the output says so.
    let out =
        steptrace(&["compare", "--backends", "cpu,cpu", "--warmup", "1", "--steps", "2", "--runs", "1"], dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(flat(&stdout).contains("saved by cpu's first run into a temporary record"), "{stdout}");
}
