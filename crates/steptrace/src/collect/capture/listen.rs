//! The running process's side: a flag raised by `SIGUSR1` (or by a
//! [`CaptureHandle`] in the same process), read once per step; the request
//! read and answered at the step boundary; the capture planned as a cycle.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::files::{self, Answer, Paths, Ready, Request, State, Steps};
use crate::error::Error;
use crate::schedule::{Action, Schedule};
use crate::sink::{utc_stamp, SavedTrace};

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
    pub(crate) fn start(dir: &Path, worker: &str, schedule: &Schedule) -> Result<OnDemand, Error> {
        let pid = std::process::id();
        let paths = Paths::new(dir, pid);
        let folder = paths.ready.parent().unwrap_or(dir).to_path_buf();
        let failed = |what, source| Error::OutDir { path: folder.clone(), what, source };
        std::fs::create_dir_all(&folder).map_err(|e| failed("cannot create the on-demand capture folder", e))?;
        let ready = Ready {
            pid,
            process_start: files::process_start(pid),
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
        let _ = std::fs::remove_file(&paths.request);
        files::write_atomic(&paths.ready, &ready).map_err(|e| failed("cannot write the on-demand ready file", e))?;
        Ok(OnDemand {
            paths,
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
        })
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
            None => match files::read::<Request>(&self.paths.request) {
                Ok(None) => return false,
                Ok(Some(request)) => {
                    let _ = std::fs::remove_file(&self.paths.request);
                    self.asked_from_outside = true;
                    request
                }
                Err(e) => {
                    self.asked_from_outside = true;
                    let _ = std::fs::remove_file(&self.paths.request);
                    let reason = format!("the request file {} could not be read: {e}", self.paths.request.display());
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
            self.ready.answer(Answer::Refused { id: Some(request.id), reason: "a capture records at least one step (asked for 0)".into() });
            return true;
        }
        let plan = Plan { cycle: self.next_cycle, first: next, warmup: self.ready.warmup, active, request, read_at: next - 1 };
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

    /// Whether a capture's recording has ended and its file is not yet answered for.
    pub(crate) fn awaits_save(&self) -> bool {
        !self.saving.is_empty()
    }

    /// Answers the captures whose files are now written (or failed).
    pub(crate) fn note_results(&mut self, results: &[(u64, Result<SavedTrace, Error>)]) {
        if self.saving.is_empty() {
            return;
        }
        let mut changed = false;
        self.saving.retain(|(cycle, id)| {
            let Some((_, result)) = results.iter().find(|(c, _)| c == cycle) else { return true };
            let answer = match result {
                Ok(saved) => Answer::Saved { id: id.clone(), path: saved.path.clone(), steps: Steps::of(&saved.steps), partial: saved.partial },
                Err(e) => Answer::Failed { id: id.clone(), reason: e.to_string() },
            };
            self.ready.answer(answer);
            changed = true;
            false
        });
        if changed {
            self.write();
        }
    }

    /// The run has ended (every file written): a capture cut short is
    /// answered, and the ready file says the run has ended, so that an asker
    /// still waiting reads its answer (and then removes the file); it goes
    /// at once when no request came from another process.
    pub(crate) fn end(&mut self, results: &[(u64, Result<SavedTrace, Error>)]) {
        if let Some(plan) = self.plan.take() {
            self.saving.push((plan.cycle, plan.request.id));
        }
        self.note_results(results);
        for (_, id) in std::mem::take(&mut self.saving) {
            let reason = "the run ended before the capture's first recorded step".to_owned();
            self.ready.answer(Answer::Refused { id: Some(id), reason });
        }
        self.stop_listening();
        let _ = std::fs::remove_file(&self.paths.request);
        if !self.asked_from_outside {
            let _ = std::fs::remove_file(&self.paths.ready);
        } else {
            self.ready.state = State::Ended;
            self.write();
        }
    }

    fn write(&mut self) {
        if let Err(e) = files::write_atomic(&self.paths.ready, &self.ready) {
            self.problem.get_or_insert_with(|| describe(&self.paths.ready, &e));
        }
    }

    fn stop_listening(&mut self) {
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
    format!("the on-demand ready file {} could not be updated: {e}", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(dir: &Path) -> OnDemand {
        OnDemand::start(dir, "w", &Schedule::on_demand(1, 2).unwrap()).unwrap()
    }

    #[test]
    fn a_request_becomes_a_warmup_then_its_active_steps_and_a_second_is_refused_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let mut od = listener(dir.path());
        let handle = od.handle();
        od.at_boundary(5);
        assert_eq!(od.action(5), Action::None);
        let id = handle.request(None, "test");
        od.at_boundary(6);
        let actions: Vec<Action> = (5..10).map(|s| od.action(s)).collect();
        assert_eq!(actions, [Action::None, Action::Warmup, Action::Record, Action::RecordAndSave, Action::None]);
        let ready: Ready = files::read(&od.paths.ready).unwrap().unwrap();
        assert_eq!(ready.state, State::Recording);
        assert!(matches!(ready.answer_to(&id), Some(Answer::Accepted { first_step: 6, steps, .. }) if *steps == Steps::new(7, 8)));
        let second = handle.request(Some(1), "again");
        od.at_boundary(7);
        assert!(matches!(od.ready.answer_to(&second), Some(Answer::Refused { reason, .. }) if reason.contains("already recording")));
        od.at_boundary(8);
        od.at_boundary(9);
        assert_eq!(od.ready.state, State::Idle);
        assert_eq!(od.saving, [(0, id.clone())]);
    }

    #[test]
    fn the_ready_file_goes_at_the_end_unless_another_process_asked() {
        let dir = tempfile::tempdir().unwrap();
        let mut od = listener(dir.path());
        let path = od.paths.ready.clone();
        assert!(path.exists());
        od.handle().request(Some(1), "own code");
        od.at_boundary(1);
        od.end(&[]);
        assert!(!path.exists(), "asked from inside: nobody outside waits for the answer");

        let mut od = listener(dir.path());
        let request = Request::new(Some(4), "another process");
        files::write_new(&od.paths.request, &request).unwrap();
        od.flag.store(true, Ordering::Release);
        od.at_boundary(1);
        assert!(!od.paths.request.exists());
        od.end(&[]);
        let ready: Ready = files::read(&path).unwrap().unwrap();
        assert_eq!(ready.state, State::Ended);
        assert!(matches!(ready.answer_to(&request.id), Some(Answer::Refused { reason, .. }) if reason.contains("ended")));
    }

    #[test]
    fn an_unreadable_request_is_answered_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let mut od = listener(dir.path());
        std::fs::write(&od.paths.request, b"garbage").unwrap();
        od.flag.store(true, Ordering::Release);
        od.at_boundary(3);
        assert!(!od.paths.request.exists());
        assert_eq!(od.action(3), Action::None);
        assert!(matches!(&od.ready.answers[..], [Answer::Refused { id: None, reason }] if reason.contains("could not be read")));
    }
}
