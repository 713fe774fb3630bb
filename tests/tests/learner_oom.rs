//! burn-train's `Learner` running out of device memory, on wgpu (lavapipe here and in CI): a
//! hidden layer 65,536 wide at batch 1,024 needs a 268 MB activation, more than lavapipe's
//! largest buffer. `LearnerProfiler::launch` returns the failure as a typed error with the
//! report of a session's, and saves the cycle in progress cut short.
//!
//! One global subscriber per process: this binary holds one run.

use steptrace::reader::read_trace_file;
use steptrace_burn::backend::BackendChoice;
use steptrace_burn::failure::oom::Shortage;
use steptrace_burn::learner::LearnerError;

#[path = "../../crates/steptrace-burn/examples/learner.rs"]
#[allow(dead_code)]
mod example;

const WIDTH: usize = 65_536;
const BATCH: usize = 1_024;

#[test]
fn a_learner_step_out_of_device_memory_is_a_typed_error_with_its_report() {
    if steptrace_tests::select_or_skip(BackendChoice::Wgpu).is_none() {
        return;
    }
    let dirs = tempfile::tempdir().expect("tempdir");
    let mut settings = example::Settings::new(dirs.path().join("traces"), dirs.path().join("artifacts"));
    settings.backend = BackendChoice::Wgpu;
    settings.memory = true;
    settings.epochs = 1;
    settings.batch_size = BATCH;
    settings.hidden = vec![WIDTH];
    // A cycle longer than the epoch (three steps): the failure surfaces inside it.
    settings.schedule = "wait=0,warmup=0,active=4,repeat=1".into();
    let error = example::run(&settings).expect_err("a batch that cannot be allocated fails the run");
    let failure = match error.downcast::<LearnerError>().map(|e| *e) {
        Ok(LearnerError::StepFailed(failure)) => failure,
        other => panic!("expected LearnerError::StepFailed, got {other:?}"),
    };
    let o = failure.out_of_memory.as_ref().unwrap_or_else(|| panic!("an out-of-memory report: {}", failure.cause));
    assert_eq!(o.shortage, Shortage::TooLargeForOneAllocation, "{o:?}");
    // The hidden layer's output: batch x width f32, in one allocation.
    assert_eq!(o.requested_bytes, Some((BATCH * WIDTH * 4) as u64), "{o:?}");
    assert_eq!(o.batch_size, BATCH as u64);
    let parameters = ((64 * WIDTH + WIDTH) + (WIDTH * 10 + 10)) * 4;
    let category = |name: &str| o.categories.iter().find(|c| c.name == name).map(|c| c.bytes);
    if o.at_failure.is_some() {
        assert_eq!(category("parameters"), Some(parameters as i64), "{o:?}");
    }
    assert!(o.phases_observed, "the example's TrainStep marks its phases");
    // One epoch of two batches (1,024 and 414 images): burn-train's loop does not wait for
    // the device, so the failure surfaces at one of its three steps, and the report says so.
    assert!(failure.step <= 2, "{}", failure.step);
    assert!(o.not_observed.iter().any(|n| n.contains("does not wait for the device")), "{:?}", o.not_observed);

    // The cycle in progress is saved, cut short with the failure as its reason.
    assert_eq!(failure.traces.len(), 1, "{:?} {:?}", failure.traces, failure.trace_errors);
    let saved = &failure.traces[0];
    assert!(saved.partial, "{saved:?}");
    let trace = read_trace_file(&saved.path).expect("the partial trace reads back");
    let manifest = &trace.metadata["metadata"]["manifest"];
    assert_eq!(manifest["out_of_memory"]["requested_bytes"], (BATCH * WIDTH * 4) as u64, "{manifest}");
    let notes = manifest["notes"].to_string();
    assert!(notes.contains("out of device memory"), "{notes}");
}
