use super::*;

const S: u64 = 1_000_000_000;

fn pair(host: Instant, cupti_ns: u64, bracket_ns: u64) -> ClockPair {
    ClockPair::new(host, cupti_ns, Duration::from_nanos(bracket_ns))
}

/// Two pairs 10 s apart on CUPTI's clock, with the host running `ppm` faster.
fn drifting(ppm: f64) -> (Instant, ClockPair, ClockPair) {
    let t0 = Instant::now();
    let c0 = 1_700_000_000 * S; // epoch-like magnitudes must not overflow
    let host_span = (10.0 * S as f64 * (1.0 + ppm * 1e-6)).round() as u64;
    let open = pair(t0, c0, 200);
    let close = pair(t0 + Duration::from_nanos(host_span), c0 + 10 * S, 600);
    (t0, open, close)
}

#[test]
fn sample_keeps_the_narrowest_bracket() {
    let mut calls = 0u64;
    let best = ClockPair::sample_with(|| -> Result<u64, ()> {
        calls += 1;
        if calls < 3 {
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(calls * 1_000)
    })
    .unwrap();
    assert_eq!(calls, 3);
    assert_eq!(best.cupti_ns, 3_000, "the third reading had no sleep inside its bracket");
    assert!(best.bracket < Duration::from_millis(5));
    assert_eq!(best.uncertainty(), best.bracket / 2);
}

#[test]
fn sample_passes_reader_errors_on() {
    let r = ClockPair::sample_with(|| -> Result<u64, &str> { Err("no clock") });
    assert_eq!(r, Err("no clock"));
}

#[test]
fn fit_recovers_positive_and_negative_drift() {
    for ppm in [50.0, -120.0, 0.0] {
        let (_, open, close) = drifting(ppm);
        let map = ClockMap::fit(open, close);
        assert!(map.is_fitted());
        assert!((map.drift_ppm() - ppm).abs() < 1e-3, "ppm {ppm}: got {}", map.drift_ppm());
    }
}

#[test]
fn fit_maps_both_anchors_and_the_middle() {
    let (t0, open, close) = drifting(50.0);
    let map = ClockMap::fit(open, close);
    assert_eq!(map.to_instant(open.cupti_ns), Some(open.host));
    let at_close = map.to_instant(close.cupti_ns).unwrap();
    let err = if at_close > close.host { at_close - close.host } else { close.host - at_close };
    assert!(err <= Duration::from_nanos(1), "close anchor off by {err:?}");
    // Five CUPTI seconds after open: 5 s plus 250 µs of host time.
    let mid = map.since(t0, open.cupti_ns + 5 * S).unwrap();
    assert_eq!(mid, Duration::from_nanos(5 * S + 250_000));
}

#[test]
fn offsets_before_the_origin_are_negative() {
    let (t0, open, close) = drifting(0.0);
    let map = ClockMap::fit(open, close);
    let origin = t0 + Duration::from_secs(1);
    assert_eq!(map.offset_from(origin, open.cupti_ns), -(S as i128));
    assert_eq!(map.since(origin, open.cupti_ns), None);
    assert_eq!(map.since(origin, open.cupti_ns + 3 * S), Some(Duration::from_secs(2)));
    // Before the anchor itself, the instant is earlier than `open.host`.
    let before = map.to_instant(open.cupti_ns - 1_000).unwrap();
    assert_eq!(open.host - before, Duration::from_nanos(1_000));
}

#[test]
fn degenerate_pairs_fall_back_to_offset_only() {
    let (_, open, close) = drifting(50.0);
    for (a, b) in [(open, open), (close, open)] {
        let map = ClockMap::fit(a, b);
        assert!(!map.is_fitted());
        assert_eq!(map.rate(), 1.0);
        assert_eq!(map.drift_ppm(), 0.0);
        assert_eq!(map.to_instant(a.cupti_ns + 7), Some(a.host + Duration::from_nanos(7)));
    }
    // Host time that went nowhere while CUPTI advanced: no rate can be fitted.
    let stuck = pair(open.host, open.cupti_ns + S, 10);
    assert!(!ClockMap::fit(open, stuck).is_fitted());
}

#[test]
fn uncertainties_come_from_the_brackets() {
    let (_, open, close) = drifting(10.0);
    let map = ClockMap::fit(open, close);
    // Half of the wider (600 ns) bracket.
    assert_eq!(map.uncertainty(), Duration::from_nanos(300));
    // (100 + 300) ns over 10 s of CUPTI time = 0.04 ppm.
    assert!((map.drift_uncertainty_ppm() - 0.04).abs() < 1e-9);
    let single = ClockMap::offset_only(close);
    assert_eq!(single.uncertainty(), Duration::from_nanos(300));
    assert_eq!(single.drift_uncertainty_ppm(), 0.0);
}

#[test]
fn durations_scale_with_the_rate() {
    let (_, open, close) = drifting(1_000.0); // 0.1 %
    let map = ClockMap::fit(open, close);
    assert_eq!(map.duration(100, 1_000_100), Duration::from_nanos(1_001_000));
    assert_eq!(map.duration(500, 100), Duration::ZERO);
}

#[test]
fn host_instants_map_back_to_cupti_time() {
    let (t0, open, close) = drifting(-75.0);
    let map = ClockMap::fit(open, close);
    for cupti in [open.cupti_ns - 3 * S, open.cupti_ns, open.cupti_ns + 4 * S + 17, close.cupti_ns] {
        let host = map.to_instant(cupti).unwrap();
        let back = map.to_cupti_ns(host).unwrap();
        assert!(back.abs_diff(cupti) <= 1, "{cupti} -> {back}");
    }
    // 1 s of host time is 1 s / (1 - 75 ppm) of CUPTI time.
    let later = map.to_cupti_ns(t0 + Duration::from_secs(1)).unwrap();
    assert_eq!(later - open.cupti_ns, (S as f64 / (1.0 - 75e-6)).round() as u64);
    // Before CUPTI's zero there is no CUPTI time.
    let small = ClockMap::offset_only(pair(t0 + Duration::from_secs(5), 1_000, 0));
    assert_eq!(small.to_cupti_ns(t0), None);
}
