//! Tests of `bench --profile interleaved`'s own code: wrapping and the
//! checks of `--schedule`.

use super::*;

#[test]
fn lines_are_wrapped_at_the_width_and_long_words_cut() {
    let text = format!("  {}", "word ".repeat(60));
    let wrapped = wrap(&text, "    ");
    assert!(wrapped.lines().all(|l| l.chars().count() <= WIDTH), "{wrapped}");
    assert!(wrapped.starts_with("  word") && wrapped.lines().nth(1).is_some_and(|l| l.starts_with("    word")));
    let long = format!("path {}", "x".repeat(250));
    let wrapped = wrap(&long, "  ");
    assert!(wrapped.lines().all(|l| l.chars().count() <= WIDTH), "{wrapped}");
    assert_eq!(wrapped.chars().filter(|&c| c == 'x').count(), 250);
    assert_eq!(wrap("µs – é", ""), "µs – é\n");
}

#[test]
fn schedules_without_wait_or_active_steps_are_refused() {
    assert!(interleaved(DEFAULT_CYCLE, 20, 300).is_ok());
    let err = interleaved("wait=0,warmup=1,active=2", 20, 300).unwrap_err().to_string();
    assert!(err.contains("no wait steps") && err.contains("wait=7,warmup=1,active=2"), "{err}");
    let err = interleaved("skip_first=5,wait=7,active=2", 20, 300).unwrap_err().to_string();
    assert!(err.contains("skip_first") && err.contains("--warmup"), "{err}");
    // Five measured steps, all of them wait steps.
    let err = interleaved("wait=7,warmup=1,active=2", 20, 5).unwrap_err().to_string();
    assert!(err.contains("5 wait and 0 active"), "{err}");
    // One cycle, then nothing: still both phases.
    assert!(interleaved("wait=2,active=1,repeat=1", 20, 50).is_ok());
    assert!(interleaved("wait=1,active=0", 20, 50).is_err());
}

/// What a refusal suggests: `(--schedule TEXT, --steps N)`, either absent.
fn suggested(err: &str) -> (Option<String>, Option<u64>) {
    let after =
        |marker: &str| err.split(marker).nth(1).map(|rest| rest.split([' ', ')', ';']).next().unwrap_or("").to_owned());
    let schedule = after("e.g. --schedule ").or_else(|| after("(--schedule "));
    let steps = after("raise --steps to ").and_then(|n| n.parse().ok());
    (schedule, steps)
}

#[test]
fn every_suggestion_passes_and_never_repeats_the_failed_schedule() {
    let schedules = [
        "wait=7,warmup=1,active=2",
        "wait=0,warmup=1,active=2",
        "skip_first=5,wait=7,active=2",
        "skip_first=5,wait=1,active=1",
        "wait=3,warmup=1,active=2,repeat=1",
        "wait=2,warmup=2,active=3,skip_first_wait=1",
        "wait=2,warmup=1,active=1,repeat=1,skip_first_wait=1",
        "wait=1,warmup=1,active=1",
        "wait=40,active=1",
    ];
    let mut refused = 0;
    for text in schedules {
        for steps in [1, 2, 3, 4, 5, 9, 12, 50] {
            let Err(err) = interleaved(text, 20, steps) else { continue };
            refused += 1;
            let err = err.to_string();
            let (schedule, more) = suggested(&err);
            assert!(
                schedule.is_some() || more.is_some() || steps < 2,
                "{text} --steps {steps}: nothing suggested: {err}"
            );
            if let Some(s) = schedule {
                assert_ne!(s, text, "{err}");
                assert!(interleaved(&s, 20, steps).is_ok(), "{text} --steps {steps}: {s} fails too: {err}");
            }
            if let Some(n) = more {
                assert!(interleaved(text, 20, n).is_ok(), "{text}: --steps {n} fails too: {err}");
                // The fewest that pass.
                assert!(interleaved(text, 20, n - 1).is_err(), "{text}: --steps {} passes already", n - 1);
            }
            if steps < 2 {
                assert!(err.contains("raise --steps"), "{err}");
            }
        }
    }
    assert!(refused > 20, "{refused}");
    // The case found: five steps of the default cycle suggested the default cycle.
    let err = interleaved(DEFAULT_CYCLE, 20, 5).unwrap_err().to_string();
    assert_eq!(suggested(&err), (Some("wait=3,warmup=1,active=2".to_owned()), Some(9)), "{err}");
    assert!(err.contains("raise --steps to 9 or more for this schedule, or use a shorter cycle"), "{err}");
}

/// Two auto processes with device activity, `kept` of them with CUPTI kept on between windows.
fn auto_result(kept: usize) -> OverheadResult {
    let schedule: Schedule = DEFAULT_CYCLE.parse().unwrap();
    let pairs: Vec<(u64, f64)> = (0..60).map(|s| (s, 2.0 + (s % 3) as f64 * 0.01)).collect();
    let processes = (0..2)
        .map(|i| {
            ProcessRecord::new(
                i,
                ProcessRun {
                    condition: Condition::Auto,
                    device_activity: ActivityStatus::Observed,
                    cupti_kept: i < kept,
                    first_step_ms: 100.0,
                    cache: "warm".into(),
                    first_loss: None,
                    final_loss: None,
                    steps: label_steps(&schedule, &pairs, 20..60),
                },
            )
        })
        .collect();
    let setup = OverheadSetup {
        fingerprint: steptrace::bench::Fingerprint::new(),
        backend_label: "cuda".into(),
        schedule,
        warmup: 20,
        steps: 40,
        batch_size: 256,
        threshold: 0.01,
    };
    OverheadResult::new(setup, processes).unwrap()
}

#[test]
fn a_process_that_kept_cupti_on_between_windows_is_named_with_what_active_over_wait_misses() {
    let r = auto_result(1);
    let text = describe(&r, r.condition(Condition::Auto).unwrap());
    assert!(text.contains("recorded in 2 of 2 processes"), "{text}");
    assert!(text.contains("CUPTI stayed enabled between windows in 1 of them"), "{text}");
    assert!(text.contains("STEPTRACE_CUPTI=per-cycle"), "{text}");
    let r = auto_result(0);
    let text = describe(&r, r.condition(Condition::Auto).unwrap());
    assert!(!text.contains("stayed enabled"), "{text}");
}
