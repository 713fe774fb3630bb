use super::*;

fn ev(at: f64, thread: usize, marker: Marker) -> Event {
    Event { at, thread, marker }
}

fn wgpu_facts() -> Facts {
    Facts {
        source: "test".into(),
        compiler: "shader",
        compile_timing: CompileTiming::Paired,
        compile_cache: Err("not applicable: no shader cache".into()),
        autotune_ends: Ok(()),
        autotune_hits: Ok(()),
    }
}

fn cuda_facts() -> Facts {
    Facts {
        compiler: "NVRTC",
        compile_timing: CompileTiming::StartOnly("not measured: no end record".into()),
        compile_cache: Ok("PTX cache"),
        ..wgpu_facts()
    }
}

fn end(key: &str) -> Marker {
    Marker::TuneEnd(format!("Fastest result simple-{key}. Context: "))
}

#[test]
fn interval_sets() {
    assert_eq!(union(vec![(5.0, 6.0), (0.0, 2.0), (1.0, 3.0), (4.0, 4.0)]), vec![(0.0, 3.0), (5.0, 6.0)]);
    assert_eq!(subtract(&[(0.0, 10.0)], &[(2.0, 3.0), (5.0, 12.0)]), vec![(0.0, 2.0), (3.0, 5.0)]);
    assert_eq!(subtract(&[(0.0, 1.0), (4.0, 6.0)], &[(-1.0, 0.5)]), vec![(0.5, 1.0), (4.0, 6.0)]);
    assert_eq!(clip(&[(0.0, 3.0), (5.0, 9.0)], (2.0, 6.0)), vec![(2.0, 3.0), (5.0, 6.0)]);
}

/// Set-up 0..100 with the client at 10..40 and one compile; step 0 100..1000 with an
/// autotune 200..500 whose candidates compile on the device thread (1), and compiles
/// outside it. Every figure worked by hand.
#[test]
fn a_wgpu_start_adds_up_by_hand() {
    use Marker::*;
    let key = "K - 64";
    let t = Timeline {
        events: vec![
            ev(50.0, 1, CompileStart),
            ev(60.0, 1, CompileEnd),
            ev(150.0, 1, CompileStart),
            ev(180.0, 1, CompileEnd),
            ev(200.0, 0, TuneStart(key.into())),
            ev(210.0, 1, CompileStart),
            ev(260.0, 1, CompileEnd),
            ev(270.0, 1, CompileStart),
            ev(300.0, 1, CompileEnd),
            ev(500.0, 0, end(key)),
            // A single-candidate "tune": no end, no benchmark.
            ev(600.0, 0, TuneStart("Single".into())),
            ev(700.0, 1, CompileStart),
            ev(790.0, 1, CompileEnd),
        ],
        clients: vec![(10.0, 40.0)],
        setup: (0.0, 100.0),
        first_step: (100.0, 1000.0),
        walls: None,
    };
    let c = cold_start(&t, &wgpu_facts());
    let s = &c.setup;
    assert_eq!(s.ms, 100.0);
    assert_eq!(s.client_ms, Some(Figure::Known(30.0)));
    assert_eq!(s.compile.kernels, Figure::Known(1));
    assert_eq!(s.compile.outside_autotune_ms, Figure::Known(10.0));
    assert_eq!(s.rest_ms, 60.0);
    let f = &c.first_step;
    assert_eq!(f.ms, 900.0);
    assert_eq!(f.client_ms, None);
    assert_eq!(f.autotune.runs, Figure::Known(1));
    assert_eq!(f.autotune.cache_hits, Figure::Known(0));
    assert_eq!(f.autotune.ms, Figure::Known(300.0));
    assert_eq!(f.compile.kernels, Figure::Known(4));
    assert_eq!(f.compile.ms, Figure::Known(30.0 + 50.0 + 30.0 + 90.0));
    assert_eq!(f.compile.in_autotune_ms, Figure::Known(80.0));
    assert_eq!(f.compile.outside_autotune_ms, Figure::Known(120.0));
    assert_eq!(f.rest_ms, 900.0 - 300.0 - 120.0);
    assert!(f.rest_includes.is_empty());
    for phase in [s, f] {
        assert!((phase.parts().iter().map(|p| p.1).sum::<f64>() - phase.ms).abs() < 1e-9);
    }
    assert_eq!(c.cache.label, "cold", "{:?}", c.cache);
    assert!(c.cache.basis.contains("kernels: 5 compiled (not applicable: no shader cache)"), "{}", c.cache.basis);
    assert!(c.cache.basis.contains("autotune results: 0 of 1 from the cache"), "{}", c.cache.basis);
}

