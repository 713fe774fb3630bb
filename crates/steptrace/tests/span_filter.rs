//! The `STEPTRACE_SPANS=steps` experiment (its own test binary: it sets the environment):
//! only the `ProfilerStep` spans are made while collecting, events and counters stay, and the
//! trace's metadata says that spans were left out.

use serde_json::Value;
use steptrace::{Profiler, Schedule};
use tracing_subscriber::prelude::*;

#[test]
fn only_the_step_spans_are_kept_and_the_trace_says_so() {
    // This binary's only test sets it before the profiler reads it.
    std::env::set_var("STEPTRACE_SPANS", "steps");
    let dir = tempfile::tempdir().unwrap();
    let schedule: Schedule = "wait=1,warmup=1,active=2,repeat=1".parse().unwrap();
    let (layer, mut profiler) = Profiler::builder(schedule).out_dir(dir.path()).build().unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let saved = tracing::dispatcher::with_default(&dispatch, || {
        profiler.start();
        for n in 0..4u64 {
            let _forward = tracing::info_span!(target: "steptrace", "forward", batch = n).entered();
            tracing::info!(target: "steptrace::counter", bytes = 1000 + n, "device memory");
            drop(_forward);
            profiler.step();
        }
        profiler.finish().unwrap()
    });
    assert_eq!(saved.len(), 1, "{saved:?}");
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&saved[0].path).unwrap()).unwrap();
    let events = file["traceEvents"].as_array().unwrap();
    let spans: Vec<&str> = events
        .iter()
        .filter(|e| matches!(e["ph"].as_str(), Some("X" | "B")))
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(spans, ["ProfilerStep#2", "ProfilerStep#3"], "only the recorded steps' own spans");
    let counters = events.iter().filter(|e| e["ph"] == "C").count();
    assert_eq!(counters, 2, "the recorded steps' counters stay: {events:?}");
    let filter = file["metadata"]["span_filter"].as_str();
    assert!(filter.is_some_and(|f| f.contains("STEPTRACE_SPANS=steps")), "the metadata says so: {file}");
}
