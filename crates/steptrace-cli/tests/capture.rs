//! `steptrace capture PID` against a real `train --schedule on-demand` child process: a
//! capture saved with who asked, a second request refused while one records, bad pids and
//! processes that are not ready, and a run that ends mid-capture.
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use common::{flat, spawn, steptrace, text};
use serde_json::Value;

/// A CPU run recording nothing until asked, 20 ms a step, far longer than the test.
fn on_demand_run(dir: &Path) -> Child {
    let args = ["train", "--backend", "cpu", "--quiet", "--steps", "1000000", "--loader-delay-ms", "20"];
    spawn(&[&args[..], &["--schedule", "on-demand", "--out", "traces", "--json", "run.json"]].concat(), dir)
}

fn ready_file(dir: &Path, pid: u32) -> PathBuf {
    dir.join("traces/.steptrace-capture").join(format!("{pid}.ready.json"))
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(180), "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn capture(dir: &Path, args: &[&str]) -> Output {
    let mut all = vec!["capture"];
    all.extend_from_slice(args);
    steptrace(&all, dir)
}

/// `steptrace capture PID --steps 100000` in the background, once the run says it records.
fn long_capture(dir: &Path, pid: u32) -> Child {
    let asker = spawn(&["capture", &pid.to_string(), "--steps", "100000", "--out", "traces"], dir);
    wait_until("the capture records", || {
        std::fs::read_to_string(ready_file(dir, pid)).is_ok_and(|t| t.contains("\"recording\""))
    });
    asker
}

fn stop(child: Child, signal: &str) -> Output {
    assert!(Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status().unwrap().success());
    child.wait_with_output().unwrap()
}

fn traces(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("traces"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".trace.json"))
        .collect();
    files.sort();
    files
}

#[test]
fn a_running_job_is_captured_on_demand_and_bad_requests_are_told_why() {
    let dir = tempfile::tempdir().unwrap();
    let child = on_demand_run(dir.path());
    let pid = child.id();
    wait_until("the run is ready", || ready_file(dir.path(), pid).exists());
    let pid_text = pid.to_string();

    // Bad requests first: each says why, and signals nothing.
    let out = capture(dir.path(), &[&pid_text, "--out", "elsewhere"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(flat(&stderr).contains(&format!("process {pid} is not ready for on-demand capture in elsewhere")), "{stderr}");
    let out = capture(dir.path(), &["2147483000"]);
    assert!(flat(&text(&out).1).contains("no process 2147483000 is running"), "{:?}", text(&out));
    assert_eq!(capture(dir.path(), &["0"]).status.code(), Some(2), "clap refuses pid 0");
    assert_eq!(capture(dir.path(), &[&pid_text, "--steps", "0"]).status.code(), Some(2));
    // A live process that is not steptrace's: refused, and not signalled (SIGUSR1 would kill it).
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let out = capture(dir.path(), &[&sleeper.id().to_string()]);
    assert!(flat(&text(&out).1).contains("is not ready for on-demand capture"), "{:?}", text(&out));
    assert!(sleeper.try_wait().unwrap().is_none(), "the other process was left alone");
    sleeper.kill().unwrap();
    let _ = sleeper.wait();
    assert!(traces(dir.path()).is_empty(), "nothing recorded before a request");

    // A capture of two steps, saved with who asked.
    let out = capture(dir.path(), &[&pid_text, "--steps", "2", "--json"]);
    assert!(out.status.success(), "{:?}", text(&out));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((answer["partial"].as_bool(), answer["steps"]["count"].as_u64()), (Some(false), Some(2)), "{answer}");
    let path = dir.path().join(answer["path"].as_str().unwrap());
    let path = if path.exists() { path } else { PathBuf::from(answer["path"].as_str().unwrap()) };
    let trace: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let capture_record = &trace["metadata"]["manifest"]["capture"];
    assert!(capture_record["requested_by"].as_str().unwrap().starts_with("steptrace capture (pid "), "{capture_record}");
    let (read_at, first) = (capture_record["read_at_step"].as_u64().unwrap(), capture_record["first_step"].as_u64().unwrap());
    let recorded = answer["steps"]["first"].as_u64().unwrap();
    assert_eq!((first, recorded), (read_at + 1, read_at + 2), "recording starts within two steps of the request");
    let out = steptrace(&["inspect", path.to_str().unwrap()], dir.path());
    assert!(out.status.success(), "the capture's labels are clean: {:?}", text(&out));
    let out = steptrace(&["report", path.to_str().unwrap()], dir.path());
    assert!(out.status.success() && flat(&text(&out).0).contains("captured on demand"), "{:?}", text(&out));

    // A long capture, and a second request while it records: refused with what is recording.
    let mut long = long_capture(dir.path(), pid);
    let out = capture(dir.path(), &[&pid_text]);
    assert_eq!(out.status.code(), Some(1));
    assert!(flat(&text(&out).1).contains("is already recording a capture (cycle 1, steps"), "{:?}", text(&out));

    // The run ends mid-capture (SIGTERM): the capture is saved cut short, and its asker says so.
    std::thread::sleep(Duration::from_millis(300));
    let run = stop(child, "TERM");
    assert_eq!(run.status.code(), Some(143), "{:?}", text(&run));
    let started = Instant::now();
    while long.try_wait().unwrap().is_none() {
        assert!(started.elapsed() < Duration::from_secs(60), "the asker never heard the end");
        std::thread::sleep(Duration::from_millis(20));
    }
    let asker = long.wait_with_output().unwrap();
    let (stdout, stderr) = text(&asker);
    assert!(asker.status.success(), "{stdout}{stderr}");
    assert!(flat(&stdout).contains("(cut short: the run ended first)"), "{stdout}");
    assert_eq!(traces(dir.path()).len(), 2);
    // The asker heard the last word, so the ended run's ready file is gone; a new request
    // to the ended pid is told there is no such process.
    assert!(!ready_file(dir.path(), pid).exists());
    let out = capture(dir.path(), &[&pid_text]);
    assert!(flat(&text(&out).1).contains(&format!("no process {pid} is running")), "{:?}", text(&out));
}

#[test]
fn a_run_killed_mid_capture_leaves_its_partial_file_and_the_asker_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = on_demand_run(dir.path());
    let pid = child.id();
    wait_until("the run is ready", || ready_file(dir.path(), pid).exists());
    let asker = long_capture(dir.path(), pid);
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    let _ = child.wait();
    let out = asker.wait_with_output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(flat(&stderr).contains(&format!("process {pid} ended before saving the capture; what it recorded is left in")), "{stderr}");
    assert!(flat(&stderr).contains(".partial"), "{stderr}");
}
