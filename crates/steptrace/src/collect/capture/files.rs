//! The small files of the capture protocol, in `DIR/.steptrace-capture/`:
//!
//! - `PID.ready.json`, written by the running process (atomically: a new
//!   file renamed over the old): who it is, whether it is recording, and
//!   its answers to requests;
//! - `PID.token`, written once by the running process (mode 0600) and held
//!   open while it listens: a random token that a request must carry;
//! - `PID.request.json`, written by the one who asks, never over another
//!   request: a request waiting to be read is not replaced.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The folder of the protocol's files, inside a trace directory.
pub const FOLDER: &str = ".steptrace-capture";

/// Answers a ready file keeps (the oldest go first).
const ANSWERS_KEPT: usize = 16;

/// The names of process `pid`'s files in the capture folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Names {
    pub(crate) ready: String,
    pub(crate) request: String,
    pub(crate) token: String,
}

impl Names {
    pub(crate) fn new(pid: u32) -> Names {
        Names {
            ready: format!("{pid}.ready.json"),
            request: format!("{pid}.request.json"),
            token: format!("{pid}{}", super::process::TOKEN_SUFFIX),
        }
    }
}

/// Where the protocol's files of process `pid` sit, for the trace directory `dir`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paths {
    /// `DIR/.steptrace-capture`.
    pub folder: PathBuf,
    /// `DIR/.steptrace-capture/PID.ready.json`.
    pub ready: PathBuf,
    /// `DIR/.steptrace-capture/PID.request.json`.
    pub request: PathBuf,
    /// `DIR/.steptrace-capture/PID.token`.
    pub token: PathBuf,
}

impl Paths {
    /// The files of process `pid` under the trace directory `dir`.
    pub fn new(dir: &Path, pid: u32) -> Paths {
        let folder = dir.join(FOLDER);
        let names = Names::new(pid);
        Paths {
            ready: folder.join(names.ready),
            request: folder.join(names.request),
            token: folder.join(names.token),
            folder,
        }
    }
}

/// A request to record the next cycle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Matches the answers to it: the asker's pid, the time and a count.
    pub id: String,
    /// Active steps to record (`None`: the schedule's).
    pub steps: Option<u64>,
    /// Who asked, as they said (`steptrace capture, pid 4242, user ada`).
    pub requested_by: String,
    /// When, in ms since the Unix epoch.
    pub requested_at_unix_ms: u64,
    /// The token of the run asked (from its `PID.token`), which it checks;
    /// `None` in a request made in the run's own process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

impl Request {
    /// A request made now by `requested_by`.
    pub fn new(steps: Option<u64>, requested_by: impl Into<String>) -> Request {
        static MADE: AtomicU64 = AtomicU64::new(0);
        let now = now_unix_ms();
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        Request {
            id: format!("{}-{now}-{n}", std::process::id()),
            steps,
            requested_by: requested_by.into(),
            requested_at_unix_ms: now,
            token: None,
        }
    }
}

/// A run of consecutive steps, by its ends (a capture may hold a million).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Steps {
    /// The first step.
    pub first: u64,
    /// The last step.
    pub last: u64,
    /// How many (0: none, and `first` and `last` mean nothing).
    pub count: u64,
}

impl Steps {
    /// `first..=last`.
    pub fn new(first: u64, last: u64) -> Steps {
        Steps { first, last, count: last.saturating_sub(first).saturating_add(1) }
    }

    /// The ends of a list of steps in order.
    pub fn of(steps: &[u64]) -> Steps {
        match (steps.first(), steps.last()) {
            (Some(&first), Some(&last)) => Steps { first, last, count: steps.len() as u64 },
            _ => Steps { first: 0, last: 0, count: 0 },
        }
    }
}

impl std::fmt::Display for Steps {
    /// `5..=7`, `5`, or `none`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.count {
            0 => f.write_str("none"),
            1 => write!(f, "{}", self.first),
            _ => write!(f, "{}..={}", self.first, self.last),
        }
    }
}

