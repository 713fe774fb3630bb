//! Inventory, hygiene findings and sanitised copies.

use steptrace::analysis::{redact_file, Inventory};
use steptrace::reader::parse_trace;

const PLANTED: &[u8] = br#"{"traceEvents":[
  {"ph":"M","name":"thread_name","pid":1,"tid":3,"args":{"name":"loader /home/carol/work"}},
  {"ph":"X","name":"data.load","pid":1,"tid":3,"ts":0,"dur":5,"args":{"batch":"7","owner":"carol.smith@example.com"}},
  {"ph":"X","name":"upload","pid":1,"tid":3,"ts":5,"dur":1,"args":{"api_key":"q8Z3vK1mP0sX7tY2wR9uL4nB"}},
  {"ph":"X","name":"forward","pid":1,"tid":3,"ts":6,"dur":1,"args":{"pixels":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}}
],"metadata":{"manifest":{"model":"mlp","data_source":"~/private/data.csv"}}}"#;

#[test]
fn planted_secrets_are_all_flagged_and_labels_listed() {
    let trace = parse_trace(PLANTED).unwrap();
    let inv = Inventory::of(&trace);
    let kinds: Vec<(&str, &str)> = inv.findings.iter().map(|f| (f.location.as_str(), f.kind.as_str())).collect();
    assert!(kinds.contains(&("thread name tid 3", "home directory path")), "{kinds:?}");
    assert!(kinds.contains(&("event 1 args.owner", "e-mail address")), "{kinds:?}");
    assert!(kinds.contains(&("event 2 args.api_key", "token or secret")), "{kinds:?}");
    assert!(kinds.contains(&("event 3 args.pixels", "input content")), "{kinds:?}");
    assert!(kinds.contains(&("metadata.manifest.data_source", "home directory path")), "{kinds:?}");
    // Excerpts never repeat what they flag.
    assert!(inv.findings.iter().all(|f| !f.excerpt.contains("carol") && !f.excerpt.contains("q8Z3vK1m")));
    assert_eq!(inv.names["data.load"], 1);
    assert_eq!(inv.arg_keys["batch"], 1);
    assert_eq!(inv.thread_names, ["loader /home/carol/work"]);
    assert!(inv.metadata_fields.contains(&"metadata.manifest.model".to_owned()));
}

#[test]
fn a_redacted_copy_scans_clean_keeps_the_rest_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let trace = parse_trace(PLANTED).unwrap();
    let out = dir.path().join("shared.json");
    let outcome = redact_file(PLANTED, &trace, &out).unwrap();
    assert_eq!(outcome.replaced, 5);
    assert!(!outcome.rebuilt);
    let copy = std::fs::read(&out).unwrap();
    let text = String::from_utf8(copy.clone()).unwrap();
    for secret in ["carol", "q8Z3vK1m", "private/data.csv", "[1,2,3"] {
        assert!(!text.contains(secret), "{secret} left in {text}");
    }
    let again = parse_trace(&copy).unwrap();
    assert!(Inventory::of(&again).findings.is_empty());
    // Timing and structure are kept.
    assert_eq!(again.events.len(), trace.events.len());
    assert_eq!(again.events[1].dur, Some(5.0));
    assert_eq!(again.events[1].arg("batch").unwrap(), "7");

    // The output exists now: a second redaction refuses and leaves it alone.
    let err = redact_file(PLANTED, &trace, &out).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
    assert_eq!(std::fs::read(&out).unwrap(), copy);
}

#[test]
fn a_cut_file_is_redacted_from_its_complete_events() {
    let cut = &PLANTED[..PLANTED.len() - 120];
    let trace = parse_trace(cut).unwrap();
    assert!(trace.truncated);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cut.json");
    let outcome = redact_file(cut, &trace, &out).unwrap();
    assert!(outcome.rebuilt);
    let again = parse_trace(&std::fs::read(&out).unwrap()).unwrap();
    assert!(Inventory::of(&again).findings.is_empty());
    assert_eq!(again.events.len(), trace.events.len());
}
