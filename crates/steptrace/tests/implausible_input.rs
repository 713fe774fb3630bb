//! Numbers read from a trace or given to the report that no run has (a batch of 2^64 - 1,
//! step numbers at the end of u64, 2^62 prefetch threads) give a warning and bounded
//! figures, never an overflow.

use serde_json::{json, Value};
use steptrace::analysis::{Change, Report, ReportOptions, MAX_PLAUSIBLE_BATCH};
use steptrace::reader::parse_trace;

fn report(events: Vec<Value>, manifest: Option<Value>, batch: Option<u64>) -> Report {
    let mut doc = json!({"traceEvents": events});
    if let Some(m) = manifest {
        doc["metadata"] = json!({"format": "steptrace-chrome-trace/1", "cycle": 0, "manifest": m});
    }
    let trace = parse_trace(&serde_json::to_vec(&doc).unwrap()).unwrap();
    let options = ReportOptions { batch_size: batch, ..ReportOptions::default() };
    Report::build(&[("input.json".into(), trace)], &options).unwrap()
}

/// Steps numbered from `first`, 10 ms each but one of 50 ms, with a data read in each.
fn steps(first: u64, n: u64) -> Vec<Value> {
    let mut ev = Vec::new();
    let mut t = 0.0;
    for i in 0..n {
        let dur = if i == n - 2 { 50_000.0 } else { 10_000.0 };
        let step = first + i;
        ev.push(json!({"ph": "X", "name": format!("ProfilerStep#{step}"), "pid": 1, "tid": 1, "ts": t, "dur": dur}));
        ev.push(json!({"ph": "X", "name": "data.load", "pid": 1, "tid": 1, "ts": t + 1.0, "dur": dur * 0.8}));
        t += dur;
    }
    ev
}

#[test]
fn an_implausible_batch_size_is_left_out_and_said() {
    for batch in [0, 1 << 62, u64::MAX] {
        let r = report(steps(0, 8), None, Some(batch));
        assert_eq!(r.run.batch_size, None, "{batch}");
        assert!(
            r.warnings.iter().any(|w| w.contains(&format!("{batch}, is implausible"))),
            "{batch}: {:?}",
            r.warnings
        );
        assert!(r.timing.steady_samples_per_s.is_none());
        for h in &r.hypotheses {
            for change in h.experiment.iter().flat_map(|e| e.changes.iter()) {
                if let Change::BatchSize(b) = change {
                    assert!(*b <= 4 * MAX_PLAUSIBLE_BATCH, "{h:?}");
                }
            }
        }
    }
    let r = report(steps(0, 8), None, Some(64));
    assert_eq!(r.run.batch_size, Some(64));
    assert!(r.warnings.iter().all(|w| !w.contains("implausible")), "{:?}", r.warnings);
}

#[test]
fn a_manifests_implausible_figures_are_said() {
    let manifest = json!({"batch_size": 1u64 << 62, "prefetch_workers": u64::MAX, "steps": u64::MAX});
    let r = report(steps(0, 8), Some(manifest), None);
    assert_eq!((r.run.batch_size, r.run.prefetch_workers), (None, None));
    assert!(r.warnings.iter().any(|w| w.contains("batch size in the run's manifest")), "{:?}", r.warnings);
    assert!(r.warnings.iter().any(|w| w.contains("prefetch threads, implausibly many")), "{:?}", r.warnings);
}

#[test]
fn step_numbers_at_the_end_of_u64_do_not_overflow() {
    let r = report(steps(u64::MAX - 7, 8), Some(json!({"steps": u64::MAX})), Some(64));
    // The slow step is found; the experiment that would skip past u64::MAX is left out.
    let h = r.hypotheses.iter().find(|h| h.id == "not-steady").expect("the slow step is found");
    assert!(h.experiment.is_none(), "{h:?}");
    // Away from the end, the experiment is there.
    let r = report(steps(0, 8), Some(json!({"steps": 40})), Some(64));
    let h = r.hypotheses.iter().find(|h| h.id == "not-steady").expect("the slow step is found");
    assert!(h.experiment.is_some(), "{h:?}");
}

#[test]
fn copies_of_u64_max_bytes_do_not_overflow() {
    let mut ev = steps(0, 6);
    for i in 0..6u64 {
        let t = i as f64 * 10_000.0 + 100.0;
        for k in 0..3u64 {
            ev.push(json!({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7,
                           "ts": t + k as f64 * 10.0, "dur": 5.0,
                           "args": {"device": 0, "stream": 7, "correlation": i * 10 + k, "bytes": u64::MAX, "kind": "HtoD"}}));
        }
    }
    for batch in [Some(u64::MAX), Some(1 << 62), Some(64), None] {
        let r = report(ev.clone(), None, batch);
        let copies = r.device.copies.as_ref().expect("the copies are read");
        assert!(copies.bytes_per_step.median.is_finite() && copies.bytes_per_step.median > 0.0, "{copies:?}");
    }
}

#[test]
fn a_grid_past_u64_is_no_small_grid() {
    let kernels = |grid: [u64; 3]| {
        let mut ev = steps(0, 6);
        for i in 0..6u64 {
            ev.push(json!({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": i as f64 * 10_000.0 + 100.0,
                           "dur": 8000.0, "args": {"device": 0, "stream": 7, "correlation": i + 1, "grid": grid,
                           "attribution": "called in span", "span": "forward > fc1", "op kind": "matmul", "ops": "matmul"}}));
        }
        let doc = json!({"traceEvents": ev, "deviceProperties": [{"id": 0, "numSms": 132}]});
        let trace = parse_trace(&serde_json::to_vec(&doc).unwrap()).unwrap();
        Report::build(&[("grid.json".into(), trace)], &ReportOptions::default()).unwrap()
    };
    // A small grid is named: the rule runs on these kernels.
    assert!(kernels([4, 1, 1]).hypotheses.iter().any(|h| h.id == "under-filled-grid"));
    let r = kernels([u64::MAX, 4, 1]);
    assert!(r.hypotheses.iter().all(|h| h.id != "under-filled-grid"), "{:?}", r.hypotheses);
}
