//! On-demand capture end to end in one process: the profiler's own handle,
//! and `capture::ask` aimed at this process (a real SIGUSR1), with the
//! answers the ready file carries and the traces they name.

use std::path::Path;

use serde_json::Value;
use steptrace::capture::{self, Answer, CaptureError, Paths, Progress, Ready, State, Steps};
use steptrace::{Action, Profiler, Schedule};
use tracing_subscriber::prelude::*;

fn ready(dir: &Path) -> Ready {
    let bytes = std::fs::read(Paths::new(dir, std::process::id()).ready).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn manifest(path: &Path) -> Value {
    let file: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    file["metadata"].clone()
}

#[test]
fn captures_asked_from_code_and_by_signal_record_their_steps_and_say_who_asked() {
    let dir = tempfile::tempdir().unwrap();
    let (layer, mut profiler) =
        Profiler::builder(Schedule::on_demand(1, 3).unwrap()).out_dir(dir.path()).worker("w").build_global().unwrap();
    let handle = profiler.capture_handle().expect("an on-demand profiler has a handle");
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let (saved, by_code, by_signal, refused) = tracing::dispatcher::with_default(&dispatch, || {
        profiler.start();
        let mut actions = Vec::new();
        let (mut by_code, mut by_signal, mut refused) = (String::new(), None, None);
        for step in 0..16u64 {
            drop(tracing::info_span!(target: "steptrace", "work", step).entered());
            match step {
                3 => by_code = handle.request(Some(2), "the test's own code"),
                // Step 5 records: a request now is refused, with what is recording.
                5 => refused = Some(handle.request(None, "too early")),
                9 if cfg!(unix) => {
                    let asked = capture::ask(dir.path(), std::process::id(), None, "the test, by signal").unwrap();
                    by_signal = Some(asked);
                    // The signal may be handled on another thread: a real step is
                    // long enough for it; this one waits.
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                _ => {}
            }
            actions.push(profiler.action());
            profiler.step();
        }
        // Nothing recorded before the request; the warmup follows it at once.
        assert!(actions[..4].iter().all(|a| *a == Action::None), "{actions:?}");
        assert_eq!(&actions[4..8], [Action::Warmup, Action::Record, Action::RecordAndSave, Action::None]);
        (profiler.finish().unwrap(), by_code, by_signal, refused.unwrap())
    });

    let expected: &[&[u64]] = if cfg!(unix) { &[&[5, 6], &[11, 12, 13]] } else { &[&[5, 6]] };
    assert_eq!(saved.iter().map(|s| s.steps.as_slice()).collect::<Vec<_>>(), expected);
    assert!(saved.iter().all(|s| !s.partial));
    let first = manifest(&saved[0].path);
    let capture = &first["manifest"]["capture"];
    assert_eq!(capture["requested_by"], "the test's own code", "{first}");
    assert_eq!((capture["read_at_step"].as_u64(), capture["first_step"].as_u64()), (Some(3), Some(4)));
    assert_eq!(capture["request_id"], by_code.as_str());
    assert_eq!(first["schedule"]["text"], "on-demand,warmup=1,active=3");
    assert_eq!(first["expected_steps"]["count"], 2, "the capture's own count: {first}");
    assert!(first["label_warnings"].as_array().unwrap().is_empty(), "{first}");

    if let Some(asked) = by_signal {
        let file = ready(dir.path());
        assert_eq!(file.state, State::Ended, "kept for the asker after the run");
        assert!(
            matches!(file.answer_to(&refused), Some(Answer::Refused { reason, .. }) if reason.contains("already recording"))
        );
        let Progress::Answered(answer) = asked.poll().unwrap() else { panic!("no answer") };
        let Answer::Saved { path, steps, partial, .. } = asked.outcome(answer).unwrap() else { panic!("not saved") };
        assert_eq!((path, steps, partial), (saved[1].path.clone(), Steps::new(11, 13), false));
        assert_eq!(manifest(&saved[1].path)["manifest"]["capture"]["requested_by"], "the test, by signal");
        assert!(!Paths::new(dir.path(), std::process::id()).ready.exists(), "the asker tidies the ended run's file");
    }
}

#[test]
fn a_run_that_ends_inside_a_capture_saves_it_cut_short() {
    let dir = tempfile::tempdir().unwrap();
    let (layer, mut profiler) =
        Profiler::builder("on-demand,active=5".parse().unwrap()).out_dir(dir.path()).build_global().unwrap();
    let handle = profiler.capture_handle().unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let saved = tracing::dispatcher::with_default(&dispatch, || {
        profiler.start();
        handle.request(None, "test");
        for _ in 0..4 {
            profiler.step();
        }
        profiler.cut_short("the run ended");
        profiler.finish().unwrap()
    });
    assert_eq!(saved.len(), 1);
    assert_eq!((saved[0].steps.clone(), saved[0].partial), (vec![2, 3], true));
    let metadata = manifest(&saved[0].path);
    assert!(metadata["partial_reason"].as_str().unwrap().contains("2 of 5 active steps"), "{metadata}");
}

#[cfg(unix)]
#[test]
fn bad_requests_get_clear_errors_and_signal_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // A process that is not ready (this one, without an on-demand profiler in `dir`).
    let err = capture::ask(dir.path(), std::process::id(), None, "t").unwrap_err();
    assert!(matches!(err, CaptureError::NotReady { .. }), "{err}");
    assert!(err.to_string().contains("--schedule on-demand"), "{err}");
    // A process that has ended.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let gone = child.id();
    child.wait().unwrap();
    assert!(matches!(capture::ask(dir.path(), gone, None, "t"), Err(CaptureError::NoProcess { .. })));
    // Pid 0 would signal a process group: it is no process.
    assert!(matches!(capture::ask(dir.path(), 0, None, "t"), Err(CaptureError::NoProcess { .. })));

    // A ready file whose process has ended is stale, and tidied away.
    let paths = Paths::new(dir.path(), gone);
    std::fs::create_dir_all(paths.ready.parent().unwrap()).unwrap();
    let stale = Ready {
        pid: gone,
        process_start: Some(1),
        worker: "w".into(),
        dir: dir.path().into(),
        warmup: 1,
        active: 3,
        state: State::Idle,
        step: 9,
        answers: Vec::new(),
    };
    std::fs::write(&paths.ready, serde_json::to_vec(&stale).unwrap()).unwrap();
    let err = capture::ask(dir.path(), gone, None, "t").unwrap_err();
    assert!(matches!(err, CaptureError::Stale { reused: false, .. }), "{err}");
    assert!(!paths.ready.exists());

    // This process, ready and busy, or with a request already waiting: refused, nothing
    // written over.
    let (_layer, profiler) = Profiler::builder(Schedule::on_demand(1, 1).unwrap())
        .out_dir(dir.path())
        .build_global::<tracing_subscriber::Registry>()
        .unwrap();
    let own = Paths::new(dir.path(), std::process::id());
    std::fs::write(&own.request, b"{\"earlier\": true}").unwrap();
    let err = capture::ask(dir.path(), std::process::id(), Some(2), "t").unwrap_err();
    assert!(matches!(err, CaptureError::Waiting { .. }), "{err}");
    assert_eq!(std::fs::read(&own.request).unwrap(), b"{\"earlier\": true}");
    std::fs::remove_file(&own.request).unwrap();
    let mut busy = ready(dir.path());
    busy.state = State::Recording;
    busy.answers.push(Answer::Accepted { id: "x".into(), cycle: 0, first_step: 4, steps: Steps::new(5, 5) });
    std::fs::write(&own.ready, serde_json::to_vec(&busy).unwrap()).unwrap();
    let err = capture::ask(dir.path(), std::process::id(), None, "t").unwrap_err();
    assert!(err.to_string().contains("already recording a capture (cycle 0, steps 5)"), "{err}");
    drop(profiler);
}
