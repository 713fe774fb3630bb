//! burn-train's `Learner` with device memory by category, on wgpu (lavapipe here and in CI):
//! the `learner` example's program with `--memory`. Every recorded step starts with a sample
//! whose parameters are the model's own bytes and whose optimizer state is Adam's two moments
//! of each parameter, from the step after the first update on.
//!
//! One global subscriber per process: this binary holds one run.

use steptrace::format::names::counters::{DEVICE_MEMORY, MEMORY_CATEGORIES};
use steptrace::reader::read_trace_file;
use steptrace_burn::backend::BackendChoice;

#[path = "../../crates/steptrace-burn/examples/learner.rs"]
#[allow(dead_code)]
mod example;

#[test]
fn a_learner_run_samples_memory_by_category_at_each_recorded_step() {
    if steptrace_tests::select_or_skip(BackendChoice::Wgpu).is_none() {
        return;
    }
    let dirs = tempfile::tempdir().expect("tempdir");
    let mut settings = example::Settings::new(dirs.path().join("traces"), dirs.path().join("artifacts"));
    settings.backend = BackendChoice::Wgpu;
    settings.memory = true;
    settings.epochs = 1;
    settings.hidden = vec![96];
    settings.schedule = "wait=0,warmup=0,active=3,repeat=1".into();
    let outcome = example::run(&settings).expect("the example's program runs");
    assert_eq!(outcome.run.saved.len(), 1, "{:?}", outcome.run.saved);
    let saved = &outcome.run.saved[0];
    assert_eq!(saved.steps, vec![0, 1, 2]);

    // The digits: 64 features, 10 classes; one hidden layer 96 wide; f32.
    let parameters = ((64 * 96 + 96) + (96 * 10 + 10)) * 4;
    let trace = read_trace_file(&saved.path).expect("the trace reads back");
    let manifest = &trace.metadata["metadata"]["manifest"];
    let described = manifest["memory_description"].as_str().unwrap_or_default();
    assert!(described.contains("the first update returned"), "{manifest}");
    let samples: Vec<_> = trace.events.iter().filter(|e| e.ph == "C" && e.name == MEMORY_CATEGORIES).collect();
    let in_use: Vec<_> = trace.events.iter().filter(|e| e.ph == "C" && e.name == DEVICE_MEMORY).collect();
    assert_eq!(samples.len(), 3, "one sample at each recorded step's start");
    assert_eq!(in_use.len(), 3);
    for (i, sample) in samples.iter().enumerate() {
        let value = |key: &str| sample.arg(key).and_then(|v| v.as_f64()).map(|v| v as i64);
        assert_eq!(value("parameters"), Some(parameters), "{:?}", sample.args);
        // Step 0's start comes before any update: the state is not known yet, and not zero.
        let expected_state = if i == 0 { None } else { Some(2 * parameters) };
        assert_eq!(value("optimizer_state"), expected_state, "step {i}: {:?}", sample.args);
        let total: i64 = ["parameters", "optimizer_state", "gradients", "input_batch", "other", "unattributed"]
            .iter()
            .filter_map(|k| value(k))
            .sum();
        let used = in_use[i].arg("in_use").and_then(|v| v.as_f64()).expect("in use") as i64;
        assert_eq!(total, used, "the categories add up to what is in use: {:?}", sample.args);
    }
}