/// What the running process did with a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Answer {
    /// The capture is planned: a warmup from `first_step`, recording `steps`.
    Accepted {
        /// The request's id.
        id: String,
        /// The cycle number its file will carry.
        cycle: u64,
        /// The first step of the capture (its warmup, if any).
        first_step: u64,
        /// The steps it records.
        steps: Steps,
    },
    /// The capture's file is written.
    Saved {
        /// The request's id.
        id: String,
        /// The trace file.
        path: PathBuf,
        /// The steps it holds.
        steps: Steps,
        /// Whether the run ended before the last of them.
        partial: bool,
    },
    /// Nothing was or will be recorded for it; why.
    Refused {
        /// The request's id (`None`: the request could not be read).
        id: Option<String>,
        /// Why.
        reason: String,
    },
    /// The capture recorded, but its file could not be written; why.
    Failed {
        /// The request's id.
        id: String,
        /// The write error.
        reason: String,
    },
}

impl Answer {
    /// The id of the request it answers.
    pub fn id(&self) -> Option<&str> {
        match self {
            Answer::Accepted { id, .. } | Answer::Saved { id, .. } | Answer::Failed { id, .. } => Some(id),
            Answer::Refused { id, .. } => id.as_deref(),
        }
    }

    /// Whether nothing more will be said about its request.
    pub fn is_final(&self) -> bool {
        !matches!(self, Answer::Accepted { .. })
    }
}

/// Whether the process is recording a capture, or ready for one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Ready: the next request starts a capture.
    Idle,
    /// A capture is planned or recording; a request now is refused.
    Recording,
    /// The run has ended; no request will be read.
    Ended,
}

/// The running process's side: `PID.ready.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ready {
    /// The process.
    pub pid: u32,
    /// When it started, as the system counts it (Linux: clock ticks since
    /// boot, from `/proc/PID/stat`), to tell it from a later process that
    /// reuses its pid; `None` where not known.
    pub process_start: Option<u64>,
    /// Its worker name (the traces' file names start with it).
    pub worker: String,
    /// The trace directory.
    pub dir: PathBuf,
    /// Warmup steps of a capture.
    pub warmup: u64,
    /// Active steps of a capture when a request does not say.
    pub active: u64,
    /// The state.
    pub state: State,
    /// The step the process was at when it last wrote this file.
    pub step: u64,
    /// Its latest answers, oldest first.
    pub answers: Vec<Answer>,
}

impl Ready {
    /// Adds an answer, replacing an earlier one to the same request.
    pub fn answer(&mut self, answer: Answer) {
        if let Some(id) = answer.id() {
            self.answers.retain(|a| a.id() != Some(id));
        }
        self.answers.push(answer);
        let extra = self.answers.len().saturating_sub(ANSWERS_KEPT);
        self.answers.drain(..extra);
    }

    /// The latest answer to request `id`.
    pub fn answer_to(&self, id: &str) -> Option<&Answer> {
        self.answers.iter().rev().find(|a| a.id() == Some(id))
    }
}

/// `value` as a protocol file's bytes.
pub(crate) fn to_bytes(value: &impl Serialize) -> std::io::Result<Vec<u8>> {
    serde_json::to_vec_pretty(value).map_err(std::io::Error::other)
}

/// A protocol file's bytes as a value.
pub(crate) fn from_bytes<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> std::io::Result<T> {
    serde_json::from_slice(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_replace_their_earlier_word_and_stay_bounded() {
        let mut ready = Ready {
            pid: 1,
            process_start: None,
            worker: "w".into(),
            dir: "traces".into(),
            warmup: 1,
            active: 3,
            state: State::Idle,
            step: 0,
            answers: Vec::new(),
        };
        ready.answer(Answer::Accepted { id: "a".into(), cycle: 0, first_step: 5, steps: Steps::new(6, 7) });
        ready.answer(Answer::Saved { id: "a".into(), path: "t".into(), steps: Steps::of(&[6, 7]), partial: false });
        assert_eq!(ready.answers.len(), 1);
        assert!(ready.answer_to("a").unwrap().is_final());
        for n in 0..40 {
            ready.answer(Answer::Refused { id: Some(n.to_string()), reason: "busy".into() });
        }
        assert_eq!(ready.answers.len(), ANSWERS_KEPT);
        assert!(ready.answer_to("39").is_some() && ready.answer_to("a").is_none());
    }
}
