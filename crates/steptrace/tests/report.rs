//! The report on synthetic traces whose answers are computed by hand.

use serde_json::{json, Value};
use steptrace::analysis::{Change, Experiment, Report, ReportOptions, Timing};
use steptrace::reader::parse_trace;

/// A steptrace-style object trace from `events`, with a manifest.
fn trace(events: Vec<Value>, manifest: Value) -> steptrace::reader::Trace {
    let doc = json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "metadata": {"format": "steptrace-chrome-trace/1", "cycle": 0, "manifest": manifest},
    });
    parse_trace(&serde_json::to_vec(&doc).unwrap()).unwrap()
}

fn x(name: &str, tid: i64, ts_ms: f64, dur_ms: f64) -> Value {
    json!({"ph": "X", "name": name, "pid": 1, "tid": tid, "ts": ts_ms * 1000.0, "dur": dur_ms * 1000.0})
}

fn manifest(sync: &str) -> Value {
    json!({
        "batch_size": 32, "startup_steps": 2, "sync_policy": sync, "backend_kind": "cuda",
        "backend": "cuda (test)", "fallback_reason": null,
        "command": "steptrace train --model mlp --backend cuda --batch 32 --prefetch 0",
    })
}

/// Steps 0..6 back to back: 100, 50 (startup), then 10, 12, 11, 13 ms.
fn steps() -> (Vec<Value>, Vec<(f64, f64)>) {
    let mut t = 0.0;
    let mut events = Vec::new();
    let mut bounds = Vec::new();
    for (n, ms) in [100.0, 50.0, 10.0, 12.0, 11.0, 13.0].into_iter().enumerate() {
        events.push(x(&format!("ProfilerStep#{n}"), 1, t, ms));
        bounds.push((t, ms));
        t += ms;
    }
    (events, bounds)
}

fn report(events: Vec<Value>, manifest: Value) -> Report {
    Report::build(&[("t.json".into(), trace(events, manifest))], &ReportOptions::default()).unwrap()
}

#[test]
fn step_statistics_keep_startup_apart() {
    let (events, _) = steps();
    let r = report(events, manifest("step"));
    let t = &r.timing;
    assert_eq!(t.unit, "ms/step");
    let startup: Vec<u64> = t.steps.iter().filter(|s| s.startup).map(|s| s.step).collect();
    assert_eq!(startup, [0, 1]);
    let s = t.startup_ms.as_ref().unwrap();
    assert_eq!((s.n, s.min, s.max), (2, 50.0, 100.0));
    let s = t.steady_ms.as_ref().unwrap();
    assert_eq!((s.n, s.min, s.median, s.p90, s.max), (4, 10.0, 11.5, 13.0, 13.0));
    // samples/s per step: 32 / 0.010 s = 3200 at best, 32 / 0.013 s at worst.
    let r2 = t.steady_samples_per_s.as_ref().unwrap();
    assert!((r2.max - 3200.0).abs() < 1e-6 && (r2.min - 32.0 / 0.013).abs() < 1e-6);
    // Wall-clock window: steps 2..=5 run from 150 ms to 196 ms.
    let w = t.window.as_ref().unwrap();
    assert_eq!(w.steps, 4);
    assert!((w.wall_ms - 46.0).abs() < 1e-9 && (w.ms_per_step - 11.5).abs() < 1e-9);
    assert!((w.samples_per_s.unwrap() - 32.0 * 1000.0 / 11.5).abs() < 1e-6);
}

#[test]
fn self_total_and_cross_thread_overlap() {
    let (mut events, b) = steps();
    let (s2, _) = b[2];
    // In step 2 (10 ms): train.step 2..9 ms holding forward 2..4 and
    // backward 4..8; two loader threads read 0..6 and 3..9 ms.
    events.push(x("train.step", 1, s2 + 2.0, 7.0));
    events.push(x("forward", 1, s2 + 2.0, 2.0));
    events.push(x("backward", 1, s2 + 4.0, 4.0));
    events.push(x("data.load", 7, s2, 6.0));
    events.push(x("data.load", 8, s2 + 3.0, 6.0));
    let r = report(events, manifest("none"));
    let row = |n: &str| r.spans.rows.iter().find(|row| row.name == n).unwrap().clone();
    let step = row("train.step");
    assert_eq!((step.calls, step.total_ms, step.self_ms), (1, 7.0, 1.0));
    let load = row("data.load");
    assert_eq!((load.calls, load.threads, load.total_ms, load.busy_ms), (2, 2, 12.0, 9.0));
    assert!((load.mean_ms - 6.0).abs() < 1e-9);
    // The window is the extent of the steps: 196 ms.
    assert!((r.spans.wall_ms - 196.0).abs() < 1e-9);
    assert!((load.share - 9.0 / 196.0).abs() < 1e-9);
    let markers = row("ProfilerStep#*");
    assert_eq!(markers.calls, 6);
    // No sync policy: phases are host launch times, and the table says so.
    assert_eq!(row("forward").timing, Timing::HostLaunch);
    assert!(r.spans.footer.iter().any(|f| f.contains("not elapsed time")));
    assert!(r.spans.footer.iter().any(|f| f.contains("host launch")));
}

