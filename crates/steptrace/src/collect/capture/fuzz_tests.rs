//! The capture protocol's two files, fuzzed: whatever another process leaves as the request
//! file, the run answers (or ignores) it without a panic, plans no capture it was not asked
//! for by its token, and keeps a ready file that reads back; whatever lies in the ready file,
//! `steptrace capture` refuses it with an error, never a panic, and signals nobody.

use proptest::prelude::*;

use super::*;
use crate::collect::capture::ask;

fn listener(dir: &std::path::Path) -> OnDemand {
    OnDemand::start(dir, "w", &Schedule::on_demand(1, 2).unwrap()).unwrap()
}

/// Any JSON value, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |v| v.is_finite()).prop_map(Value::from),
        ".{0,40}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map(".{0,12}", inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A field of a request: left as a valid request has it (`None`), or replaced by anything.
fn field() -> impl Strategy<Value = Option<Value>> {
    prop::option::of(prop_oneof![any::<u64>().prop_map(Value::from), any_json()])
}

/// Leaves `bytes` as the request file and raises the run's flag, as SIGUSR1 does; then
/// steps the run to `step`.
fn deliver(od: &mut OnDemand, bytes: &[u8], step: u64) {
    let _ = std::fs::remove_file(&od.paths.request);
    std::fs::write(&od.paths.request, bytes).unwrap();
    od.flag.store(true, std::sync::atomic::Ordering::SeqCst);
    od.at_boundary(step);
}

/// What a run must hold after any request.
fn assert_sound(od: &OnDemand, step: u64) {
    let ready: Ready = files::from_bytes(&std::fs::read(&od.paths.ready).unwrap()).expect("the ready file reads back");
    assert_eq!(ready.pid, std::process::id());
    assert!(!od.paths.request.exists(), "a request read is not read twice");
    if let Some(plan) = &od.plan {
        // A capture planned from a request holds at least one step and does not wrap around.
        assert!(plan.last() >= step, "a plan ending before it starts, at {step}");
    }
    for s in step..step.saturating_add(4) {
        let _ = od.action(s);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn any_bytes_as_the_request_are_refused_or_ignored(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let dir = tempfile::tempdir().unwrap();
        let mut od = listener(dir.path());
        deliver(&mut od, &bytes, 5);
        // Without the run's token nothing is planned.
        prop_assert!(od.plan.is_none());
        assert_sound(&od, 5);
    }

    #[test]
    fn any_json_as_the_request_is_refused_or_ignored(value in any_json()) {
        let dir = tempfile::tempdir().unwrap();
        let mut od = listener(dir.path());
        deliver(&mut od, &serde_json::to_vec(&value).unwrap(), 5);
        prop_assert!(od.plan.is_none());
        assert_sound(&od, 5);
    }

    #[test]
    fn a_request_with_the_token_and_any_fields_is_answered_soundly(
        id in field(), steps in field(), by in field(), at in field(), keep_token in any::<bool>(), step in any::<u64>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut od = listener(dir.path());
        let token = if keep_token { od.token.clone() } else { "0".repeat(32) };
        let mut value = json!({"id": "fuzz", "steps": 3, "requested_by": "fuzz", "requested_at_unix_ms": 1, "token": token});
        for (key, replaced) in [("id", id), ("steps", steps), ("requested_by", by), ("requested_at_unix_ms", at)] {
            if let Some(v) = replaced {
                value[key] = v;
            }
        }
        deliver(&mut od, &serde_json::to_vec(&value).unwrap(), step);
        if !keep_token {
            prop_assert!(od.plan.is_none(), "planned without the run's token");
        }
        assert_sound(&od, step);
    }

    #[test]
    fn any_ready_file_is_refused_by_capture_without_a_signal(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let dir = tempfile::tempdir().unwrap();
        let od = listener(dir.path());
        std::fs::write(&od.paths.ready, &bytes).unwrap();
        // Our own process: a valid ready file would make `ask` signal it, which the listener's
        // handler takes as a flag; garbage must be an error.
        let asked = ask(dir.path(), std::process::id(), Some(1), "fuzz");
        prop_assert!(asked.is_err(), "garbage accepted as a ready file");
        prop_assert!(!od.flag.load(std::sync::atomic::Ordering::SeqCst), "nobody was signalled");
    }

    #[test]
    fn any_json_ready_file_is_refused_by_capture_without_a_signal(value in any_json()) {
        let dir = tempfile::tempdir().unwrap();
        let od = listener(dir.path());
        std::fs::write(&od.paths.ready, serde_json::to_vec(&value).unwrap()).unwrap();
        prop_assert!(ask(dir.path(), std::process::id(), Some(1), "fuzz").is_err());
        prop_assert!(!od.flag.load(std::sync::atomic::Ordering::SeqCst));
    }
}
