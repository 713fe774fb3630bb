//! Ctrl-C and SIGTERM on a real `steptrace train` child process.
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::{flat, steptrace, text};

/// A CPU run long enough to be interrupted inside its one long window.
fn long_run(dir: &Path, extra: &[&str]) -> Child {
    let args = ["train", "--backend", "cpu", "--quiet", "--steps", "1000000", "--json", "run.json"];
    let schedule = ["--schedule", "wait=0,warmup=1,active=1000000", "--out", "traces"];
    common::spawn(&[&args[..], extra, &schedule[..]].concat(), dir)
}

fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().path()).filter(|p| p.to_string_lossy().ends_with(suffix)).collect())
        .unwrap_or_default()
}

/// Waits until the window is recording (its `.partial` file has grown).
fn wait_for_recording(dir: &Path, min_bytes: u64) {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(120) {
        if files(&dir.join("traces"), ".partial")
            .iter()
            .any(|p| std::fs::metadata(p).map_or(0, |m| m.len()) > min_bytes)
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the run never started recording");
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill").args([&format!("-{name}"), &child.id().to_string()]).status().unwrap();
    assert!(status.success());
}

#[test]
fn the_first_signal_saves_the_cycle_cut_short_and_exits_with_the_signal_code() {
    for (name, code) in [("INT", 130), ("TERM", 143)] {
        let dir = tempfile::tempdir().unwrap();
        let child = long_run(dir.path(), &[]);
        wait_for_recording(dir.path(), 20_000);
        signal(&child, name);
        let out = child.wait_with_output().unwrap();
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(code), "{stdout}{stderr}");
        assert!(stderr.contains(&format!("SIG{name}")) && stderr.contains("again to quit at once"), "{stderr}");
        assert!(stdout.contains(&format!("interrupted (SIG{name})")) && stdout.contains("PARTIAL"), "{stdout}");
        // The cycle is finalised, not left as a .partial.
        let traces = dir.path().join("traces");
        assert!(files(&traces, ".partial").is_empty());
        let saved = files(&traces, ".trace.json");
        assert_eq!(saved.len(), 1, "{saved:?}");
        let trace = steptrace::reader::read_trace_file(&saved[0]).unwrap();
        let meta = &trace.metadata["metadata"];
        assert_eq!(meta["partial"], true);
        assert!(meta["partial_reason"].as_str().unwrap().starts_with(&format!("interrupted (SIG{name})")), "{meta}");
        // The summary says so too, and lists the file.
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("run.json")).unwrap()).unwrap();
        assert!(summary["interrupted"].as_str().unwrap().contains(&format!("SIG{name}")));
        assert_eq!(summary["traces"].as_array().unwrap().len(), 1);
        // And the report reads it as cut short, with the summary's startup: a fifth of the
        // steps that ran, not of the million asked for.
        let report = steptrace(&["report", saved[0].to_str().unwrap()], dir.path());
        assert!(report.status.success(), "{:?}", text(&report));
        let ran = summary["steps"].as_array().unwrap().len() as u64;
        let startup = summary["startup_steps"].as_u64().unwrap();
        assert_eq!(startup, (ran / 5).max(1), "{ran} steps ran");
        assert_eq!(meta["manifest"]["startup_steps"], startup, "{meta}");
        let json = steptrace(&["report", saved[0].to_str().unwrap(), "--json"], dir.path());
        let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        let rows = json["timing"]["steps"].as_array().unwrap();
        let steady = rows.iter().filter(|r| r["startup"] == false).count() as u64;
        let recorded_steady = rows.iter().filter(|r| r["step"].as_u64().unwrap() >= startup).count() as u64;
        assert!(
            steady > 0 && steady == recorded_steady,
            "{steady} steady of {} recorded; startup {startup}",
            rows.len()
        );
        assert_eq!(json["timing"]["steady_ms"]["n"], steady);
    }
}

/// A signal in the first milliseconds is not lost: the run never goes on to its end (it
/// stops after at most its first step, or the signal's default action ends it before the
/// handlers are in). Each batch read takes 300 ms, so that however fast the machine, the
/// signal arrives before the second step can start. SIGTERM, because a test run started
/// in the background (`cmd &` in a shell without job control) inherits SIGINT as ignored,
/// and a signal that arrives before the handlers replace that is rightly dropped.
#[test]
fn a_signal_at_once_stops_the_run() {
    for delay_ms in [1u64, 5, 15, 40] {
        let dir = tempfile::tempdir().unwrap();
        let mut child = long_run(dir.path(), &["--loader-delay-ms", "300"]);
        std::thread::sleep(Duration::from_millis(delay_ms));
        signal(&child, "TERM");
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > Duration::from_secs(120) {
                child.kill().unwrap();
                panic!("{delay_ms} ms: the signal was lost and the run went on");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        let (stdout, stderr) = text(&out);
        assert_ne!(out.status.code(), Some(0), "{delay_ms} ms: the signal was lost\n{stdout}{stderr}");
        if out.status.code() == Some(143) && dir.path().join("run.json").exists() {
            let summary: serde_json::Value =
                serde_json::from_slice(&std::fs::read(dir.path().join("run.json")).unwrap()).unwrap();
            assert!(summary["steps"].as_array().unwrap().len() <= 2, "{delay_ms} ms: {stdout}");
        }
    }
}

#[test]
fn a_second_signal_exits_at_once_and_leaves_a_readable_partial_file() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    // Each batch read takes 30 s, so both signals find the loop inside a
    // step: only the second signal can end the process.
    let mut child = long_run(dir.path(), &["--loader-delay-ms", "30000"]);
    wait_for_recording(dir.path(), 100);
    let stderr = child.stderr.take().unwrap();
    let (said, heard) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = said.send(line);
        }
    });
    signal(&child, "INT");
    // The first signal is handled (and announced) before the second is sent:
    // two SIGINTs pending at once would be merged into one by the kernel.
    let announced = std::iter::from_fn(|| heard.recv_timeout(Duration::from_secs(20)).ok())
        .any(|line| line.contains("again to quit at once"));
    assert!(announced, "the first signal was not announced");
    signal(&child, "INT");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let partial = files(&dir.path().join("traces"), ".partial");
    assert_eq!(partial.len(), 1, "the cycle stays a .partial file");
    let trace = steptrace::reader::read_trace_file(&partial[0]).unwrap();
    assert!(trace.truncated, "never finalised");
    assert!(trace.events.iter().any(|e| e.name == "steptrace_segment"), "the header says what the file is");
    // No summary is written: the run did not end.
    assert!(!dir.path().join("run.json").exists());
}

#[test]
fn a_file_size_limit_is_a_reported_write_error_not_a_silent_kill() {
    let dir = tempfile::tempdir().unwrap();
    let exe = env!("CARGO_BIN_EXE_steptrace");
    // `ulimit -f 200`: 200 blocks of 1 KiB (bash and dash count in KiB here).
    let script = format!(
        "ulimit -f 200 && exec '{exe}' train --backend cpu --quiet --steps 300 --schedule wait=0,warmup=1,active=290 --out traces"
    );
    let out =
        Command::new("sh").args(["-c", &script]).current_dir(dir.path()).env("NODEVICE_SELECT", "1").output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "exit 1 for a trace error, not a signal: {stdout}{stderr}");
    assert!(stdout.contains("trace error:") && flat(&stdout).contains("File too large"), "{stdout}");
    assert!(flat(&stdout).contains("bytes written so far are kept in"), "{stdout}");
}
