//! The typed trace contract on real files: a trace written by the first
//! round still reads, field for field, and a newer format is refused.

use std::path::PathBuf;

use serde_json::Value;
use steptrace::analysis::{Producer, Report, ReportOptions};
use steptrace::format::{FormatVersion, TraceMetadata};
use steptrace::reader::{parse_trace, read_trace_file, ReadErrorKind};

/// A cycle written on the H200 by steptrace 0.1.0 before the format
/// became types (CUDA MLP, warm cache, steps 7..=11).
fn v1_fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/steptrace-v1-cuda-mlp-h200.trace.json")
}

#[test]
fn a_trace_of_the_first_round_reads_typed() {
    let trace = read_trace_file(&v1_fixture()).unwrap();
    let st = trace.steptrace().unwrap().expect("a steptrace file");
    let meta = st.metadata.as_ref().unwrap();
    assert_eq!(meta.format.parse::<FormatVersion>().unwrap(), FormatVersion::CURRENT);
    assert_eq!(meta.cycle, Some(0));
    assert_eq!(meta.steps, [7, 8, 9, 10, 11]);
    assert_eq!(meta.schedule.as_ref().map(|s| (s.wait, s.warmup, s.active)), Some((5, 2, 5)));
    let m = &meta.manifest;
    assert_eq!(m.backend_kind.as_deref(), Some("cuda"));
    assert_eq!(m.batch_size, Some(256));
    assert_eq!(m.fallback_reason, None);
    assert!(m.extra["burn_type"].as_str().unwrap().contains("CudaRuntime"));
    assert!(st.header.is_none(), "the finaliser drops the partial-file header");

    // Every key of the old metadata survives a round trip through the types.
    let raw = &trace.metadata["metadata"];
    let back = serde_json::to_value(TraceMetadata::clone(meta)).unwrap();
    for (key, value) in raw.as_object().unwrap() {
        match key.as_str() {
            // Written as null before, left out now when absent: reads the same.
            "partial_reason" if value.is_null() => assert!(back[key].is_null()),
            // The first round wrote the list of steps; it reads as the range
            // that is written now.
            "expected_steps" => {
                let list: Vec<u64> = serde_json::from_value(value.clone()).unwrap();
                assert_eq!(back[key], serde_json::json!({"first": list[0], "count": list.len()}));
            }
            "manifest" => {
                for (k, v) in value.as_object().unwrap() {
                    assert_eq!(&back["manifest"][k], v, "manifest.{k}");
                }
            }
            _ => assert_eq!(&back[key], value, "{key}"),
        }
    }

    let report = Report::build(&[("v1.json".into(), trace)], &ReportOptions::default()).unwrap();
    assert_eq!(report.sources[0].producer, Producer::Steptrace);
    assert_eq!(report.timing.steps.iter().map(|s| s.step).collect::<Vec<_>>(), [7, 8, 9, 10, 11]);
    assert_eq!(report.run.backend_kind.as_deref(), Some("cuda"));
    assert_eq!(report.run.batch_size, Some(256));
    assert!(report.timing.steady_ms.is_some());
}

fn with_format(tag: &str) -> Vec<u8> {
    let mut doc: Value = serde_json::from_slice(&std::fs::read(v1_fixture()).unwrap()).unwrap();
    doc["metadata"]["format"] = Value::from(tag);
    serde_json::to_vec(&doc).unwrap()
}

#[test]
fn a_newer_format_is_refused_with_both_versions_named() {
    let err = parse_trace(&with_format("steptrace-chrome-trace/2")).unwrap_err();
    assert!(matches!(err.kind(), ReadErrorKind::Version(_)), "{err}");
    let text = err.to_string();
    assert!(text.contains("steptrace-chrome-trace/2") && text.contains("steptrace-chrome-trace/1"), "{text}");
    // The same file with today's tag reads; a foreign tag reads as foreign.
    assert!(parse_trace(&with_format("steptrace-chrome-trace/1")).is_ok());
    let foreign = parse_trace(&with_format("something-else/9")).unwrap();
    assert!(foreign.steptrace().unwrap().is_none());
}

#[test]
fn a_partial_file_header_is_checked_too() {
    let partial = br#"[
{"ph":"M","pid":1,"tid":0,"name":"steptrace_segment","args":{"format":"steptrace-chrome-trace/7","worker":"w","cycle":0,"schedule":"active=1","epoch_unix_ms":1,"steptrace_version":"9.0.0","manifest":{}}},
{"ph":"B","pid":1,"tid":1,"ts":1,"name":"ProfilerStep#0"},
"#;
    let err = parse_trace(partial).unwrap_err();
    assert!(err.to_string().contains("steptrace-chrome-trace/7"), "{err}");
    // Read one event at a time, the header is checked as well.
    let size = partial.len() as u64;
    let streamed = [
        steptrace::reader::read_events(&partial[..], size, drop).map(drop),
        steptrace::reader::read_json_events(&partial[..], size, drop).map(drop),
        steptrace::analysis::LoadedTrace::read(&partial[..], size).map(drop),
    ];
    for result in streamed {
        let err = result.unwrap_err();
        assert!(matches!(err.kind(), ReadErrorKind::Version(_)), "{err}");
    }
    let ok = br#"[
{"ph":"M","pid":1,"tid":0,"name":"steptrace_segment","args":{"worker":"w","cycle":3,"schedule":"active=1","epoch_unix_ms":1,"steptrace_version":"0.1.0","manifest":{"batch_size":8}}},
{"ph":"B","pid":1,"tid":1,"ts":1,"name":"ProfilerStep#0"},
"#;
    let trace = parse_trace(ok).unwrap();
    let st = trace.steptrace().unwrap().unwrap();
    assert_eq!((st.cycle(), st.manifest().and_then(|m| m.batch_size)), (Some(3), Some(8)));
}
