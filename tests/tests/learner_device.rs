//! The burn-train integration on the device path: the `learner` example's
//! program with a synthetic CUPTI-shaped collector (no GPU needed), so the
//! kernels, copies and launches of each window land in the same files as
//! the learner's steps.
//!
//! One global subscriber per process: this binary holds one run.

use steptrace::reader::read_trace_file;
use steptrace_tests::fake_gpu::FakeGpu;

#[path = "../../crates/steptrace-burn/examples/learner.rs"]
#[allow(dead_code)]
mod example;

#[test]
fn device_activity_lands_in_the_learner_windows() {
    let dirs = tempfile::tempdir().expect("tempdir");
    let mut settings = example::Settings::new(dirs.path().join("traces"), dirs.path().join("artifacts"));
    settings.customise = |builder| builder.device_collector(Box::new(FakeGpu::default()));
    let outcome = example::run(&settings).expect("the example's program runs");
    assert_eq!(outcome.run.saved.len(), 2);
    for saved in &outcome.run.saved {
        let trace = read_trace_file(&saved.path).expect("the trace reads back");
        let meta = &trace.metadata["metadata"]["device_activity"];
        assert_eq!(meta["status"], "observed", "{}: {meta}", saved.path.display());
        let steps: Vec<(f64, f64)> = trace
            .events
            .iter()
            .filter(|e| e.name.starts_with("ProfilerStep#") && e.ph == "X")
            .filter_map(|e| Some((e.ts?, e.ts? + e.dur?)))
            .collect();
        let (first, last) =
            (steps.iter().map(|s| s.0).fold(f64::MAX, f64::min), steps.iter().map(|s| s.1).fold(f64::MIN, f64::max));
        let kernels: Vec<_> = trace.events.iter().filter(|e| e.cat.as_deref() == Some("kernel")).collect();
        assert!(!kernels.is_empty(), "{}", saved.path.display());
        for k in &kernels {
            let ts = k.ts.expect("a kernel has a start");
            assert!(first <= ts && ts <= last, "kernel at {ts} outside the recorded steps {first}..{last}");
        }
        // A launch flow from the host to each kernel whose launch is in the
        // window (a launch just before the window's start is not written).
        let correlation = |e: &steptrace::reader::TraceEvent| e.arg("correlation").and_then(|v| v.as_u64());
        let launched: std::collections::BTreeSet<u64> = trace
            .events
            .iter()
            .filter(|e| e.ph == "X" && e.cat.as_deref() != Some("kernel") && e.arg("stream").is_none())
            .filter_map(correlation)
            .collect();
        let with_launch = kernels.iter().filter_map(|k| correlation(k)).filter(|c| launched.contains(c)).count();
        assert!(with_launch + 1 >= kernels.len(), "{with_launch} of {} kernels have their launch", kernels.len());
        let flows = trace.events.iter().filter(|e| e.ph == "s").count();
        assert_eq!(flows, with_launch);
    }
}