#[test]
fn synced_spans_are_marked_and_absent_device_time_is_not_zero() {
    let (mut events, b) = steps();
    for &(start, ms) in &b {
        events.push(x("sync", 1, start + ms - 1.0, 0.9));
    }
    let r = report(events, manifest("step"));
    let marker = r.spans.rows.iter().find(|row| row.name == "ProfilerStep#*").unwrap();
    assert_eq!(marker.timing, Timing::Synced);
    assert!(!r.device.observed);
    assert!(r.device.not_observed_reason.as_deref().unwrap().contains("no device timestamps"));
    assert!(r.device.device_busy_ms_per_step.is_none() && r.device.device_events_per_step.is_none());
    // Waiting is measured: 0.9 ms in each steady step.
    assert_eq!(r.device.waiting_ms_per_step.as_ref().unwrap().median, 0.9);
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["device"]["device_busy_ms_per_step"], Value::Null);
}

#[test]
fn a_slow_input_gives_the_input_pipeline_hypothesis_with_numbers() {
    let (mut events, b) = steps();
    for &(start, ms) in &b[2..] {
        events.push(x("data.load", 1, start, ms * 0.6));
        events.push(x("train.step", 1, start + ms * 0.6, ms * 0.3));
    }
    let r = report(events, manifest("step"));
    let h = r.hypotheses.iter().find(|h| h.id == "input-pipeline").expect("input hypothesis");
    assert!(h.evidence.contains("60%"), "{}", h.evidence);
    assert!(h.evidence.contains("6.90 ms"), "{}", h.evidence); // median of 6, 7.2, 6.6, 7.8
    assert!(h.evidence.contains("nothing queued"), "{}", h.evidence);
    // The next experiment is typed: twice the prefetch threads (from 0, two).
    assert_eq!(h.experiment, Some(Experiment::of([Change::Prefetch(2)])));
    // Rendered by the caller, who knows its flags, into the run's command.
    let mut r = r.clone();
    r.render_commands(|cmd, changes| format!("{cmd} | {changes:?}"));
    let h = r.hypotheses.iter().find(|h| h.id == "input-pipeline").unwrap();
    assert_eq!(
        h.command.as_deref(),
        Some("steptrace train --model mlp --backend cuda --batch 32 --prefetch 0 | [Prefetch(2)]")
    );

    // A fast loader raises nothing.
    let (mut events, b) = steps();
    for &(start, ms) in &b[2..] {
        events.push(x("data.load", 1, start, ms * 0.05));
    }
    let r = report(events, manifest("step"));
    assert!(r.hypotheses.iter().all(|h| h.id != "input-pipeline"));
    assert!(r.not_examined.iter().any(|n| n.enable == Some(Change::RecordInternals)));
}

#[test]
fn device_events_of_torch_traces_are_observed() {
    // Kineto layout: host steps on one thread, kernels on a stream.
    let mut events = Vec::new();
    for n in 0..4u64 {
        let t = n as f64 * 10.0;
        events.push(json!({"ph":"X","cat":"user_annotation","name":format!("ProfilerStep#{n}"),"pid":1,"tid":1,"ts":t*1000.0,"dur":10_000.0}));
        events.push(json!({"ph":"X","cat":"gpu_user_annotation","name":format!("ProfilerStep#{n}"),"pid":0,"tid":7,"ts":t*1000.0,"dur":9_000.0}));
        // Two overlapping kernels: 1..4 and 3..6 ms -> busy 5 ms.
        events.push(json!({"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":(t+1.0)*1000.0,"dur":3000.0}));
        events.push(json!({"ph":"X","cat":"kernel","name":"relu","pid":0,"tid":8,"ts":(t+3.0)*1000.0,"dur":3000.0}));
    }
    let doc = json!({"schemaVersion": 1, "traceEvents": events});
    let t = parse_trace(&serde_json::to_vec(&doc).unwrap()).unwrap();
    let r = Report::build(&[("k.json".into(), t)], &ReportOptions { batch_size: Some(8), ..ReportOptions::default() })
        .unwrap();
    assert_eq!(r.sources[0].producer, steptrace::analysis::Producer::TorchProfiler);
    // Step 0 is startup (no declaration); steps 1..3 are steady, 10 ms each.
    assert_eq!(r.timing.steady_ms.as_ref().unwrap().n, 3);
    assert!(r.device.observed);
    assert_eq!(r.device.device_busy_ms_per_step.as_ref().unwrap().median, 5.0);
    assert_eq!(r.device.device_events_per_step.as_ref().unwrap().median, 2.0);
    assert!((r.device.device_busy_share.as_ref().unwrap().median - 0.5).abs() < 1e-12);
    assert_eq!(r.spans.rows.iter().find(|row| row.name == "gemm").unwrap().timing, Timing::Device);
    assert_eq!(r.run.batch_size_from, "option");
}

