//! burn-train's `SupervisedTraining`, profiled through
//! `steptrace_burn::learner`: the `learner` example's own program, run end
//! to end on the CPU, then its traces read back.
//!
//! One test installs the global subscriber, so this binary holds one run.

use std::collections::BTreeMap;

use steptrace::analysis::{Report, ReportOptions, Span, Spans};
use steptrace::format::names::{step_number, DATA_LOAD, OPTIMIZER};
use steptrace::reader::{read_trace_file, Trace};
use steptrace_burn::learner::{LearnerError, LearnerProfiler, EPOCH_BOUNDARY};

#[path = "../../crates/steptrace-burn/examples/learner.rs"]
#[allow(dead_code)]
mod example;

/// The `ProfilerStep#N` span that holds `span`, following its parents.
fn step_of(spans: &Spans, mut at: usize) -> Option<u64> {
    loop {
        if let Some(n) = step_number(&spans.spans[at].name) {
            return Some(n);
        }
        at = spans.spans[at].parent?;
    }
}

fn arg<'a>(trace: &'a Trace, span: &Span, key: &str) -> Option<&'a str> {
    trace
        .events
        .iter()
        .find(|e| e.name == span.name && e.ts == Some(span.start) && e.tid == span.thread.1)
        .and_then(|e| e.arg(key)?.as_str())
}

