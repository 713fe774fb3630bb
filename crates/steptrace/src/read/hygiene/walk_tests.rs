//! Tests of the walk of every string of a trace, through the scan and the
//! redaction.

use super::{assert_located, located, redact_trace, scan_trace, FindingKind};
use crate::read::reader::parse_json_trace;

#[test]
fn every_field_and_every_key_is_walked() {
    let json = r#"[{"ph":"X","name":"a","ts":1,"dur":2,
        "foo":"alice@example.com",
        "sf":"/home/bob/x",
        "stack":["ok","ghp_abcdefghijklmnopqrstuvwxyz0123456789"],
        "estack":[{"frame":"/Users/carol/lib.rs"}],
        "bp":{"k":{"deeper":["dan@example.com"]}},
        "erin@example.com":1,
        "args":{"nested":{"frank@example.com":[1]}}}]"#;
    assert_located(
        json,
        &[
            ("event 0 args.nested.frank@example.com (key)", FindingKind::Email),
            ("event 0 bp.k.deeper[0]", FindingKind::Email),
            ("event 0 erin@example.com (key)", FindingKind::Email),
            ("event 0 estack[0].frame", FindingKind::HomePath),
            ("event 0 foo", FindingKind::Email),
            ("event 0 sf", FindingKind::HomePath),
            ("event 0 stack[1]", FindingKind::Token),
        ],
    );
}

#[test]
fn a_partial_header_is_tool_written_like_the_metadata() {
    let prose =
        "one sync at the end of each step: ProfilerStep#N is the true step time and phase spans are host launch time";
    let header = format!(
        r#"[{{"ph":"M","name":"steptrace_segment","pid":1,"tid":0,"args":{{"worker":"w","manifest":{{"sync_meaning":"{prose}","cache":"/home/alice/.cache","counts":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}}}}}},
           {{"ph":"i","name":"n","ts":1,"args":{{"sync_meaning":"{prose}"}}}}]"#
    );
    // The header's prose and settings are not input content; a private
    // path still is a finding; the same prose in an ordinary event is.
    assert_eq!(
        located(&header),
        [
            ("event 0 args.manifest.cache".to_owned(), FindingKind::HomePath),
            ("event 1 args.sync_meaning".to_owned(), FindingKind::InputContent),
        ]
    );
}

#[test]
fn the_measured_limits_and_the_cold_start_are_steptraces_own_words() {
    let method = "the best of 20 repeats of a reduction over a 1 GiB tensor, timed around a sync on the device";
    let source = "the NVIDIA H200 datasheet, the line for the memory bandwidth of the SXM form factor module";
    let reason = "not applicable: the backend in use does not compile its kernels with cubecl at all in this run";
    let manifest = format!(
        r#"{{"peaks":{{"read":{{"value":1e12,"spread":0.1,"method":"{method}"}},
             "published":{{"bandwidth":{{"value":4.8e12,"source":"{source}"}}}},"owner":"/home/alice/peaks"}},
           "startup":{{"cold_start":{{"reason":"{reason}","list":"{method}"}}}}}}"#
    );
    let trace = format!(
        r#"{{"traceEvents":[
            {{"ph":"M","name":"steptrace_segment","pid":1,"tid":0,"args":{{"manifest":{manifest}}}}},
            {{"ph":"i","name":"n","ts":1,"args":{{"method":"{method}"}}}}],
           "metadata":{{"manifest":{manifest},"other":{{"peaks":{{"method":"{method}, twice"}}}}}}}}"#
    );
    // Quiet in the manifest's limits and cold start, in the metadata and in
    // a partial file's header alike; a private path there is still found,
    // and the same words anywhere else are input content (each string is
    // reported once, at its first place).
    assert_eq!(
        located(&trace),
        [
            ("event 0 args.manifest.peaks.owner".to_owned(), FindingKind::HomePath),
            ("event 1 args.method".to_owned(), FindingKind::InputContent),
            ("metadata.other.peaks.method".to_owned(), FindingKind::InputContent),
        ]
    );
}

#[test]
fn a_reports_lists_of_what_was_not_observed_are_prose_too() {
    let prose = "what the allocator held after the failure: the backend does not report memory in use";
    let other = "the same words under a key of no meaning are still read as what they look like";
    let json = format!(
        r#"{{"traceEvents":[{{"ph":"i","name":"n","ts":1,"args":{{"not_observed":["{prose}"]}}}}],
           "metadata":{{"manifest":{{"out_of_memory":{{"not_observed":["{prose}"],"per_sample":{{"not_known":"{prose}"}},
           "largest":[{{"description":"{prose}","bytes":8}}],"kept":"{other}"}}}}}}}}"#
    );
    // Under the report's diagnostic keys, in the metadata, prose is the tool's;
    // elsewhere it is still read as input content.
    assert_eq!(
        located(&json),
        [
            ("event 0 args.not_observed[0]".to_owned(), FindingKind::InputContent),
            ("metadata.manifest.out_of_memory.kept".to_owned(), FindingKind::InputContent),
        ]
    );
}

