//! What the system says of a process: when it started, which user it runs
//! as and which capture token files it holds open (Linux: `/proc/PID`), and
//! the signal itself, sent through a pidfd where there is one.

#[cfg(target_os = "linux")]
use std::path::Path;
use std::path::PathBuf;

use super::ask::CaptureError;
#[cfg(target_os = "linux")]
use super::files::FOLDER;
#[cfg(target_os = "linux")]
use super::folder::Meta;

/// The suffix of a run's token file: `PID.token`.
pub(crate) const TOKEN_SUFFIX: &str = ".token";

/// When process `pid` started, where the system says (Linux: field 22 of
/// `/proc/PID/stat`, in clock ticks since boot).
pub fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last `)`.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// The effective uid of process `pid` (Linux: the second number of the
/// `Uid:` line of `/proc/PID/status`); `None` where not known.
pub(crate) fn process_uid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| line.strip_prefix("Uid:"))?.split_whitespace().nth(1)?.parse().ok()
}

/// The token files (`*.token`) that process `pid` holds open: each one's
/// path as the process sees it, and the file itself. Reading them takes the
/// right to inspect the process (its own user, or root).
#[cfg(target_os = "linux")]
pub(crate) fn held_tokens(pid: u32) -> std::io::Result<Vec<(PathBuf, Meta)>> {
    let mut held = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        let Ok(entry) = entry else { continue };
        // A file removed since shows as "PATH (deleted)" and is skipped.
        let Ok(path) = std::fs::read_link(entry.path()) else { continue };
        if !path.file_name().is_some_and(|n| n.to_string_lossy().ends_with(TOKEN_SUFFIX)) {
            continue;
        }
        // The link itself is followed: to the open file, wherever it now is.
        if let Ok(meta) = std::fs::metadata(entry.path()) {
            held.push((path, Meta::of(&meta)));
        }
    }
    Ok(held)
}

/// Whether process `pid` holds the file `token` open.
#[cfg(target_os = "linux")]
pub(crate) fn holds(pid: u32, token: &Meta) -> std::io::Result<bool> {
    Ok(held_tokens(pid)?.iter().any(|(_, meta)| meta.same_file(token)))
}

