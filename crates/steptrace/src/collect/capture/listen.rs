//! The running process's side: a flag raised by `SIGUSR1` (or by a
//! [`CaptureHandle`] in the same process), read once per step; the request
//! read and answered at the step boundary; the capture planned as a cycle.
//!
//! The capture folder is created with mode 0700, or taken only if it is a
//! real folder of this user's that nobody else can write to; it is then
//! used through its descriptor. A random token is written to `PID.token`
//! (mode 0600) and the file is held open while the run listens: a request
//! must carry the token, and `capture` finds the folder, and tells this run
//! from any other process, by the open file.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::error::shown;
use super::files::{self, Answer, Names, Paths, Ready, Request, State, Steps};
use super::folder::{Folder, FolderError};
use crate::collect::schedule::{Action, Schedule};
use crate::collect::sink::{utc_stamp, SavedTrace};
use crate::error::Error;

/// Asks the process's own profiler for a capture, from any thread.
///
/// Get one from [`Profiler::capture_handle`](crate::Profiler::capture_handle)
/// on a profiler built with an on-demand schedule. The request is read at
/// the next step boundary, like one sent by `steptrace capture PID`.
#[derive(Clone, Debug)]
pub struct CaptureHandle {
    flag: Arc<AtomicBool>,
    pending: Arc<Mutex<Option<Request>>>,
}

impl CaptureHandle {
    /// Asks for a capture of `steps` active steps (`None`: the schedule's),
    /// said to be asked by `requested_by`; returns the request's id, which
    /// the profiler's answers carry. A request made before the last one
    /// was read replaces it.
    pub fn request(&self, steps: Option<u64>, requested_by: impl Into<String>) -> String {
        let request = Request::new(steps, requested_by);
        let id = request.id.clone();
        if let Ok(mut pending) = self.pending.lock() {
            *pending = Some(request);
        }
        self.flag.store(true, Ordering::Release);
        id
    }
}

/// A capture planned from a request: `warmup` steps from `first`, then `active`.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub(crate) cycle: u64,
    pub(crate) first: u64,
    pub(crate) warmup: u64,
    pub(crate) active: u64,
    request: Request,
    /// The step at whose end the request was read.
    read_at: u64,
}

impl Plan {
    fn last(&self) -> u64 {
        self.first.saturating_add(self.warmup).saturating_add(self.active).saturating_sub(1)
    }

    fn action(&self, step: u64) -> Action {
        if step < self.first || step > self.last() {
            return Action::None;
        }
        let k = step - self.first;
        if k < self.warmup {
            Action::Warmup
        } else if step < self.last() {
            Action::Record
        } else {
            Action::RecordAndSave
        }
    }

    fn recorded(&self) -> Steps {
        Steps::new(self.first.saturating_add(self.warmup), self.last())
    }

    /// What the capture's trace says of it, in its manifest's `capture`.
    pub(crate) fn record(&self) -> Value {
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(self.request.requested_at_unix_ms);
        json!({
            "on_demand": true,
            "request_id": self.request.id,
            "requested_by": self.request.requested_by,
            "requested_at_unix_ms": self.request.requested_at_unix_ms,
            "requested_at": utc_stamp(at),
            "read_at_step": self.read_at,
            "first_step": self.first,
            "warmup": self.warmup,
            "active": self.active,
        })
    }
}

/// The on-demand state of a profiler.
pub(crate) struct OnDemand {
    paths: Paths,
    names: Names,
    folder: Folder,
    /// The uid this process runs as (requests are taken from it and root).
    uid: u32,
    /// What a request from another process must carry.
    token: String,
    /// The token file, held open while the run listens.
    held: Option<File>,
    flag: Arc<AtomicBool>,
    pending: Arc<Mutex<Option<Request>>>,
    ready: Ready,
    plan: Option<Plan>,
    /// Captures whose recording ended, waiting for their file: (cycle, request id).
    saving: Vec<(u64, String)>,
    next_cycle: u64,
    /// Whether a request came from another process (its answers are then
    /// kept in the ready file after the run, for the asker to read).
    asked_from_outside: bool,
    /// Why the ready file could not be kept up to date, once.
    pub(crate) problem: Option<String>,
    #[cfg(unix)]
    signal: Option<signal_hook::SigId>,
}

