//! What `inspect` flags and `--redact` replaces, against secrets placed to slip through: a
//! PEM private key over several lines with a short last line (in a value, as an argument
//! key, as an array of lines), secrets used as argument keys or behind a prefix of their own
//! (`key_AKIA…`, `extra_sk_live_…`), and one address written three times, counted three
//! times alike by the inventory, its JSON and the sanitised copy.

use serde_json::{json, Value};
use steptrace::analysis::{redact_file, Inventory};
use steptrace::reader::{parse_json_trace, JsonTrace};

/// A private key as a file holds it: 64 characters a line, a short last line.
const KEY: &str = "-----BEGIN RSA PRIVATE KEY-----\n\
MIIEowIBAAKCAQEAv3a9Qk2Zp7Xw1Lm4Nc8Rt6Yb0Hd5Jf2Gs9Tu3Ve7AqWxYz1K\n\
q8Zp3Xv7Lk2Rt9Wm4Yb1Nc6Hd0Jf5Gs8Tu2Ve7Aq8Zp3Xv7Lk2Rt9Wm4Yb1Nc6Hd\n\
Zm9vYmFy\n\
-----END RSA PRIVATE KEY-----\n";

/// What must be gone from a sanitised copy of a trace holding [`KEY`]: every line of it.
const KEY_LINES: [&str; 5] =
    ["BEGIN RSA PRIVATE KEY", "MIIEowIBAAKCAQEA", "q8Zp3Xv7Lk2Rt9Wm", "Zm9vYmFy", "END RSA PRIVATE KEY"];

fn event(ts: u64, args: Value) -> Value {
    json!({"ph": "X", "name": "work", "pid": 1, "tid": 1, "ts": ts, "dur": 1, "args": args})
}

fn parsed(events: Vec<Value>) -> JsonTrace {
    parse_json_trace(json!({"traceEvents": events}).to_string().as_bytes()).unwrap()
}

/// The sanitised copy of `trace`, as text, after checking that it scans clean and that it
/// replaced as many strings as the inventory flagged.
fn redacted(trace: &JsonTrace) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shared.json");
    let outcome = redact_file(trace, &out).unwrap();
    let inv = Inventory::of(trace);
    assert_eq!(outcome.replaced, inv.flagged, "{:#?}", inv.findings);
    let text = std::fs::read_to_string(&out).unwrap();
    let again = Inventory::of(&parse_json_trace(text.as_bytes()).unwrap());
    assert_eq!((again.findings.len(), again.flagged), (0, 0), "{:#?}", again.findings);
    text
}

fn locations(inv: &Inventory) -> Vec<(&str, &str)> {
    let mut v: Vec<(&str, &str)> = inv.findings.iter().map(|f| (f.location.as_str(), f.kind.as_str())).collect();
    v.sort_unstable();
    v
}

#[test]
fn no_line_of_a_private_key_survives_in_a_value_a_key_or_an_array_of_lines() {
    let lines: Vec<&str> = KEY.lines().collect();
    let trace = parsed(vec![
        event(0, json!({"pem": KEY})),
        event(1, json!({KEY: 1})),
        event(2, json!({"lines": lines})),
        // The body alone, without its header, as a key.
        event(3, json!({lines[1..4].join("\n"): 2})),
    ]);
    let inv = Inventory::of(&trace);
    let found = locations(&inv);
    for at in ["event 0 args.pem", "event 2 args.lines[0]", "event 2 args.lines[3]", "event 2 args.lines[4]"] {
        assert!(found.contains(&(at, "token or secret")), "{at} not in {found:?}");
    }
    assert_eq!(found.iter().filter(|(at, _)| at.ends_with("(key)")).count(), 1, "{found:?}");
    // The same key as a key: the same string, reported once and counted twice.
    assert_eq!(inv.findings.iter().find(|f| f.location == "event 0 args.pem").unwrap().occurrences, 2);
    let copy = redacted(&trace);
    for line in KEY_LINES {
        assert!(!copy.contains(line), "{line} left in {copy}");
    }
    // What is around the key is kept.
    let again = parse_json_trace(copy.as_bytes()).unwrap();
    assert_eq!(again.events[0]["args"]["pem"], "[*** redacted token or secret ***]\n");
    assert_eq!(again.events[2]["args"]["lines"].as_array().unwrap().len(), 5);
}

