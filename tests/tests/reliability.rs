//! The collect side under hostile conditions, without burn: names taken by
//! someone else, long and absurd windows, failed writes, and every outcome
//! reported once, in order.

use std::fs;
use std::path::Path;
use std::time::Duration;

use steptrace::reader::read_trace_file;
use steptrace::{Profiler, Schedule};
use steptrace_tests::{one_step, with_layer};

/// Runs `steps` fake steps under a profiler writing `{worker}.{cycle}.trace.json`
/// into `dir`, and returns every cycle's outcome.
fn run(dir: &Path, schedule: &str, steps: u64, limit: Option<u64>) -> Vec<steptrace::Result<steptrace::SavedTrace>> {
    let schedule: Schedule = schedule.parse().unwrap();
    let mut builder = Profiler::builder(schedule).out_dir(dir).worker("w").file_name("{worker}.{cycle}.trace.json");
    if let Some(limit) = limit {
        builder = builder.max_file_bytes(limit);
    }
    let (layer, mut profiler) = builder.build().unwrap();
    with_layer(layer, || {
        profiler.start();
        for _ in 0..steps {
            one_step(Duration::from_micros(5));
            profiler.step();
        }
        profiler.finish_all()
    })
}

#[test]
fn temporary_names_held_by_someone_else_are_skipped_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    // Names the sink would use first, pre-created by "someone else".
    let finishing = dir.path().join(".w.0.trace.json.finishing");
    let probe = dir.path().join(format!(".steptrace-probe-{}-0", std::process::id()));
    for path in [&finishing, &probe] {
        fs::write(path, b"not yours").unwrap();
    }
    let outcomes = run(dir.path(), "wait=0,warmup=1,active=2,repeat=1", 4, None);
    assert_eq!(outcomes.len(), 1);
    let saved = outcomes.into_iter().next().unwrap().expect("the cycle is saved under another temporary name");
    assert_eq!(saved.path, dir.path().join("w.0.trace.json"));
    assert!(read_trace_file(&saved.path).unwrap().events.len() > 4);
    for path in [&finishing, &probe] {
        assert_eq!(fs::read(path).unwrap(), b"not yours", "{}", path.display());
    }
    // Nothing of ours is left behind.
    let left: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".finishing") || n.ends_with(".partial") || n.starts_with(".steptrace-probe"))
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
}

#[test]
fn every_saved_file_and_every_error_is_reported_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("w.1.trace.json"), b"precious").unwrap();
    fs::write(dir.path().join("w.3.trace.json.partial"), b"also precious").unwrap();
    let outcomes = run(dir.path(), "wait=0,warmup=0,active=1,repeat=5", 5, None);
    let summary: Vec<String> = outcomes
        .iter()
        .map(|o| match o {
            Ok(saved) => format!("ok {}", saved.path.file_name().unwrap().to_string_lossy()),
            Err(err) => format!("err {err}"),
        })
        .collect();
    assert_eq!(summary.len(), 5, "{summary:#?}");
    assert_eq!(summary[0], "ok w.0.trace.json");
    assert!(
        summary[1].starts_with("err ")
            && summary[1].contains("w.1.trace.json")
            && summary[1].contains("already exists")
    );
    assert_eq!(summary[2], "ok w.2.trace.json");
    assert!(summary[3].starts_with("err ") && summary[3].contains("w.3.trace.json.partial"), "{}", summary[3]);
    assert_eq!(summary[4], "ok w.4.trace.json");
    assert_eq!(fs::read(dir.path().join("w.1.trace.json")).unwrap(), b"precious");
    assert_eq!(fs::read(dir.path().join("w.3.trace.json.partial")).unwrap(), b"also precious");
}

#[test]
fn a_huge_active_costs_what_is_recorded_not_what_is_announced() {
    let dir = tempfile::tempdir().unwrap();
    let active = u64::MAX - 1;
    let outcomes = run(dir.path(), &format!("wait=0,warmup=1,active={active}"), 6, None);
    let saved = outcomes.into_iter().next().unwrap().unwrap();
    assert!(saved.partial);
    assert_eq!(saved.steps, [1, 2, 3, 4, 5]);
    // Five steps of a few spans each: kilobytes, however large `active`.
    assert!(saved.bytes < 64 * 1024, "{} bytes", saved.bytes);
    let trace = read_trace_file(&saved.path).unwrap();
    let meta = &trace.metadata["metadata"];
    assert_eq!(meta["expected_steps"], serde_json::json!({"first": 1, "count": active}));
    assert!(meta["partial_reason"].as_str().unwrap().contains(&format!("5 of {active} active steps")));
}

#[test]
fn a_long_window_is_saved_whole() {
    let dir = tempfile::tempdir().unwrap();
    let steps = 20_000;
    let outcomes = run(dir.path(), &format!("wait=0,warmup=1,active={steps},repeat=1"), steps + 1, None);
    let saved = outcomes.into_iter().next().unwrap().unwrap();
    assert!(!saved.partial);
    assert_eq!(saved.steps.len() as u64, steps);
    assert_eq!(saved.steps.first(), Some(&1));
    assert_eq!(saved.steps.last(), Some(&steps));
    let trace = read_trace_file(&saved.path).unwrap();
    let recorded = trace.events.iter().filter(|e| e.name.starts_with("ProfilerStep#")).count();
    assert_eq!(recorded as u64, steps);
}

#[test]
fn a_failed_write_says_what_was_kept_or_that_nothing_was() {
    // A limit below the first write: nothing of the cycle is on disk.
    let dir = tempfile::tempdir().unwrap();
    let outcomes = run(dir.path(), "wait=0,warmup=1,active=3,repeat=1", 5, Some(1));
    let err = outcomes.into_iter().next().unwrap().unwrap_err().to_string();
    assert!(err.contains("nothing of this cycle was kept"), "{err}");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0, "an empty partial file is removed");

    // A limit mid-cycle: the partial file is kept, with its size.
    let dir = tempfile::tempdir().unwrap();
    let outcomes = run(dir.path(), "wait=0,warmup=1,active=3,repeat=1", 5, Some(2_000));
    let err = outcomes.into_iter().next().unwrap().unwrap_err().to_string();
    let partial = dir.path().join("w.0.trace.json.partial");
    let bytes = fs::metadata(&partial).unwrap().len();
    assert!(
        err.contains(&format!("{bytes} bytes written so far are kept in")) && err.contains("w.0.trace.json.partial"),
        "{err}"
    );
}

#[test]
fn concurrent_runs_of_one_worker_lose_and_clobber_nothing() {
    // Four processes named alike, each saving a file per millisecond or so:
    // names may collide, and a collision must cost nothing.
    let dir = tempfile::tempdir().unwrap();
    let (runs, cycles) = (4, 30);
    let children: Vec<_> = (0..runs)
        .map(|_| {
            std::process::Command::new(env!("CARGO_BIN_EXE_fake_workload"))
                .args([dir.path().to_str().unwrap(), "wait=0,warmup=0,active=1", &cycles.to_string()])
                .output_spawn()
        })
        .collect();
    let mut listed = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        listed.extend(String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned));
    }
    assert_eq!(listed.len(), runs * cycles);
    let mut unique = listed.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), listed.len(), "two runs reported the same file");
    for path in &listed {
        assert!(read_trace_file(Path::new(path)).is_ok(), "{path}");
    }
}

trait SpawnPiped {
    fn output_spawn(&mut self) -> std::process::Child;
}

impl SpawnPiped for std::process::Command {
    fn output_spawn(&mut self) -> std::process::Child {
        self.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap()
    }
}