impl OnDemand {
    /// Writes the ready file in `dir` and starts listening for `SIGUSR1`.
    ///
    /// # Errors
    ///
    /// [`Error::OutDir`] when the capture folder cannot be created, or is
    /// there but is not a folder of this user's that only this user can
    /// write to (it is then refused, and said why).
    pub(crate) fn start(dir: &Path, worker: &str, schedule: &Schedule) -> Result<OnDemand, Error> {
        let pid = std::process::id();
        let paths = Paths::new(dir, pid);
        let names = Names::new(pid);
        let folder_path = paths.folder.clone();
        let failed = |what, source| Error::OutDir { path: folder_path.clone(), what, source };
        std::fs::create_dir_all(dir).map_err(|source| Error::OutDir {
            path: dir.to_path_buf(),
            what: "cannot create the trace directory",
            source,
        })?;
        let folder = Folder::create(&paths.folder).map_err(|e| match e {
            FolderError::Refused(why) => {
                failed("the on-demand capture folder is refused", io::Error::new(io::ErrorKind::PermissionDenied, why))
            }
            FolderError::Missing => {
                failed("cannot create the on-demand capture folder", io::ErrorKind::NotFound.into())
            }
            FolderError::Io(e) => failed("cannot create the on-demand capture folder", e),
        })?;
        let token = random_token().map_err(|e| failed("cannot make the on-demand token", e))?;
        let ready = Ready {
            pid,
            process_start: super::process::process_start(pid),
            worker: worker.to_owned(),
            dir: dir.to_path_buf(),
            warmup: schedule.warmup(),
            active: schedule.active(),
            state: State::Idle,
            step: 0,
            answers: Vec::new(),
        };
        let flag = Arc::new(AtomicBool::new(false));
        #[cfg(unix)]
        let signal = Some(
            signal_hook::flag::register(signal_hook::consts::SIGUSR1, flag.clone())
                .map_err(|e| failed("cannot listen for SIGUSR1", e))?,
        );
        // A request left by a run that ended before reading it is not this run's.
        let _ = folder.remove(&names.request);
        let (held, _) = folder
            .write_atomic(&names.token, token.as_bytes())
            .map_err(|e| failed("cannot write the on-demand token file", e))?;
        let on_demand = OnDemand {
            paths,
            names,
            folder,
            uid: super::ask::euid(),
            token,
            held: Some(held),
            flag,
            pending: Arc::new(Mutex::new(None)),
            ready,
            plan: None,
            saving: Vec::new(),
            next_cycle: 0,
            asked_from_outside: false,
            problem: None,
            #[cfg(unix)]
            signal,
        };
        let bytes =
            files::to_bytes(&on_demand.ready).map_err(|e| failed("cannot write the on-demand ready file", e))?;
        on_demand
            .folder
            .write_atomic(&on_demand.names.ready, &bytes)
            .map_err(|e| failed("cannot write the on-demand ready file", e))?;
        Ok(on_demand)
    }

    pub(crate) fn handle(&self) -> CaptureHandle {
        CaptureHandle { flag: self.flag.clone(), pending: self.pending.clone() }
    }

    /// The capture that holds `step`, if any.
    pub(crate) fn plan_at(&self, step: u64) -> Option<&Plan> {
        self.plan.as_ref().filter(|p| p.action(step) != Action::None)
    }

    /// What the profiler does in `step`.
    pub(crate) fn action(&self, step: u64) -> Action {
        self.plan.as_ref().map_or(Action::None, |p| p.action(step))
    }

    /// At the boundary before `next` (step `next - 1` has ended): retires a
    /// finished capture, then reads a request if one was signalled. One
    /// atomic load when nothing happened.
    pub(crate) fn at_boundary(&mut self, next: u64) {
        let mut changed = false;
        if let Some(plan) = self.plan.take_if(|p| p.last() < next) {
            self.saving.push((plan.cycle, plan.request.id));
            self.ready.state = State::Idle;
            changed = true;
        }
        if self.flag.load(Ordering::Relaxed) && self.flag.swap(false, Ordering::AcqRel) {
            changed |= self.read_request(next);
        }
        if changed {
            self.ready.step = next;
            self.write();
        }
    }

    /// Reads and answers the waiting request; whether there was one.
    fn read_request(&mut self, next: u64) -> bool {
        let own = self.pending.lock().ok().and_then(|mut p| p.take());
        let request = match own {
            Some(request) => request,
            None => match self.read_outside() {
                Ok(None) => return false,
                Ok(Some(request)) => request,
                Err(reason) => {
                    // No id: one taken from an untrusted file could replace the answer to another request.
                    self.ready.answer(Answer::Refused { id: None, reason });
                    return true;
                }
            },
        };
        if let Some(plan) = &self.plan {
            let reason = format!(
                "a capture is already recording: steps {} (cycle {}, asked by {}); ask again once it is saved",
                plan.recorded(),
                plan.cycle,
                plan.request.requested_by
            );
            self.ready.answer(Answer::Refused { id: Some(request.id), reason });
            return true;
        }
        let active = request.steps.unwrap_or(self.ready.active);
        if active == 0 {
            self.ready.answer(Answer::Refused {
                id: Some(request.id),
                reason: "a capture records at least one step (asked for 0)".into(),
            });
            return true;
        }
        let plan =
            Plan { cycle: self.next_cycle, first: next, warmup: self.ready.warmup, active, request, read_at: next - 1 };
        self.next_cycle += 1;
        self.ready.answer(Answer::Accepted {
            id: plan.request.id.clone(),
            cycle: plan.cycle,
            first_step: plan.first,
            steps: plan.recorded(),
        });
        self.ready.state = State::Recording;
        self.plan = Some(plan);
        true
    }

