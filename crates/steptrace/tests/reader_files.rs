//! The reader on real files: tracing-chrome's output, cut short as a
//! killed process leaves it, and the sink's object layout.

use std::path::Path;

use steptrace::hygiene::{scan_trace, FindingKind};
use steptrace::reader::{
    parse_json_trace, parse_trace, read_json_trace_file, read_trace_file, validate, ProblemKind, TraceFormat, TrackId,
};
use tracing_chrome::ChromeLayerBuilder;
use tracing_subscriber::prelude::*;

/// Writes a small trace with tracing-chrome, as the sink does underneath.
fn write_tracing_chrome_trace(path: &Path) {
    let (layer, guard) = ChromeLayerBuilder::new().file(path).include_args(true).build();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        for step in 0..3 {
            let _step = tracing::info_span!("ProfilerStep", step).entered();
            {
                let _fwd = tracing::info_span!("forward", batch = 32, source = "/home/alice/data.csv").entered();
                tracing::info!(loss = 0.5, "step done");
            }
            let _bwd = tracing::info_span!("backward").entered();
        }
    });
    drop(guard);
}

#[test]
fn reads_what_tracing_chrome_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.json");
    write_tracing_chrome_trace(&path);

    let trace = read_trace_file(&path).unwrap();
    assert_eq!(trace.format, TraceFormat::Array);
    assert!(!trace.truncated);
    let begins: Vec<&str> = trace.events.iter().filter(|e| e.ph == "B").map(|e| e.name.as_str()).collect();
    assert_eq!(begins, ["ProfilerStep", "forward", "backward"].repeat(3));
    assert_eq!(trace.events.iter().filter(|e| e.ph == "E").count(), 9);
    assert_eq!(trace.events.iter().filter(|e| e.ph == "i").count(), 3);
    let forward = trace.events.iter().find(|e| e.name == "forward").unwrap();
    assert_eq!(forward.pid, Some(TrackId::Num(1)));
    assert!(forward.ts.is_some());
    // tracing-chrome records field values as strings.
    assert_eq!(forward.arg("batch"), Some(&serde_json::json!("32")));
    assert_eq!(validate(&trace), []);

    let findings = scan_trace(&read_json_trace_file(&path).unwrap());
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].finding.kind, FindingKind::HomePath);
    assert!(findings[0].location.ends_with("args.source"), "{}", findings[0].location);
}

#[test]
fn a_tracing_chrome_file_cut_anywhere_keeps_its_complete_events() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.json");
    write_tracing_chrome_trace(&path);
    let bytes = std::fs::read(&path).unwrap();
    let full = parse_trace(&bytes).unwrap();

    let mut last = 0;
    for cut in 1..bytes.len() {
        let trace = parse_trace(&bytes[..cut]).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert!(trace.truncated, "cut at {cut}");
        assert!(trace.events.len() >= last);
        assert_eq!(trace.events[..], full.events[..trace.events.len()]);
        last = trace.events.len();
        // Whatever was cut short shows up as unclosed spans, never as a
        // reader error.
        let problems = validate(&trace);
        assert_eq!(problems[0].kind, ProblemKind::Truncated);
        assert!(problems[1..].iter().all(|p| p.kind == ProblemKind::UnclosedBegin), "{problems:?}");
    }
    assert_eq!(last, full.events.len());
}

