//! `steptrace capture PID`: asks a running on-demand run to record its next
//! cycle, and waits for the trace (the protocol: `steptrace::capture`).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::json;
use steptrace::capture::{self, Answer, Progress};

use crate::args::CaptureArgs;
use crate::console::say;

/// How often the ready file is read while waiting.
const POLL: Duration = Duration::from_millis(50);

pub fn run(a: CaptureArgs) -> anyhow::Result<ExitCode> {
    let asked = capture::ask(&a.out, a.pid, a.steps, &requested_by())?;
    let quiet = a.json;
    if !quiet {
        say(&format!("asked process {} for a capture (request {}); it starts at the run's next step boundary", a.pid, asked.id()));
    }
    let deadline = Instant::now() + Duration::from_secs(a.timeout);
    let mut accepted = None;
    loop {
        match asked.poll()? {
            Progress::Answered(answer @ Answer::Accepted { .. }) => {
                if accepted.as_ref() != Some(&answer) {
                    if let (false, Answer::Accepted { cycle, first_step, steps, .. }) = (quiet, &answer) {
                        say(&format!("accepted: cycle {cycle}, warmup from step {first_step}, recording steps {steps}"));
                    }
                    accepted = Some(answer);
                }
            }
            Progress::Answered(answer) => {
                let Answer::Saved { path, steps, partial, .. } = asked.outcome(answer)? else { bail!("unexpected answer") };
                if quiet {
                    let out = json!({"pid": a.pid, "request": asked.id(), "path": path, "steps": steps, "partial": partial});
                    println!("{}", serde_json::to_string_pretty(&out)?);
                } else {
                    let cut = if partial { " (cut short: the run ended first)" } else { "" };
                    say(&format!("saved {} (steps {steps}){cut}", path.display()));
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
                a.out.display()
            );
        }
        std::thread::sleep(POLL);
    }
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
