//! End-to-end tests of the core crate without burn: schedule, gate, sink,
//! reader, on a fake multi-threaded workload.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use steptrace::reader::{read_trace_file, validate, Trace};
use steptrace_tests::{expected_files, Workload};

fn step_numbers(trace: &Trace) -> Vec<u64> {
    let mut steps: BTreeSet<u64> = BTreeSet::new();
    for ev in &trace.events {
        if steptrace_tests::opens_span(ev) {
            if let Some(n) = ev.name.strip_prefix("ProfilerStep#") {
                steps.insert(n.parse().expect("step number"));
            }
        }
    }
    steps.into_iter().collect()
}

fn trace_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".trace.json"))
        .collect();
    files.sort_by_key(|p| {
        let t = read_trace_file(p).expect("readable");
        t.metadata["metadata"]["cycle"].as_u64().expect("cycle")
    });
    files
}

fn assert_clean(path: &Path, text: &str) {
    for needle in ["/root/", "/home/", "/Users/", ".cargo/registry", "\".file\"", "/rustc/"] {
        assert!(!text.contains(needle), "{} contains {needle}", path.display());
    }
}

#[test]
fn files_hold_exactly_the_scheduled_steps() {
    // (skip_first, wait, warmup, active, repeat, skip_first_wait, steps)
    let cases: &[(u64, u64, u64, u64, u64, bool, u64)] = &[
        (0, 1, 1, 2, 2, false, 10),
        (0, 1, 1, 3, 2, false, 7), // second cycle cut short: partial file
        (2, 1, 1, 1, 3, false, 14),
        (0, 0, 0, 1, 3, false, 5),
        (1, 2, 1, 2, 0, true, 13),
        (0, 2, 0, 2, 0, false, 9),
        (3, 0, 2, 3, 1, false, 12),
        (0, 1, 2, 1, 0, false, 11),
    ];
    for &(skip_first, wait, warmup, active, repeat, sfw, steps) in cases {
        let dir = tempfile::tempdir().unwrap();
        let schedule = format!(
            "skip_first={skip_first},wait={wait},warmup={warmup},active={active},repeat={repeat},skip_first_wait={}",
            sfw as u8
        );
        let saved = Workload::new(&schedule, steps, dir.path()).run().unwrap();
        let expected = expected_files(skip_first, wait, warmup, active, repeat, sfw, steps);
        let files = trace_files(dir.path());
        let mut loader_seen = false;
        assert_eq!(files.len(), expected.len(), "{schedule}, {steps} steps: {files:?}");
        assert_eq!(saved.len(), expected.len());
        for (path, want) in files.iter().zip(&expected) {
            let text = fs::read_to_string(path).unwrap();
            assert_clean(path, &text);
            let trace = read_trace_file(path).unwrap();
            assert!(!trace.truncated);
            assert_eq!(&step_numbers(&trace), want, "{schedule}: {}", path.display());
            let problems = validate(&trace);
            assert!(problems.is_empty(), "{schedule}: {}: {problems:?}", path.display());
            let meta = &trace.metadata["metadata"];
            assert_eq!(trace.metadata["displayTimeUnit"], "ms");
            assert_eq!(meta["partial"].as_bool(), Some((want.len() as u64) < active), "{schedule}");
            assert_eq!(meta["schedule"]["active"].as_u64(), Some(active));
            assert!(meta["steptrace_version"].is_string() && meta["host_os"].is_string());
            assert_eq!(meta["manifest"]["workload"], "fake");
            // Threads are named; loader threads appear once they have run.
            let names = steptrace_tests::thread_names(&trace);
            loader_seen |= names.iter().any(|n| n.starts_with("loader-"));
            let tids: BTreeSet<_> =
                trace.events.iter().filter(|e| steptrace_tests::opens_span(e)).map(|e| e.tid.clone()).collect();
            assert!(tids.len() <= names.len(), "{schedule}: every thread is named: {tids:?} vs {names:?}");
            assert!(trace.events.iter().any(|e| e.ph == "M" && e.name == "process_name"));
        }
        assert!(loader_seen, "{schedule}: no loader thread in any file");
        // No partial files are left behind.
        assert!(fs::read_dir(dir.path()).unwrap().all(|e| !e.unwrap().path().to_string_lossy().ends_with(".partial")));
    }
}

#[test]
fn spans_nest_under_the_step_span() {
    let dir = tempfile::tempdir().unwrap();
    Workload::new("wait=0,warmup=1,active=2,repeat=1", 3, dir.path()).run().unwrap();
    let files = trace_files(dir.path());
    let trace = read_trace_file(&files[0]).unwrap();
    // On the stepping thread, spans (complete events, or begin/end pairs
    // at the window's edges) nest as
    // ProfilerStep#N > train.step > forward|loss|backward|optimizer.
    let seen = steptrace_tests::nesting_paths(&trace, "ProfilerStep#1");
    for want in ["ProfilerStep#1>train.step>forward", "ProfilerStep#2>train.step>optimizer"] {
        assert!(seen.iter().any(|s| s == want), "missing {want} in {seen:?}");
    }
    assert!(!seen.iter().any(|s| s.starts_with("ProfilerStep#0")), "warmup step leaked: {seen:?}");
}

