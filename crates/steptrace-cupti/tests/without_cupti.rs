//! On a machine without libcupti (this workspace's build machine), everything must fail
//! cleanly with the probe's reason. With libcupti present, the same calls must agree with
//! the probe instead.

use std::path::Path;

use steptrace_cupti::{probe, CallbackApi, ClockPair, Collector, CollectorConfig, CuptiError};

/// Looks for libcupti independently of cudarc: the loader cache and LD_LIBRARY_PATH.
fn libcupti_on_loader_path() -> bool {
    let cached = std::process::Command::new("ldconfig")
        .arg("-p")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("libcupti.so"))
        .unwrap_or(false);
    let in_env = std::env::var("LD_LIBRARY_PATH").unwrap_or_default().split(':').any(|dir| {
        std::fs::read_dir(Path::new(dir))
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("libcupti.so"))
    });
    cached || in_env
}

#[test]
fn probe_explains_a_missing_library_without_panicking() {
    let found = probe();
    assert_eq!(found, probe(), "the probe is stable");
    if libcupti_on_loader_path() {
        assert!(found.is_available(), "libcupti is on the loader path: {found}");
        assert!(found.version.is_some_and(|v| v > 0));
        return;
    }
    assert!(!found.is_available());
    assert_eq!(found.version, None);
    assert_eq!(found.callback_api, CallbackApi::Unknown);
    match &found.error {
        Some(CuptiError::LibraryNotFound { tried }) => {
            assert!(tried.split(", ").any(|name| name == "libcupti.so"), "{tried}");
            assert!(tried.contains("libcupti.so.13"), "{tried}");
        }
        other => panic!("expected LibraryNotFound, got {other:?}"),
    }
    let reason = found.reason().expect("a reason");
    assert!(reason.starts_with("libcupti.so not found on the loader path"), "{reason}");
    assert!(found.to_string().starts_with("CUPTI not available: "), "{found}");
}

#[test]
fn collector_and_clock_fail_with_the_probes_reason() {
    let found = probe();
    if found.is_available() {
        return; // covered by the smoke example on a CUDA machine
    }
    let expected = found.error.clone().expect("unavailable has an error");
    match Collector::start(CollectorConfig::default()) {
        Err(CuptiError::Unavailable(inner)) => assert_eq!(*inner, expected),
        other => panic!("expected Unavailable, got {other:?}"),
    }
    // Still no collector: a second attempt fails the same way, not with AlreadyStarted.
    let again = Collector::start(CollectorConfig::default()).unwrap_err();
    assert_eq!(again.root(), &expected);
    assert_eq!(ClockPair::sample().unwrap_err(), expected);
}

#[test]
fn configuration_is_checked_before_anything_else() {
    let config = CollectorConfig { buffer_bytes: 1024, ..CollectorConfig::default() };
    let err = Collector::start(config).unwrap_err();
    assert!(matches!(err, CuptiError::InvalidConfig(_)), "{err:?}");
}