#[test]
fn card_numbers_written_as_json_numbers_are_flagged_and_redacted() {
    let json = r#"{"traceEvents":[
        {"ph":"X","name":"pay","ts":1714567890123451,"dur":123456789012347,"pid":1,"tid":1,
         "args":{"card":4111111111111111,"amount":1999,"list":[1,5555555555554444]}}
    ],"metadata":{"billing":{"card":378282246310005},"epoch_unix_ms":1714567890123}}"#;
    assert_eq!(
        located(json),
        [
            ("event 0 args.card".to_owned(), FindingKind::Card),
            ("event 0 args.list[1]".to_owned(), FindingKind::Card),
            ("metadata.billing.card".to_owned(), FindingKind::Card),
        ]
    );
    let trace = parse_json_trace(json.as_bytes()).unwrap();
    let (clean, replaced) = redact_trace(&trace);
    assert_eq!(replaced, 3);
    assert_eq!(scan_trace(&clean), []);
    let text = clean.to_value().to_string();
    for number in ["4111111111111111", "5555555555554444", "378282246310005"] {
        assert!(!text.contains(number), "{number} left in {text}");
    }
    // Timestamps, durations and amounts are kept as they were.
    let event = &clean.events[0];
    assert_eq!((event["ts"].as_u64(), event["args"]["amount"].as_u64()), (Some(1714567890123451), Some(1999)));
    assert_eq!(event["args"]["card"], "[*** redacted payment card number ***]");
}

#[test]
fn a_traces_own_numbers_are_not_card_numbers() {
    // 4111111111119 passes Luhn's check and has a Visa's shape (13
    // digits from 4): as ns, 68 minutes; as an id, any id.
    let json = r#"{"traceEvents":[
        {"ph":"X","name":"gemm","ts":4111111111119,"dur":4111111111119,"pid":4111111111119,"tid":4111111111119,
         "id":4111111111119,"args":{"correlation":4111111111119,"External id":4111111111119,
         "start_ns":4111111111119,"queued_time":4111111111119,"Addr":94111111111119,"bytes":1048576}},
        {"ph":"X","name":"ProfilerStep#3","ts":1733140000123456,"dur":4111111111111,"pid":1,"tid":1},
        {"ph":"f","name":"flow","ts":1733140000123999,"pid":1,"tid":1,"id":4111111111119,"bind_id":4111111111119}
    ],"metadata":{"baseTimeNanoseconds":1733140000123456789,"clock":{"epoch_unix_ms":1733140000123},
                  "duration_ns":4111111111119}}"#;
    assert_eq!(located(json), Vec::<(String, FindingKind)>::new());
    let trace = parse_json_trace(json.as_bytes()).unwrap();
    let (clean, replaced) = redact_trace(&trace);
    assert_eq!((replaced, &clean), (0, &trace));
    // The same number under a key of no figure is a card number.
    let card = r#"[{"ph":"X","name":"pay","ts":1,"dur":2,"args":{"card":4111111111119}}]"#;
    assert_located(card, &[("event 0 args.card", FindingKind::Card)]);
}

#[test]
fn the_redaction_replaces_what_the_walk_flags_and_keeps_the_rest() {
    let json = r#"{"traceEvents":[
        {"ph":"X","name":"a","ts":1,"dur":2,"foo":"alice@example.com","erin@example.com":7,"ok":"fine",
         "stack":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]},
        {"ph":"M","name":"thread_name","tid":3,"args":{"name":"/home/bob/worker"}}
    ],"otherData":{"api_key":"q8Z3vK1mP0sX7tY2wR9uL4nB"}}"#;
    let trace = parse_json_trace(json.as_bytes()).unwrap();
    let (clean, replaced) = redact_trace(&trace);
    assert_eq!(replaced, 5);
    assert_eq!(scan_trace(&clean), []);
    let text = clean.to_value().to_string();
    for secret in ["alice", "erin", "bob", "q8Z3"] {
        assert!(!text.contains(secret), "{secret} left in {text}");
    }
    let event = &clean.events[0];
    assert_eq!((event["ok"].as_str(), event["dur"].as_f64()), (Some("fine"), Some(2.0)));
    assert!(event.keys().any(|k| k.starts_with("[*** redacted e-mail address ***]#")), "{event:?}");
    // Nothing flagged: nothing copied.
    let (same, replaced) = redact_trace(&clean);
    assert_eq!((replaced, same), (0, clean));
}
