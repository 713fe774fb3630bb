//! `steptrace capture PID`: asks a running on-demand run to record its next
//! cycle, and waits for the trace (the protocol: `steptrace::capture`).

use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::json;
use steptrace::capture::{self, Answer, Asked, Progress};
use steptrace::display::escape;

use crate::args::CaptureArgs;
use crate::console::{say, warn};

/// How often the ready file is read while waiting.
const POLL: Duration = Duration::from_millis(50);

/// The exit status after Ctrl-C (128 + SIGINT), as a shell reports it.
const INTERRUPTED: u8 = 130;

pub fn run(a: CaptureArgs) -> anyhow::Result<ExitCode> {
    // Ctrl-C (or SIGTERM) while waiting takes the request back: caught from before the
    // request is written, so that none is left behind.
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone()).context("cannot install the Ctrl-C handler")?;
    }
    let dir = match &a.out {
        Some(dir) => dir.clone(),
        None => capture::locate(a.pid)?,
    };
    let asked = capture::ask(&dir, a.pid, a.steps, &requested_by())?;
    let quiet = a.json;
    if !quiet {
        say(&format!(
            "asked process {} for a capture (request {}, traces in {}); it starts at the run's next step boundary",
            a.pid,
            asked.id(),
            shown(&dir)
        ));
    }
    let deadline = Instant::now() + Duration::from_secs(a.timeout);
    let mut accepted = None;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(interrupted(&asked, a.pid, accepted.is_some(), &dir));
        }
        match asked.poll()? {
            Progress::Answered(answer @ Answer::Accepted { .. }) => {
                if accepted.as_ref() != Some(&answer) {
                    if let (false, Answer::Accepted { cycle, first_step, steps, .. }) = (quiet, &answer) {
                        say(&format!(
                            "accepted: cycle {cycle}, warmup from step {first_step}, recording steps {steps}"
                        ));
                    }
                    accepted = Some(answer);
                }
            }
            Progress::Answered(answer) => {
                let Answer::Saved { path, steps, partial, .. } = asked.outcome(answer)? else {
                    bail!("unexpected answer")
                };
                if quiet {
                    let out =
                        json!({"pid": a.pid, "request": asked.id(), "path": path, "steps": steps, "partial": partial});
                    println!("{}", serde_json::to_string_pretty(&out)?);
                } else {
                    let cut = if partial { " (cut short: the run ended first)" } else { "" };
                    say(&format!("saved {} (steps {steps}){cut}", shown(&path)));
                }
                return Ok(ExitCode::SUCCESS);
            }
            Progress::Waiting => {}
        }
        if Instant::now() >= deadline {
            if accepted.is_none() && asked.withdraw() {
                bail!(
                    "process {} did not read the request within {} s (it may be inside a long step, or stopped); \
                     the request was taken back: nothing will be recorded for it (try a longer --timeout)",
                    a.pid,
                    a.timeout
                );
            }
            bail!(
                "the capture was accepted but not saved within {} s; process {} will still save it in {}",
                a.timeout,
                a.pid,
                shown(&dir)
            );
        }
        std::thread::sleep(POLL);
    }
}

/// Stopped by Ctrl-C: the request is taken back if the run has not read it.
fn interrupted(asked: &Asked, pid: u32, accepted: bool, dir: &Path) -> ExitCode {
    if !accepted && asked.withdraw() {
        warn(&format!(
            "steptrace: interrupted: the request to process {pid} was taken back; nothing will be recorded for it"
        ));
    } else {
        warn(&format!(
            "steptrace: interrupted: process {pid} had already read the request; it will still answer it, and save any \
             capture it accepted in {}",
            shown(dir)
        ));
    }
    ExitCode::from(INTERRUPTED)
}

/// A path as printed: control characters escaped (paths come from the run's files).
fn shown(path: &Path) -> String {
    escape(&path.display().to_string()).into_owned()
}

/// Who asked, for the capture's manifest: this command, its pid and the
/// user's login name (no path, no host).
fn requested_by() -> String {
    let user = ["USER", "LOGNAME"].iter().find_map(|k| std::env::var(k).ok()).filter(|u| !u.is_empty());
    match user {
        Some(user) => format!("steptrace capture (pid {}, user {user})", std::process::id()),
        None => format!("steptrace capture (pid {})", std::process::id()),
    }
}
