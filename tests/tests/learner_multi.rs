//! burn-train's `MultiDevice` strategy on the CPU: the CPU backend has one
//! device, and burn-train accepts it listed twice (one worker thread per
//! entry, each batch split between them, one optimizer on the launching
//! thread). steptrace profiles such a run as one process: one file per
//! cycle, each step one update on the launching thread, and every worker's
//! `forward`/`backward` on a track of its own. Per-rank files need each
//! rank's own loop (DistributedDataParallel, `LearnerProfiler::install_ranks`).
//!
//! One global subscriber per process: this binary holds one run.

use steptrace::analysis::Spans;
use steptrace::format::names::{FORWARD, OPTIMIZER};
use steptrace::reader::read_trace_file;

#[path = "../../crates/steptrace-burn/examples/learner.rs"]
#[allow(dead_code)]
mod example;

#[test]
fn a_multi_device_run_on_the_cpu_is_profiled_as_one_process() {
    let dirs = tempfile::tempdir().expect("tempdir");
    let mut settings = example::Settings::new(dirs.path().join("traces"), dirs.path().join("artifacts"));
    settings.devices = 2;
    settings.epochs = 1;
    settings.schedule = "wait=2,warmup=1,active=3,repeat=1".into();
    let outcome = example::run(&settings).expect("the MultiDevice run trains");
    let run = &outcome.run;
    // Each update takes one batch per device.
    let batches = outcome.train_items.div_ceil(settings.batch_size) as u64;
    assert_eq!(run.updates, batches.div_ceil(2), "{run:?}");
    assert_eq!(run.missed_updates, 0, "the optimizer runs on the launching thread");
    assert_eq!(run.saved.len(), 1);
    assert_eq!(run.saved[0].steps, vec![3, 4, 5]);
    let trace = read_trace_file(&run.saved[0].path).expect("the trace reads back");
    let spans = Spans::from_trace(&trace);
    let threads = |name: &str| {
        let mut t: Vec<_> = spans.spans.iter().filter(|s| s.name == name).map(|s| s.thread.clone()).collect();
        t.sort();
        t.dedup();
        t
    };
    let (forward, optimizer) = (threads(FORWARD), threads(OPTIMIZER));
    assert_eq!(optimizer.len(), 1, "one optimizer, on the launching thread");
    // burn-train starts new workers each epoch: at least two threads run forward passes, none the launching one.
    assert!(forward.len() >= 2, "{forward:?}");
    assert!(!forward.contains(&optimizer[0]));
    let meta = trace.steptrace().unwrap().unwrap().metadata.unwrap();
    assert_eq!(meta.manifest.extra["devices"], 2);
    assert!(meta.distributed.is_none(), "one process, not ranks");
}
