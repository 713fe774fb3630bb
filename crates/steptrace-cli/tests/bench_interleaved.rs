//! `steptrace bench --profile interleaved` as a user runs it: the structure
//! of what it writes, every step's phase, and figures that agree with the
//! raw steps. No timing is compared between processes (the statistics have
//! their own unit tests in `steptrace::bench::overhead`).

mod common;

use common::{steptrace, text};
use serde_json::Value;

/// The phase of `step` under `skip_first=3,wait=3,warmup=1,active=2`,
/// written out here independently of the schedule code.
fn phase(step: u64) -> &'static str {
    if step < 3 {
        return "skip";
    }
    match (step - 3) % 6 {
        0..=2 => "wait",
        3 => "warmup",
        _ => "active",
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[test]
fn interleaved_bench_keeps_every_step_with_its_phase_and_figures_that_agree_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "bench",
        "--profile",
        "interleaved",
        "--backend",
        "cpu",
        "--runs",
        "2",
        "--warmup",
        "3",
        "--steps",
        "40",
        "--schedule",
        "wait=3,warmup=1,active=2",
        "--baseline",
        "--json",
        "oh.json",
    ];
    let run = steptrace(&args, dir.path());
    let (stdout, stderr) = text(&run);
    assert!(run.status.success(), "{stdout}{stderr}");
    for line in stdout.lines() {
        assert!(line.chars().count() <= 100, "wider than 100 columns: {line:?}");
    }
    for part in ["verdict: ", "null check", "baseline", "warning: cross-process", "by position", "a whole cycle"] {
        assert!(stdout.contains(part), "{part:?} missing:\n{stdout}");
    }
    // Two processes per condition: no "95% interval" over processes, no
    // verdict, and the reason said.
    let flat = common::flat(&stdout);
    assert!(
        flat.contains("range over the 2 processes") && !flat.contains("95% bootstrap interval over processes"),
        "{stdout}"
    );
    assert!(flat.contains("2 processes per condition: too few for a verdict"), "{stdout}");
    assert!(!flat.contains("verdict: measurable"), "{stdout}");
    let r: Value = serde_json::from_slice(&std::fs::read(dir.path().join("oh.json")).unwrap()).unwrap();
    assert_eq!(r["format"], "steptrace-overhead/1");
    assert_eq!(r["schedule"], "skip_first=3,wait=3,warmup=1,active=2,repeat=0");
    assert_eq!(r["fingerprint"]["profile"], "interleaved");
    assert_eq!(r["fingerprint"]["schedule"], r["schedule"]);
    // 40 measured steps from step 3: six cycles of six, then 3 wait and 1 warmup.
    assert_eq!(r["phase_counts"], serde_json::json!({"wait": 21, "warmup": 7, "active": 12}));

    // Two rounds, the second reversed: auto, no-profile, no-profile, auto.
    let processes = r["processes"].as_array().unwrap();
    let conditions: Vec<&str> = processes.iter().map(|p| p["condition"].as_str().unwrap()).collect();
    assert_eq!(conditions, ["auto", "no_profile", "no_profile", "auto"]);
    let first_loss = &processes[0]["first_loss"];
    for (i, p) in processes.iter().enumerate() {
        assert_eq!(p["index"], i);
        // Same seed, same starting state in every process.
        assert_eq!(&p["first_loss"], first_loss, "process {i}");
        let steps = p["steps"].as_array().unwrap();
        // 3 skipped + 40 measured + the step that reads the loss back.
        assert_eq!(steps.len(), 44, "process {i}");
        for (n, s) in steps.iter().enumerate() {
            let n = n as u64;
            assert_eq!(s["step"], n);
            assert_eq!(s["phase"], phase(n), "process {i} step {n}");
            assert_eq!(s["measured"], (3..43).contains(&n), "process {i} step {n}");
            assert!(s["ms"].as_f64().unwrap() > 0.0);
        }
        // The figures are those of the raw steps.
        let of = |ph: &str| -> Vec<f64> {
            steps
                .iter()
                .filter(|s| s["measured"] == true && s["phase"] == ph)
                .map(|s| s["ms"].as_f64().unwrap())
                .collect()
        };
        let (wait, active) = (of("wait"), of("active"));
        assert_eq!((wait.len(), of("warmup").len(), active.len()), (21, 7, 12));
        let fig = &p["phases"];
        assert_eq!(fig["wait"]["n"], 21);
        // (JSON numbers may read back a last bit off: compare to 1e-12.)
        let near = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs();
        assert!(near(fig["wait"]["median"].as_f64().unwrap(), median(wait.clone())), "{fig}");
        assert!(near(fig["active"]["median"].as_f64().unwrap(), median(active.clone())), "{fig}");
        let ratio = &p["active_over_wait"];
        let expected = median(active) / median(wait);
        assert!(near(ratio["ratio"].as_f64().unwrap(), expected), "{ratio}");
        let (lo, hi) = (ratio["interval"][0].as_f64().unwrap(), ratio["interval"][1].as_f64().unwrap());
        assert!(lo <= expected * (1.0 + 1e-12) && expected <= hi * (1.0 + 1e-12), "{ratio}");
        // The CPU records no device activity, and says why.
        assert_eq!(p["device_activity"]["status"], "not_observed", "process {i}");
        assert!(!p["device_activity"]["reason"].as_str().unwrap().is_empty());
        // Slots: 3 wait, 1 warmup, 2 active.
        assert_eq!(p["slots"].as_array().unwrap().len(), 6);
    }

    // Over processes: each condition's ratios are its processes' ratios.
    let auto = r["conditions"].as_array().unwrap().iter().find(|c| c["condition"] == "auto").unwrap();
    assert_eq!(auto["processes"], serde_json::json!([0, 3]));
    assert_eq!(auto["device_activity_observed"], 0);
    let a = &auto["active_over_wait"];
    let per: Vec<f64> = a["per_process"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(per, [&processes[0], &processes[3]].map(|p| p["active_over_wait"]["ratio"].as_f64().unwrap()));
    let x = |v: &Value| v.as_f64().unwrap();
    assert!(x(&a["spread"]["min"]) <= x(&a["ratio"]) && x(&a["ratio"]) <= x(&a["spread"]["max"]), "{a}");
    assert!(x(&a["interval"][0]) <= x(&a["ratio"]) && x(&a["ratio"]) <= x(&a["interval"][1]), "{a}");
    assert_eq!(a["verdict"]["kind"], "no_measurable_difference", "{a}");
    assert!(r["conditions"].as_array().unwrap().iter().any(|c| c["condition"] == "no_profile"));
    // Without device activity there is nothing to tell apart; the baseline is there, warned about.
    assert!(r.get("device_activity").is_none());
    assert!(r["baseline"]["warning"].as_str().unwrap().starts_with("cross-process"));
    assert_eq!(r["baseline"]["a_values"].as_array().unwrap().len(), 2);
    assert_eq!(r["baseline"]["interval_is_range"], true);
    assert_eq!(auto["active_over_wait"]["interval_is_range"], true);
    assert!(a["verdict"]["reason"].as_str().unwrap().contains("too few"), "{a}");
    // The null check: how far the labels alone moved, and whether that failed.
    assert!(
        r["null_check"]["moved"].as_f64().unwrap() >= 0.0 && r["null_check"]["failed"] == false,
        "{}",
        r["null_check"]
    );

    // A result is never overwritten.
    let before = std::fs::read(dir.path().join("oh.json")).unwrap();
    let again = steptrace(&args, dir.path());
    assert_eq!(again.status.code(), Some(1));
    assert!(text(&again).1.contains("already exists"));
    assert_eq!(std::fs::read(dir.path().join("oh.json")).unwrap(), before);
}

