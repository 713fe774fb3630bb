use super::*;

#[test]
fn cubecl_errors_are_classified_with_their_size() {
    let too_big = "reading the loss back from the device failed: An error happened\nCaused by:\n  can't allocate buffer of size: 68719476736\n";
    assert_eq!(classify(too_big), Some((Shortage::TooLargeForOneAllocation, Some(68_719_476_736))));
    assert_eq!(classify("out of device memory allocating 4096 bytes\n"), Some((Shortage::DeviceFull, Some(4096))));
    assert_eq!(classify("CUDA_ERROR_OUT_OF_MEMORY"), Some((Shortage::DeviceFull, None)));
    assert_eq!(classify("An out-of-memory error happened during launch"), Some((Shortage::DeviceFull, None)));
    assert_eq!(classify("Cube count too big (1024, 125000, 1)"), None);
}

#[test]
fn brief_keeps_the_first_line_and_cause_without_backtraces() {
    let e = "step 0 failed: An error happened during execution\nCaused by:\n  Several failures at once\nCaused by:\n  can't allocate buffer of size: 8\n   0: std::backtrace\n   1: /root/.cargo/x.rs";
    assert_eq!(brief(e), "step 0 failed: An error happened during execution: can't allocate buffer of size: 8");
    assert_eq!(brief("plain"), "plain");
    assert!(brief(&"é".repeat(500)).len() <= 403);
}

fn params(bytes: u64) -> Parameters {
    Parameters { bytes, largest: Some(("hidden0.weight".to_owned(), bytes / 2, vec![10, 20])) }
}

fn facts(p: &Parameters) -> Facts<'_> {
    Facts {
        step: 0,
        shortage: Shortage::DeviceFull,
        requested: Some(600),
        batch_size: 10,
        batch_bytes: 40,
        reached: None,
        surfaced_at: "the loss read",
        parameters: p,
        optimizer_state: None,
        limits: Some(MemoryLimits { capacity: Some(1_300), max_allocation: 2_500 }),
        at_failure: Some(MemorySnapshot { bytes_in_use: 500, bytes_padding: 0, bytes_reserved: 800, allocations: 3 }),
        pools: &[(700, 4096), (300, 1024)],
        highest: None,
    }
}

/// Step 0 failed: the failure gives a lower bound per sample, and the batch an upper one,
/// with Adam's state to come counted.
#[test]
fn a_first_step_failure_bounds_the_batch_from_the_failure() {
    let p = params(100);
    let r = explain(&facts(&p));
    // (500 held + 600 asked − 100 parameters) / 10 samples.
    assert_eq!(r.per_sample.known().unwrap().value, 100);
    assert_eq!(r.per_sample.known().unwrap().bound, "at least");
    // (1,300 − 100 parameters − 100 gradients − 200 Adam) / 100.
    assert_eq!(r.fitting_batch.known().unwrap().value, 9);
    assert_eq!(r.fitting_batch.known().unwrap().bound, "at most");
    assert_eq!(r.categories, [Category { name: "parameters", bytes: 100 }, Category { name: "other", bytes: 400 }]);
    let sizes: Vec<u64> = r.largest.iter().map(|a| a.bytes).collect();
    assert_eq!(sizes, [700, 600, 300, 50, 40]);
}

/// A completed step's highest sample measures the bytes per sample; a request too large for
/// one allocation bounds the batch by the largest allocation.
#[test]
fn a_sampled_step_and_a_too_large_request() {
    let p = params(100);
    let mut f = facts(&p);
    f.highest =
        Some(Sample { in_use: 1_400, gradients: 100, optimizer_state: 200, after: "loss", step: 3, inside_step: true });
    f.optimizer_state = Some(200);
    f.shortage = Shortage::TooLargeForOneAllocation;
    f.requested = Some(5_000);
    let r = explain(&f);
    // (1,400 − 100 − 100 − 200) / 10.
    assert_eq!(r.per_sample.known().unwrap().value, 100);
    // By capacity: (1,300 − 400) / 100 = 9; by the largest allocation: 10 × 2,500 / 5,000 = 5.
    assert_eq!(r.fitting_batch.known().unwrap().value, 5);
    assert!(r.fitting_batch.known().unwrap().method_note.contains("largest allocation"));
    assert_eq!(r.categories[1], Category { name: "optimizer_state", bytes: 200 });
    assert_eq!(r.categories[2], Category { name: "other", bytes: 200 });
}

/// Figures that would fit the failed batch are not turned into a fitting batch; an unknown
/// capacity is said, never guessed; categories beyond in use are unattributed.
#[test]
fn what_cannot_be_known_is_said() {
    let p = params(100);
    let mut f = facts(&p);
    f.requested = Some(10);
    f.at_failure = Some(MemorySnapshot { bytes_in_use: 150, ..MemorySnapshot::default() });
    let r = explain(&f);
    // (150 + 10 − 100) / 10 = 6 per sample would fit 150 samples: not a fit.
    assert!(r.fitting_batch.reason().unwrap().contains("needs more than they show"));
    f.limits = None;
    f.at_failure = Some(MemorySnapshot { bytes_in_use: 50, ..MemorySnapshot::default() });
    f.requested = Some(600);
    let r = explain(&f);
    assert!(r.fitting_batch.reason().unwrap().contains("capacity is not known"));
    assert_eq!(r.categories[1], Category { name: "unattributed", bytes: -50 });
    assert!(r.not_observed.iter().any(|n| n.contains("capacity")));
}

/// The bound per sample is never below the input batch's own bytes per sample, which the
/// step holds (a step-start sample between steps says almost nothing of the step).
#[test]
fn the_bound_per_sample_is_never_below_the_input_batch() {
    let p = params(100);
    let mut f = facts(&p);
    f.batch_bytes = 2_600;
    f.highest = Some(Sample {
        in_use: 110,
        gradients: 0,
        optimizer_state: 0,
        after: "step start",
        step: 0,
        inside_step: false,
    });
    let r = explain(&f);
    let b = r.per_sample.known().unwrap();
    assert_eq!((b.value, b.bound), (260, "at least"));
    assert!(b.method_note.contains("input batch") && b.method_note.contains("more than 1 B"), "{}", b.method_note);
}
