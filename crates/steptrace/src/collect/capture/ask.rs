//! The asking side: checks that the process is the run that wrote the
//! ready file, leaves the request, raises `SIGUSR1`, and reads the answers.
//!
//! Before anything is signalled: the capture folder is a real folder (not
//! a link) owned by the process's user and writable by nobody else; the
//! ready and token files in it are regular files of that user's; the
//! ready file names the process, with its start time; and (Linux) the
//! process holds the token file open, which only the run that created it
//! can. The request carries the token, which the run checks in turn.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

pub use super::error::CaptureError;
use super::files::{self, Answer, Names, Paths, Ready, Request, State};
use super::folder::{caller_refusal, Folder, FolderError, Meta};
use super::process::{self, Target};

/// A request left for a process and signalled.
#[derive(Debug)]
pub struct Asked {
    pid: u32,
    folder: Folder,
    names: Names,
    paths: Paths,
    request: Request,
    /// The request file as placed, to take back only that one.
    placed: Meta,
    /// The uid whose files are the run's.
    owner: u32,
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

/// This process's effective uid (0 where there are none).
pub(crate) fn euid() -> u32 {
    #[cfg(unix)]
    return rustix::process::geteuid().as_raw();
    #[cfg(not(unix))]
    0
}

fn io_error(what: &'static str, file: &Path) -> impl FnOnce(std::io::Error) -> CaptureError {
    let file = file.to_path_buf();
    move |source| CaptureError::Io { what, file, source }
}

/// Asks process `pid`, which writes its traces to `dir`, to record a
/// capture of `steps` active steps (`None`: its schedule's) after one
/// warmup step; `requested_by` is written into the capture's manifest.
///
/// Nothing is signalled unless `dir` holds the process's ready file, in a
/// capture folder that only the process's user can write, and the process
/// is the one that wrote it (see the module's documentation for the
/// checks). [`locate`](super::locate) finds `dir` from the process.
///
/// # Errors
///
/// A [`CaptureError`] that says what is wrong: no such process, one that
/// is not ready or not the run that wrote the ready file, a folder or file
/// that is not to be trusted, one already recording, a request already
/// waiting, or a file that cannot be written.
pub fn ask(dir: &Path, pid: u32, steps: Option<u64>, requested_by: &str) -> Result<Asked, CaptureError> {
    let paths = Paths::new(dir, pid);
    let names = Names::new(pid);
    let Some(target) = Target::find(pid)? else {
        return Err(ended(&paths, &names, pid));
    };
    let caller = euid();
    let owner = process::process_uid(pid).unwrap_or(caller);
    if caller_refusal(caller, owner).is_some() {
        return Err(CaptureError::NotPermitted { pid });
    }
    let not_ready = || CaptureError::NotReady { pid, dir: dir.to_path_buf(), file: paths.ready.clone() };
    let folder = match Folder::open(&paths.folder, owner) {
        Ok(folder) => folder,
        Err(FolderError::Missing) => return Err(not_ready()),
        Err(FolderError::Refused(why)) => return Err(CaptureError::Unsafe { pid, path: paths.folder, why }),
        Err(FolderError::Io(e)) => return Err(io_error("cannot open the capture folder", &paths.folder)(e)),
    };
    let read_ready = folder
        .read(&names.ready, &[owner])
        .and_then(|f| f.map(|(bytes, _)| files::from_bytes::<Ready>(&bytes)).transpose());
    let Some(ready) = read_ready.map_err(io_error("cannot read the ready file", &paths.ready))? else {
        return Err(not_ready());
    };
    let not_the_run = |why: String| CaptureError::NotTheRun { pid, file: paths.ready.clone(), why };
    if ready.pid != pid {
        return Err(not_the_run(format!("it names process {}", ready.pid)));
    }
    if !same_start(ready.process_start, process::process_start(pid)) {
        if ready.state == State::Ended {
            // Left by a run that has ended: tidied away.
            let _ = folder.remove(&names.ready);
        }
        return Err(CaptureError::Stale { pid, file: paths.ready, reused: true });
    }
    if ready.state == State::Ended {
        return Err(CaptureError::Ended { pid });
    }
    let token = match folder.read(&names.token, &[owner]) {
        Ok(Some((bytes, meta))) => (String::from_utf8_lossy(&bytes).trim().to_owned(), meta),
        Ok(None) => return Err(not_the_run(format!("there is no token file {} beside it", names.token))),
        Err(e) => return Err(io_error("cannot read the token file", &paths.token)(e)),
    };
    #[cfg(target_os = "linux")]
    match process::holds(pid, &token.1) {
        Ok(true) => {}
        Ok(false) => return Err(not_the_run(format!("it does not hold the run's token file {} open", names.token))),
        Err(e) if e.kind() == ErrorKind::PermissionDenied => return Err(CaptureError::NotPermitted { pid }),
        Err(e) if e.kind() == ErrorKind::NotFound => return Err(CaptureError::NoProcess { pid }),
        Err(e) => return Err(io_error("cannot list the open files of process", Path::new(&pid.to_string()))(e)),
    }
    if ready.state == State::Recording {
        return Err(CaptureError::Busy { pid, detail: recording(&ready) });
    }
    let mut request = Request::new(steps, requested_by);
    request.token = Some(token.0);
    let bytes = files::to_bytes(&request).map_err(io_error("cannot write the request", &paths.request))?;
    let placed = match folder.write_new(&names.request, &bytes) {
        Ok(placed) => placed,
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            return Err(match folder.what_is(&names.request) {
                Some(there) if !there.is_regular() => {
                    CaptureError::Blocked { pid, file: paths.request, kind: there.kind() }
                }
                _ => CaptureError::Waiting { pid, file: paths.request },
            });
        }
        Err(e) => return Err(io_error("cannot write the request", &paths.request)(e)),
    };
    if let Err(e) = target.signal() {
        folder.remove_if_same(&names.request, &placed);
        return Err(e);
    }
    let (process_start, worker) = (ready.process_start, ready.worker);
    Ok(Asked { pid, folder, names, paths, request, placed, owner, process_start, worker, dir: dir.to_path_buf() })
}