    /// The request another process left, taken away: `Err` with the
    /// reason to refuse it when it is not a readable request file of this
    /// user's or root's that carries this run's token. The file is opened
    /// without following a link or blocking, and read through a bound.
    fn read_outside(&mut self) -> Result<Option<Request>, String> {
        let read = self.folder.read(&self.names.request, &[self.uid, 0]);
        if matches!(read, Ok(None)) {
            return Ok(None);
        }
        self.asked_from_outside = true;
        // Read or refused, it is not read twice (a request read is removed only if it is
        // still the file read).
        if let Ok(Some((_, meta))) = &read {
            self.folder.remove_if_same(&self.names.request, meta);
        } else {
            let _ = self.folder.remove(&self.names.request);
        }
        let unreadable =
            |e: io::Error| format!("the request file {} could not be read: {e}", shown(&self.paths.request));
        let Some((bytes, _)) = read.map_err(unreadable)? else { return Ok(None) };
        let request: Request = files::from_bytes(&bytes).map_err(unreadable)?;
        if request.token.as_deref() != Some(self.token.as_str()) {
            return Err(format!(
                "the request file {} does not carry this run's token (steptrace capture reads it from {})",
                shown(&self.paths.request),
                self.names.token
            ));
        }
        Ok(Some(request))
    }

    /// Whether a capture's recording has ended and its file is not yet answered for.
    pub(crate) fn awaits_save(&self) -> bool {
        !self.saving.is_empty()
    }

    /// Answers the captures whose files are now written (or failed).
    pub(crate) fn note_results(&mut self, results: &[(u64, Result<SavedTrace, Error>)]) {
        if self.answer_results(results) {
            self.write();
        }
    }

    /// Answers the captures whose files are in `results`; whether any was.
    fn answer_results(&mut self, results: &[(u64, Result<SavedTrace, Error>)]) -> bool {
        let mut changed = false;
        self.saving.retain(|(cycle, id)| {
            let Some((_, result)) = results.iter().find(|(c, _)| c == cycle) else { return true };
            let answer = match result {
                Ok(saved) => Answer::Saved {
                    id: id.clone(),
                    path: saved.path.clone(),
                    steps: Steps::of(&saved.steps),
                    partial: saved.partial,
                },
                Err(e) => Answer::Failed { id: id.clone(), reason: e.to_string() },
            };
            self.ready.answer(answer);
            changed = true;
            false
        });
        changed
    }

    /// The run has ended (every file written): a capture cut short is
    /// answered, and the ready file says the run has ended, so that an asker
    /// still waiting reads its answer (and then removes the file); it goes
    /// at once when no request came from another process. The last answers
    /// and the end are written at once: an asker that reads a final answer
    /// reads the end with it.
    pub(crate) fn end(&mut self, results: &[(u64, Result<SavedTrace, Error>)]) {
        if let Some(plan) = self.plan.take() {
            self.saving.push((plan.cycle, plan.request.id));
        }
        self.answer_results(results);
        for (_, id) in std::mem::take(&mut self.saving) {
            let reason = "the run ended before the capture's first recorded step".to_owned();
            self.ready.answer(Answer::Refused { id: Some(id), reason });
        }
        self.stop_listening();
        let _ = self.folder.remove(&self.names.request);
        if !self.asked_from_outside {
            let _ = self.folder.remove(&self.names.ready);
        } else {
            self.ready.state = State::Ended;
            self.write();
        }
    }

    fn write(&mut self) {
        let written =
            files::to_bytes(&self.ready).and_then(|bytes| self.folder.write_atomic(&self.names.ready, &bytes));
        if let Err(e) = written {
            self.problem.get_or_insert_with(|| describe(&self.paths.ready, &e));
        }
    }

    /// Stops listening: no more signals, and the token file goes (nobody
    /// can ask any more).
    fn stop_listening(&mut self) {
        if self.held.take().is_some() {
            let _ = self.folder.remove(&self.names.token);
        }
        #[cfg(unix)]
        if let Some(id) = self.signal.take() {
            // The registry's handler stays installed and does nothing: a late
            // SIGUSR1 does not kill the process.
            signal_hook::low_level::unregister(id);
        }
    }
}

impl Drop for OnDemand {
    fn drop(&mut self) {
        self.stop_listening();
    }
}

fn describe(path: &Path, e: &io::Error) -> String {
    format!("the on-demand ready file {} could not be updated: {e}", shown(path))
}

/// 128 random bits, in hex.
fn random_token() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    #[cfg(unix)]
    io::Read::read_exact(&mut File::open("/dev/urandom")?, &mut bytes)?;
    #[cfg(not(unix))]
    {
        // Without signals no other process can ask; the token is never checked.
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0),
        );
        bytes[..8].copy_from_slice(&hasher.finish().to_le_bytes());
    }
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
#[path = "listen_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "fuzz_tests.rs"]
mod fuzz_tests;