#[test]
fn dropping_mid_cycle_saves_a_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = Workload::new("wait=1,warmup=1,active=4,repeat=1", 4, dir.path());
    w.explicit_finish = false;
    w.run().unwrap();
    let files = trace_files(dir.path());
    assert_eq!(files.len(), 1);
    let trace = read_trace_file(&files[0]).unwrap();
    assert_eq!(step_numbers(&trace), vec![2, 3]);
    let meta = &trace.metadata["metadata"];
    assert_eq!(meta["partial"], true);
    assert!(meta["partial_reason"].as_str().unwrap().contains("2 of 4"));
    assert!(validate(&trace).is_empty());
}

#[test]
fn an_existing_file_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let existing = dir.path().join("run.trace.json");
    fs::write(&existing, b"precious").unwrap();
    let err = steptrace::Profiler::builder("active=1,repeat=1".parse().unwrap())
        .out_dir(dir.path())
        .file_name("run.trace.json")
        .build::<tracing_subscriber::Registry>()
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("already exists") && msg.contains("run.trace.json") && msg.contains("never overwrites"),
        "{msg}"
    );
    assert_eq!(fs::read(&existing).unwrap(), b"precious");

    // A later cycle's name taken by another file: that cycle fails clearly,
    // the other cycles are saved, and the file is untouched.
    let other = dir.path().join("w.1.trace.json");
    fs::write(&other, b"also precious").unwrap();
    let schedule: steptrace::Schedule = "wait=0,warmup=0,active=1,repeat=3".parse().unwrap();
    let (layer, mut profiler) = steptrace::Profiler::builder(schedule)
        .out_dir(dir.path())
        .worker("w")
        .file_name("{worker}.{cycle}.trace.json")
        .build()
        .unwrap();
    let result = steptrace_tests::with_layer(layer, || {
        profiler.start();
        for _ in 0..3 {
            steptrace_tests::one_step(std::time::Duration::from_micros(50));
            profiler.step();
        }
        profiler.finish_all()
    });
    let errors: Vec<String> = result.iter().filter_map(|r| r.as_ref().err().map(|e| e.to_string())).collect();
    assert_eq!(result.len(), 3, "one outcome per cycle: {errors:?}");
    assert_eq!(errors.len(), 1, "{errors:?}");
    let err = &errors[0];
    assert!(result[1].is_err() && err.contains("w.1.trace.json") && err.contains("already exists"), "{err}");
    assert_eq!(fs::read(&other).unwrap(), b"also precious");
    assert!(dir.path().join("w.0.trace.json").exists());
    assert!(dir.path().join("w.2.trace.json").exists());
}

#[test]
fn a_write_failure_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let schedule: steptrace::Schedule = "wait=0,warmup=1,active=3,repeat=1".parse().unwrap();
    let (layer, mut profiler) =
        steptrace::Profiler::builder(schedule).out_dir(dir.path()).max_file_bytes(2_000).build().unwrap();
    let finished = steptrace_tests::with_layer(layer, || {
        profiler.start();
        for _ in 0..6 {
            steptrace_tests::one_step(std::time::Duration::from_micros(50));
            profiler.step();
        }
        profiler.finish()
    });
    let err = finished.unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("writing trace") && msg.contains("limit"), "{msg}");
    // What was written so far is kept and still readable.
    let kept: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".partial"))
        .collect();
    assert_eq!(kept.len(), 1, "{msg}");
    assert!(msg.contains(".partial"), "{msg}");
    let trace = read_trace_file(&kept[0]).unwrap();
    assert!(trace.truncated && !trace.events.is_empty());
}

#[test]
fn an_unusable_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    fs::write(&file, b"x").unwrap();
    let err = steptrace::Profiler::builder("active=1".parse().unwrap())
        .out_dir(file.join("traces"))
        .build::<tracing_subscriber::Registry>()
        .unwrap_err();
    assert!(err.to_string().contains("not usable"), "{err}");
    assert_eq!(fs::read(&file).unwrap(), b"x");
}

