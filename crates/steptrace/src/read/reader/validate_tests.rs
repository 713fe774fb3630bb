//! Tests of the validator.

use super::*;
use crate::read::reader::parse_trace;

fn problems(json: &str) -> Vec<(Option<usize>, ProblemKind)> {
    let trace = parse_trace(json.as_bytes()).unwrap();
    validate(&trace).into_iter().map(|p| (p.event_index, p.kind)).collect()
}

#[test]
fn a_well_formed_trace_has_no_problems() {
    let json = r#"{"traceEvents":[
        {"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"main"}},
        {"ph":"B","name":"step","pid":1,"tid":1,"ts":0},
        {"ph":"B","name":"fwd","pid":1,"tid":1,"ts":1},
        {"ph":"E","pid":1,"tid":1,"ts":2},
        {"ph":"X","name":"k","pid":1,"tid":2,"ts":1,"dur":0},
        {"ph":"i","name":"mark","pid":1,"tid":1,"ts":2,"s":"t"},
        {"ph":"C","name":"mem","pid":1,"ts":2,"args":{"bytes":10,"peak":"12.5"}},
        {"ph":"b","cat":"io","id":"0x1","name":"load","pid":1,"ts":0},
        {"ph":"n","cat":"io","id":"0x1","name":"chunk","pid":1,"ts":1},
        {"ph":"e","cat":"io","id":"0x1","name":"load","pid":1,"ts":3},
        {"ph":"s","id":7,"name":"flow","pid":1,"tid":1,"ts":1},
        {"ph":"f","id":7,"name":"flow","pid":1,"tid":2,"ts":2,"bp":"e"},
        {"ph":"E","name":"step","pid":1,"tid":1,"ts":3}
    ]}"#;
    assert_eq!(problems(json), []);
}

#[test]
fn begin_end_pairs_are_matched_per_thread_in_time_order() {
    // Written out of order, and interleaved across threads.
    let json = r#"[
        {"ph":"E","name":"a","pid":1,"tid":1,"ts":5},
        {"ph":"B","name":"a","pid":1,"tid":2,"ts":1},
        {"ph":"B","name":"a","pid":1,"tid":1,"ts":1},
        {"ph":"E","name":"a","pid":1,"tid":2,"ts":2}
    ]"#;
    assert_eq!(problems(json), []);
    // Equal timestamps keep file order: zero-length spans back to back.
    let json = r#"[
        {"ph":"B","name":"a","tid":1,"ts":1},{"ph":"E","name":"a","tid":1,"ts":1},
        {"ph":"B","name":"b","tid":1,"ts":1},{"ph":"E","name":"b","tid":1,"ts":1}
    ]"#;
    assert_eq!(problems(json), []);
    // The same tid in another process is another thread.
    let json = r#"[{"ph":"B","name":"a","pid":1,"tid":1,"ts":1},{"ph":"E","name":"a","pid":2,"tid":1,"ts":2}]"#;
    assert_eq!(problems(json), [(Some(0), ProblemKind::UnclosedBegin), (Some(1), ProblemKind::UnmatchedEnd)]);
}

#[test]
fn nesting_problems() {
    let json = r#"[
        {"ph":"E","name":"x","tid":1,"ts":0},
        {"ph":"B","name":"outer","tid":1,"ts":1},
        {"ph":"B","name":"inner","tid":1,"ts":2},
        {"ph":"E","name":"outer","tid":1,"ts":3},
        {"ph":"E","name":"","tid":1,"ts":4},
        {"ph":"B","name":"open","tid":1,"ts":5}
    ]"#;
    assert_eq!(
        problems(json),
        [
            (Some(0), ProblemKind::UnmatchedEnd),
            (Some(3), ProblemKind::MismatchedEnd),
            (Some(5), ProblemKind::UnclosedBegin),
        ]
    );
    let trace = parse_trace(json.as_bytes()).unwrap();
    let found = validate(&trace);
    assert!(found[1].message.contains("closes \"inner\""), "{}", found[1].message);
    assert!(found[2].to_string().starts_with("event 5: B event \"open\""), "{}", found[2]);
}

#[test]
fn events_without_a_timestamp_are_reported_once() {
    let json = r#"[
        {"ph":"B","name":"a","tid":1},
        {"ph":"X","name":"k","ts":"NaN","dur":1},
        {"ph":"M","name":"thread_name","args":{"name":"t"}},
        {"ph":"E","name":"a","tid":1,"ts":3}
    ]"#;
    assert_eq!(
        problems(json),
        [
            (Some(0), ProblemKind::InvalidTimestamp),
            (Some(1), ProblemKind::InvalidTimestamp),
            (Some(3), ProblemKind::UnmatchedEnd),
        ]
    );
}

