//! Tests of the in-process overhead figures: hand-made step lists whose
//! answers are worked out in the comments.

use std::ops::Range;

use super::*;
use crate::read::bench::Verdict;
use serde_json::json;

/// The default interleaved schedule, 10 steps skipped.
fn schedule() -> Schedule {
    "skip_first=10,wait=7,warmup=1,active=2".parse().expect("schedule")
}

/// 300 measured steps (10..310) and the loss-read step 310.
const MEASURED: Range<u64> = 10..310;

/// `n` values evenly spread over [-1, 1], in a scrambled order: a multiset
/// symmetric about 0, so the median of `base * (1 + a * u)` is exactly
/// `base` (up to rounding) whatever the amplitude `a`.
fn symmetric(n: usize) -> Vec<f64> {
    let step = |j: usize| if n == 1 { 0.0 } else { (2.0 * j as f64 - (n - 1) as f64) / (n - 1) as f64 };
    // 7919 is prime, so j -> j * 7919 mod n is a permutation when n is not a multiple of it.
    (0..n).map(|k| step((k * 7919) % n)).collect()
}

/// SplitMix64 in [-1, 1): noise that is not symmetric.
fn noise(seed: u64) -> impl FnMut() -> f64 {
    let mut state = seed;
    move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// One process: its wait steps at `base`, its warmup steps at `warmup ×
/// base`, its active steps at `active × base`, each times `1 + amp × u`
/// for `u` from `draw` (called once per step, per phase in turn).
fn process(
    index: usize,
    condition: Condition,
    base: f64,
    (active, warmup): (f64, f64),
    amp: f64,
    draw: &mut dyn FnMut(Phase, usize) -> f64,
) -> ProcessRecord {
    let s = schedule();
    let mut seen: BTreeMap<Phase, usize> = BTreeMap::new();
    let steps: Vec<(u64, f64)> = (0..=MEASURED.end)
        .map(|step| {
            let phase = Phase::of(&s, step);
            let k = seen.entry(phase).or_default();
            let u = draw(phase, *k);
            *k += 1;
            let factor = match phase {
                Phase::Active => active,
                Phase::Warmup => warmup,
                _ => 1.0,
            };
            // Step 0 is startup, step 310 reads the loss back: both slow, neither measured.
            let slow = if step == 0 || step == MEASURED.end { 50.0 } else { 1.0 };
            (step, base * factor * (1.0 + amp * u) * slow)
        })
        .collect();
    ProcessRecord::new(
        index,
        ProcessRun {
            condition,
            device_activity: ActivityStatus::NotObserved { reason: "cpu".into() },
            cupti_kept: false,
            first_step_ms: steps[0].1,
            cache: "not applicable".into(),
            first_loss: Some(2.3),
            final_loss: Some(0.5),
            steps: label_steps(&s, &steps, MEASURED),
        },
    )
}

/// Symmetric noise in every phase: each phase's median is exactly its
/// level, so the active/wait ratio is exactly `active`.
fn exact(index: usize, condition: Condition, base: f64, active: f64, amp: f64) -> ProcessRecord {
    exact_with(index, condition, base, (active, 1.4), amp)
}

/// As [`exact`], the warmup steps at `warmup × base`.
fn exact_with(index: usize, condition: Condition, base: f64, levels: (f64, f64), amp: f64) -> ProcessRecord {
    let c = PhaseCounts::of(&schedule(), MEASURED);
    let (wait, warm, act) = (symmetric(c.wait as usize), symmetric(c.warmup as usize), symmetric(c.active as usize));
    let mut draw = move |phase: Phase, k: usize| match phase {
        Phase::Wait => wait.get(k).copied().unwrap_or(0.0),
        Phase::Warmup => warm.get(k).copied().unwrap_or(0.0),
        Phase::Active => act.get(k).copied().unwrap_or(0.0),
        _ => 0.0,
    };
    process(index, condition, base, levels, amp, &mut draw)
}

fn setup() -> OverheadSetup {
    let mut fp = Fingerprint::new();
    fp.insert("model".into(), json!("mlp"));
    fp.insert("fallback".into(), json!(false));
    OverheadSetup {
        fingerprint: fp,
        backend_label: "cpu (ndarray)".into(),
        schedule: schedule(),
        warmup: MEASURED.start,
        steps: MEASURED.end - MEASURED.start,
        batch_size: 64,
        threshold: 0.01,
    }
}

/// Process levels 5% apart, as processes of one command are on the H200.
const BASES: [f64; 5] = [2.00, 2.08, 1.94, 2.04, 1.98];

#[test]
fn phases_and_slots_come_from_the_schedule() {
    use Phase::*;
    let s: Schedule = "skip_first=2,wait=2,warmup=1,active=2,repeat=2,skip_first_wait=1".parse().expect("schedule");
    // The first cycle has no wait phase; two cycles, then after.
    let expected = [Skip, Skip, Warmup, Active, Active, Wait, Wait, Warmup, Active, Active, After];
    let got: Vec<Phase> = (0..11).map(|step| Phase::of(&s, step)).collect();
    assert_eq!(got, expected);
    // The schedule places wait steps in a cycle (`Phase::of` relies on it).
    assert_eq!(s.cycle_of(5), Some(1));
    assert_eq!(s.cycle_of(10), None);
    let steps: Vec<(u64, f64)> = (0..11).map(|i| (i, 1.0)).collect();
    let labelled = label_steps(&s, &steps, 0..11);
    let slots: Vec<u64> = labelled.iter().map(|p| p.slot).collect();
    assert_eq!(slots, [0, 1, 0, 0, 1, 0, 1, 0, 0, 1, 0]);
    let measured: Vec<bool> = labelled.iter().map(|p| p.measured).collect();
    assert_eq!(measured, [false, false, true, true, true, true, true, true, true, true, false]);
    assert_eq!(labelled[5].cycle, Some(1));
    // A missing step starts its phase's slots again.
    let gap = label_steps(&schedule(), &[(10, 1.0), (12, 1.0)], MEASURED);
    assert_eq!((gap[0].slot, gap[1].slot), (0, 0));
    let c = PhaseCounts::of(&s, 0..11);
    assert_eq!((c.wait, c.warmup, c.active), (2, 2, 4));
    let no_wait: Schedule = "skip_first=10,wait=0,warmup=1,active=2".parse().expect("schedule");
    assert_eq!(PhaseCounts::of(&no_wait, MEASURED).wait, 0);
}

#[test]
fn one_process_figures_match_hand_computed_values() {
    let s: Schedule = "wait=4,warmup=1,active=3".parse().expect("schedule");
    // wait 1, 2, 3, 4 (median 2.5); warmup 9; active 2, 2, 6 (median 2).
    let ms = [1.0, 2.0, 3.0, 4.0, 9.0, 2.0, 2.0, 6.0];
    let steps: Vec<(u64, f64)> = ms.iter().enumerate().map(|(i, &m)| (i as u64, m)).collect();
    let run = ProcessRun {
        condition: Condition::Off,
        device_activity: ActivityStatus::NotObserved { reason: "--device-activity off".into() },
        cupti_kept: false,
        first_step_ms: 1.0,
        cache: "warm".into(),
        first_loss: None,
        final_loss: None,
        steps: label_steps(&s, &steps, 0..8),
    };
    let p = ProcessRecord::new(3, run);
    let wait = p.phases.wait.as_ref().expect("wait");
    assert_eq!((wait.n, wait.median, wait.iqr), (4, 2.5, 3.0 - 1.0));
    assert_eq!(p.phases.active.as_ref().map(|a| a.median), Some(2.0));
    let r = p.active_over_wait.expect("ratio");
    assert_eq!(r.ratio, 2.0 / 2.5);
    assert!(r.interval.0 <= r.ratio && r.ratio <= r.interval.1, "{r:?}");
    assert_eq!(p.warmup_over_wait.map(|r| r.ratio), Some(9.0 / 2.5));
    let slot = |phase, slot| p.slots.iter().find(|s| s.phase == phase && s.slot == slot).map(|s| s.over_wait);
    assert_eq!(slot(Phase::Wait, 0), Some(1.0 / 2.5));
    assert_eq!(slot(Phase::Active, 2), Some(6.0 / 2.5));
    assert_eq!(p.slots.len(), 4 + 1 + 3);
}

#[test]
fn a_planted_three_percent_active_cost_is_measured_with_its_interval() {
    // Five processes 5% apart with ±10% noise within each (phases overlap
    // widely), symmetric so that each phase median is exact; each process's
    // estimate is off by a known amount, as a real median is: its ratio is
    // 1.03 + d. Over the processes: median 1.030, spread 0.008, interval
    // [1.026, 1.034] (five values: the bootstrap median's 2.5% and 97.5%
    // points are the smallest and largest), which excludes 1; the
    // difference, 0.03, is beyond the spread and the 1% threshold.
    let d = [-0.004, 0.002, 0.0, 0.004, -0.002];
    let processes: Vec<ProcessRecord> =
        (0..5).map(|i| exact(i, Condition::Auto, BASES[i], 1.03 + d[i], 0.10)).collect();
    for (p, d) in processes.iter().zip(d) {
        let r = p.active_over_wait.expect("ratio").ratio;
        assert!((r - (1.03 + d)).abs() < 1e-9, "process {}: {r}", p.index);
    }
    let result = OverheadResult::new(setup(), processes).expect("result");
    let auto = result.condition(Condition::Auto).expect("auto");
    let a = auto.active_over_wait.as_ref().expect("active/wait");
    assert!((a.ratio - 1.03).abs() < 1e-9, "{a:?}");
    assert!(a.interval.0 <= 1.03 && 1.03 <= a.interval.1, "{a:?}");
    assert!(a.interval.0 >= 1.026 - 1e-9 && a.interval.1 <= 1.034 + 1e-9, "{a:?}");
    assert!((a.spread.min - 1.026).abs() < 1e-9 && (a.spread.max - 1.034).abs() < 1e-9, "{a:?}");
    match a.verdict {
        Verdict::BSlower { slowdown } => assert!((slowdown - 1.03).abs() < 1e-9),
        ref v => panic!("{v:?}"),
    }
    // The warmup steps were planted at 1.4.
    let w = auto.warmup_over_wait.as_ref().expect("warmup/wait");
    assert!((w.ratio - 1.4).abs() < 1e-9 && matches!(w.verdict, Verdict::BSlower { .. }), "{w:?}");
    // Slots: every wait slot and active slot sits at its level.
    let wait0 = auto.slots.iter().find(|s| s.phase == Phase::Wait && s.slot == 0).expect("wait#0");
    assert!((wait0.over_wait - 1.0).abs() < 0.05, "{wait0:?}");
    // A cycle: 7 wait slots at 1, a warmup at 1.4 and two active slots at
    // 1.03 (± the planted offsets): (7 + 1.4 + 2 × 1.03) / 10 = 1.046.
    assert!((auto.cycle_over_wait.unwrap_or(0.0) - 1.046).abs() < 0.01, "{:?}", auto.cycle_over_wait);
    assert_eq!(result.phase_counts, PhaseCounts { wait: 210, warmup: 30, active: 60 });
}

#[test]
fn a_planted_cost_under_random_noise_is_still_found() {
    // Not symmetric: ±4% uniform noise from a fixed seed. A median of 60
    // such steps moves by about 0.5%, so each ratio by about 0.6%: far less
    // than the 3%.
    let processes: Vec<ProcessRecord> = (0..5)
        .map(|i| {
            let mut u = noise(100 + i as u64);
            process(i, Condition::Auto, BASES[i], (1.03, 1.4), 0.04, &mut |_, _| u())
        })
        .collect();
    let result = OverheadResult::new(setup(), processes).expect("result");
    let a = result.condition(Condition::Auto).and_then(|c| c.active_over_wait.clone()).expect("active/wait");
    assert!((a.ratio - 1.03).abs() < 0.01, "{a:?}");
    assert!(matches!(a.verdict, Verdict::BSlower { .. }), "{a:?}");
}

#[test]
fn identical_phases_give_no_measurable_difference() {
    // Exactly equal levels: every ratio is 1.
    let same: Vec<ProcessRecord> = (0..5).map(|i| exact(i, Condition::Off, BASES[i], 1.0, 0.10)).collect();
    let result = OverheadResult::new(setup(), same).expect("result");
    let a = result.condition(Condition::Off).and_then(|c| c.active_over_wait.clone()).expect("active/wait");
    assert!((a.ratio - 1.0).abs() < 1e-9, "{a:?}");
    assert!(matches!(&a.verdict, Verdict::NoMeasurableDifference { reason } if reason.contains("contains 1")), "{a:?}");
    // Estimates scattered around 1 by ±0.4%.
    let d = [-0.004, 0.002, 0.0, 0.004, -0.002];
    let near: Vec<ProcessRecord> = (0..5).map(|i| exact(i, Condition::Off, BASES[i], 1.0 + d[i], 0.10)).collect();
    let a = PairedRatio::of(&near.iter().filter_map(|p| p.active_over_wait).map(|r| r.ratio).collect::<Vec<_>>(), 0.01)
        .expect("paired");
    assert!(matches!(a.verdict, Verdict::NoMeasurableDifference { .. }), "{a:?}");
    // Random noise, the same distribution in both phases.
    let random: Vec<ProcessRecord> = (0..6)
        .map(|i| {
            let mut u = noise(7 + i as u64);
            process(i, Condition::Off, BASES[i % 5], (1.0, 1.4), 0.10, &mut |_, _| u())
        })
        .collect();
    let result = OverheadResult::new(setup(), random).expect("result");
    let a = result.condition(Condition::Off).and_then(|c| c.active_over_wait.clone()).expect("active/wait");
    assert!(matches!(a.verdict, Verdict::NoMeasurableDifference { .. }), "{a:?}");
    // One process: no spread between processes, whatever its ratio.
    let one = PairedRatio::of(&[1.2], 0.01).expect("paired");
    assert!(matches!(&one.verdict, Verdict::NoMeasurableDifference { reason } if reason.contains("--runs")), "{one:?}");
}

#[test]
fn comparisons_across_processes_are_made_apart_and_warned_about() {
    // Profiled processes at the BASES levels, no-profile processes at the
    // same levels in another order: wait steps against no profiler, across
    // processes, show nothing, and say why they cannot.
    let mut processes: Vec<ProcessRecord> = (0..5).map(|i| exact(i, Condition::Auto, BASES[i], 1.03, 0.05)).collect();
    processes[0].device_activity = ActivityStatus::Observed;
    processes.extend((0..5).map(|i| exact(5 + i, Condition::Off, BASES[(i + 2) % 5], 1.01, 0.05)));
    processes.extend((0..5).map(|i| exact(10 + i, Condition::NoProfile, BASES[(i + 1) % 5], 1.0, 0.05)));
    let result = OverheadResult::new(setup(), processes).expect("result");
    let b = result.baseline.as_ref().expect("baseline");
    assert_eq!(b.warning, CROSS_PROCESS_WARNING);
    assert!((b.ratio - 1.0).abs() < 1e-9, "{b:?}");
    assert!(matches!(b.verdict, Verdict::NoMeasurableDifference { .. }), "{b:?}");
    // Device activity's own cost: 1.03 over 1.01, paired ratios compared across processes.
    let d = result.device_activity.as_ref().expect("device activity");
    assert!((d.ratio - 1.03 / 1.01).abs() < 1e-9, "{d:?}");
    assert_eq!(d.warning, CROSS_PROCESS_WARNING);
    // The null check: no profiler, phases as labels.
    let null = result.condition(Condition::NoProfile).and_then(|c| c.active_over_wait.clone()).expect("null");
    assert!(matches!(null.verdict, Verdict::NoMeasurableDifference { .. }), "{null:?}");
    assert_eq!(result.condition(Condition::Auto).map(|c| c.device_activity_observed), Some(1));
    // Without an observing process, there is no device-activity comparison.
    let plain: Vec<ProcessRecord> = (0..3).map(|i| exact(i, Condition::Auto, BASES[i], 1.0, 0.05)).collect();
    let result = OverheadResult::new(setup(), plain).expect("result");
    assert!(result.device_activity.is_none() && result.baseline.is_none());
}

#[test]
fn the_result_round_trips_keeps_every_step_and_refuses_impossible_times() {
    let processes: Vec<ProcessRecord> = (0..4).map(|i| exact(i, Condition::Auto, BASES[i], 1.02, 0.05)).collect();
    let result = OverheadResult::new(setup(), processes.clone()).expect("result");
    let bytes = serde_json::to_vec(&result).expect("json");
    // serde_json's float parsing may differ from the written value in the
    // last bit: compare the structure, and the figures to 1e-12.
    let back = OverheadResult::from_json(&bytes).expect("read back");
    assert_eq!((back.processes.len(), back.conditions.len(), &back.schedule), (4, 1, &result.schedule));
    assert_eq!(back.processes[1].steps.len(), result.processes[1].steps.len());
    let (a, b) = (&back.conditions[0].active_over_wait, &result.conditions[0].active_over_wait);
    assert!((a.as_ref().map_or(0.0, |r| r.ratio) - b.as_ref().map_or(1.0, |r| r.ratio)).abs() < 1e-12);
    assert_eq!(a.as_ref().map(|r| &r.verdict), b.as_ref().map(|r| &r.verdict));
    let doc: Value = serde_json::from_slice(&bytes).expect("json");
    assert_eq!(doc["format"], OVERHEAD_FORMAT);
    let step = &doc["processes"][1]["steps"][15];
    assert_eq!(
        (step["step"].as_u64(), step["phase"].as_str(), step["measured"].as_bool()),
        (Some(15), Some("wait"), Some(true))
    );
    assert_eq!(doc["processes"][1]["steps"].as_array().map(Vec::len), Some(311));
    assert_eq!(doc["processes"][1]["index"], 1);
    assert_eq!(doc["conditions"][0]["active_over_wait"]["verdict"]["kind"], "b_slower");
    let mut newer = doc.clone();
    newer["format"] = json!("steptrace-overhead/2");
    let err = OverheadResult::from_json(&serde_json::to_vec(&newer).expect("json")).unwrap_err();
    assert!(matches!(err, BenchError::NewerFormat { .. }), "{err}");
    let mut bad = processes;
    bad[1].steps[20].ms = -1.0;
    let err = OverheadResult::new(setup(), bad).unwrap_err();
    assert!(err.to_string().starts_with("process 1 step 20 ms is -1"), "{err}");
    assert!(matches!(OverheadResult::new(setup(), Vec::new()), Err(BenchError::NoRun)));
}

/// Brute force: every step's phase, one by one.
fn counted(s: &Schedule, measured: Range<u64>) -> PhaseCounts {
    let mut c = PhaseCounts::default();
    for step in measured {
        match Phase::of(s, step) {
            Phase::Wait => c.wait += 1,
            Phase::Warmup => c.warmup += 1,
            Phase::Active => c.active += 1,
            Phase::Skip | Phase::After => {}
        }
    }
    c
}

#[test]
fn phase_counts_by_cycles_agree_with_every_step_counted() {
    for text in [
        "wait=7,warmup=1,active=2",
        "skip_first=3,wait=3,warmup=1,active=2",
        "skip_first=5,wait=2,active=1,repeat=3",
        "skip_first=2,wait=2,warmup=1,active=2,repeat=2,skip_first_wait=1",
        "wait=0,warmup=0,active=1",
        "skip_first=1,wait=4,warmup=2,active=3,repeat=1",
    ] {
        let s: Schedule = text.parse().expect("schedule");
        for start in 0..12 {
            for len in 0..40 {
                assert_eq!(
                    PhaseCounts::of(&s, start..start + len),
                    counted(&s, start..start + len),
                    "{text} {start}+{len}"
                );
            }
        }
    }
    // Any step count is counted at once.
    let big: Schedule = "skip_first=20,wait=7,warmup=1,active=2".parse().expect("schedule");
    let c = PhaseCounts::of(&big, 20..20 + 1_000_000_000_000);
    assert_eq!((c.wait, c.warmup, c.active), (700_000_000_000, 100_000_000_000, 200_000_000_000));
    assert_eq!(PhaseCounts::of(&big, 20..u64::MAX).total(), u64::MAX - 20);
}

#[test]
fn steps_after_the_last_cycle_are_warned_about() {
    let s: Schedule = "skip_first=10,wait=2,warmup=1,active=1,repeat=2".parse().expect("schedule");
    // 8 of the 300 measured steps lie in the two cycles; 292 in none.
    assert_eq!(PhaseCounts::of(&s, MEASURED).total(), 8);
    let warning = PhaseCounts::warning(&s, MEASURED).expect("warning");
    assert!(
        warning.starts_with("292 of the 300 measured steps fall after the schedule's last cycle (repeat=2)"),
        "{warning}"
    );
    let steps: Vec<(u64, f64)> = (0..=MEASURED.end).map(|i| (i, 1.0 + (i % 3) as f64 * 0.01)).collect();
    let processes: Vec<ProcessRecord> = (0..4)
        .map(|i| {
            let run = ProcessRun {
                condition: Condition::Off,
                device_activity: ActivityStatus::NotObserved { reason: "cpu".into() },
                cupti_kept: false,
                first_step_ms: 1.0,
                cache: "warm".into(),
                first_loss: None,
                final_loss: None,
                steps: label_steps(&s, &steps, MEASURED),
            };
            ProcessRecord::new(i, run)
        })
        .collect();
    let result = OverheadResult::new(OverheadSetup { schedule: s, ..setup() }, processes).expect("result");
    assert!(result.warnings.contains(&warning), "{:?}", result.warnings);
    // The default schedule covers every measured step: no such warning.
    let full = OverheadResult::new(setup(), (0..4).map(|i| exact(i, Condition::Off, BASES[i], 1.0, 0.1)).collect());
    assert!(!full.expect("result").warnings.iter().any(|w| w.contains("no phase")));
}

#[test]
fn two_processes_give_a_range_and_no_verdict() {
    // The hostile case: two processes per condition, the null check's
    // labels 8.84% apart (1.0834 and 1.0934). Two values cannot show that:
    // no verdict, the "interval" is their range and says so, and the null
    // check's move is reported.
    let mut processes: Vec<ProcessRecord> = (0..2).map(|i| exact(i, Condition::Auto, BASES[i], 1.03, 0.05)).collect();
    let null_ratio = |i: usize| 1.0834 + 0.01 * i as f64;
    processes.extend((0..2).map(|i| exact_with(2 + i, Condition::NoProfile, BASES[i + 2], (null_ratio(i), 1.0), 0.05)));
    let result = OverheadResult::new(setup(), processes).expect("result");
    let null = result.condition(Condition::NoProfile).and_then(|c| c.active_over_wait.clone()).expect("null");
    assert!(null.interval_is_range, "{null:?}");
    assert!((null.interval.0 - 1.0834).abs() < 1e-9 && (null.interval.1 - 1.0934).abs() < 1e-9, "{null:?}");
    assert!(
        matches!(&null.verdict, Verdict::NoMeasurableDifference { reason } if reason.contains("too few")),
        "{null:?}"
    );
    let auto = result.condition(Condition::Auto).and_then(|c| c.active_over_wait.clone()).expect("auto");
    assert!(matches!(auto.verdict, Verdict::NoMeasurableDifference { .. }), "{auto:?}");
    let check = result.null_check.expect("null check");
    assert!(!check.failed && (check.moved - 0.0884).abs() < 1e-9, "{check:?}");
    let warned = |part: &str| result.warnings.iter().any(|w| w.contains(part));
    assert!(warned("the null check moved by 8.84%"), "{:?}", result.warnings);
    assert!(warned("2 processes per condition: too few for a verdict"), "{:?}", result.warnings);
    // The comparison across processes: two per side, no verdict either.
    let b = result.baseline.as_ref().expect("baseline");
    assert!(b.interval_is_range && matches!(b.verdict, Verdict::NoMeasurableDifference { .. }), "{b:?}");
    // Six processes give a real interval, narrower than their range.
    let six = PairedRatio::of(&[1.01, 1.02, 1.03, 1.04, 1.05, 1.06], 0.01).expect("paired");
    assert!(!six.interval_is_range && (six.interval.0 > 1.01 || six.interval.1 < 1.06), "{six:?}");
}

#[test]
fn a_failed_null_check_is_flagged_and_covers_the_verdicts_of_its_size() {
    // Five no-profile processes whose labels alone differ by 5%: the rule
    // calls that measurable, so the check fails; the auto processes' 3%
    // lies within it and is suspect, a 20% cost would not be.
    let mut processes: Vec<ProcessRecord> = (0..5).map(|i| exact(i, Condition::Auto, BASES[i], 1.03, 0.05)).collect();
    processes.extend(
        (0..5).map(|i| exact_with(5 + i, Condition::NoProfile, BASES[i], (1.05 + 0.001 * i as f64, 1.0), 0.05)),
    );
    let result = OverheadResult::new(setup(), processes).expect("result");
    let check = result.null_check.expect("null check");
    assert!(check.failed, "{check:?}");
    assert!(result.warnings.iter().any(|w| w.starts_with("the null check FAILED")), "{:?}", result.warnings);
    let auto = result.condition(Condition::Auto).and_then(|c| c.active_over_wait.clone()).expect("auto");
    assert!(matches!(auto.verdict, Verdict::BSlower { .. }) && check.covers(&auto.verdict), "{auto:?}");
    assert!(!check.covers(&Verdict::BSlower { slowdown: 1.2 }));
    // A quiet null check says nothing.
    let quiet: Vec<ProcessRecord> =
        (0..5).map(|i| exact_with(i, Condition::NoProfile, BASES[i], (1.0, 1.0), 0.05)).collect();
    let result = OverheadResult::new(setup(), quiet).expect("result");
    assert_eq!(result.null_check.map(|n| n.failed), Some(false));
    assert!(!result.warnings.iter().any(|w| w.contains("null check")), "{:?}", result.warnings);
}
