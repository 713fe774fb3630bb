//! Why a capture could not be asked for, in words a person can act on.
//! Paths and reasons that come from files are shown escaped: a file name
//! or a reason in a ready file cannot drive the terminal.

use std::path::{Path, PathBuf};

use crate::display::escape;

/// A path as shown in a message: control characters escaped.
pub(crate) fn shown(path: &Path) -> String {
    escape(&path.display().to_string()).into_owned()
}

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
        dir = shown(.dir), file = shown(.file)
    )]
    NotReady {
        /// The pid asked for.
        pid: u32,
        /// The trace directory looked in.
        dir: PathBuf,
        /// The ready file that is missing.
        file: PathBuf,
    },
    /// The process's trace directory could not be found from the process.
    #[error("process {pid} is not ready for on-demand capture: {why}")]
    NotFound {
        /// The pid asked for.
        pid: u32,
        /// Why.
        why: String,
    },
    /// The capture folder is not one to trust: nothing in it is read as
    /// the run's word, and nothing is signalled.
    #[error("the capture folder {path} is refused for process {pid}: {why}; nothing is signalled", path = shown(.path))]
    Unsafe {
        /// The pid asked for.
        pid: u32,
        /// The folder.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The ready file was left by a process that has ended (its pid may now
    /// be another process's, which is never signalled).
    #[error("process {pid} is not the steptrace run that wrote {file}: that run has ended{reused}", file = shown(.file), reused = if *.reused { " and its pid is now another process's (not signalled)" } else { "" })]
    Stale {
        /// The pid asked for.
        pid: u32,
        /// The ready file left behind.
        file: PathBuf,
        /// Whether another process now has the pid.
        reused: bool,
    },
    /// The process is not the run that wrote the ready file: it does not
    /// hold the run's token file open (a ready file written for another
    /// process, or one left by a run whose pid is now another's).
    #[error("process {pid} is not the steptrace run that wrote {file}: {why}; it is not signalled", file = shown(.file))]
    NotTheRun {
        /// The pid asked for.
        pid: u32,
        /// The ready file.
        file: PathBuf,
        /// What gave it away.
        why: String,
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
    #[error("a capture request for process {pid} is already waiting to be read ({file}); it is left as it is", file = shown(.file))]
    Waiting {
        /// The pid asked for.
        pid: u32,
        /// The waiting request.
        file: PathBuf,
    },
    /// Something that is not a request file holds the request's name.
    #[error("cannot leave a request for process {pid}: {file} is {kind}, not a request file; remove it", file = shown(.file))]
    Blocked {
        /// The pid asked for.
        pid: u32,
        /// The request's name.
        file: PathBuf,
        /// What is there (`a directory`, `a FIFO`, ...).
        kind: &'static str,
    },
    /// The process refused the request.
    #[error("process {pid} refused the capture: {reason}", reason = escape(.reason))]
    Refused {
        /// The pid asked for.
        pid: u32,
        /// Its reason.
        reason: String,
    },
    /// The capture recorded but its file could not be written.
    #[error("process {pid} recorded the capture but could not save it: {reason}", reason = escape(.reason))]
    Failed {
        /// The pid asked for.
        pid: u32,
        /// The write error.
        reason: String,
    },
    /// The process ended before answering.
    #[error("process {pid} ended before {what}{kept}", kept = .kept.as_ref().map(|p| format!("; what it recorded is left in {}", shown(p))).unwrap_or_default())]
    Gone {
        /// The pid asked for.
        pid: u32,
        /// What it had not done yet.
        what: &'static str,
        /// A `.partial` file of the capture, if one is there.
        kept: Option<PathBuf>,
    },
    /// A protocol file could not be read or written.
    #[error("{what} {file}: {source}", file = shown(.file))]
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
