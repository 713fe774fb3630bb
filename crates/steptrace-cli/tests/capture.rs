//! `steptrace capture PID` against a real `train --schedule on-demand` child process: a
//! capture saved with who asked (the run found from its pid, without --out), a second request
//! refused while one records, bad pids and processes that are not ready, a run that ends
//! mid-capture, Ctrl-C taking a waiting request back, and hostile files in the capture folder.
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use common::{flat, spawn, steptrace, text};
use serde_json::Value;

const RUN: [&str; 12] = [
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

/// A CPU run recording nothing until asked, 20 ms a step, far longer than the test.
fn on_demand_run(dir: &Path) -> Child {
    spawn(&[&RUN[..], &["--json", "run.json"]].concat(), dir)
}

/// `steptrace ARGS` in `dir` with its address space limited to `kb` (`ulimit -v`): a read
/// without end fails there at once instead of taking the machine's memory.
fn spawn_limited(args: &[&str], dir: &Path, kb: u64) -> Child {
    Command::new("sh")
        .args(["-c", &format!("ulimit -v {kb} && exec \"$0\" \"$@\""), env!("CARGO_BIN_EXE_steptrace")])
        .args(args)
        .current_dir(dir)
        .env("NODEVICE_SELECT", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// `child`'s output once it exits, or after `limit` (then killed); and how long it took.
fn within(mut child: Child, limit: Duration) -> (Output, Duration) {
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() && started.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = started.elapsed();
    let _ = child.kill();
    (child.wait_with_output().unwrap(), took)
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
    assert!(
        flat(&stderr).contains(&format!("process {pid} is not ready for on-demand capture in elsewhere")),
        "{stderr}"
    );
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

    // A capture of two steps, saved with who asked. No --out, from another directory: the
    // run is found from its pid.
    let elsewhere = tempfile::tempdir().unwrap();
    let out = capture(elsewhere.path(), &[&pid_text, "--steps", "2", "--json"]);
    assert!(out.status.success(), "{:?}", text(&out));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((answer["partial"].as_bool(), answer["steps"]["count"].as_u64()), (Some(false), Some(2)), "{answer}");
    let path = dir.path().join(answer["path"].as_str().unwrap());
    let path = if path.exists() { path } else { PathBuf::from(answer["path"].as_str().unwrap()) };
    let trace: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let capture_record = &trace["metadata"]["manifest"]["capture"];
    assert!(
        capture_record["requested_by"].as_str().unwrap().starts_with("steptrace capture (pid "),
        "{capture_record}"
    );
    let (read_at, first) =
        (capture_record["read_at_step"].as_u64().unwrap(), capture_record["first_step"].as_u64().unwrap());
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
    assert!(
        flat(&stderr).contains(&format!("process {pid} ended before saving the capture; what it recorded is left in")),
        "{stderr}"
    );
    assert!(flat(&stderr).contains(".partial"), "{stderr}");
}

fn request_file(dir: &Path, pid: u32) -> PathBuf {
    dir.join("traces/.steptrace-capture").join(format!("{pid}.request.json"))
}

fn signal(pid: u32, signal: &str) {
    assert!(Command::new("kill").args([&format!("-{signal}"), &pid.to_string()]).status().unwrap().success());
}

/// The resident memory of process `pid`, in kB.
fn resident_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn ctrl_c_takes_a_waiting_request_back_and_a_hostile_request_harms_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = Ended(spawn_limited(&RUN, dir.path(), 4_000_000));
    let pid = run.0.id();
    wait_until("the run is ready", || ready_file(dir.path(), pid).exists());

    // A stopped run reads nothing: the request waits, and Ctrl-C takes it back.
    signal(pid, "STOP");
    let asker = spawn(&["capture", &pid.to_string()], dir.path());
    wait_until("the request is left", || request_file(dir.path(), pid).exists());
    let out = stop(asker, "INT");
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(flat(&stderr).contains(&format!("the request to process {pid} was taken back")), "{stderr}");
    assert!(!request_file(dir.path(), pid).exists(), "the request is gone");
    signal(pid, "CONT");

    // A request that is a link to /dev/zero, signalled: refused unread, the run goes on.
    let before = resident_kb(pid);
    std::os::unix::fs::symlink("/dev/zero", request_file(dir.path(), pid)).unwrap();
    signal(pid, "USR1");
    wait_until("the run answers", || {
        std::fs::read_to_string(ready_file(dir.path(), pid)).is_ok_and(|t| t.contains("symbolic link"))
    });
    assert!(run.0.try_wait().unwrap().is_none(), "the run goes on");
    assert!(resident_kb(pid) < before + 64 * 1024, "the run's memory grew: {before} kB -> {} kB", resident_kb(pid));
    assert!(std::fs::symlink_metadata(request_file(dir.path(), pid)).is_err(), "the link is taken away");

    // A FIFO request: the run's next step boundary does not wait on it.
    let steps_before = std::fs::read_to_string(ready_file(dir.path(), pid)).unwrap();
    assert!(Command::new("mkfifo").arg(request_file(dir.path(), pid)).status().unwrap().success());
    signal(pid, "USR1");
    wait_until("the run answers", || {
        std::fs::read_to_string(ready_file(dir.path(), pid)).is_ok_and(|t| t != steps_before && t.contains("FIFO"))
    });

    // And it still captures when asked properly.
    let out = capture(dir.path(), &[&pid.to_string(), "--steps", "1"]);
    assert!(out.status.success(), "{:?}", text(&out));
}

/// A run killed when the test ends, passed or not.
struct Ended(Child);

impl Drop for Ended {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn hostile_ready_files_neither_stall_capture_nor_get_a_process_signalled() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("traces/.steptrace-capture");
    std::fs::create_dir_all(&folder).unwrap();
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = sleeper.id();

    let ready = folder.join(format!("{pid}.ready.json"));
    let pid_text = pid.to_string();
    let ask = ["capture", pid_text.as_str(), "--out", "traces", "--timeout", "1"];

    // A FIFO ready file: capture gives up within its --timeout, says why, signals nothing.
    assert!(Command::new("mkfifo").arg(&ready).status().unwrap().success());
    let (out, took) = within(spawn(&ask, dir.path()), Duration::from_secs(20));
    assert!(took < Duration::from_secs(5), "capture hung on a FIFO for {took:?}");
    assert!(flat(&text(&out).1).contains("it is a FIFO, not a regular file"), "{:?}", text(&out));
    std::fs::remove_file(&ready).unwrap();

    // A ready file linked to /dev/zero: refused unread (capture's memory is capped at 1 GB
    // here, where a read without end would end it).
    std::os::unix::fs::symlink("/dev/zero", &ready).unwrap();
    let (out, took) = within(spawn_limited(&ask, dir.path(), 1_000_000), Duration::from_secs(20));
    assert!(took < Duration::from_secs(5), "capture read /dev/zero for {took:?}");
    assert_eq!(out.status.code(), Some(1), "{:?}", text(&out));
    assert!(flat(&text(&out).1).contains("it is a symbolic link (not followed)"), "{:?}", text(&out));
    std::fs::remove_file(&ready).unwrap();

    // A ready file forged for a live process that is no steptrace run, its real start time
    // copied from /proc, and a token file beside it: refused, and the process lives.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let start: u64 = stat[stat.rfind(')').unwrap() + 1..].split_whitespace().nth(19).unwrap().parse().unwrap();
    let forged = serde_json::json!({"pid": pid, "process_start": start, "worker": "w", "dir": "traces", "warmup": 1,
        "active": 1, "state": "idle", "step": 0, "answers": []});
    std::fs::write(folder.join(format!("{pid}.ready.json")), forged.to_string()).unwrap();
    std::fs::write(folder.join(format!("{pid}.token")), "0123456789abcdef0123456789abcdef").unwrap();
    let out = capture(dir.path(), &ask[1..]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        flat(&text(&out).1).contains(&format!("process {pid} is not the steptrace run that wrote")),
        "{:?}",
        text(&out)
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(sleeper.try_wait().unwrap().is_none(), "the process was not signalled");
    assert!(!folder.join(format!("{pid}.request.json")).exists());

    // A trace directory whose name would drive the terminal is shown escaped.
    let out = capture(dir.path(), &[&pid_text, "--out", "a\u{1b}[2Jb"]);
    let (_, stderr) = text(&out);
    assert!(stderr.contains("a\\x1b[2Jb") && !stderr.contains('\u{1b}'), "{stderr:?}");
    sleeper.kill().unwrap();
    let _ = sleeper.wait();
}
