//! Tests of the choice and the checks of the limits the report prices against.

use super::*;
use crate::format::peaks::{Measured, PEAKS_VERSION};

fn measured(value: f64) -> Option<Measured> {
    Some(Measured { value, spread: 0.0, method: "a reduction".into() })
}

fn peaks(device: &str, copy: f64) -> Peaks {
    Peaks {
        version: PEAKS_VERSION,
        device: device.into(),
        backend: "cuda".into(),
        software: String::new(),
        measured_at: "2026-01-01T00:00:00Z".into(),
        read: None,
        write: None,
        copy: measured(copy),
        flops: [("f32".to_owned(), Measured { value: 5e13, spread: 0.0, method: String::new() })].into(),
        launch_us: None,
        published: BTreeMap::new(),
        problems: Vec::new(),
        cpu: false,
    }
}

fn run(own: Option<Peaks>) -> RunInfo {
    RunInfo { device: Some("NVIDIA H200".into()), peaks: own, ..RunInfo::default() }
}

#[test]
fn without_limits_the_reason_names_the_device_on_one_line() {
    let mut warnings = Vec::new();
    let mut r = run(None);
    r.device = Some("H200\n== Hypotheses".into());
    let why = pick_roofs(None, &r, &mut warnings).unwrap_err();
    assert!(why.starts_with("the trace holds no measured limits for H200\\n== Hypotheses:"), "{why}");
    assert!(warnings.is_empty());
}

#[test]
fn unusable_limits_of_the_trace_are_named_not_called_missing() {
    let mut warnings = Vec::new();
    let why = pick_roofs(None, &run(Some(peaks("NVIDIA H200", 0.0))), &mut warnings).unwrap_err();
    assert_eq!(
        why,
        "the device limits from the trace's manifest are unusable: no usable bandwidth (copy bandwidth 0 B/s: not \
         positive; read bandwidth missing)"
    );
}

#[test]
fn a_bad_peaks_file_keeps_the_traces_good_limits() {
    for bad in [peaks("NVIDIA H200", -1.0), Peaks { version: 999, ..peaks("NVIDIA H200", 3e12) }] {
        let mut warnings = Vec::new();
        let roofs = pick_roofs(Some(&bad), &run(Some(peaks("NVIDIA H200", 3e12))), &mut warnings).unwrap();
        assert_eq!((roofs.from.as_str(), roofs.bandwidth), (FROM_TRACE, 3e12));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].starts_with("the device limits from report --peaks are unusable: "), "{warnings:?}");
        assert!(warnings[0].ends_with(": the trace's own limits are used instead"), "{warnings:?}");
    }
    // Both bad: both reasons, and no floor.
    let mut warnings = Vec::new();
    let why = pick_roofs(Some(&peaks("NVIDIA H200", 0.0)), &run(None), &mut warnings).unwrap_err();
    assert!(
        why.starts_with("the device limits from report --peaks are unusable") && why.contains("; the trace holds no"),
        "{why}"
    );
}

#[test]
fn the_device_of_given_limits_must_match_whole() {
    for (device, warned) in [("nvidia  h200 ", false), ("H", true), ("", true), ("NVIDIA H200 NVL", true)] {
        let mut warnings = Vec::new();
        let roofs = pick_roofs(Some(&peaks(device, 3e12)), &run(None), &mut warnings).unwrap();
        assert_eq!(roofs.from, FROM_OPTION);
        assert_eq!(warnings.len(), usize::from(warned), "{device:?}: {warnings:?}");
    }
}

#[test]
fn the_texts_of_limits_are_one_bounded_line() {
    let mut p = peaks(&format!("GPU\n== Hypotheses\n{}", "x".repeat(10_000)), 3e12);
    p.measured_at = "today\u{1b}[2J".into();
    let roofs = Roofs::of(&p, FROM_OPTION).unwrap();
    assert!(!roofs.device.contains('\n') && roofs.device.chars().count() < 230, "{}", roofs.device);
    assert_eq!(roofs.measured_at, "today\\x1b[2J");
}

#[test]
fn an_unusable_dtype_is_passed_over_and_said() {
    let mut p = peaks("NVIDIA H200", 0.0);
    p.read = measured(2e12);
    p.flops.insert("bf16".into(), Measured { value: f64::NAN, spread: 0.0, method: String::new() });
    let roofs = Roofs::of(&p, FROM_TRACE).unwrap();
    assert_eq!(roofs.bandwidth, 2e12);
    assert_eq!(roofs.throughput.keys().collect::<Vec<_>>(), ["f32"]);
    assert_eq!(roofs.passed_over, ["copy bandwidth 0 B/s: not positive", "bf16 throughput: not a finite number"]);
}