#[test]
fn reads_the_sink_object_layout_and_its_metadata() {
    // The layout the sink finalises a cycle into.
    let text = r#"{"traceEvents":[
{"ph":"M","pid":1,"tid":0,"name":"process_name","args":{"name":"steptrace: worker-0"}},
{"ph":"B","pid":1,"tid":1,"ts":10.0,"name":"ProfilerStep#2","cat":"steptrace"},
{"ph":"E","pid":1,"tid":1,"ts":20.0,"name":"ProfilerStep#2","args":{"steptrace.clipped":"end"}}
],
"displayTimeUnit":"ms",
"metadata":{
  "steptrace_version": "0.1.0",
  "schedule": {
    "text": "wait=1,warmup=1,active=2,repeat=2"
  },
  "steps": [
    2,
    3
  ],
  "manifest": {
    "backend": "wgpu (FALLBACK: CUDA unavailable: libcuda.so not found)"
  }
}}
"#;
    let trace = parse_trace(text.as_bytes()).unwrap();
    assert_eq!(trace.format, TraceFormat::Object);
    assert_eq!(trace.events.len(), 3);
    assert_eq!(trace.metadata["displayTimeUnit"], "ms");
    assert_eq!(trace.metadata["metadata"]["steps"], serde_json::json!([2, 3]));
    assert_eq!(validate(&trace), []);
    assert_eq!(scan_trace(&parse_json_trace(text.as_bytes()).unwrap()), []);

    // Cut inside the metadata: every event is kept, the metadata is lost.
    let cut = text.find("\"steps\"").unwrap();
    let trace = parse_trace(&text.as_bytes()[..cut]).unwrap();
    assert_eq!(trace.events.len(), 3);
    assert!(trace.truncated);
    assert_eq!(trace.metadata["displayTimeUnit"], "ms");
    assert!(!trace.metadata.contains_key("metadata"));
}

#[test]
fn large_traces_parse_in_one_pass() {
    let count = 200_000;
    let mut text = String::from("{\"traceEvents\":[\n");
    for i in 0..count {
        if i > 0 {
            text.push_str(",\n");
        }
        let ph = if i % 2 == 0 { "B" } else { "E" };
        text.push_str(&format!(
            r#"{{"ph":"{ph}","pid":1,"tid":{},"ts":{i}.5,"name":"span{}","cat":"c","args":{{"i":{i}}}}}"#,
            i / 2 % 4,
            i / 2
        ));
    }
    text.push_str("\n]}");
    let trace = parse_trace(text.as_bytes()).unwrap();
    assert_eq!(trace.events.len(), count);
    assert_eq!(trace.events[count - 1].ts, Some((count - 1) as f64 + 0.5));
    assert_eq!(validate(&trace), []);
    let cut = parse_trace(&text.as_bytes()[..text.len() - 40]).unwrap();
    assert_eq!(cut.events.len(), count - 1);
    assert!(cut.truncated);
}

#[test]
fn io_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let err = read_trace_file(dir.path()).unwrap_err();
    assert!(err.offset().is_none());
    assert!(err.to_string().starts_with("cannot read trace "), "{err}");
    assert!(err.to_string().contains(&dir.path().display().to_string()), "{err}");
}

#[test]
fn gzip_files_read_as_their_content_whatever_their_name() {
    use std::io::Write;
    let text = br#"{"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":2},{"ph":"X","name":"b","ts":3,"dur":1}]}"#;
    let gz = |bytes: &[u8]| {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    // Two members, as `cat a.gz b.gz` makes, under a name that says nothing.
    let mut two = gz(&text[..40]);
    two.extend(gz(&text[40..]));
    let path = dir.path().join("trace.bin");
    std::fs::write(&path, &two).unwrap();
    let trace = read_trace_file(&path).unwrap();
    assert_eq!(trace, parse_trace(text).unwrap());
    assert_eq!(read_json_trace_file(&path).unwrap().events.len(), 2);
    // Cut inside the compressed stream: the complete events are kept.
    let whole = gz(text);
    let cut = parse_trace(&whole[..whole.len() - 10]).unwrap();
    assert!(cut.truncated);
    // Broken JSON inside: the offset counts decompressed bytes.
    let err = parse_trace(&gz(b"[{\"ph\":1}]")).unwrap_err();
    assert!(err.to_string().contains("of the decompressed data"), "{err}");
    // Not gzip beyond its magic bytes.
    let err = parse_trace(&[0x1f, 0x8b, 0, 1, 2, 3]).unwrap_err();
    assert!(err.to_string().contains("not a readable gzip file"), "{err}");
}