#[test]
fn durations_of_complete_events() {
    let json = r#"[
        {"ph":"X","name":"ok","ts":1,"dur":0},
        {"ph":"X","name":"neg","ts":1,"dur":-0.5},
        {"ph":"X","name":"none","ts":1},
        {"ph":"X","name":"inf","ts":1,"dur":"inf"},
        {"ph":"B","name":"b","ts":1,"dur":-5},
        {"ph":"E","name":"b","ts":1}
    ]"#;
    assert_eq!(
        problems(json),
        [
            (Some(1), ProblemKind::InvalidDuration),
            (Some(2), ProblemKind::InvalidDuration),
            (Some(3), ProblemKind::InvalidDuration),
        ]
    );
}

#[test]
fn absurd_times_are_implausible() {
    let json = r#"[
        {"ph":"X","name":"ok","ts":1.7e15,"dur":1e15},
        {"ph":"X","name":"far","ts":1e308,"dur":1},
        {"ph":"X","name":"long","ts":1,"dur":2e15},
        {"ph":"B","name":"b","tid":1,"ts":-1e17},
        {"ph":"E","name":"b","tid":1,"ts":2}
    ]"#;
    assert_eq!(
        problems(json),
        [
            (Some(1), ProblemKind::ImplausibleTime),
            (Some(2), ProblemKind::ImplausibleTime),
            (Some(3), ProblemKind::ImplausibleTime),
            // The begin is left out of the nesting: its end closes nothing.
            (Some(4), ProblemKind::UnmatchedEnd),
        ]
    );
    let trace = parse_trace(json.as_bytes()).unwrap();
    assert!(validate(&trace)[0].message.contains("1e308 µs"), "{}", validate(&trace)[0].message);
    assert!(plausible_ts(-1e16) && !plausible_ts(f64::NAN) && !plausible_dur(-0.5) && plausible_dur(0.0));
}

#[test]
fn unknown_and_missing_phases() {
    let json = r#"[{"ph":"Q","ts":1},{"name":"nophase","ts":1},{"ph":"bb","ts":1},{"ph":"I","ts":1}]"#;
    assert_eq!(
        problems(json),
        [
            (Some(0), ProblemKind::UnknownPhase),
            (Some(1), ProblemKind::UnknownPhase),
            (Some(2), ProblemKind::UnknownPhase)
        ]
    );
}

#[test]
fn async_events_balance_per_category_and_id() {
    let json = r#"[
        {"ph":"b","cat":"a","id":1,"name":"x","ts":1},
        {"ph":"e","cat":"b","id":1,"name":"x","ts":2},
        {"ph":"b","cat":"a","id":2,"name":"y","ts":1},
        {"ph":"e","cat":"a","id":2,"name":"z","ts":2},
        {"ph":"e","cat":"a","id":"2","name":"","ts":3},
        {"ph":"b","name":"noid","ts":1},
        {"ph":"f","name":"flow","ts":1}
    ]"#;
    assert_eq!(
        problems(json),
        [
            (Some(0), ProblemKind::UnclosedAsyncBegin),
            (Some(1), ProblemKind::UnmatchedAsyncEnd),
            (Some(3), ProblemKind::MismatchedAsyncEnd),
            (Some(4), ProblemKind::UnmatchedAsyncEnd),
            (Some(5), ProblemKind::MissingId),
            (Some(6), ProblemKind::MissingId),
        ]
    );
}

#[test]
fn counters_need_numeric_args() {
    let json = r#"[
        {"ph":"C","name":"ok","ts":1,"args":{"a":1,"b":2.5,"c":"3"}},
        {"ph":"C","name":"none","ts":1},
        {"ph":"C","name":"empty","ts":1,"args":{}},
        {"ph":"C","name":"text","ts":1,"args":{"a":"lots","b":1,"c":[1]}},
        {"ph":"C","name":"list","ts":1,"args":[1,2]}
    ]"#;
    assert_eq!(
        problems(json),
        [
            (Some(1), ProblemKind::InvalidCounter),
            (Some(2), ProblemKind::InvalidCounter),
            (Some(3), ProblemKind::InvalidCounter),
            (Some(4), ProblemKind::InvalidCounter),
        ]
    );
    let trace = parse_trace(json.as_bytes()).unwrap();
    let found = validate(&trace);
    assert!(found[2].message.contains("non-numeric values for a, c"), "{}", found[2].message);
}

#[test]
fn instant_scopes() {
    let json = r#"[{"ph":"i","ts":1,"s":"g"},{"ph":"i","ts":1,"s":"x"},{"ph":"I","ts":1,"s":"process"}]"#;
    assert_eq!(problems(json), [(Some(1), ProblemKind::InvalidScope), (Some(2), ProblemKind::InvalidScope)]);
}

#[test]
fn truncation_is_a_problem_of_the_whole_trace() {
    let json = r#"[{"ph":"B","name":"a","tid":1,"ts":1},{"ph":"E","na"#;
    assert_eq!(problems(json), [(None, ProblemKind::Truncated), (Some(0), ProblemKind::UnclosedBegin)]);
    let trace = parse_trace(json.as_bytes()).unwrap();
    assert!(validate(&trace)[0].to_string().contains("13 trailing bytes ignored"));
}
