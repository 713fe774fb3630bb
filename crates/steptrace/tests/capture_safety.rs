//! The capture protocol in a trace directory others can write to: what a
//! hostile file or folder in `DIR/.steptrace-capture` can and cannot do to
//! the run and to the one who asks. A second user is played, where the
//! tests run as root, by files handed to uid 65534.
#![cfg(unix)]

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use steptrace::capture::{self, CaptureError, Paths, Ready, State, FOLDER};
use steptrace::{Profiler, Schedule};

fn on_demand(dir: &Path) -> Result<Profiler, steptrace::Error> {
    let (_layer, profiler) = Profiler::builder(Schedule::on_demand(1, 1).unwrap())
        .out_dir(dir)
        .build_global::<tracing_subscriber::Registry>()?;
    Ok(profiler)
}

fn mkfifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

/// A private capture folder in `dir`, as a run makes it.
fn private_folder(dir: &Path) -> PathBuf {
    let folder = dir.join(FOLDER);
    std::fs::create_dir(&folder).unwrap();
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o700)).unwrap();
    folder
}

/// A process that SIGUSR1 would kill.
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Sleeper {
        Sleeper(Command::new("sleep").arg("60").spawn().unwrap())
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    fn alive(&mut self) -> bool {
        std::thread::sleep(Duration::from_millis(200));
        self.0.try_wait().unwrap().is_none()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A ready file for `pid` as the run would write it, its real start time included.
fn forged_ready(dir: &Path, pid: u32) -> Ready {
    Ready {
        pid,
        process_start: capture::process_start(pid),
        worker: "w".into(),
        dir: dir.into(),
        warmup: 1,
        active: 1,
        state: State::Idle,
        step: 0,
        answers: Vec::new(),
    }
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

const NOBODY: u32 = 65534;

#[test]
fn a_fifo_request_does_not_block_the_runs_step_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let mut profiler = on_demand(dir.path()).unwrap();
    profiler.start();
    let request = Paths::new(dir.path(), std::process::id()).request;
    mkfifo(&request);
    rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::USR1).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    // Should the step block in open(2), a writer lets it go after 10 s, and the test fails.
    let released = request.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(10));
        let _ = std::fs::OpenOptions::new().write(true).custom_flags_nonblock().open(&released);
    });
    let started = Instant::now();
    profiler.step();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the step boundary blocked on a FIFO for {:?}",
        started.elapsed()
    );
    assert!(std::fs::symlink_metadata(&request).is_err(), "the FIFO is taken away");
    profiler.finish().unwrap();
}

/// `OpenOptions` with `O_NONBLOCK`: opening a FIFO for writing then never waits for a reader.
trait NonBlocking {
    fn custom_flags_nonblock(&mut self) -> &mut Self;
}

impl NonBlocking for std::fs::OpenOptions {
    fn custom_flags_nonblock(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
    }
}

#[test]
fn a_linked_capture_folder_is_refused_at_start_and_nothing_is_written_or_deleted_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let traces = dir.path().join("traces");
    std::fs::create_dir(&traces).unwrap();
    symlink(&elsewhere, traces.join(FOLDER)).unwrap();
    let theirs = elsewhere.join(format!("{}.request.json", std::process::id()));
    std::fs::write(&theirs, b"kept").unwrap();
    let err = on_demand(&traces).expect_err("a linked capture folder is refused");
    let text = err.to_string();
    assert!(text.contains(FOLDER) && text.contains("it is a symbolic link, not a folder"), "{text}");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 1, "no ready file written there");
    assert_eq!(std::fs::read(&theirs).unwrap(), b"kept", "no file deleted there");
}

#[test]
fn a_capture_folder_of_another_user_or_open_to_others_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let folder = private_folder(dir.path());
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = on_demand(dir.path()).expect_err("refused");
    assert!(err.to_string().contains("others can write to it (mode 0777)"), "{err}");
    if is_root() {
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&folder, Some(NOBODY), None).unwrap();
        let err = on_demand(dir.path()).expect_err("refused");
        assert!(err.to_string().contains(&format!("it belongs to uid {NOBODY}, not to uid 0")), "{err}");
    }
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 0, "nothing written in it");
}

#[test]
fn a_ready_file_forged_for_another_process_is_refused_and_nothing_is_signalled() {
    let dir = tempfile::tempdir().unwrap();
    let mut sleeper = Sleeper::start();
    let pid = sleeper.pid();
    let paths = Paths::new(dir.path(), pid);
    private_folder(dir.path());
    // Everything a file can say, copied from /proc; the token file too.
    std::fs::write(&paths.ready, serde_json::to_vec(&forged_ready(dir.path(), pid)).unwrap()).unwrap();
    std::fs::write(&paths.token, b"0123456789abcdef0123456789abcdef").unwrap();
    let err = capture::ask(dir.path(), pid, None, "t").unwrap_err();
    assert!(matches!(err, CaptureError::NotTheRun { .. }), "{err}");
    assert!(err.to_string().contains("does not hold the run's token file"), "{err}");
    assert!(sleeper.alive(), "the process was not signalled");
    assert!(!paths.request.exists(), "no request left");

    if is_root() {
        // The same files in a folder another user owns (and could have written): refused
        // before anything in it is read.
        std::os::unix::fs::chown(&paths.folder, Some(NOBODY), None).unwrap();
        let err = capture::ask(dir.path(), pid, None, "t").unwrap_err();
        assert!(matches!(err, CaptureError::Unsafe { .. }), "{err}");
        assert!(err.to_string().contains(&format!("belongs to uid {NOBODY}")), "{err}");
        // A folder of the right owner holding a ready file of another user's.
        std::os::unix::fs::chown(&paths.folder, Some(0), None).unwrap();
        std::os::unix::fs::chown(&paths.ready, Some(NOBODY), None).unwrap();
        let err = capture::ask(dir.path(), pid, None, "t").unwrap_err();
        assert!(err.to_string().contains(&format!("it belongs to uid {NOBODY}")), "{err}");
        assert!(sleeper.alive());
    }
}

#[test]
fn a_fifo_ready_file_does_not_block_the_asker() {
    let dir = tempfile::tempdir().unwrap();
    let mut sleeper = Sleeper::start();
    let pid = sleeper.pid();
    private_folder(dir.path());
    let ready = Paths::new(dir.path(), pid).ready;
    mkfifo(&ready);
    let (tx, rx) = mpsc::channel();
    let asked_in = dir.path().to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(capture::ask(&asked_in, pid, None, "t").map(|_| ()).map_err(|e| e.to_string()));
    });
    let Ok(result) = rx.recv_timeout(Duration::from_secs(10)) else {
        let _ = std::fs::OpenOptions::new().write(true).custom_flags_nonblock().open(&ready);
        panic!("ask blocked on a FIFO ready file");
    };
    let err = result.unwrap_err();
    assert!(err.contains("it is a FIFO, not a regular file"), "{err}");
    assert!(sleeper.alive());
}

#[test]
fn a_request_name_held_by_a_folder_is_reported_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let profiler = on_demand(dir.path()).unwrap();
    let request = Paths::new(dir.path(), std::process::id()).request;
    std::fs::create_dir(&request).unwrap();
    let err = capture::ask(dir.path(), std::process::id(), None, "t").unwrap_err();
    assert!(matches!(err, CaptureError::Blocked { kind: "a directory", .. }), "{err}");
    assert!(err.to_string().contains("is a directory, not a request file"), "{err}");
    drop(profiler);
}
