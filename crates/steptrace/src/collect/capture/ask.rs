//! The asking side: checks that the process is there and ready, leaves the
//! request, raises `SIGUSR1`, and reads the answers.

use std::path::{Path, PathBuf};

use super::files::{self, Answer, Paths, Ready, Request, State};

/// Why a capture could not be asked for, or did not end in a file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaptureError {
    /// No process has that pid.
    #[error("no process {pid} is running")]
    NoProcess {
        /// The pid asked for.
        pid: u32,
    },
    /// The process exists but this user may not signal it.
    #[error("process {pid} belongs to another user: it cannot be signalled from here")]
    NotPermitted {
        /// The pid asked for.
        pid: u32,
    },
    /// The process is not ready for on-demand capture in that directory.
    #[error(
        "process {pid} is not ready for on-demand capture in {dir} (no {file}): start it with `--schedule on-demand` \
         (or an on-demand Schedule in code), and give capture the trace directory it writes to (--out)",
        dir = .dir.display(), file = .file.display()
    )]
    NotReady {
        /// The pid asked for.
        pid: u32,
        /// The trace directory looked in.
        dir: PathBuf,
        /// The ready file that is missing.
        file: PathBuf,
    },
    /// The ready file was left by a process that has ended (its pid may now
    /// be another process's, which is never signalled).
    #[error("process {pid} is not the steptrace run that wrote {file}: that run has ended{reused}", file = .file.display(), reused = if *.reused { " and its pid is now another process's (not signalled)" } else { "" })]
    Stale {
        /// The pid asked for.
        pid: u32,
        /// The ready file left behind.
        file: PathBuf,
        /// Whether another process now has the pid.
        reused: bool,
    },
    /// The run has ended.
    #[error("the steptrace run {pid} has ended: it reads no more requests")]
    Ended {
        /// The pid asked for.
        pid: u32,
    },
    /// A capture is recording; a request now would be refused.
    #[error("process {pid} is already recording a capture{detail}; ask again once it is saved")]
    Busy {
        /// The pid asked for.
        pid: u32,
        /// What it is recording.
        detail: String,
    },
    /// An earlier request has not been read yet.
    #[error("a capture request for process {pid} is already waiting to be read ({file}); it is left as it is", file = .file.display())]
    Waiting {
        /// The pid asked for.
        pid: u32,
        /// The waiting request.
        file: PathBuf,
    },
    /// The process refused the request.
    #[error("process {pid} refused the capture: {reason}")]
    Refused {
        /// The pid asked for.
        pid: u32,
        /// Its reason.
        reason: String,
    },
    /// The capture recorded but its file could not be written.
    #[error("process {pid} recorded the capture but could not save it: {reason}")]
    Failed {
        /// The pid asked for.
        pid: u32,
        /// The write error.
        reason: String,
    },
    /// The process ended before answering.
    #[error("process {pid} ended before {what}{kept}", kept = .kept.as_ref().map(|p| format!("; what it recorded is left in {}", p.display())).unwrap_or_default())]
    Gone {
        /// The pid asked for.
        pid: u32,
        /// What it had not done yet.
        what: &'static str,
        /// A `.partial` file of the capture, if one is there.
        kept: Option<PathBuf>,
    },
    /// A protocol file could not be read or written.
    #[error("{what} {file}: {source}", file = .file.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        file: PathBuf,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// On-demand capture needs Unix signals.
    #[error("on-demand capture needs Unix signals; this platform has none")]
    Unsupported,
}

/// A request left for a process and signalled.
#[derive(Debug)]
pub struct Asked {
    pid: u32,
    paths: Paths,
    request: Request,
    process_start: Option<u64>,
    worker: String,
    dir: PathBuf,
}

/// Where an asked capture stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The request has not been read yet (the process is inside a step).
    Waiting,
    /// The process answered.
    Answered(Answer),
}

/// Asks process `pid`, which writes its traces to `dir`, to record a
/// capture of `steps` active steps (`None`: its schedule's) after one
/// warmup step; `requested_by` is written into the capture's manifest.
///
/// Nothing is signalled unless `dir` holds the process's ready file and
/// the process is the one that wrote it.
///
/// # Errors
///
/// A [`CaptureError`] that says what is wrong: no such process, one that
/// is not ready, one already recording, a request already waiting, or a
/// file that cannot be written.
pub fn ask(dir: &Path, pid: u32, steps: Option<u64>, requested_by: &str) -> Result<Asked, CaptureError> {
    let paths = Paths::new(dir, pid);
    let io = |what, file: &Path| {
        let file = file.to_path_buf();
        move |source| CaptureError::Io { what, file, source }
    };
    let ready: Option<Ready> = files::read(&paths.ready).map_err(io("cannot read the ready file", &paths.ready))?;
    let alive = alive(pid)?;
    let Some(ready) = ready else {
        return Err(if alive { CaptureError::NotReady { pid, dir: dir.to_path_buf(), file: paths.ready } } else { CaptureError::NoProcess { pid } });
    };
    let same = alive && (ready.process_start.is_none() || ready.process_start == files::process_start(pid));
    if !same {
        if ready.state == State::Ended || !alive {
            // Left by a run that has ended: tidied away.
            let _ = std::fs::remove_file(&paths.ready);
        }
        return Err(CaptureError::Stale { pid, file: paths.ready, reused: alive });
    }
    match ready.state {
        State::Ended => return Err(CaptureError::Ended { pid }),
        State::Recording => return Err(CaptureError::Busy { pid, detail: recording(&ready) }),
        State::Idle => {}
    }
    let request = Request::new(steps, requested_by);
    if let Err(e) = files::write_new(&paths.request, &request) {
        return Err(if e.kind() == std::io::ErrorKind::AlreadyExists {
            CaptureError::Waiting { pid, file: paths.request }
        } else {
            io("cannot write the request", &paths.request)(e)
        });
    }
    if let Err(e) = signal(pid) {
        let _ = std::fs::remove_file(&paths.request);
        return Err(e);
    }
    Ok(Asked { pid, paths, request, process_start: ready.process_start, worker: ready.worker, dir: dir.to_path_buf() })
}

