//! Inventory, hygiene findings and sanitised copies.

use steptrace::analysis::{redact_file, Inventory, RedactError};
use steptrace::reader::{parse_json_trace, parse_trace};

const PLANTED: &[u8] = br#"{"traceEvents":[
  {"ph":"M","name":"thread_name","pid":1,"tid":3,"args":{"name":"loader /home/carol/work"}},
  {"ph":"X","name":"data.load","pid":1,"tid":3,"ts":0,"dur":5,"args":{"batch":"7","owner":"carol.smith@example.com"}},
  {"ph":"X","name":"upload","pid":1,"tid":3,"ts":5,"dur":1,"args":{"api_key":"q8Z3vK1mP0sX7tY2wR9uL4nB"}},
  {"ph":"X","name":"forward","pid":1,"tid":3,"ts":6,"dur":1,"args":{"pixels":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}}
],"metadata":{"manifest":{"model":"mlp","data_source":"~/private/data.csv"}}}"#;

/// Secrets in fields the reader does not type, and in keys.
const UNKNOWN_FIELDS: &[u8] = br#"[
  {"ph":"X","name":"a","pid":1,"tid":1,"ts":0,"dur":2,"foo":"alice@example.com","sf":"/home/bob/x",
   "stack":["ghp_abcdefghijklmnopqrstuvwxyz0123456789"],"estack":[{"f":"/Users/dan/lib"}],
   "bp":{"deep":["erin@example.com"]},"frank@example.com":1}
]"#;

#[test]
fn planted_secrets_are_all_flagged_and_labels_listed() {
    let trace = parse_json_trace(PLANTED).unwrap();
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
    assert!(inv.other_fields.is_empty(), "{:?}", inv.other_fields);
}

#[test]
fn secrets_in_unknown_fields_and_keys_are_flagged_and_redacted() {
    let trace = parse_json_trace(UNKNOWN_FIELDS).unwrap();
    let inv = Inventory::of(&trace);
    let mut located: Vec<&str> = inv.findings.iter().map(|f| f.location.as_str()).collect();
    located.sort_unstable();
    assert_eq!(
        located,
        [
            "event 0 bp.deep[0]",
            "event 0 estack[0].f",
            "event 0 foo",
            "event 0 frank@example.com (key)",
            "event 0 sf",
            "event 0 stack[0]"
        ]
    );
    assert_eq!(
        inv.other_fields.keys().map(String::as_str).collect::<Vec<_>>(),
        ["bp", "estack", "foo", "frank@example.com", "sf", "stack"]
    );

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shared.json");
    let outcome = redact_file(&trace, &out).unwrap();
    assert_eq!(outcome.replaced, 6);
    let text = std::fs::read_to_string(&out).unwrap();
    for secret in ["alice", "bob", "ghp_", "dan", "erin", "frank"] {
        assert!(!text.contains(secret), "{secret} left in {text}");
    }
    let again = parse_json_trace(text.as_bytes()).unwrap();
    assert!(Inventory::of(&again).findings.is_empty());
    // The typed fields are intact.
    let typed = parse_trace(text.as_bytes()).unwrap();
    assert_eq!((typed.events[0].ts, typed.events[0].dur), (Some(0.0), Some(2.0)));
}

#[test]
fn a_redacted_copy_scans_clean_keeps_the_rest_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let trace = parse_json_trace(PLANTED).unwrap();
    let out = dir.path().join("shared.json");
    let outcome = redact_file(&trace, &out).unwrap();
    assert_eq!(outcome.replaced, 5);
    assert!(!outcome.rebuilt);
    let copy = std::fs::read(&out).unwrap();
    let text = String::from_utf8(copy.clone()).unwrap();
    for secret in ["carol", "q8Z3vK1m", "private/data.csv", "[1,2,3"] {
        assert!(!text.contains(secret), "{secret} left in {text}");
    }
    assert!(Inventory::of(&parse_json_trace(&copy).unwrap()).findings.is_empty());
    // Timing and structure are kept.
    let again = parse_trace(&copy).unwrap();
    assert_eq!(again.events.len(), trace.events.len());
    assert_eq!(again.events[1].dur, Some(5.0));
    assert_eq!(again.events[1].arg("batch").unwrap(), "7");

    // The output exists now: a second redaction refuses and leaves it alone.
    let err = redact_file(&trace, &out).unwrap_err();
    assert!(matches!(err, RedactError::Exists { .. }), "{err}");
    assert!(err.to_string().contains("never overwrites"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), copy);
}

