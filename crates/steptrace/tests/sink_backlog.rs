//! The sink under load: a bounded channel that loses nothing, and spans
//! without fields written without args.

use steptrace::reader::read_trace_file;
use steptrace::{Profiler, Schedule};
use tracing_subscriber::prelude::*;

/// Records `spans` spans back to back on one thread in a one-step window,
/// plus one span with a field, and returns the file's events and metadata.
fn record(spans: u64) -> (Vec<serde_json::Value>, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let schedule: Schedule = "wait=0,warmup=0,active=1,repeat=1".parse().unwrap();
    let (layer, mut profiler) = Profiler::builder(schedule).out_dir(dir.path()).build_global().unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let saved = tracing::dispatcher::with_default(&dispatch, || {
        profiler.start();
        for _ in 0..spans {
            drop(tracing::info_span!(target: "steptrace", "plain").entered());
        }
        drop(tracing::info_span!(target: "steptrace", "sized", bytes = 4096u64).entered());
        profiler.step();
        profiler.finish().unwrap()
    });
    let text = std::fs::read_to_string(&saved[0].path).unwrap();
    let file: serde_json::Value = serde_json::from_str(&text).unwrap();
    let trace = read_trace_file(&saved[0].path).unwrap();
    assert!(!trace.events.is_empty());
    (file["traceEvents"].as_array().unwrap().clone(), file["metadata"].clone())
}

#[test]
fn a_window_longer_than_the_channel_bound_keeps_every_span() {
    // 100,001 spans are 200,002 events, three times the bound on events in
    // flight: the emitting thread may wait for the writer, but nothing is lost.
    let spans = 100_000;
    let (events, metadata) = record(spans);
    let plain = events.iter().filter(|e| e["name"] == "plain" && e["ph"] == "X").count();
    assert_eq!(plain as u64, spans);
    assert!(!events.iter().any(|e| e["name"] == "plain" && (e["ph"] == "B" || e["ph"] == "E")));
    let waits = &metadata["writer_waits"];
    assert_eq!(waits["cap"], 65_536, "{metadata}");
    assert!(waits["waits"].is_u64() && waits["waited_us"].is_u64(), "{waits}");
}

#[test]
fn spans_without_fields_have_no_args_and_fields_are_kept() {
    let (events, metadata) = record(3);
    let plain: Vec<_> = events.iter().filter(|e| e["name"] == "plain").collect();
    assert_eq!(plain.len(), 3);
    assert!(plain.iter().all(|e| e.get("args").is_none()), "{plain:?}");
    let sized = events.iter().find(|e| e["name"] == "sized").expect("sized span");
    assert_eq!(sized["args"]["bytes"], "4096", "{sized}");
    // A short window: nobody waited.
    assert_eq!(metadata["writer_waits"]["waits"], 0);
    // How the writer waited between steps is written down (the default, unless the
    // environment sets it).
    if std::env::var_os("STEPTRACE_LINGER").is_none() {
        assert_eq!(metadata["writer_linger"], "polls every 500 µs", "{metadata}");
    }
    if std::env::var_os("STEPTRACE_SPANS").is_none() {
        assert!(metadata.get("span_filter").is_none(), "no experiment, no span filter: {metadata}");
    }
}

#[test]
fn a_cycle_cut_by_the_size_limit_leaves_no_backlog_to_the_next() {
    // Cycle 0's one step holds 300,000 spans of the stepping thread, far past the 1 MB limit:
    // its file fails, and the writer discards the rest. The batches it was announced must
    // still leave the queue, or cycle 1's thread would wait for a writer that is idle.
    let dir = tempfile::tempdir().unwrap();
    let schedule: Schedule = "wait=0,warmup=0,active=1,repeat=2".parse().unwrap();
    let (layer, mut profiler) =
        Profiler::builder(schedule).out_dir(dir.path()).max_file_bytes(1 << 20).build_global().unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let results = tracing::dispatcher::with_default(&dispatch, || {
        profiler.start();
        for _ in 0..300_000 {
            drop(tracing::info_span!(target: "steptrace", "plain").entered());
        }
        profiler.step();
        for _ in 0..10 {
            drop(tracing::info_span!(target: "steptrace", "plain").entered());
        }
        profiler.step();
        profiler.finish_all()
    });
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].is_err(), "cycle 0 is past the limit: {:?}", results[0]);
    let second = results[1].as_ref().expect("cycle 1 fits");
    let file: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&second.path).unwrap()).unwrap();
    let plain = file["traceEvents"].as_array().unwrap().iter().filter(|e| e["name"] == "plain").count();
    assert_eq!(plain, 10);
    assert_eq!(file["metadata"]["writer_waits"]["waits"], 0, "{}", file["metadata"]);
}
