//! Every command whose output goes to a pipe that closes early (`steptrace inspect T |
//! head -1`) ends as a command line tool does: quietly, killed by SIGPIPE (status 141 in a
//! shell), or done, never with a panic. Each command runs once with its stdout a pipe whose
//! reader is already gone (its first write fails, whatever the timing), and the readers once
//! more in a shell pipeline into `head -1`, with outputs larger than a pipe holds.
#![cfg(unix)]

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{spawn, text};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_steptrace");
const SIGPIPE: i32 = 13;

/// `steptrace ARGS` in `dir` with its stdout a pipe nobody reads any more.
fn into_closed_pipe(args: &[&str], dir: &Path) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env("NODEVICE_SELECT", "1")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

/// `steptrace ARGS | head -1` in bash: steptrace's own exit status (`PIPESTATUS`), and
/// what it wrote on stderr.
fn into_head(args: &[&str], dir: &Path) -> (String, String) {
    let script = r#""$0" "$@" 2>stderr.txt | head -1 >/dev/null; echo "${PIPESTATUS[0]}""#;
    let out = Command::new("bash")
        .args(["-c", script, BIN])
        .args(args)
        .current_dir(dir)
        .env("NODEVICE_SELECT", "1")
        .output()
        .unwrap();
    let stderr = std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default();
    (String::from_utf8_lossy(&out.stdout).trim().to_owned(), stderr)
}

fn assert_quiet(args: &[&str], out: &Output) {
    let (_, stderr) = text(out);
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    let ended = out.status.signal() == Some(SIGPIPE) || out.status.code() == Some(0);
    assert!(ended, "{args:?} ended with {:?}: {stderr}", out.status);
}

/// A trace with `n` spans of distinct names and 200 kernels of long distinct names, over ten
/// steps: `inspect` lists every name, `report --top` every span, `compare --json` fifty
/// kernels in full.
fn many_names(n: usize) -> Vec<u8> {
    let mut events = Vec::new();
    for step in 0..10 {
        let at = step as f64 * 10_000.0;
        events.push(json!({"ph":"X","name":format!("ProfilerStep#{step}"),"pid":1,"tid":1,"ts":at,"dur":9_000.0}));
        for i in 0..n / 10 {
            let ts = at + 1.0 + i as f64 * 0.5;
            events.push(
                json!({"ph":"X","name":format!("span.{:06}", step * n / 10 + i),"pid":1,"tid":1,"ts":ts,"dur":0.25}),
            );
        }
        for k in 0..200 {
            let name = format!("kernel_{k:03}_{}", "x".repeat(4000));
            let ts = at + 1.0 + k as f64;
            events.push(json!({"ph":"X","cat":"kernel","name":name,"pid":100,"tid":7,"ts":ts,"dur":0.5,"args":{"correlation":k}}));
        }
    }
    serde_json::to_vec(&json!({ "traceEvents": Value::from(events) })).unwrap()
}

#[test]
fn the_readers_end_quietly_when_their_reader_goes() {
    let dir = tempfile::tempdir().unwrap();
    let trace = many_names(20_000);
    std::fs::write(dir.path().join("a.trace.json"), &trace).unwrap();
    std::fs::write(dir.path().join("b.trace.json"), &trace).unwrap();
    let cases: [&[&str]; 7] = [
        &["report", "a.trace.json"],
        &["report", "a.trace.json", "--top", "100000"],
        &["report", "a.trace.json", "--json"],
        &["inspect", "a.trace.json"],
        &["inspect", "a.trace.json", "--json"],
        &["compare", "a.trace.json", "b.trace.json"],
        &["compare", "a.trace.json", "b.trace.json", "--json"],
    ];
    for args in cases {
        assert_quiet(args, &into_closed_pipe(args, dir.path()));
        let (status, stderr) = into_head(args, dir.path());
        assert!(!stderr.contains("panicked"), "{args:?} | head -1: {stderr}");
        assert!(status == "141" || status == "0", "{args:?} | head -1 ended with {status}: {stderr}");
    }
}

#[test]
fn backends_ends_quietly_too() {
    let dir = tempfile::tempdir().unwrap();
    assert_quiet(&["backends"], &into_closed_pipe(&["backends"], dir.path()));
    let (status, stderr) = into_head(&["backends"], dir.path());
    assert!(
        !stderr.contains("panicked") && (status == "141" || status == "0"),
        "backends | head -1: {status} {stderr}"
    );
}

/// A run whose console goes away keeps running and writes its files: killed by SIGPIPE at
/// its first line it would lose the cycle it was recording, or the bench's result.
#[test]
fn runs_lose_nothing_when_their_console_goes() {
    let dir = tempfile::tempdir().unwrap();
    let train = ["train", "--backend", "cpu", "--steps", "6", "--schedule", "wait=1,warmup=1,active=2", "--out", "t"];
    let out = into_closed_pipe(&train, dir.path());
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "train into a closed pipe: {:?}: {stderr}", out.status);
    let traces: Vec<_> = std::fs::read_dir(dir.path().join("t"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".trace.json"))
        .collect();
    assert_eq!(traces.len(), 1, "one cycle, its trace written: {traces:?}");

    let bench = ["bench", "--backend", "cpu", "--runs", "1", "--steps", "1", "--warmup", "0", "--json", "b.json"];
    let out = into_closed_pipe(&bench, dir.path());
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "bench into a closed pipe: {:?}: {stderr}", out.status);
    let result: Value = serde_json::from_slice(&std::fs::read(dir.path().join("b.json")).unwrap()).unwrap();
    assert!(result.is_object(), "the bench result is written: {result}");
}

#[test]
fn capture_ends_quietly_too() {
    let dir = tempfile::tempdir().unwrap();
    let run = [
        "train",
        "--backend",
        "cpu",
        "--quiet",
        "--steps",
        "1000000",
        "--loader-delay-ms",
        "20",
        "--schedule",
        "on-demand",
        "--out",
        "traces",
    ];
    let mut child = spawn(&run, dir.path());
    let ready = dir.path().join("traces/.steptrace-capture").join(format!("{}.ready.json", child.id()));
    let started = Instant::now();
    while !ready.exists() {
        assert!(started.elapsed() < Duration::from_secs(180), "the run never got ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    let args = ["capture", &child.id().to_string(), "--steps", "1"];
    let out = into_closed_pipe(&args, dir.path());
    let _ = child.kill();
    let _ = child.wait();
    assert_quiet(&args, &out);
}
