//! The device view and the device-based hypotheses on synthetic
//! Kineto-shaped traces whose answers are computed by hand.
//!
//! Each 10 ms step (host thread 1/1, times in µs from the step's start):
//! - `enumerate(DataLoader)` reads input over 0..3000 (optional);
//! - `Memcpy HtoD` of the 65,536-byte batch over 3005..3015;
//! - `gemm` over 3020..7020 (grid 64,1,1; block 256,1,1), launched at 3000;
//! - a planted 4,000-byte `Memcpy HtoD` over 7100..7110 (optional);
//! - three 5 µs `elementwise` kernels at 7200, 7300, 7400, each launched
//!   10 µs before;
//! - `cudaStreamSynchronize` over 8000..9800 on the host, while `reduce`
//!   runs over 8000..8500 (launched at 7990 for 10 µs).

use serde_json::{json, Value};
use steptrace::analysis::{Report, ReportOptions};
use steptrace::reader::parse_trace;

const STEP_US: f64 = 10_000.0;

struct Plant {
    slow_input: bool,
    upload: bool,
}

fn kineto(plant: &Plant, steps: u64) -> Vec<Value> {
    let mut ev = Vec::new();
    let mut corr = 0u64;
    let host = |name: &str, cat: &str, ts: f64, dur: f64, args: Value| json!({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args});
    let dev = |name: &str, cat: &str, ts: f64, dur: f64, args: Value| json!({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args});
    for n in 0..steps {
        let t = n as f64 * STEP_US;
        ev.push(host(&format!("ProfilerStep#{n}"), "user_annotation", t, STEP_US, json!({})));
        if plant.slow_input {
            ev.push(host(
                "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                "user_annotation",
                t,
                3000.0,
                json!({}),
            ));
        }
        let mut kernel = |ev: &mut Vec<Value>, name: &str, launch: f64, start: f64, dur: f64, grid: [u64; 3]| {
            corr += 1;
            ev.push(host("cudaLaunchKernel", "cuda_runtime", t + launch, 10.0, json!({"correlation": corr})));
            ev.push(dev(
                name,
                "kernel",
                t + start,
                dur,
                json!({"device": 0, "stream": 7, "correlation": corr, "grid": grid, "block": [256, 1, 1]}),
            ));
        };
        kernel(&mut ev, "void gemm<float, 4>(float const*, float*)", 3000.0, 3020.0, 4000.0, [64, 1, 1]);
        for k in 0..3 {
            let at = 7200.0 + 100.0 * f64::from(k);
            kernel(&mut ev, "void elementwise<float>(float*)", at - 10.0, at, 5.0, [1, 1, 1]);
        }
        kernel(&mut ev, "reduce", 7990.0, 8000.0, 500.0, [8, 1, 1]);
        let copy = |ts: f64, bytes: u64| {
            dev(
                "Memcpy HtoD (Pageable -> Device)",
                "gpu_memcpy",
                ts,
                10.0,
                json!({"device": 0, "stream": 7, "bytes": bytes}),
            )
        };
        ev.push(copy(t + 3005.0, 65_536));
        if plant.upload {
            ev.push(copy(t + 7100.0, 4000));
        }
        ev.push(host("cudaStreamSynchronize", "cuda_runtime", t + 8000.0, 1800.0, json!({})));
    }
    ev
}

