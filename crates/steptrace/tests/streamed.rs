//! What is built as a file is read, without its events held, equals what is
//! built from the trace held in memory: reports ([`LoadedTrace`]).

use std::path::Path;

use steptrace::analysis::{LoadedTrace, RankReport, Report, ReportOptions};
use steptrace::reader::parse_trace;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/");

/// Secrets in events (known fields, unknown ones, keys) and in the metadata.
const PLANTED: &[u8] = br#"{"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents":[
  {"ph":"M","name":"thread_name","pid":1,"tid":3,"args":{"name":"loader /home/carol/work"}},
  {"ph":"X","name":"data.load","pid":1,"tid":3,"ts":0,"dur":5,"args":{"batch":"7","owner":"carol.smith@example.com"}},
  {"ph":"X","name":"upload","pid":1,"tid":3,"ts":5,"dur":1,"args":{"api_key":"q8Z3vK1mP0sX7tY2wR9uL4nB"}},
  {"ph":"X","name":"a","pid":1,"tid":1,"ts":0,"dur":2,"foo":"alice@example.com","sf":"/home/bob/x","frank@example.com":1},
  {"ph":"X","name":"forward","pid":1,"tid":3,"ts":6,"dur":1,"args":{"pixels":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}}
],"metadata":{"manifest":{"model":"mlp","data_source":"~/private/data.csv"}}}"#;

/// The traces of every shape the fixtures hold, whole and cut short.
fn traces() -> Vec<(String, Vec<u8>)> {
    let mut files = vec![
        "steptrace-v1-cuda-mlp-h200.trace.json".to_owned(),
        "torch-kineto-mlp-h200.json".to_owned(),
        "h200-cuda/mlp-cuda.cycle0.20261201T104254.501Z.trace.json".to_owned(),
    ];
    files.retain(|f| Path::new(&format!("{FIXTURES}{f}")).exists());
    assert!(!files.is_empty(), "no fixture found in {FIXTURES}");
    let mut out = Vec::new();
    for file in files {
        let bytes = std::fs::read(format!("{FIXTURES}{file}")).unwrap();
        // Cut inside an event two thirds of the way: spans left open, a truncated file.
        let cut = bytes[..bytes.len() * 2 / 3].to_vec();
        out.push((format!("{file} (cut)"), cut));
        out.push((file, bytes));
    }
    out.push(("planted".to_owned(), PLANTED.to_vec()));
    out
}

#[test]
fn a_report_of_a_file_read_as_it_is_parsed_is_that_of_the_trace() {
    for (name, bytes) in traces() {
        let held = Report::build(&[(name.clone(), parse_trace(&bytes).unwrap())], &ReportOptions::default()).unwrap();
        let loaded = LoadedTrace::read(bytes.as_slice(), bytes.len() as u64).unwrap();
        assert_eq!(loaded.events(), parse_trace(&bytes).unwrap().events.len(), "{name}");
        assert!(loaded.trace().events.len() <= 16, "{name}");
        let streamed = Report::build_loaded(vec![(name.clone(), loaded)], &ReportOptions::default()).unwrap();
        let (held, streamed) = (serde_json::to_value(&held).unwrap(), serde_json::to_value(&streamed).unwrap());
        assert_eq!(held, streamed, "{name}");
    }
}

#[test]
fn a_rank_report_of_files_read_as_they_are_parsed_is_that_of_the_traces() {
    let rank = |r: u32, steps: &[u32]| {
        let events: Vec<String> = steps
            .iter()
            .map(|s| format!(r#"{{"ph":"X","name":"ProfilerStep#{s}","pid":1,"tid":1,"ts":{},"dur":{}}}"#, s * 100, 90 + r))
            .collect();
        format!(r#"{{"distributedInfo":{{"rank":{r},"world_size":2}},"traceEvents":[{}]}}"#, events.join(","))
    };
    let files = [("rank0.json", rank(0, &[1, 2, 3])), ("rank1.json", rank(1, &[1, 2, 3]))];
    let held: Vec<_> = files.iter().map(|(p, t)| ((*p).to_owned(), parse_trace(t.as_bytes()).unwrap())).collect();
    let loaded: Vec<_> = files
        .iter()
        .map(|(p, t)| ((*p).to_owned(), LoadedTrace::read(t.as_bytes(), t.len() as u64).unwrap()))
        .collect();
    assert!(RankReport::applies(&held) && RankReport::applies(&loaded));
    let held = RankReport::build(&held, &ReportOptions::default()).unwrap();
    let streamed = RankReport::build_loaded(loaded, &ReportOptions::default()).unwrap();
    assert_eq!(serde_json::to_value(&held).unwrap(), serde_json::to_value(&streamed).unwrap());
    assert_eq!(streamed.ranks.len(), 2);
}
