use super::*;

fn listener(dir: &Path) -> OnDemand {
    OnDemand::start(dir, "w", &Schedule::on_demand(1, 2).unwrap()).unwrap()
}

fn ready_at(path: &Path) -> Ready {
    files::from_bytes(&std::fs::read(path).unwrap()).unwrap()
}

/// A request from another process, carrying the run's token.
fn leave_request(od: &OnDemand, request: &mut Request) {
    request.token = Some(od.token.clone());
    od.folder.write_new(&od.names.request, &files::to_bytes(request).unwrap()).unwrap();
}

fn refusal(od: &OnDemand) -> String {
    match od.ready.answers.last() {
        Some(Answer::Refused { reason, .. }) => reason.clone(),
        other => panic!("not refused: {other:?}"),
    }
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
    let ready = ready_at(&od.paths.ready);
    assert_eq!(ready.state, State::Recording);
    assert!(
        matches!(ready.answer_to(&id), Some(Answer::Accepted { first_step: 6, steps, .. }) if *steps == Steps::new(7, 8))
    );
    let second = handle.request(Some(1), "again");
    od.at_boundary(7);
    assert!(
        matches!(od.ready.answer_to(&second), Some(Answer::Refused { reason, .. }) if reason.contains("already recording"))
    );
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
    let mut request = Request::new(Some(4), "another process");
    leave_request(&od, &mut request);
    od.flag.store(true, Ordering::Release);
    od.at_boundary(1);
    assert!(!od.paths.request.exists());
    assert!(matches!(od.ready.answer_to(&request.id), Some(Answer::Accepted { .. })));
    od.end(&[]);
    let ready = ready_at(&path);
    assert_eq!(ready.state, State::Ended);
    assert!(matches!(ready.answer_to(&request.id), Some(Answer::Refused { reason, .. }) if reason.contains("ended")));
    assert!(!od.paths.token.exists(), "the token goes when the run stops listening");
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
    assert!(
        matches!(&od.ready.answers[..], [Answer::Refused { id: None, reason }] if reason.contains("could not be read"))
    );
}

#[test]
fn a_request_without_the_runs_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut od = listener(dir.path());
    for token in [None, Some("0123456789abcdef0123456789abcdef".to_owned())] {
        let mut request = Request::new(Some(1), "someone");
        request.token = token;
        od.folder.write_new(&od.names.request, &files::to_bytes(&request).unwrap()).unwrap();
        od.flag.store(true, Ordering::Release);
        od.at_boundary(2);
        assert!(refusal(&od).contains("does not carry this run's token"), "{}", refusal(&od));
        assert_eq!(od.action(2), Action::None, "nothing planned");
        assert!(od.ready.answer_to(&request.id).is_none(), "an untrusted id names no answer");
        assert!(!od.paths.request.exists());
    }
}

#[test]
fn the_folder_is_private_and_the_token_file_is_held_open_while_listening() {
    let dir = tempfile::tempdir().unwrap();
    let od = listener(dir.path());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&od.paths.folder), 0o700);
        assert_eq!(mode(&od.paths.token), 0o600);
        assert_eq!(mode(&od.paths.ready), 0o600);
    }
    let token = std::fs::read_to_string(&od.paths.token).unwrap();
    assert_eq!((token.len(), token.chars().all(|c| c.is_ascii_hexdigit())), (32, true));
    #[cfg(target_os = "linux")]
    {
        let meta = od.folder.what_is(&od.names.token).unwrap();
        assert!(super::super::process::holds(std::process::id(), &meta).unwrap());
        // Other tests of this process may hold folders of their own: then it is ambiguous.
        match super::super::process::locate(std::process::id()) {
            Ok(found) => assert_eq!(found.canonicalize().unwrap(), dir.path().canonicalize().unwrap()),
            Err(e) => assert!(e.to_string().contains("several capture folders open"), "{e}"),
        }
    }
    let token_path = od.paths.token.clone();
    drop(od);
    assert!(!token_path.exists(), "a run that stops listening leaves no token");
}

#[cfg(unix)]
mod hostile {
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    fn mkfifo(path: &Path) {
        assert!(std::process::Command::new("mkfifo").arg(path).status().unwrap().success());
    }

    /// `at_boundary` on another thread; `None` if it did not return within 10 s.
    fn boundary_within_10_s(mut od: OnDemand, next: u64) -> Option<OnDemand> {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            od.at_boundary(next);
            let _ = tx.send(od);
        });
        rx.recv_timeout(Duration::from_secs(10)).ok()
    }

    #[test]
    fn a_fifo_request_does_not_block_the_step_boundary() {
        let dir = tempfile::tempdir().unwrap();
        let od = listener(dir.path());
        let request = od.paths.request.clone();
        mkfifo(&request);
        od.flag.store(true, Ordering::Release);
        let Some(od) = boundary_within_10_s(od, 4) else {
            // Blocked in open(2): a writer lets it go, and the test fails.
            let _ = std::fs::OpenOptions::new().write(true).open(&request);
            panic!("the step boundary blocked on a FIFO request");
        };
        assert!(refusal(&od).contains("it is a FIFO, not a regular file"), "{}", refusal(&od));
        assert_eq!(od.action(4), Action::None);
        assert!(std::fs::symlink_metadata(&request).is_err(), "the FIFO is taken away");
    }

    #[test]
    fn a_request_linked_to_dev_zero_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let od = listener(dir.path());
        symlink("/dev/zero", &od.paths.request).unwrap();
        od.flag.store(true, Ordering::Release);
        let od = boundary_within_10_s(od, 2).expect("the step boundary read /dev/zero without end");
        assert!(refusal(&od).contains("symbolic link"), "{}", refusal(&od));
        assert!(std::fs::symlink_metadata(&od.paths.request).is_err(), "the link (not /dev/zero) is removed");
        assert!(Path::new("/dev/zero").exists());
    }

    #[test]
    fn a_linked_folder_is_refused_at_start_and_nothing_is_written_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let traces = dir.path().join("traces");
        std::fs::create_dir(&traces).unwrap();
        symlink(&elsewhere, traces.join(files::FOLDER)).unwrap();
        let stale = elsewhere.join(format!("{}.request.json", std::process::id()));
        std::fs::write(&stale, b"{}").unwrap();
        let err = OnDemand::start(&traces, "w", &Schedule::on_demand(1, 1).unwrap()).err().expect("refused");
        assert!(err.to_string().contains("is refused: it is a symbolic link, not a folder"), "{err}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 1, "nothing written there");
        assert!(stale.exists(), "nothing deleted there");
    }

    #[test]
    fn a_folder_others_can_write_is_refused_unless_sticky() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join(files::FOLDER);
        std::fs::create_dir(&folder).unwrap();
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = OnDemand::start(dir.path(), "w", &Schedule::on_demand(1, 1).unwrap()).err().expect("refused");
        assert!(err.to_string().contains("others can write to it (mode 0777)"), "{err}");
        assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 0);
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(OnDemand::start(dir.path(), "w", &Schedule::on_demand(1, 1).unwrap()).is_ok());
    }

    #[test]
    fn a_request_of_another_kind_is_answered_for_what_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let mut od = listener(dir.path());
        std::fs::create_dir(&od.paths.request).unwrap();
        od.flag.store(true, Ordering::Release);
        od.at_boundary(1);
        assert!(refusal(&od).contains("it is a directory, not a regular file"), "{}", refusal(&od));
    }
}