#[test]
fn steps_after_the_last_cycle_are_warned_about_before_and_after_the_runs() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "bench",
        "--profile",
        "interleaved",
        "--backend",
        "cpu",
        "--runs",
        "1",
        "--warmup",
        "1",
        "--steps",
        "12",
        "--schedule",
        "wait=2,active=1,repeat=1",
    ];
    let out = steptrace(&args, dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    let warning = "9 of the 12 measured steps fall after the schedule's last cycle (repeat=1) and in no phase";
    // Before the first process, and in the result.
    let before = common::flat(&stderr);
    let at = before.find(warning).unwrap_or_else(|| panic!("{stderr}"));
    assert!(before.find("process 1 (").is_some_and(|p| p > at), "{stderr}");
    assert!(common::flat(&stdout).contains(warning), "{stdout}");
    // One process: its interval is a range, said in the singular.
    assert!(common::flat(&stdout).contains("range over the 1 process "), "{stdout}");
}

#[test]
fn schedules_without_wait_or_active_steps_and_misplaced_flags_are_refused_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["bench", "--profile", "interleaved", "--backend", "cpu", "--json", "x.json"];
    let cases: [(&[&str], &str); 4] = [
        (&["--schedule", "wait=0,warmup=1,active=2"], "has no wait steps"),
        (&["--schedule", "skip_first=5,wait=3,active=1"], "sets skip_first"),
        (&["--schedule", "wait=7,warmup=1,active=2", "--steps", "5"], "raise --steps to 9 or more for this schedule, or use a shorter cycle, e.g. --schedule wait=3,warmup=1,active=2"),
        (&["--threshold", "nan"], "--threshold"),
    ];
    for (extra, expected) in cases {
        let out = steptrace(&[&base[..], extra].concat(), dir.path());
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {stdout}{stderr}");
        assert!(stderr.contains(expected), "{extra:?}: {stderr}");
        assert!(!dir.path().join("x.json").exists());
    }
    for flag in [&["--baseline"][..], &["--schedule", "wait=1,active=1"], &["--device-activity", "off"]] {
        let out = steptrace(&[&["bench", "--backend", "cpu"][..], flag].concat(), dir.path());
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{flag:?}");
        assert!(stderr.contains("applies to --profile interleaved only"), "{flag:?}: {stderr}");
    }
    let help = steptrace(&["bench", "--help"], dir.path());
    let (stdout, _) = text(&help);
    for part in ["interleaved", "--baseline", "--schedule", "wait=7,warmup=1,active=2", "--threshold"] {
        assert!(stdout.contains(part), "{part:?} missing from bench --help");
    }
}
