//! Tests of the checks on measured limits.

use super::*;

fn measured(value: f64) -> Option<Measured> {
    Some(Measured { value, spread: 0.0, method: "a reduction".into() })
}

fn peaks() -> Peaks {
    Peaks {
        version: PEAKS_VERSION,
        device: "NVIDIA H200".into(),
        backend: "cuda".into(),
        software: String::new(),
        measured_at: "2026-01-01T00:00:00Z".into(),
        read: measured(4e12),
        write: measured(3e12),
        copy: measured(3.5e12),
        flops: [("f32".to_owned(), Measured { value: 5e13, spread: 0.0, method: String::new() })].into(),
        launch_us: None,
        published: BTreeMap::new(),
        problems: Vec::new(),
        cpu: false,
    }
}

#[test]
fn good_limits_pass() {
    let p = peaks();
    assert_eq!(p.check(), Ok(()));
    assert_eq!((p.bandwidth(), p.throughput("bf16")), (Some(3.5e12), Some(5e13)));
    assert!(p.unusable_figures().is_empty());
}

#[test]
fn an_unusable_copy_bandwidth_falls_back_to_the_read_bandwidth() {
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-300, 1e308, 1.0] {
        let mut p = peaks();
        p.copy = measured(bad);
        assert_eq!(p.bandwidth(), Some(4e12), "copy {bad}");
        assert_eq!(p.check(), Ok(()), "copy {bad}");
        assert_eq!(p.unusable_figures().len(), 1, "copy {bad}");
        assert!(p.unusable_figures()[0].starts_with("copy bandwidth"), "{:?}", p.unusable_figures());
    }
}

#[test]
fn each_unusable_limit_is_named() {
    let mut p = peaks();
    p.copy = measured(0.0);
    p.read = None;
    assert_eq!(
        p.check(),
        Err("no usable bandwidth (copy bandwidth 0 B/s: not positive; read bandwidth missing)".into())
    );
    let mut p = peaks();
    p.flops.insert("f32".into(), Measured { value: -5.0, spread: 0.0, method: String::new() });
    assert_eq!(p.check(), Err("no usable f32 throughput (f32 throughput -5 FLOP/s: not positive)".into()));
    p.flops.clear();
    assert_eq!(p.check(), Err("no usable f32 throughput (f32 throughput missing)".into()));
    let mut p = peaks();
    p.flops.insert("bf16".into(), Measured { value: f64::INFINITY, spread: 0.0, method: String::new() });
    // An unusable dtype's work is priced against f32's throughput.
    assert_eq!(p.throughput("bf16"), Some(5e13));
    assert_eq!(p.unusable_figures(), ["bf16 throughput: not a finite number"]);
}

#[test]
fn another_layout_version_is_refused() {
    let mut p = peaks();
    p.version = 999;
    assert_eq!(p.check(), Err("written in layout version 999 of peaks files; this steptrace reads version 1".into()));
}

#[test]
fn device_names_compare_whole_after_normalising() {
    assert_eq!(device_key("  NVIDIA   H200 "), device_key("nvidia h200"));
    assert_ne!(device_key("H"), device_key("NVIDIA H200"));
    assert_ne!(device_key(""), device_key("NVIDIA H200"));
}
