//! Tests of the label scanner on its own.

use serde_json::json;

use super::*;

#[test]
fn the_sink_entry_points_name_their_locations() {
    let mut scanner = LabelScanner::with_limit(4096);
    scanner.event(
        Some("load alice@example.org"),
        Some(&json!({ "/home/bob/x": 1, "path": "C:\\Users\\carol\\x", "nested": { "user": "dan@example.com" } })),
    );
    scanner.event(None, Some(&json!(["erin@example.com"])));
    scanner.label("thread name", "/root/worker");
    scanner.tool_value(
        "manifest",
        &json!({ "cache": "/home/frank/.cache", "list": ["ok", "~/x"], "text": "The quick brown fox jumps over the lazy dog and then runs into the forest" }),
    );
    let mut warnings = scanner.into_warnings();
    // Arguments come in the order of the JSON map.
    warnings.sort();
    assert_eq!(
        warnings,
        [
            "argument key looks like HomePath: /home/b***/…",
            "manifest.cache looks like HomePath: /home/fr***/…",
            "manifest.list looks like HomePath: ~/***",
            "name looks like Email: al***@***.org",
            r"path looks like HomePath: C:\Users\ca***",
            "thread name looks like HomePath: /root/***",
        ]
    );
}

#[test]
fn each_string_is_reported_once_for_each_check() {
    let prose = "The quick brown fox jumps over the lazy dog and then runs into the forest";
    let mut scanner = LabelScanner::new();
    // Fewer checks after more: nothing new.
    scanner.label("a", "alice@example.org");
    scanner.tool_value("b", &json!("alice@example.org"));
    // More checks after fewer: only what the new checks find.
    scanner.tool_value("c", &json!(format!("{prose} ~/x")));
    scanner.label("d", &format!("{prose} ~/x"));
    scanner.label("e", &format!("{prose} ~/x"));
    let found: Vec<(&str, FindingKind)> =
        scanner.findings().iter().map(|f| (f.location.as_str(), f.finding.kind)).collect();
    assert_eq!(found, [("a", FindingKind::Email), ("c", FindingKind::HomePath), ("d", FindingKind::InputContent)]);
}

#[test]
fn past_the_cap_strings_are_checked_or_skipped() {
    let labels = ["alice@example.org", "bob@example.org", "carol@example.org", "carol@example.org"];
    let mut limited = LabelScanner::with_limit(2);
    let mut capped = LabelScanner::capped(2, false);
    for label in labels {
        limited.label("x", label);
        capped.label("x", label);
    }
    assert_eq!(limited.findings().len(), 2);
    // Not remembered, so reported each time.
    assert_eq!(capped.findings().len(), 4);
    // What was remembered is still not reported twice.
    capped.label("x", "alice@example.org");
    limited.label("x", "alice@example.org");
    assert_eq!((limited.findings().len(), capped.findings().len()), (2, 4));
}