/// The trace directory of the on-demand run `pid`, found from the run
/// itself: the capture folder whose token file (`PID.token`) it holds open.
/// Only the run's own user and root can see it (Linux; elsewhere give the
/// directory).
///
/// # Errors
///
/// [`CaptureError::NoProcess`], [`CaptureError::NotPermitted`], or
/// [`CaptureError::NotFound`] when the process holds no capture folder open,
/// or several.
pub fn locate(pid: u32) -> Result<PathBuf, CaptureError> {
    #[cfg(target_os = "linux")]
    {
        use std::io::ErrorKind;
        if !alive(pid)? {
            return Err(CaptureError::NoProcess { pid });
        }
        let held = match held_tokens(pid) {
            Ok(held) => held,
            Err(e) if e.kind() == ErrorKind::NotFound => return Err(CaptureError::NoProcess { pid }),
            Err(e) if e.kind() == ErrorKind::PermissionDenied => return Err(CaptureError::NotPermitted { pid }),
            Err(source) => {
                return Err(CaptureError::Io {
                    what: "cannot list the open files of",
                    file: format!("/proc/{pid}/fd").into(),
                    source,
                })
            }
        };
        let name = format!("{pid}{TOKEN_SUFFIX}");
        let mut dirs: Vec<PathBuf> = held
            .into_iter()
            .filter(|(path, _)| {
                path.file_name().is_some_and(|n| *n == *name)
                    && path.parent().and_then(Path::file_name).is_some_and(|n| n == FOLDER)
            })
            .filter_map(|(path, _)| path.parent()?.parent().map(Path::to_path_buf))
            .collect();
        dirs.sort();
        dirs.dedup();
        match dirs.len() {
            1 => Ok(dirs.remove(0)),
            0 => Err(CaptureError::NotFound {
                pid,
                why: "it holds no steptrace capture folder open: it was not started on demand (`--schedule on-demand`, or an \
                      on-demand Schedule in code), or has ended"
                    .into(),
            }),
            _ => {
                let list: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
                Err(CaptureError::NotFound { pid, why: format!("it has several capture folders open, in {}: say which with --out", list.join(", ")) })
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(CaptureError::NotFound {
            pid,
            why: "this system has no /proc to find its trace directory in: give it with --out".into(),
        })
    }
}

/// A process about to be signalled: held by a pidfd where the system has
/// them, so that the signal reaches the process that was checked even if
/// it ends and its pid is taken meanwhile.
#[derive(Debug)]
pub(crate) struct Target {
    pid: u32,
    #[cfg(target_os = "linux")]
    pidfd: Option<std::os::fd::OwnedFd>,
}

impl Target {
    /// Process `pid`, if there is one (and this user may signal it).
    pub(crate) fn find(pid: u32) -> Result<Option<Target>, CaptureError> {
        if !alive(pid)? {
            return Ok(None);
        }
        #[cfg(target_os = "linux")]
        {
            use rustix::process::{pidfd_open, Pid, PidfdFlags};
            let pidfd =
                match i32::try_from(pid).ok().and_then(Pid::from_raw).map(|p| pidfd_open(p, PidfdFlags::empty())) {
                    Some(Ok(fd)) => Some(fd),
                    Some(Err(rustix::io::Errno::SRCH)) => return Ok(None),
                    // An older kernel: the pid is signalled.
                    _ => None,
                };
            Ok(Some(Target { pid, pidfd }))
        }
        #[cfg(not(target_os = "linux"))]
        Ok(Some(Target { pid }))
    }

    /// Sends `SIGUSR1`.
    pub(crate) fn signal(&self) -> Result<(), CaptureError> {
        #[cfg(target_os = "linux")]
        if let Some(fd) = &self.pidfd {
            return map_signal_error(self.pid, rustix::process::pidfd_send_signal(fd, rustix::process::Signal::USR1));
        }
        signal(self.pid)
    }
}

/// Whether process `pid` exists (and may be signalled by us).
#[cfg(unix)]
pub(crate) fn alive(pid: u32) -> Result<bool, CaptureError> {
    use rustix::io::Errno;
    let Some(p) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else {
        return Ok(false);
    };
    match rustix::process::test_kill_process(p) {
        Ok(()) => Ok(true),
        Err(Errno::SRCH) => Ok(false),
        Err(Errno::PERM) => Err(CaptureError::NotPermitted { pid }),
        Err(e) => Err(CaptureError::Io {
            what: "cannot check process",
            file: PathBuf::from(pid.to_string()),
            source: e.into(),
        }),
    }
}

#[cfg(not(unix))]
pub(crate) fn alive(_pid: u32) -> Result<bool, CaptureError> {
    Err(CaptureError::Unsupported)
}

#[cfg(unix)]
fn map_signal_error(pid: u32, result: rustix::io::Result<()>) -> Result<(), CaptureError> {
    use rustix::io::Errno;
    match result {
        Ok(()) => Ok(()),
        Err(Errno::SRCH) => Err(CaptureError::NoProcess { pid }),
        Err(Errno::PERM) => Err(CaptureError::NotPermitted { pid }),
        Err(e) => Err(CaptureError::Io {
            what: "cannot signal process",
            file: PathBuf::from(pid.to_string()),
            source: e.into(),
        }),
    }
}

#[cfg(unix)]
fn signal(pid: u32) -> Result<(), CaptureError> {
    let p = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw).ok_or(CaptureError::NoProcess { pid })?;
    map_signal_error(pid, rustix::process::kill_process(p, rustix::process::Signal::USR1))
}

#[cfg(not(unix))]
fn signal(_pid: u32) -> Result<(), CaptureError> {
    Err(CaptureError::Unsupported)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_start_time_and_a_user_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(process_start(std::process::id()).is_some());
            assert_eq!(process_start(u32::MAX), None);
            assert_eq!(process_uid(std::process::id()), Some(rustix::process::geteuid().as_raw()));
        }
    }
}