#[test]
fn late_anomalies_and_slow_steps_say_the_steady_state_was_not_reached() {
    let (mut events, b) = steps();
    // Step 5 gets a new-shape instant and is made 5x slower.
    let (s5, _) = b[5];
    events.push(json!({"ph":"i","name":"new input shape after startup","pid":1,"tid":1,"ts":(s5+0.5)*1000.0,"s":"t"}));
    events[5] = x("ProfilerStep#5", 1, s5, 60.0);
    let r = report(events, manifest("step"));
    let h = r.hypotheses.iter().find(|h| h.id == "not-steady").expect("not-steady hypothesis");
    assert!(h.evidence.contains("step 5: new input shape"), "{}", h.evidence);
    assert!(h.evidence.contains("step 5 took 60.00 ms"), "{}", h.evidence);
    assert_eq!(r.anomalies, [(Some(5), "new input shape after startup".to_owned())]);
}

#[test]
fn files_of_different_runs_are_refused() {
    let (events, _) = steps();
    let a = trace(events.clone(), manifest("step"));
    let b = trace(events, manifest("none"));
    let err = Report::build(&[("a.json".into(), a), ("b.json".into(), b)], &ReportOptions::default()).unwrap_err();
    assert!(err.to_string().contains("b.json does not come from the same run as a.json"), "{err}");
}

mod properties {
    use proptest::prelude::*;
    use serde_json::json;
    use steptrace::analysis::{Report, ReportOptions};
    use steptrace::reader::parse_trace;

    fn event() -> impl Strategy<Value = serde_json::Value> {
        (
            prop::sample::select(vec!["B", "E", "X", "i", "M", "C"]),
            prop::sample::select(vec!["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#x", "data.load", "sync", "k"]),
            0i64..3,
            -5.0f64..1000.0,
            prop::option::of(-5.0f64..500.0),
            prop::sample::select(vec!["steptrace", "kernel", "cpu_op", "gpu_user_annotation"]),
        )
            .prop_map(|(ph, name, tid, ts, dur, cat)| {
                json!({"ph": ph, "name": name, "tid": tid, "pid": 1, "ts": ts, "dur": dur, "cat": cat})
            })
    }

    proptest! {
        /// Whatever the events, the report is built without panicking, and
        /// its figures stay consistent: busy time never exceeds the wall
        /// time nor the summed time, and shares stay within [0, 1].
        #[test]
        fn any_events_give_a_consistent_report(events in prop::collection::vec(event(), 0..60)) {
            let bytes = serde_json::to_vec(&json!({"traceEvents": events})).unwrap();
            let trace = parse_trace(&bytes).unwrap();
            let report = Report::build(&[("p.json".into(), trace)], &ReportOptions { batch_size: Some(4), ..ReportOptions::default() }).unwrap();
            for row in &report.spans.rows {
                prop_assert!(row.busy_ms <= report.spans.wall_ms + 1e-9, "{row:?}");
                prop_assert!(row.busy_ms <= row.total_ms + 1e-9, "{row:?}");
                prop_assert!((0.0..=1.0 + 1e-9).contains(&row.share), "{row:?}");
                prop_assert!(row.self_ms <= row.total_ms + 1e-9, "{row:?}");
            }
            if let Some(s) = &report.timing.steady_ms {
                prop_assert!(s.min <= s.median && s.median <= s.p90 && s.p90 <= s.max);
                prop_assert!(s.min >= 0.0, "{s:?}");
            }
            // Never a figure to quote that cannot be a time.
            if let Some(w) = &report.timing.window {
                prop_assert!(w.ms_per_step > 0.0 && w.ms_per_step.is_finite(), "{w:?}");
            }
        }
    }
}

#[test]
fn a_window_whose_threads_waited_for_the_writer_is_flagged() {
    let doc = |waits: u64| {
        let (events, _) = steps();
        json!({
            "traceEvents": events,
            "metadata": {"format": "steptrace-chrome-trace/1", "cycle": 0, "manifest": manifest("step"),
                         "writer_waits": {"waits": waits, "waited_us": 2500, "cap": 65536}},
        })
    };
    let build = |waits| {
        let trace = parse_trace(&serde_json::to_vec(&doc(waits)).unwrap()).unwrap();
        Report::build(&[("t.json".into(), trace)], &ReportOptions::default()).unwrap()
    };
    let flagged = build(3);
    let warning = flagged.warnings.iter().find(|w| w.contains("trace writer")).expect("a writer warning");
    assert!(warning.contains("2.5 ms") && warning.contains("(3 events)") && warning.contains("65536"), "{warning}");
    assert!(!build(0).warnings.iter().any(|w| w.contains("trace writer")));
}