#[test]
fn a_cut_file_is_redacted_from_its_complete_events_with_every_field() {
    let cut = &UNKNOWN_FIELDS[..UNKNOWN_FIELDS.len() - 2];
    let trace = parse_json_trace(cut).unwrap();
    assert!(trace.truncated);
    assert_eq!(trace.events.len(), 1);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cut.json");
    let outcome = redact_file(&trace, &out).unwrap();
    assert!(outcome.rebuilt);
    let again = parse_json_trace(&std::fs::read(&out).unwrap()).unwrap();
    assert!(!again.truncated, "the copy is a complete file");
    assert!(Inventory::of(&again).findings.is_empty());
    assert_eq!(again.events.len(), trace.events.len());
    assert!(again.events[0].contains_key("estack"), "every field is carried over");
}

#[test]
fn a_partial_file_header_is_not_input_content_and_its_tags_are_decoded() {
    // What the sink streams while a cycle is being written, cut by a crash.
    let partial = br#"[
{"ph":"M","pid":1,"tid":0,"name":"steptrace_segment","args":{"worker":"w","cycle":0,"schedule":"active=1","epoch_unix_ms":1,"steptrace_version":"0.1.0","manifest":{"sync_policy":"step","sync_meaning":"one sync at the end of each step: ProfilerStep#N is the true step time; phase spans are host launch time","fallback_reason":"CUDA unavailable: libcuda.so not found (NVIDIA driver not installed or not on the loader path)"}}},
{"ph":"B","pid":1,"tid":1,"ts":1,"name":"ProfilerStep#0","cat":"steptrace\u001f7"},
{"ph":"B","pid":1,"tid":1,"ts":2,"name":"forward","cat":"steptrace\u001f7"},
"#;
    let trace = parse_json_trace(partial).unwrap();
    let inv = Inventory::of(&trace);
    assert_eq!(inv.findings.len(), 0, "{:?}", inv.findings);
    assert_eq!(inv.categories.keys().map(String::as_str).collect::<Vec<_>>(), ["steptrace"]);
    assert_eq!(inv.categories["steptrace"], 2);
    // The same prose in an ordinary event is flagged.
    let prose = br#"[{"ph":"i","name":"x","ts":1,"args":{"sync_meaning":"one sync at the end of each step: ProfilerStep#N is the true step time; phase spans are host launch time"}}]"#;
    assert_eq!(Inventory::of(&parse_json_trace(prose).unwrap()).findings.len(), 1);
}

/// A rank's file as steptrace writes it, with a secret in its metadata.
const RANK: &[u8] = br#"{"distributedInfo": {"backend": "threads", "rank": 1, "world_size": 2},
"traceEvents":[
{"ph":"X","name":"ProfilerStep#3","pid":1,"tid":1,"ts":0,"dur":5,"args":{"rank":1}},
{"ph":"X","name":"data.load","pid":1,"tid":1,"ts":1,"dur":2,"args":{"card":4111111111111111}}
],
"displayTimeUnit":"ms",
"deviceProperties":[{"id":0,"name":"cpu"}],
"metadata":{"distributed":{"rank":1,"world_size":2},"manifest":{"notes":["ask alice@example.org"]}}}
"#;

/// The first match of HTA's rank pattern, `"rank":\s+(\d+)`, on the raw text.
fn hta_rank(text: &str) -> Option<u64> {
    let mut rest = text;
    while let Some(at) = rest.find("\"rank\":") {
        let after = &rest[at + 7..];
        let digits = after.trim_start_matches([' ', '\t', '\n', '\r']);
        if digits.len() < after.len() {
            let n: String = digits.chars().take_while(char::is_ascii_digit).collect();
            if !n.is_empty() {
                return n.parse().ok();
            }
        }
        rest = after;
    }
    None
}

