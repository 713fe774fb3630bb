//! The device path of the trace writer, without a GPU: CUPTI-shaped
//! records from a fake collector end up as kernels, copies, launches and
//! flows that viewers and HTA read; a missing device says why.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;
use steptrace::analysis::{Report, ReportOptions};
use steptrace::reader::{read_trace_file, validate, Trace, TraceEvent, TrackId};
use steptrace_tests::fake_gpu::FakeGpu;
use steptrace_tests::Workload;

fn run(device: Option<Result<FakeGpu, String>>) -> Trace {
    let dir = tempfile::tempdir().unwrap();
    let mut w = Workload::new("wait=1,warmup=1,active=3,repeat=1", 5, dir.path());
    w.device = device;
    let saved = w.run().unwrap();
    assert_eq!(saved.len(), 1);
    read_trace_file(&saved[0].path).unwrap()
}

fn num(id: &Option<TrackId>) -> Option<u64> {
    match id {
        Some(TrackId::Num(n)) => u64::try_from(*n).ok(),
        _ => None,
    }
}

fn arg_u64(e: &TraceEvent, key: &str) -> Option<u64> {
    e.arg(key).and_then(Value::as_u64)
}

#[test]
fn kernels_copies_and_launches_are_written_on_their_tracks_inside_the_window() {
    let mut gpu = FakeGpu::default();
    gpu.orphan_every = 10;
    let trace = run(Some(Ok(gpu)));
    assert!(validate(&trace).is_empty(), "{:?}", validate(&trace));
    let meta = &trace.metadata["metadata"];
    let window = (meta["window_us"]["start"].as_f64().unwrap(), meta["window_us"]["end"].as_f64().unwrap());
    let kernels: Vec<&TraceEvent> = trace.events.iter().filter(|e| e.cat.as_deref() == Some("kernel")).collect();
    assert!(kernels.len() > 10, "{} kernels", kernels.len());
    let launches: HashMap<u64, &TraceEvent> = trace
        .events
        .iter()
        .filter(|e| e.cat.as_deref() == Some("cuda_driver"))
        .map(|e| (arg_u64(e, "correlation").unwrap(), e))
        .collect();
    let mut orphans = 0;
    for k in &kernels {
        assert_eq!(k.ph, "X");
        let ts = k.ts.unwrap();
        assert!(ts >= window.0 && ts <= window.1, "kernel at {ts} outside {window:?}");
        assert_eq!(num(&k.pid), Some(100), "device 0's process");
        assert_eq!(num(&k.tid), arg_u64(k, "stream"));
        match launches.get(&arg_u64(k, "correlation").unwrap()) {
            Some(l) => assert!(l.ts.unwrap() <= ts, "a launch starts before its kernel"),
            None => orphans += 1,
        }
    }
    assert!(orphans > 0);
    assert_eq!(meta["device_activity"]["orphan_kernels"].as_u64(), Some(orphans));
    assert_eq!(meta["device_activity"]["status"], "observed");
    assert_eq!(meta["device_activity"]["written"]["kernel"].as_u64(), Some(kernels.len() as u64));
    assert!(meta["device_activity"]["outside_window"].as_u64().unwrap() > 0, "warmup kernels are counted, not written");
    // Launches are host events: on the host process, with no stream.
    for l in launches.values() {
        assert_eq!(num(&l.pid), Some(1));
        assert!(l.arg("stream").is_none());
    }
    // Host spans carry no stream either, and are complete events.
    let host: Vec<&TraceEvent> = trace.events.iter().filter(|e| num(&e.pid) == Some(1) && e.ph == "X").collect();
    assert!(host.iter().all(|e| e.arg("stream").is_none()));
    assert!(host.iter().any(|e| e.name == "ProfilerStep#2" && e.dur.is_some()));
    // One flow per launched kernel, from the launch's thread to the stream.
    let starts: HashSet<u64> = trace.events.iter().filter(|e| e.ph == "s").filter_map(|e| num(&e.id)).collect();
    let ends: Vec<&TraceEvent> = trace.events.iter().filter(|e| e.ph == "f").collect();
    assert_eq!(starts.len(), kernels.len() - orphans as usize);
    assert!(ends.iter().all(|f| starts.contains(&num(&f.id).unwrap()) && num(&f.pid) == Some(100)));
    // Kernels on one stream do not overlap.
    let mut by_stream: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
    for k in &kernels {
        by_stream
            .entry(arg_u64(k, "stream").unwrap())
            .or_default()
            .push((k.ts.unwrap(), k.ts.unwrap() + k.dur.unwrap()));
    }
    for list in by_stream.values_mut() {
        list.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert!(list.windows(2).all(|w| w[0].1 <= w[1].0), "{list:?}");
    }
    // The tracks are named, and the device is described at the top level.
    let named =
        |pid: u64, what: &str| trace.events.iter().any(|e| e.ph == "M" && e.name == what && num(&e.pid) == Some(pid));
    assert!(named(100, "process_name") && named(100, "thread_name"));
    let process = trace.events.iter().find(|e| e.name == "process_name" && num(&e.pid) == Some(100)).unwrap();
    assert_eq!(process.arg("name").and_then(Value::as_str), Some("GPU 0: Fake GPU"));
    assert_eq!(trace.metadata["deviceProperties"][0]["name"], "Fake GPU");
    let copies = trace.events.iter().filter(|e| e.cat.as_deref() == Some("gpu_memcpy")).count();
    assert!(copies > 0);

    // The report sees the device.
    let report = Report::build(&[("t.json".into(), trace)], &ReportOptions::default()).unwrap();
    assert!(report.device.observed);
    assert!(report.device.device_busy_ms_per_step.as_ref().is_some_and(|s| s.median > 0.0));
    assert!(report.device.launches_per_step.is_some());
}