fn report_of(events: Vec<Value>) -> Report {
    let doc = json!({"schemaVersion": 1, "traceEvents": events});
    let trace = parse_trace(&serde_json::to_vec(&doc).unwrap()).unwrap();
    let options = ReportOptions { batch_size: Some(256), ..ReportOptions::default() };
    Report::build(&[("kineto.json".into(), trace)], &options).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn busy_and_idle_by_cause_to_the_microsecond() {
    let r = report_of(kineto(&Plant { slow_input: true, upload: true }, 5));
    let d = &r.device;
    // Everything is observed but attribution, which a Kineto trace does not carry.
    assert!(d.observed && d.not_observed.iter().all(|(part, _)| *part == "attribution"), "{:?}", d.not_observed);
    assert_eq!(d.devices.len(), 1);
    let dev = &d.devices[0];
    assert_eq!(dev.device, "GPU 0");
    // Busy: 10 + 4000 + 10 + 3 × 5 + 500 µs.
    assert!(close(dev.busy_ms.median, 4.535), "{}", dev.busy_ms.median);
    assert!(close(dev.busy_share.median, 0.4535));
    assert!(close(dev.idle_input_ms.as_ref().unwrap().median, 3.0));
    // The sync covers 8000..9800; reduce keeps the device busy until 8500.
    assert!(close(dev.idle_sync_ms.as_ref().unwrap().median, 1.3));
    assert!(close(dev.busy_while_host_waits_ms.median, 0.5));
    assert!(close(dev.idle_other_ms.median, 10.0 - 4.535 - 3.0 - 1.3));
    for s in &dev.steps {
        assert_eq!((s.kernels, s.copies), (5, 2));
        assert!(close(s.busy_ms + s.idle_input_ms + s.idle_sync_ms + s.idle_other_ms, s.step_ms));
    }
    assert!(close(d.device_busy_ms_per_step.as_ref().unwrap().median, 4.535));
}

#[test]
fn launches_copies_and_kernels() {
    let r = report_of(kineto(&Plant { slow_input: false, upload: true }, 5));
    let l = r.device.launch.as_ref().unwrap();
    assert_eq!(l.launches_per_step.median, 5.0);
    assert_eq!(l.unmatched_kernels, 0);
    // Launch to start: 20 µs for gemm, 10 µs for the four others.
    let latency = l.launch_to_start_us.as_ref().unwrap();
    assert!(close(latency.median, 10.0) && close(latency.max, 20.0));
    assert_eq!(l.before_launch, 0);
    // The last launch ends at 8000, the last kernel at 8500.
    assert!(close(l.host_ahead_ms.median, 0.5));

    let c = r.device.copies.as_ref().unwrap();
    assert_eq!((c.per_step.median, c.bytes_per_step.median), (2.0, 69_536.0));
    assert_eq!(c.directions.len(), 1);
    assert_eq!(c.directions[0].direction, "HtoD");
    let size = |b: u64| c.sizes.iter().find(|s| s.bytes == Some(b)).unwrap();
    assert!(size(65_536).batch && size(65_536).every_step);
    assert!(!size(4000).batch && size(4000).every_step && size(4000).per_step == 1.0);
    assert_eq!(c.batch.from, "a multiple of the batch size (heuristic)");
    assert!(c.small_uploads_every_step.is_none());

    let k = r.device.kernels.as_ref().unwrap();
    assert_eq!((k.kernels_per_step.median, k.short_per_step.median), (5.0, 3.0));
    let top = &k.rows[0];
    assert_eq!(top.label, "gemm<float, 4>");
    assert_eq!((top.calls_per_step, top.grid, top.block), (1.0, Some([64, 1, 1]), Some([256, 1, 1])));
    assert!(close(top.per_step_ms, 4.0) && close(top.mean_us, 4000.0));
    assert!(close(top.share_of_busy, 4.0 / 4.535));
    assert_eq!(k.rows.iter().find(|r| r.label == "elementwise<float>").unwrap().short_calls, 3 * k.steps);
}

fn fired(r: &Report) -> Vec<&'static str> {
    let mut ids: Vec<&'static str> = r.hypotheses.iter().map(|h| h.id).collect();
    ids.sort_unstable();
    ids
}

#[test]
fn hypotheses_fire_on_the_plants_only() {
    let both = report_of(kineto(&Plant { slow_input: true, upload: true }, 5));
    assert_eq!(fired(&both), ["dominant-kernel", "input-pipeline", "repeated-upload"]);
    let input = both.hypotheses.iter().find(|h| h.id == "input-pipeline").unwrap();
    assert!(input.evidence.contains("idle for 3.00 ms") && input.evidence.contains("30%"), "{}", input.evidence);
    let upload = both.hypotheses.iter().find(|h| h.id == "repeated-upload").unwrap();
    assert!(upload.evidence.contains("4000 B ×1") && upload.evidence.contains("65536 B"), "{}", upload.evidence);
    let dominant = both.hypotheses.iter().find(|h| h.id == "dominant-kernel").unwrap();
    assert!(
        dominant.evidence.contains("grid [64, 1, 1]") && dominant.evidence.contains("89%"),
        "{}",
        dominant.evidence
    );

    let clean = report_of(kineto(&Plant { slow_input: false, upload: false }, 5));
    assert_eq!(fired(&clean), ["dominant-kernel"]);
    let only_upload = report_of(kineto(&Plant { slow_input: false, upload: true }, 5));
    assert_eq!(fired(&only_upload), ["dominant-kernel", "repeated-upload"]);
}