impl Asked {
    /// The request's id, which the answers and the capture's manifest carry.
    pub fn id(&self) -> &str {
        &self.request.id
    }

    /// The latest word on the request.
    ///
    /// # Errors
    ///
    /// [`CaptureError::Gone`] when the process ended without a final
    /// answer, [`CaptureError::Io`] when its ready file cannot be read.
    pub fn poll(&self) -> Result<Progress, CaptureError> {
        let ready: Option<Ready> = files::read(&self.paths.ready)
            .map_err(|source| CaptureError::Io { what: "cannot read the ready file", file: self.paths.ready.clone(), source })?;
        let answer = ready.as_ref().and_then(|r| r.answer_to(&self.request.id)).cloned();
        if let (Some(ready), Some(answer)) = (&ready, &answer) {
            if ready.state == State::Ended && answer.is_final() {
                // The last word of an ended run has been heard: its file can go.
                let _ = std::fs::remove_file(&self.paths.ready);
            }
        }
        match answer {
            Some(answer) if answer.is_final() || self.running() => Ok(Progress::Answered(answer)),
            None if self.running() => Ok(Progress::Waiting),
            answer => {
                let what = if answer.is_some() { "saving the capture" } else { "reading the request" };
                if answer.is_none() {
                    let _ = std::fs::remove_file(&self.paths.request);
                }
                Err(CaptureError::Gone { pid: self.pid, what, kept: self.partial_file() })
            }
        }
    }

    /// Takes the request back if it has not been read; whether it was.
    pub fn withdraw(&self) -> bool {
        std::fs::remove_file(&self.paths.request).is_ok()
    }

    /// The final answer as a result: the saved file, or why there is none.
    ///
    /// # Errors
    ///
    /// [`CaptureError::Refused`] or [`CaptureError::Failed`] from the answer.
    pub fn outcome(&self, answer: Answer) -> Result<Answer, CaptureError> {
        match answer {
            Answer::Refused { reason, .. } => Err(CaptureError::Refused { pid: self.pid, reason }),
            Answer::Failed { reason, .. } => Err(CaptureError::Failed { pid: self.pid, reason }),
            other => Ok(other),
        }
    }

    fn running(&self) -> bool {
        matches!(alive(self.pid), Ok(true)) && (self.process_start.is_none() || self.process_start == files::process_start(self.pid))
    }

    /// The newest `.partial` file of the process's worker in its directory.
    fn partial_file(&self) -> Option<PathBuf> {
        let entries = std::fs::read_dir(&self.dir).ok()?;
        entries
            .filter_map(Result::ok)
            .filter(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.starts_with(&self.worker) && name.ends_with(".partial")
            })
            .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
            .map(|e| e.path())
    }
}

fn recording(ready: &Ready) -> String {
    ready
        .answers
        .iter()
        .rev()
        .find_map(|a| match a {
            Answer::Accepted { cycle, steps, .. } => Some(format!(" (cycle {cycle}, steps {steps})")),
            _ => None,
        })
        .unwrap_or_default()
}

/// Whether process `pid` exists (and may be signalled by us).
#[cfg(unix)]
fn alive(pid: u32) -> Result<bool, CaptureError> {
    use rustix::io::Errno;
    let Some(p) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else {
        return Ok(false);
    };
    match rustix::process::test_kill_process(p) {
        Ok(()) => Ok(true),
        Err(Errno::SRCH) => Ok(false),
        Err(Errno::PERM) => Err(CaptureError::NotPermitted { pid }),
        Err(e) => Err(CaptureError::Io { what: "cannot check process", file: PathBuf::from(pid.to_string()), source: e.into() }),
    }
}

#[cfg(not(unix))]
fn alive(_pid: u32) -> Result<bool, CaptureError> {
    Err(CaptureError::Unsupported)
}

#[cfg(unix)]
fn signal(pid: u32) -> Result<(), CaptureError> {
    use rustix::io::Errno;
    let p = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw).ok_or(CaptureError::NoProcess { pid })?;
    match rustix::process::kill_process(p, rustix::process::Signal::USR1) {
        Ok(()) => Ok(()),
        Err(Errno::SRCH) => Err(CaptureError::NoProcess { pid }),
        Err(Errno::PERM) => Err(CaptureError::NotPermitted { pid }),
        Err(e) => Err(CaptureError::Io { what: "cannot signal process", file: PathBuf::from(pid.to_string()), source: e.into() }),
    }
}

#[cfg(not(unix))]
fn signal(_pid: u32) -> Result<(), CaptureError> {
    Err(CaptureError::Unsupported)
}