#[test]
fn secrets_used_as_keys_or_behind_a_prefix_are_flagged_and_replaced() {
    let trace = parsed(vec![
        event(0, json!({"k": "key_AKIAIOSFODNN7EXAMPLE", "s": "extra_sk_live_4eC39HqLyjWDarjtT1zdp7dc"})),
        event(1, json!({"AKIAIOSFODNN7EXAMPLE": 1, "user_ghp_1234567890abcdefghijABCDEFGHIJ123456": 2})),
        event(2, json!({"sk_live_4eC39HqLyjWDarjtT1zdp7dc": {"ok": true}})),
    ]);
    let inv = Inventory::of(&trace);
    assert_eq!(
        locations(&inv),
        [
            ("event 0 args.k", "token or secret"),
            ("event 0 args.s", "token or secret"),
            ("event 1 args.AKIAIOSFODNN7EXAMPLE (key)", "token or secret"),
            ("event 1 args.user_ghp_1234567890abcdefghijABCDEFGHIJ123456 (key)", "token or secret"),
            ("event 2 args.sk_live_4eC39HqLyjWDarjtT1zdp7dc (key)", "token or secret"),
        ]
    );
    assert!(inv.findings.iter().all(|f| !f.excerpt.contains("IOSFODNN") && !f.excerpt.contains("4eC39")));
    let copy = redacted(&trace);
    for secret in ["AKIAIOSFODNN7EXAMPLE", "4eC39HqLyjWDarjtT1zdp7dc", "1234567890abcdefghij"] {
        assert!(!copy.contains(secret), "{secret} left in {copy}");
    }
    // The prefix is no secret: it stays, and so does what the key held.
    let again = parse_json_trace(copy.as_bytes()).unwrap();
    assert_eq!(again.events[0]["args"]["k"], "key_[*** redacted token or secret ***]");
    let moved = again.events[2]["args"].as_object().unwrap();
    assert_eq!(moved.values().next().unwrap(), &json!({"ok": true}));
}

#[test]
fn every_occurrence_is_counted_alike_by_the_inventory_its_json_and_the_copy() {
    let mut events: Vec<Value> = (0..3).map(|i| event(i, json!({"owner": "alice@example.org"}))).collect();
    // One string with two findings counts once; a secret pair twice.
    events.push(event(3, json!({"note": "alice@example.org in /home/alice/run"})));
    events.push(event(4, json!({"api_key": "q8Z3vK1mP0sX7tY2wR9uL4nB"})));
    events.push(event(5, json!({"api_key": "q8Z3vK1mP0sX7tY2wR9uL4nB"})));
    let trace = parsed(events);
    let inv = Inventory::of(&trace);
    let email = inv.findings.iter().find(|f| f.location == "event 0 args.owner").unwrap();
    assert_eq!(email.occurrences, 3);
    assert_eq!(inv.findings.iter().filter(|f| f.kind == "e-mail address").count(), 2, "{:#?}", inv.findings);
    let key = inv.findings.iter().find(|f| f.location == "event 4 args.api_key").unwrap();
    assert_eq!(key.occurrences, 2);
    assert_eq!(inv.flagged, 6);
    let json = serde_json::to_value(&inv).unwrap();
    assert_eq!(json["flagged"], 6);
    assert_eq!(json["findings"][0]["occurrences"], 3);
    let copy = redacted(&trace);
    assert_eq!(copy.matches("[*** redacted e-mail address ***]").count(), 4, "{copy}");
    assert!(!copy.contains("alice"));
}