#[test]
fn a_redacted_rank_file_keeps_its_layout_and_htas_rank() {
    use steptrace::analysis::{redact_file_in_order, top_level_keys};
    assert_eq!(hta_rank(std::str::from_utf8(RANK).unwrap()), Some(1));
    let order = top_level_keys(RANK);
    assert_eq!(order, ["distributedInfo", "traceEvents", "displayTimeUnit", "deviceProperties", "metadata"]);
    let trace = parse_json_trace(RANK).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (name, outcome) in [
        ("kept.json", redact_file_in_order(&trace, &order, &dir.path().join("kept.json"))),
        // Without the source's order: steptrace's own layout, distributedInfo first.
        ("plain.json", redact_file(&trace, &dir.path().join("plain.json"))),
    ] {
        assert_eq!(outcome.unwrap().replaced, 2, "{name}");
        let copy = std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert!(
            copy.starts_with(r#"{"distributedInfo": {"backend": "threads", "rank": 1, "world_size": 2},"#),
            "{name}: {copy}"
        );
        assert_eq!(hta_rank(&copy), Some(1), "{name}");
        assert!(!copy.contains("alice") && !copy.contains("4111111111111111"), "{name}: {copy}");
        let keys = top_level_keys(copy.as_bytes());
        assert_eq!(keys[..2], ["distributedInfo", "traceEvents"], "{name}");
        if name == "kept.json" {
            assert_eq!(keys, order);
        }
        let again = parse_json_trace(copy.as_bytes()).unwrap();
        assert!(Inventory::of(&again).findings.is_empty(), "{name}");
        assert_eq!(again.events.len(), 2);
    }
    // A foreign order is kept as well: torch.profiler's, distributedInfo third.
    let kineto = br#"{"schemaVersion": 1, "deviceProperties": [], "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4},
        "traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1, "args": {"who": "bob@example.com"}}], "traceName": "t.json"}"#;
    let order = top_level_keys(kineto);
    let out = dir.path().join("kineto.json");
    redact_file_in_order(&parse_json_trace(kineto).unwrap(), &order, &out).unwrap();
    let copy = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        top_level_keys(copy.as_bytes()),
        ["schemaVersion", "deviceProperties", "distributedInfo", "traceEvents", "traceName"]
    );
    assert_eq!(hta_rank(&copy), Some(3));
}

#[test]
fn a_gz_name_gets_a_gzip_copy_and_the_order_of_a_gzip_source_is_read() {
    use std::io::{Read, Write};
    use steptrace::analysis::top_level_keys;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(RANK).unwrap();
    let gz = encoder.finish().unwrap();
    assert_eq!(top_level_keys(&gz), top_level_keys(RANK));
    let trace = parse_json_trace(&gz).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shared.json.gz");
    let outcome = redact_file(&trace, &out).unwrap();
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(outcome.bytes, bytes.len() as u64);
    assert_eq!(bytes[..2], [0x1f, 0x8b], "gzip magic");
    let mut plain = String::new();
    flate2::read::MultiGzDecoder::new(bytes.as_slice()).read_to_string(&mut plain).unwrap();
    assert!(plain.starts_with(r#"{"distributedInfo": {"#) && !plain.contains("alice"), "{plain}");
    assert!(Inventory::of(&parse_json_trace(&bytes).unwrap()).findings.is_empty());
    // Upper-case extensions too.
    redact_file(&trace, &dir.path().join("X.JSON.GZ")).unwrap();
    assert_eq!(std::fs::read(dir.path().join("X.JSON.GZ")).unwrap()[..2], [0x1f, 0x8b]);
    // A plain name stays plain.
    redact_file(&trace, &dir.path().join("plain.json")).unwrap();
    assert_eq!(std::fs::read(dir.path().join("plain.json")).unwrap()[0], b'{');
}

#[test]
fn personal_numbers_shares_and_named_homes_are_flagged_and_redacted() {
    let planted = br#"{"traceEvents":[
      {"ph":"X","name":"charge","pid":1,"tid":1,"ts":1714567890123451,"dur":123456789012347,
       "args":{"card":"4111 1111 1111 1111","pan":5555555555554444,"ssn":"078-05-1120","iban":"DE89 3704 0044 0532 0130 00",
               "src":"\\\\fileserver\\finance\\q3.csv","escaped":"\\\\\\\\fileserver\\\\finance","home":"~alice/data",
               "4111-1111-1111-1111":true}}
    ],"metadata":{"epoch_unix_ms":1714567890123}}"#;
    let trace = parse_json_trace(planted).unwrap();
    let inv = Inventory::of(&trace);
    let mut kinds: Vec<&str> = inv.findings.iter().map(|f| f.kind.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            "bank account number (IBAN)",
            "home directory path",
            "national identifier",
            "network share path",
            "payment card number"
        ]
    );
    assert_eq!(inv.findings.len(), 8, "{:?}", inv.findings);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shared.json");
    assert_eq!(redact_file(&trace, &out).unwrap().replaced, 8);
    let copy = std::fs::read_to_string(&out).unwrap();
    for secret in ["4111", "5555555555554444", "05-1120", "3704", "fileserver", "alice"] {
        assert!(!copy.contains(secret), "{secret} left in {copy}");
    }
    // Timestamps and durations are no card numbers.
    let typed = parse_trace(copy.as_bytes()).unwrap();
    assert_eq!((typed.events[0].ts, typed.events[0].dur), (Some(1714567890123451.0), Some(123456789012347.0)));
}
