//! `steptrace inspect` counts what it flags as `--redact` replaces it: one address written
//! three times is one finding of three occurrences in the text, in `--json` and in the
//! sanitised copy; and a private key over several lines, or a secret behind a prefix of its
//! own, leaves nothing of itself in the copy.

mod common;

use common::{steptrace, text};
use serde_json::{json, Value};

const KEY: &str = "-----BEGIN EC PRIVATE KEY-----\n\
MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5ocNnqKLFVm6OoAoGCCqGSM49\n\
AwEHoUQDQgAE\n\
-----END EC PRIVATE KEY-----";

fn trace() -> String {
    let mut events: Vec<Value> = (0..3)
        .map(|i| json!({"ph": "X", "name": "load", "pid": 1, "tid": 1, "ts": i, "dur": 1, "args": {"owner": "alice@example.org"}}))
        .collect();
    events.push(json!({"ph": "X", "name": "auth", "pid": 1, "tid": 1, "ts": 3, "dur": 1,
        "args": {"pem": KEY, "lines": KEY.lines().collect::<Vec<_>>(), "k": "key_AKIAIOSFODNN7EXAMPLE",
                 "extra_sk_live_4eC39HqLyjWDarjtT1zdp7dc": 1}}));
    json!({"traceEvents": events}).to_string()
}

#[test]
fn every_occurrence_is_counted_alike_in_text_json_and_the_copy() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.json"), trace()).unwrap();
    let out = steptrace(&["inspect", "t.json", "--redact", "shared.json"], dir.path());
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    // The address three times, the key in a value, each of its 4 lines in an array, the
    // prefixed AWS and Stripe keys.
    assert!(stdout.contains("flagged (8 distinct, 10 occurrences):"), "{stdout}");
    assert!(stdout.contains("event 0 args.owner: e-mail address (al***@***.org) ×3"), "{stdout}");
    assert!(stderr.contains("(10 strings replaced,"), "{stderr}");
    assert!(stderr.contains("it scans clean"), "{stderr}");
    let copy = std::fs::read_to_string(dir.path().join("shared.json")).unwrap();
    for secret in
        ["alice", "MHcCAQEE", "AwEHoUQDQgAE", "PRIVATE KEY", "AKIAIOSFODNN7EXAMPLE", "4eC39HqLyjWDarjtT1zdp7dc"]
    {
        assert!(!copy.contains(secret), "{secret} left in {copy}");
    }

    let out = steptrace(&["inspect", "t.json", "--json"], dir.path());
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["flagged"], 10);
    let findings = json["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 8);
    assert_eq!(findings[0]["occurrences"], 3);
    assert_eq!(findings.iter().map(|f| f["occurrences"].as_u64().unwrap()).sum::<u64>(), 10);
}
