//! A large trace of realistic shape, written on demand for measuring the readers' memory
//! and time (which are benchmarks, not tests: nothing here is timed or asserted on them).
//!
//! ```text
//! STEPTRACE_SCALE_OUT=/tmp/big.trace.json STEPTRACE_SCALE_MB=300 STEPTRACE_SCALE_SHAPE=steptrace \
//!     cargo test -p steptrace-cli --test scale_trace -- --ignored
//! /usr/bin/time -v steptrace report /tmp/big.trace.json     # "Maximum resident set size"
//! /usr/bin/time -v steptrace inspect /tmp/big.trace.json
//! ```
//!
//! The events are those of a fixture, repeated with their times shifted, their step
//! numbers, batch arguments and flow ids renumbered, until the file holds the size asked
//! for, with the fixture's own metadata: `steptrace` (steptrace's host spans, small `B`/`E`
//! events: the most events per MB), `device` (steptrace's spans with CUPTI kernels, copies
//! and launches), or `kineto` (a torch.profiler trace: CPU ops, kernels, flows).

use std::io::{BufWriter, Write};

use serde_json::{Map, Value};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/");

fn fixture(shape: &str) -> &'static str {
    match shape {
        "steptrace" => "steptrace-v1-cuda-mlp-h200.trace.json",
        "device" => "h200-cuda/mlp-cuda.cycle0.20261201T104254.501Z.trace.json",
        "kineto" => "torch-kineto-mlp-h200.json",
        other => panic!("STEPTRACE_SCALE_SHAPE is steptrace, device or kineto, not {other}"),
    }
}

/// The step number of a `ProfilerStep#N` name.
fn step_of(event: &Value) -> Option<u64> {
    event["name"].as_str()?.strip_prefix("ProfilerStep#")?.parse().ok()
}

/// Writes the trace; returns how many events it holds.
fn write_trace(out: &mut impl Write, shape: &str, bytes: u64) -> std::io::Result<u64> {
    let doc: Value = serde_json::from_slice(&std::fs::read(format!("{FIXTURES}{}", fixture(shape)))?)?;
    let events = doc["traceEvents"].as_array().cloned().unwrap_or_default();
    let (meta, timed): (Vec<Value>, Vec<Value>) = events.into_iter().partition(|e| e["ph"] == "M" || e["ts"].is_null());
    let ts = |e: &Value| e["ts"].as_f64().unwrap_or(0.0);
    let first = timed.iter().map(ts).fold(f64::INFINITY, f64::min);
    let last = timed.iter().map(|e| ts(e) + e["dur"].as_f64().unwrap_or(0.0)).fold(0.0, f64::max);
    let period = last - first + 100.0;
    let mut steps: Vec<u64> = timed.iter().filter_map(step_of).collect();
    steps.sort_unstable();
    steps.dedup();
    let span = steps.len().max(1) as u64;
    let (mut written, mut count) = (0u64, 0u64);
    out.write_all(b"{\"traceEvents\":[\n")?;
    for (i, event) in meta.iter().enumerate() {
        if i > 0 {
            out.write_all(b",\n")?;
        }
        serde_json::to_writer(&mut *out, event)?;
    }
    let mut rep = 0u64;
    while written < bytes {
        for event in &timed {
            let mut e = event.clone();
            e["ts"] = Value::from(((ts(event) + rep as f64 * period) * 1000.0).round() / 1000.0);
            if let Some(id) = event["id"].as_u64() {
                e["id"] = Value::from(id + rep * 1_000_000);
            }
            if let Some(n) = step_of(event) {
                let k = steps.iter().position(|&s| s == n).unwrap_or(0) as u64;
                e["name"] = Value::from(format!("ProfilerStep#{}", steps[0] + rep * span + k));
            }
            if let Some(batch) = event["args"]["batch"].as_str().and_then(|b| b.parse::<u64>().ok()) {
                e["args"]["batch"] = Value::from((batch + rep * span).to_string());
            }
            let line = serde_json::to_vec(&e)?;
            out.write_all(b",\n")?;
            out.write_all(&line)?;
            written += line.len() as u64 + 2;
            count += 1;
        }
        rep += 1;
    }
    out.write_all(b"\n]")?;
    let rest: Map<String, Value> = doc
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| *k != "traceEvents")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (key, value) in rest {
        write!(out, ",{}:", Value::from(key))?;
        serde_json::to_writer(&mut *out, &value)?;
    }
    out.write_all(b"}\n")?;
    Ok(count)
}

#[test]
#[ignore = "writes a large file on demand: see the module docs"]
fn write_a_large_trace() {
    let out = std::env::var("STEPTRACE_SCALE_OUT").expect("STEPTRACE_SCALE_OUT: the file to write");
    let mb: u64 = std::env::var("STEPTRACE_SCALE_MB").map_or(300, |m| m.parse().expect("STEPTRACE_SCALE_MB: a number"));
    let shape = std::env::var("STEPTRACE_SCALE_SHAPE").unwrap_or_else(|_| "steptrace".to_owned());
    let mut file = BufWriter::new(std::fs::File::create(&out).unwrap());
    let count = write_trace(&mut file, &shape, mb << 20).unwrap();
    file.flush().unwrap();
    println!("{out}: {count} events, {} bytes", std::fs::metadata(&out).unwrap().len());
}

#[test]
fn a_small_one_reads_as_a_trace_of_its_shape() {
    let dir = tempfile::tempdir().unwrap();
    for shape in ["steptrace", "device", "kineto"] {
        let mut bytes = Vec::new();
        let count = write_trace(&mut bytes, shape, 200 << 10).unwrap();
        let doc: Value = serde_json::from_slice(&bytes).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        assert!(events.len() as u64 > count && count > 0, "{shape}");
        let path = dir.path().join(format!("{shape}.trace.json"));
        std::fs::write(&path, &bytes).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_steptrace"))
            .args(["report", path.to_str().unwrap()])
            .env("NODEVICE_SELECT", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("steady"),
            "{shape}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
