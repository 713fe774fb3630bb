//! What is built as a file is read, without its events held, equals what is
//! built from the trace held in memory: reports ([`LoadedTrace`]),
//! inventories ([`InventoryBuilder`]) and sanitised copies ([`SanitisedCopy`]).

use std::io::Write;
use std::path::{Path, PathBuf};

use steptrace::analysis::{
    redact_file_in_order, top_level_keys, Inventory, InventoryBuilder, LoadedTrace, RankReport, RedactError, Report,
    ReportOptions, SanitisedCopy,
};
use steptrace::reader::{parse_json_trace, parse_trace, read_json_events};

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
            .map(|s| {
                format!(r#"{{"ph":"X","name":"ProfilerStep#{s}","pid":1,"tid":1,"ts":{},"dur":{}}}"#, s * 100, 90 + r)
            })
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

/// The inventory of `bytes` read one event at a time.
fn streamed_inventory(bytes: &[u8]) -> Inventory {
    let mut builder = InventoryBuilder::new();
    let (trace, _) = read_json_events(bytes, bytes.len() as u64, |event| builder.event(&event)).unwrap();
    builder.finish(&trace.metadata)
}

#[test]
fn an_inventory_built_as_a_file_is_read_is_that_of_the_trace() {
    for (name, bytes) in traces() {
        let held = Inventory::of(&parse_json_trace(&bytes).unwrap());
        let streamed = streamed_inventory(&bytes);
        assert_eq!(serde_json::to_value(&held).unwrap(), serde_json::to_value(&streamed).unwrap(), "{name}");
    }
    assert_eq!(streamed_inventory(PLANTED).findings.len(), 8);
}

/// A sanitised copy of `bytes` made from two reads of them, to `out`.
fn streamed_copy(bytes: &[u8], second: &[u8], out: &Path) -> Result<steptrace::analysis::RedactOutcome, RedactError> {
    let mut copy = SanitisedCopy::new();
    let (trace, order) = read_json_events(bytes, bytes.len() as u64, |event| copy.event(&event)).unwrap();
    copy.write(&trace, &order, second, second.len() as u64, out)
}

#[test]
fn a_copy_made_from_two_reads_is_that_of_the_trace_held() {
    let dir = tempfile::tempdir().unwrap();
    for (i, (name, bytes)) in traces().into_iter().enumerate() {
        for gz in ["", ".gz"] {
            let held_out = dir.path().join(format!("{i}-held.json{gz}"));
            let streamed_out = dir.path().join(format!("{i}-streamed.json{gz}"));
            let held =
                redact_file_in_order(&parse_json_trace(&bytes).unwrap(), &top_level_keys(&bytes), &held_out).unwrap();
            let streamed = streamed_copy(&bytes, &bytes, &streamed_out).unwrap();
            assert_eq!((held.replaced, held.rebuilt), (streamed.replaced, streamed.rebuilt), "{name}");
            let (a, b) = (std::fs::read(&held_out).unwrap(), std::fs::read(&streamed_out).unwrap());
            if gz.is_empty() {
                assert!(a == b, "{name}: the copies differ");
            }
            let (a, b) = (parse_json_trace(&a).unwrap(), parse_json_trace(&b).unwrap());
            assert_eq!(a, b, "{name}");
            assert!(Inventory::of(&b).findings.is_empty(), "{name}");
        }
    }
    let out = dir.path().join("planted.json");
    assert_eq!(streamed_copy(PLANTED, PLANTED, &out).unwrap().replaced, 8);
    let copy = std::fs::read_to_string(&out).unwrap();
    for secret in ["carol", "q8Z3", "alice", "bob", "frank"] {
        assert!(!copy.contains(secret), "{secret} left in {copy}");
    }
    assert!(copy.starts_with(r#"{"distributedInfo": {"rank": 0, "world_size": 1},"#), "{copy}");
}

#[test]
fn a_second_read_that_is_not_the_first_writes_no_copy() {
    let dir = tempfile::tempdir().unwrap();
    let out: PathBuf = dir.path().join("shared.json");
    // An event more, or another secret: the copy is refused, nothing is left.
    let text = std::str::from_utf8(PLANTED).unwrap();
    let longer = text.replacen("\n],", r#",{"ph":"i","name":"late","ts":9,"s":"t"}],"#, 1);
    let other = text.replace("carol.smith@example.com", "just a label");
    for second in [longer.as_bytes(), other.as_bytes()] {
        let err = streamed_copy(PLANTED, second, &out).unwrap_err();
        assert!(matches!(err, RedactError::Changed { .. }), "{err}");
        assert!(!out.exists());
    }
    // A second read that fails.
    let err = streamed_copy(PLANTED, b"[1]", &out).unwrap_err();
    assert!(matches!(err, RedactError::Read { .. }), "{err}");
    assert!(!out.exists());
    // An existing output is never touched.
    std::fs::File::create(&out).unwrap().write_all(b"mine").unwrap();
    let err = streamed_copy(PLANTED, PLANTED, &out).unwrap_err();
    assert!(matches!(err, RedactError::Exists { .. }), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), b"mine");
}
