//! NVTX ranges end to end, with no GPU and no Nsight: `tests/nvtx/inject.c` is an NVTX
//! injection library (what `nsys` loads through `NVTX_INJECTION64_PATH`) that logs every range.
//! A CLI built with its `nvtx` feature (scripts/test builds the tests so) mirrors steptrace's
//! steps, phases and layers into the `steptrace` domain, each range ended.
#![cfg(feature = "nvtx")]

mod common;

use std::collections::HashMap;
use std::process::Command;

use common::text;

struct Range {
    domain: String,
    name: String,
    payload: Option<u64>,
    ended: bool,
}

fn ranges(log: &str) -> Vec<Range> {
    let mut out: Vec<Range> = Vec::new();
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    for line in log.lines() {
        match line.split('\t').collect::<Vec<_>>().as_slice() {
            ["start", domain, name, payload, id] => {
                by_id.insert(id, out.len());
                out.push(Range {
                    domain: (*domain).to_owned(),
                    name: (*name).to_owned(),
                    payload: payload.parse().ok(),
                    ended: false,
                });
            }
            ["end", id] => {
                let i = by_id.get(id).unwrap_or_else(|| panic!("an end for a range never started: {line}"));
                assert!(!out[*i].ended, "a range ended twice: {line}");
                out[*i].ended = true;
            }
            _ => panic!("unexpected log line: {line:?}"),
        }
    }
    out
}

#[test]
fn steps_phases_and_layers_are_nvtx_ranges_an_injected_tool_sees() {
    let dir = tempfile::tempdir().unwrap();
    let library = dir.path().join("libinject.so");
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/nvtx/inject.c");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(source)
        .arg("-lpthread")
        .output()
        .unwrap_or_else(|e| panic!("{cc} (a C compiler, to build the stand-in for Nsight): {e}"));
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let log = dir.path().join("nvtx.log");
    let out = Command::new(env!("CARGO_BIN_EXE_steptrace"))
        .args([
            "train",
            "--backend",
            "cpu",
            "--steps",
            "5",
            "--schedule",
            "wait=1,warmup=1,active=2",
            "--out",
            "traces",
        ])
        .current_dir(dir.path())
        .env("NODEVICE_SELECT", "1")
        .env("NVTX_INJECTION64_PATH", &library)
        .env("STEPTRACE_NVTX_LOG", &log)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "train failed:\n{stdout}\n{stderr}");
    let log = std::fs::read_to_string(&log).expect("the injected library was loaded and wrote its log");
    let ranges = ranges(&log);
    assert!(ranges.iter().all(|r| r.domain == "steptrace"), "only steptrace's spans are mirrored, in its domain");
    assert!(ranges.iter().all(|r| r.ended), "every range is ended");
    // Every step, recorded or not (Nsight chooses its own window), with its number as payload
    // (the profiler opens the step after the last before it finishes: at most one more).
    let steps: Vec<Option<u64>> = ranges.iter().filter(|r| r.name == "ProfilerStep").map(|r| r.payload).collect();
    assert!(steps.len() == 5 || steps.len() == 6, "{steps:?}");
    assert_eq!(steps, (0..steps.len() as u64).map(Some).collect::<Vec<_>>());
    let count = |name: &str| ranges.iter().filter(|r| r.name == name).count();
    for phase in ["data.load", "train.step", "forward", "loss", "backward", "optimizer"] {
        assert_eq!(count(phase), 5, "one `{phase}` range per step");
    }
    // Layer spans go by their layer's name, as in the trace (the held-out evaluation after
    // the last step runs them too).
    for layer in ["transfer.h2d", "hidden0", "hidden1", "output"] {
        assert!(count(layer) >= 5, "a `{layer}` range in every step: {}", count(layer));
    }
    assert_eq!(count("layer"), 0);
    assert!(ranges.iter().filter(|r| r.name != "ProfilerStep").all(|r| r.payload.is_none()));
    // The ranges need steptrace's spans in every step: they go through tracing.
    assert_eq!(own_spans(&dir.path().join("traces")), ["tracing"]);
}

/// The `own_spans` metadata of every trace under `dir`.
fn own_spans(dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("traces").flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(own_spans(&path));
        } else if path.to_string_lossy().ends_with(".trace.json") {
            let file: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).expect("a trace");
            found.push(file["metadata"]["own_spans"].as_str().unwrap_or("absent").to_owned());
        }
    }
    found.sort();
    found.dedup();
    found
}

#[test]
fn without_a_tool_attached_no_range_is_made_and_own_spans_go_around_tracing() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_steptrace"))
        .args([
            "train",
            "--backend",
            "cpu",
            "--steps",
            "4",
            "--schedule",
            "wait=1,warmup=1,active=2",
            "--out",
            "traces",
        ])
        .current_dir(dir.path())
        .env("NODEVICE_SELECT", "1")
        .env_remove("NVTX_INJECTION64_PATH")
        .env_remove("STEPTRACE_OWN_SPANS")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "train failed:\n{stdout}\n{stderr}");
    assert_eq!(own_spans(&dir.path().join("traces")), ["direct"]);
}