#[test]
fn a_supervised_training_run_is_profiled_one_step_per_update() {
    let dirs = tempfile::tempdir().expect("tempdir");
    let settings = example::Settings::new(dirs.path().join("traces"), dirs.path().join("artifacts"));
    let outcome = example::run(&settings).expect("the example's program runs");
    let run = &outcome.run;

    // One step per optimizer update: every batch of every epoch.
    let per_epoch = outcome.train_items.div_ceil(settings.batch_size) as u64;
    assert_eq!(run.updates, per_epoch * settings.epochs as u64);
    assert_eq!(run.missed_updates, 0);
    // The step after each epoch's last update also ran its validation.
    assert_eq!(run.epoch_boundary_steps, vec![per_epoch, 2 * per_epoch]);
    // The schedule applies unchanged (torch.profiler's semantics, modelled independently).
    let expected = steptrace_tests::expected_files(5, 5, 2, 4, 2, false, run.updates);
    let saved: Vec<Vec<u64>> = run.saved.iter().map(|s| s.steps.clone()).collect();
    assert_eq!(saved, expected);
    assert!(expected[1].contains(&per_epoch), "the example's second cycle holds the epoch boundary: {expected:?}");
    assert!(run.saved.iter().all(|s| !s.partial && s.label_warnings.is_empty()), "{:?}", run.saved);

    let mut files = Vec::new();
    let mut boundary_instants = Vec::new();
    let mut worker_loads = BTreeMap::<(String, String), usize>::new();
    for trace_file in &run.saved {
        let trace = read_trace_file(&trace_file.path).expect("the trace reads back");
        let spans = Spans::from_trace(&trace);
        let steps: Vec<&Span> = spans.spans.iter().filter(|s| step_number(&s.name).is_some()).collect();
        let numbers: Vec<u64> = steps.iter().filter_map(|s| step_number(&s.name)).collect();
        assert_eq!(numbers, trace_file.steps, "{}", trace_file.path.display());

        // Each recorded step holds exactly one optimizer update, on the training thread.
        let mut updates = BTreeMap::<u64, usize>::new();
        for (i, span) in spans.spans.iter().enumerate().filter(|(_, s)| s.name == OPTIMIZER) {
            *updates.entry(step_of(&spans, i).expect("an update inside a step")).or_default() += 1;
            assert_eq!(span.thread, steps[0].thread);
        }
        assert_eq!(updates.keys().copied().collect::<Vec<_>>(), numbers);
        assert!(updates.values().all(|&n| n == 1), "{updates:?}");

        // Batches are built on the data loader's threads, not the training thread.
        let training = &spans.thread_names[&steps[0].thread];
        for span in spans.spans.iter().filter(|s| s.name == DATA_LOAD) {
            let thread = spans.thread_names.get(&span.thread).cloned().unwrap_or_default();
            assert_ne!(&thread, training);
            assert!(thread.starts_with("dataloader-"), "{thread}");
            let split = arg(&trace, span, "split").unwrap_or_default().to_owned();
            *worker_loads.entry((thread, split)).or_default() += 1;
        }

        // The epoch boundary is an instant inside the step it flags.
        for (name, ts, _) in spans.instants.iter().filter(|(name, _, _)| name == EPOCH_BOUNDARY) {
            let step = steps.iter().find(|s| s.start <= *ts && *ts <= s.end).and_then(|s| step_number(&s.name));
            boundary_instants.push((name.clone(), step));
        }
        files.push((trace_file.path.display().to_string(), trace));
    }
    assert_eq!(boundary_instants, vec![(EPOCH_BOUNDARY.to_owned(), Some(per_epoch))]);
    for split in ["train", "valid"] {
        let loads: usize = worker_loads.iter().filter(|((_, s), _)| s == split).map(|(_, n)| n).sum();
        assert!(loads > 0, "no {split} data.load in the recorded steps: {worker_loads:?}");
    }

    // The manifest: what the program gave, what the integration knows, and nothing guessed.
    let st = files[0].1.steptrace().expect("metadata").expect("a steptrace trace");
    let manifest = st.manifest().expect("a manifest");
    assert_eq!(manifest.model.as_deref(), Some("mlp"));
    assert_eq!(manifest.dataset.as_deref(), Some("digits"));
    assert_eq!(manifest.batch_size, Some(settings.batch_size as u64));
    assert_eq!(manifest.backend_kind.as_deref(), Some("cpu"));
    assert!(manifest.backend.as_deref().is_some_and(|b| b.starts_with("cpu")), "{:?}", manifest.backend);
    assert_eq!(manifest.sync_policy.as_deref(), Some("none"));
    assert_eq!(manifest.mode.as_deref(), Some("train"));
    assert!(manifest.parameters.is_some_and(|p| p > 0));
    assert!(manifest.extra["data_load"].as_str().is_some_and(|s| s.contains("no transfer.h2d span")));
    assert_eq!((manifest.steps, manifest.startup_steps, manifest.input_shape.as_ref()), (None, None, None));
    // Device activity as `steptrace train` sets it up: on the CPU, not
    // observed, with the reason, in every file.
    assert_eq!(manifest.device_activity.as_deref(), Some("auto"));
    for (path, trace) in &files {
        let meta = &trace.metadata["metadata"]["device_activity"];
        assert_eq!(meta["status"], "not_observed", "{path}");
        assert!(meta["reason"].as_str().is_some_and(|r| r.contains("CPU backend")), "{path}: {meta}");
    }

    // The report reads the run: eight steps, the loader's threads, the backend.
    let report = Report::build(&files, &ReportOptions::default()).expect("a report");
    let reported: Vec<u64> = report.timing.steps.iter().map(|s| s.step).collect();
    assert_eq!(reported, expected.concat());
    let row = |name: &str| report.spans.rows.iter().find(|r| r.name == name).map(|r| (r.calls, r.threads));
    assert_eq!(row(OPTIMIZER), Some((reported.len(), 1)));
    assert!(row(DATA_LOAD).is_some_and(|(calls, threads)| calls > 0 && threads >= 1));
    assert_eq!(report.run.batch_size, Some(settings.batch_size as u64));
    // The boundary step is named as such, and not read as a compile path.
    assert_eq!(report.epoch_boundary_steps, vec![per_epoch]);
    assert!(report.notes.iter().any(|n| n.contains("epoch boundary")), "{:?}", report.notes);
    for h in report.hypotheses.iter().filter(|h| h.id == "not-steady") {
        assert!(!h.evidence.contains(&format!("step {per_epoch} took")), "{}", h.evidence);
    }

    // A second global subscriber is an error, never a panic: steptrace's ...
    let again = steptrace::Profiler::builder("active=1".parse().expect("schedule")).out_dir(dirs.path().join("again"));
    let err = LearnerProfiler::install(again).expect_err("a second global subscriber");
    assert!(matches!(err, LearnerError::SubscriberExists { .. }), "{err}");
    assert!(err.to_string().contains("with_application_logger"), "{err}");
    // ... and burn-train's own application logger, had it been left on.
    let burn_logger = burn::train::FileApplicationLoggerInstaller::new(dirs.path().join("experiment.log"));
    assert!(burn::train::ApplicationLoggerInstaller::install(&burn_logger).is_err());
}