/// Whether the start time in a ready file is the process's: both known and
/// equal (where the system says none, as off Linux, neither is known).
fn same_start(written: Option<u64>, now: Option<u64>) -> bool {
    match (written, now) {
        (Some(written), Some(now)) => written == now,
        (None, None) => !cfg!(target_os = "linux"),
        _ => false,
    }
}

/// No process `pid`: a ready file it left in a folder of this user's is
/// tidied away, and said to be stale.
fn ended(paths: &Paths, names: &Names, pid: u32) -> CaptureError {
    let me = euid();
    let Ok(folder) = Folder::open(&paths.folder, me) else { return CaptureError::NoProcess { pid } };
    match folder.read(&names.ready, &[me]) {
        Ok(Some((bytes, _))) if files::from_bytes::<Ready>(&bytes).is_ok_and(|r| r.pid == pid) => {
            let _ = folder.remove(&names.ready);
            let _ = folder.remove(&names.token);
            CaptureError::Stale { pid, file: paths.ready.clone(), reused: false }
        }
        _ => CaptureError::NoProcess { pid },
    }
}

impl Asked {
    /// The request's id, which the answers and the capture's manifest carry.
    pub fn id(&self) -> &str {
        &self.request.id
    }

    /// The trace directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The latest word on the request.
    ///
    /// # Errors
    ///
    /// [`CaptureError::Gone`] when the process ended without a final
    /// answer, [`CaptureError::Io`] when its ready file cannot be read.
    pub fn poll(&self) -> Result<Progress, CaptureError> {
        let read = self
            .folder
            .read(&self.names.ready, &[self.owner])
            .and_then(|f| f.map(|(bytes, _)| files::from_bytes::<Ready>(&bytes)).transpose());
        let ready = read.map_err(io_error("cannot read the ready file", &self.paths.ready))?;
        let answer = ready.as_ref().and_then(|r| r.answer_to(&self.request.id)).cloned();
        if let (Some(ready), Some(answer)) = (&ready, &answer) {
            if ready.state == State::Ended && answer.is_final() {
                // The last word of an ended run has been heard: its file can go.
                let _ = self.folder.remove(&self.names.ready);
            }
        }
        match answer {
            Some(answer) if answer.is_final() || self.running() => Ok(Progress::Answered(answer)),
            None if self.running() => Ok(Progress::Waiting),
            answer => {
                let what = if answer.is_some() { "saving the capture" } else { "reading the request" };
                if answer.is_none() {
                    self.withdraw();
                }
                Err(CaptureError::Gone { pid: self.pid, what, kept: self.partial_file() })
            }
        }
    }

    /// Takes the request back if it has not been read (the file this
    /// request placed, and no other); whether it was.
    pub fn withdraw(&self) -> bool {
        self.folder.remove_if_same(&self.names.request, &self.placed)
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
        matches!(process::alive(self.pid), Ok(true)) && same_start(self.process_start, process::process_start(self.pid))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_time_must_be_known_and_equal_on_linux() {
        assert!(same_start(Some(5), Some(5)));
        assert!(!same_start(Some(5), Some(6)));
        assert!(!same_start(None, Some(6)));
        assert!(!same_start(Some(5), None));
        assert_eq!(same_start(None, None), !cfg!(target_os = "linux"));
    }
}