#[test]
fn many_short_kernels_on_an_idle_device_read_as_launch_bound() {
    // 40 kernels of 2 µs per 10 ms step, 100 µs apart.
    let mut ev = Vec::new();
    for n in 0..4u64 {
        let t = n as f64 * STEP_US;
        ev.push(json!({"ph":"X","cat":"user_annotation","name":format!("ProfilerStep#{n}"),"pid":1,"tid":1,"ts":t,"dur":STEP_US}));
        for k in 0..40u64 {
            let c = n * 100 + k;
            let at = t + 100.0 + 100.0 * k as f64;
            ev.push(json!({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":at - 8.0,"dur":6.0,"args":{"correlation":c}}));
            ev.push(json!({"ph":"X","cat":"kernel","name":format!("k{}", k % 4),"pid":0,"tid":7,"ts":at,"dur":2.0,"args":{"device":0,"stream":7,"correlation":c}}));
        }
    }
    let r = report_of(ev);
    assert_eq!(fired(&r), ["many-launches"]);
    let h = &r.hypotheses[0];
    assert!(h.evidence.starts_with("40 of 40 kernels per step run under 10 µs"), "{}", h.evidence);
    assert!(close(r.device.device_busy_share.as_ref().unwrap().median, 0.008));
    assert!(close(r.device.launch.as_ref().unwrap().launch_to_start_us.as_ref().unwrap().median, 8.0));
}

#[test]
fn without_device_events_every_part_is_not_observed() {
    let ev: Vec<Value> = kineto(&Plant { slow_input: true, upload: true }, 4)
        .into_iter()
        .filter(|e| !matches!(e["cat"].as_str(), Some("kernel" | "gpu_memcpy")))
        .collect();
    let r = report_of(ev);
    let d = &r.device;
    assert!(!d.observed && d.devices.is_empty());
    assert!(d.launch.is_none() && d.copies.is_none() && d.kernels.is_none());
    assert!(d.not_observed_reason.as_deref().unwrap().contains("no kernel or memcpy events"));
    let parts: Vec<&str> = d.not_observed.iter().map(|(p, _)| *p).collect();
    assert_eq!(parts, ["device busy and idle", "launch", "copies", "kernels"]);
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["device"]["kernels"], Value::Null);
    assert_eq!(json["device"]["device_busy_ms_per_step"], Value::Null);
}

/// The committed H200 trace of the default MLP (batch 64, CUPTI device
/// activity): a launch-bound step with small scalars uploaded every step.
#[test]
fn the_h200_mlp_trace_reads_as_launch_bound_with_scalar_uploads() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/h200-cuda");
    let files: Vec<(String, steptrace::reader::Trace)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".trace.json"))
        .map(|p| (p.display().to_string(), steptrace::reader::read_trace_file(&p).unwrap()))
        .collect();
    let r = Report::build(&files, &ReportOptions::default()).unwrap();
    let d = &r.device;
    let dev = &d.devices[0];
    assert_eq!(dev.device, "GPU 0: NVIDIA H200");
    assert!(dev.busy_share.median < 0.1, "{}", dev.busy_share.median);
    let k = d.kernels.as_ref().unwrap();
    assert_eq!((k.kernels_per_step.median, k.short_per_step.median), (33.0, 33.0));
    let c = d.copies.as_ref().unwrap();
    let batch: Vec<u64> = c.sizes.iter().filter(|s| s.batch).filter_map(|s| s.bytes).collect();
    assert_eq!(batch, [16_384, 256]);
    let small = c.small_uploads_every_step.as_ref().unwrap();
    assert_eq!((small.per_step, small.min_bytes, small.max_bytes), (24.0, 8, 112));
    assert_eq!(fired(&r), ["many-launches"]);
}

#[test]
fn idle_while_reading_input_is_not_observed_without_input_spans() {
    let r = report_of(kineto(&Plant { slow_input: false, upload: false }, 4));
    let dev = &r.device.devices[0];
    assert!(!dev.input_seen && dev.wait_seen);
    assert!(dev.idle_input_ms.is_none() && dev.idle_input_share.is_none());
    // Without input spans, that idle time counts as idle otherwise.
    assert!(close(dev.idle_other_ms.median, 10.0 - 4.525 - 1.3), "{}", dev.idle_other_ms.median);
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["device"]["devices"][0]["idle_input_ms"], Value::Null);
}