/// CUDA: starts only. The time is absent, an upper bound runs to the next record on the
/// compiling thread, and the rest says what it holds.
#[test]
fn a_cuda_start_has_counts_and_a_bound_but_no_compile_time() {
    use Marker::*;
    let t = Timeline {
        events: vec![
            ev(120.0, 1, CompileStart),
            ev(150.0, 1, CompileCacheHit),
            ev(160.0, 1, CompileStart),
            ev(400.0, 0, TuneValidate("Hit".into())),
        ],
        clients: vec![(5.0, 95.0)],
        setup: (0.0, 100.0),
        first_step: (100.0, 500.0),
        walls: None,
    };
    let c = cold_start(&t, &cuda_facts());
    let f = &c.first_step;
    assert_eq!(f.compile.kernels, Figure::Known(2));
    assert_eq!(f.compile.cache_hits, Figure::Known(1));
    assert_eq!(f.compile.ms, Figure::absent("not measured: no end record"));
    assert_eq!(f.compile.ms_upper_bound, Some(30.0 + 340.0));
    assert_eq!(f.autotune.runs, Figure::Known(0));
    assert_eq!(f.autotune.cache_hits, Figure::Known(1));
    assert_eq!(f.rest_ms, 400.0);
    assert_eq!(f.rest_includes, vec!["the NVRTC compilation of 2 kernels (not measured; at most 370.0 ms)".to_owned()]);
    assert_eq!(c.setup.client_ms, Some(Figure::Known(90.0)));
    assert_eq!(c.setup.rest_ms, 10.0);
    // 1 PTX hit + 1 autotune hit against 2 compiles: partly warm.
    assert_eq!(c.cache.label, "partly warm");
    assert!(c.cache.basis.contains("kernels: 1 of 3 from the PTX cache"), "{}", c.cache.basis);
}

#[test]
fn labels_follow_hits_and_misses() {
    use Marker::*;
    let facts = cuda_facts();
    let run = |events: Vec<Event>| {
        cold_start(&Timeline { events, setup: (0.0, 1.0), first_step: (1.0, 2.0), ..Timeline::default() }, &facts)
            .cache
            .label
    };
    assert_eq!(run(vec![ev(1.5, 1, CompileCacheHit), ev(1.6, 0, TuneValidate("k".into()))]), "warm");
    assert_eq!(run(vec![ev(1.5, 1, CompileStart)]), "cold");
    // A key validated from the cache that then had to be tuned again is a miss.
    assert_eq!(
        run(vec![ev(1.1, 0, TuneValidate("k".into())), ev(1.2, 0, TuneStart("k".into())), ev(1.3, 0, end("k"))]),
        "cold"
    );
    // Nothing at all: an earlier run in this process left it all in memory.
    assert_eq!(run(vec![]), "warm");
    let wgpu = cold_start(
        &Timeline {
            events: vec![ev(1.5, 1, CompileStart), ev(1.6, 1, CompileEnd)],
            setup: (0.0, 1.0),
            first_step: (1.0, 2.0),
            ..Timeline::default()
        },
        &wgpu_facts(),
    );
    assert!(wgpu.cache.label.starts_with("not observed: nothing"), "{:?}", wgpu.cache);
    let blind = Facts { autotune_hits: Err("not observed: level".into()), ..cuda_facts() };
    let c = cold_start(
        &Timeline {
            events: vec![ev(1.5, 1, CompileCacheHit)],
            setup: (0.0, 1.0),
            first_step: (1.0, 2.0),
            ..Timeline::default()
        },
        &blind,
    );
    assert_eq!(c.cache.label, "not observed: level");
}

#[test]
fn missing_autotune_ends_leave_autotune_in_the_rest() {
    use Marker::*;
    let facts = Facts { autotune_ends: Err("not observed: no sink".into()), ..wgpu_facts() };
    let t = Timeline {
        events: vec![ev(10.0, 0, TuneStart("k".into())), ev(11.0, 1, CompileStart), ev(15.0, 1, CompileEnd)],
        setup: (0.0, 5.0),
        first_step: (5.0, 50.0),
        ..Timeline::default()
    };
    let c = cold_start(&t, &facts);
    let f = &c.first_step;
    assert_eq!(f.autotune.ms, Figure::absent("not observed: no sink"));
    assert_eq!(f.compile.in_autotune_ms, Figure::absent("not observed: no sink"));
    assert_eq!(f.compile.outside_autotune_ms, Figure::Known(4.0));
    assert_eq!(f.rest_ms, 41.0);
    assert_eq!(f.rest_includes, vec!["autotune (not measured)".to_owned()]);
    assert_eq!(
        c.setup.client_ms,
        Some(Figure::absent(
            "not measured: the device client existed before this run (created earlier in this process)"
        ))
    );
}

/// The run's own wall times win over the windows' lengths (they differ in the last
/// bits), so that the items add up to the figures the run reports.
#[test]
fn the_runs_walls_are_the_phases_times() {
    use Marker::*;
    let t = Timeline {
        events: vec![ev(1.0, 1, CompileStart), ev(2.0, 1, CompileEnd)],
        setup: (0.0, 0.5),
        first_step: (0.5, 10.0),
        walls: Some((0.5000000001, 9.4999999999)),
        ..Timeline::default()
    };
    let c = cold_start(&t, &wgpu_facts());
    assert_eq!(c.setup.ms, 0.5000000001);
    assert_eq!(c.first_step.ms, 9.4999999999);
    assert_eq!(c.first_step.parts().iter().map(|p| p.1).sum::<f64>(), 9.4999999999);
}

#[test]
fn a_compile_without_an_end_makes_the_time_absent() {
    use Marker::*;
    let t = Timeline {
        events: vec![ev(1.0, 1, CompileStart), ev(2.0, 1, CompileStart), ev(3.0, 1, CompileEnd)],
        setup: (0.0, 0.5),
        first_step: (0.5, 10.0),
        ..Timeline::default()
    };
    let c = cold_start(&t, &wgpu_facts());
    assert!(
        c.first_step.compile.ms.reason().is_some_and(|r| r.contains("1 compiles have no end")),
        "{:?}",
        c.first_step.compile
    );
    assert_eq!(c.first_step.compile.ms_upper_bound, None);
    assert_eq!(c.first_step.rest_ms, 9.5);
}