#[test]
fn a_missing_device_is_not_observed_with_its_reason_never_zero() {
    let trace = run(Some(Err("libcupti.so not found on the loader path".into())));
    let activity = &trace.metadata["metadata"]["device_activity"];
    assert_eq!(activity["status"], "not_observed");
    assert_eq!(activity["reason"], "libcupti.so not found on the loader path");
    assert!(trace.events.iter().all(|e| e.cat.as_deref() != Some("kernel")));
    let report = Report::build(&[("t.json".into(), trace)], &ReportOptions::default()).unwrap();
    assert!(!report.device.observed);
    assert!(report.device.device_busy_ms_per_step.is_none());
    let reason = report.device.not_observed_reason.unwrap();
    assert!(reason.contains("libcupti.so not found"), "{reason}");
}

/// Steptrace traces recorded on the H200 (CUDA MLP, default job).
fn h200_traces() -> Vec<Trace> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/h200-cuda");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no H200 trace in {}", dir.display());
    files.iter().map(|p| read_trace_file(p).unwrap()).collect()
}

#[test]
fn on_the_h200_every_kernel_runs_inside_the_step_that_launched_it() {
    for trace in h200_traces() {
        assert!(validate(&trace).is_empty(), "{:?}", validate(&trace));
        let activity = &trace.metadata["metadata"]["device_activity"];
        assert_eq!(activity["status"], "observed", "{activity}");
        assert_eq!(activity["dropped_by_collector"], 0);
        assert_eq!(activity["orphan_kernels"], 0);
        let steps: Vec<(f64, f64)> = trace
            .events
            .iter()
            .filter(|e| e.ph == "X" && e.name.starts_with("ProfilerStep#") && num(&e.pid) == Some(1))
            .map(|e| (e.ts.unwrap(), e.ts.unwrap() + e.dur.unwrap()))
            .collect();
        assert!(steps.len() >= 2, "{} steps", steps.len());
        let launches: HashMap<u64, f64> = trace
            .events
            .iter()
            .filter(|e| e.cat.as_deref() == Some("cuda_driver"))
            .map(|e| (arg_u64(e, "correlation").unwrap(), e.ts.unwrap()))
            .collect();
        let mut per_step = vec![0usize; steps.len()];
        let mut by_stream: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
        for k in trace.events.iter().filter(|e| e.cat.as_deref() == Some("kernel")) {
            let (start, end) = (k.ts.unwrap(), k.ts.unwrap() + k.dur.unwrap());
            let launched = launches[&arg_u64(k, "correlation").unwrap()];
            assert!(launched <= start, "kernel {} starts before its launch", k.name);
            let step = steps.iter().position(|(a, b)| *a <= launched && launched <= *b).expect("launch inside a step");
            // Each step ends with a sync: its kernels have finished by then.
            assert!(end <= steps[step].1 + 1.0, "kernel {} ends after its step", k.name);
            per_step[step] += 1;
            by_stream.entry(arg_u64(k, "stream").unwrap()).or_default().push((start, end));
        }
        for list in by_stream.values_mut() {
            list.sort_by(|a, b| a.0.total_cmp(&b.0));
            assert!(list.windows(2).all(|w| w[0].1 <= w[1].0 + 0.001), "overlap on a stream: {list:?}");
        }
        // The same workload launches the same kernels every steady step.
        assert!(per_step.iter().all(|n| *n == per_step[0] && *n > 0), "kernels per step: {per_step:?}");
    }
}