#[test]
fn layer_spans_are_written_under_their_names_inside_forward() {
    let dir = tempfile::tempdir().unwrap();
    let (layer, mut profiler) =
        steptrace::Profiler::builder("wait=1,active=2,repeat=1".parse().unwrap()).out_dir(dir.path()).build().unwrap();
    let long = "x".repeat(200);
    let saved = steptrace_tests::with_layer(layer, || {
        profiler.start();
        for _ in 0..3 {
            let _forward = tracing::info_span!(target: "steptrace", "forward").entered();
            let y = steptrace::layer("conv1", || steptrace::layer("conv1.weight\u{7}", || 1) + 1);
            assert_eq!(y, 2);
            steptrace::layer(&long, || ());
            steptrace::layer("", || ());
            drop(_forward);
            profiler.step();
        }
        profiler.finish().unwrap()
    });
    let trace = read_trace_file(&saved[0].path).unwrap();
    let seen = steptrace_tests::nesting_paths(&trace, "ProfilerStep#1");
    assert!(seen.iter().any(|s| s == "ProfilerStep#1>forward>conv1"), "{seen:?}");
    // Control characters are dropped, long names cut, an empty name is the span's own.
    assert!(seen.iter().any(|s| s == "ProfilerStep#1>forward>conv1>conv1.weight"), "{seen:?}");
    let cut = format!("ProfilerStep#1>forward>{}", "x".repeat(steptrace::format::names::LAYER_NAME_CHARS));
    assert!(seen.contains(&cut), "{seen:?}");
    assert!(seen.iter().any(|s| s == "ProfilerStep#1>forward>layer"), "{seen:?}");
    // The wait step's layers were not written.
    assert!(!seen.iter().any(|s| s.starts_with("ProfilerStep#0")), "{seen:?}");
    // Named by the name alone: no args on the layer events.
    assert!(trace.events.iter().filter(|e| e.name == "conv1").all(|e| e.args.is_none()), "layer events carry no args");
}

#[test]
fn other_crates_spans_are_opt_in() {
    let run = |targets: &[&str]| {
        let dir = tempfile::tempdir().unwrap();
        let (layer, mut profiler) = steptrace::Profiler::builder("active=2,repeat=1".parse().unwrap())
            .out_dir(dir.path())
            .targets(targets.iter().copied())
            .build()
            .unwrap();
        let saved = steptrace_tests::with_layer(layer, || {
            profiler.start();
            for _ in 0..2 {
                let _ours = tracing::info_span!(target: "steptrace_burn::train", "train.step").entered();
                let _theirs = tracing::trace_span!(target: "cubecl_runtime::client", "launch_inner").entered();
                profiler.step();
            }
            profiler.finish().unwrap()
        });
        let trace = read_trace_file(&saved[0].path).unwrap();
        let names: BTreeSet<String> =
            trace.events.iter().filter(|e| steptrace_tests::opens_span(e)).map(|e| e.name.clone()).collect();
        (names, trace.metadata["metadata"]["targets"].as_str().unwrap_or_default().to_owned())
    };
    let (names, _) = run(&[]);
    assert!(names.contains("train.step") && !names.contains("launch_inner"), "{names:?}");
    let (names, targets) = run(&["cubecl_runtime=trace"]);
    assert!(names.contains("launch_inner"), "{names:?}");
    assert!(targets.contains("cubecl_runtime=trace"));
}

#[test]
fn suspicious_labels_are_reported_at_finalisation() {
    let dir = tempfile::tempdir().unwrap();
    let (layer, mut profiler) =
        steptrace::Profiler::builder("active=1,repeat=1".parse().unwrap()).out_dir(dir.path()).build().unwrap();
    let saved = steptrace_tests::with_layer(layer, || {
        profiler.start();
        let _s = tracing::info_span!(target: "steptrace", "data.load", user = "alice@example.org").entered();
        drop(_s);
        profiler.step();
        profiler.finish().unwrap()
    });
    assert!(!saved[0].label_warnings.is_empty());
    let trace = read_trace_file(&saved[0].path).unwrap();
    let warnings = trace.metadata["metadata"]["label_warnings"].as_array().unwrap();
    assert!(!warnings.is_empty());
}

#[test]
fn a_killed_process_leaves_a_readable_partial_file() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_fake_workload"))
        .args([dir.path().to_str().unwrap(), "wait=1,warmup=1,active=20,repeat=1", "30", "6"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "hanging");
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let partial: Vec<PathBuf> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".trace.json.partial"))
        .collect();
    assert_eq!(partial.len(), 1);
    let trace = read_trace_file(&partial[0]).unwrap();
    assert!(trace.truncated, "a killed writer cannot have closed the array");
    // Every step up to the one that was running was flushed.
    let steps = step_numbers(&trace);
    for want in 1..=7 {
        assert!(steps.contains(&want), "step {want} missing from {steps:?}");
    }
    // The header says what the file is.
    let seg = trace.events.iter().find(|e| e.name == "steptrace_segment").unwrap();
    assert_eq!(seg.args.as_ref().unwrap()["worker"], "child");
}

#[test]
fn a_private_path_in_the_manifest_is_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let (layer, mut profiler) = steptrace::Profiler::builder("active=1,repeat=1".parse().unwrap())
        .out_dir(dir.path())
        .manifest("cache", "/home/alice/.cache/cubecl")
        .build()
        .unwrap();
    let saved = steptrace_tests::with_layer(layer, || {
        profiler.start();
        profiler.step();
        profiler.finish().unwrap()
    });
    assert!(saved[0].label_warnings.iter().any(|w| w.contains("manifest.cache")), "{:?}", saved[0].label_warnings);
}
