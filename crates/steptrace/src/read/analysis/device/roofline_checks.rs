//! The checks every priced figure passes before the report is given it: finite, never a
//! negative zero, and a step whose parts add up to it (within rounding) or is not split at
//! all, with the inconsistent input named instead.

use super::roofline::{PricedRow, RooflineView, StepFloor};
use super::TimeRow;

/// The share of the step its parts may miss it by, rounding: 0.5%.
const ROUNDING_SHARE: f64 = 0.005;

/// The least slack of that rounding, ms.
const ROUNDING_MS: f64 = 1e-6;

/// `v`, a negative zero made zero (so that nothing prints `-0.0`).
fn zero(v: f64) -> f64 {
    v + 0.0
}

/// A duration in ms for a message: `12.5000`, or `1.000e9` when large.
fn ms(v: f64) -> String {
    if v.abs() < 1e6 {
        format!("{v:.4}")
    } else {
        format!("{v:.3e}")
    }
}

/// `step` when its parts can be shown as its split: every part finite and not below zero
/// (beyond rounding), the priced kernels no faster than their floor, and the parts adding
/// up to the step's wall time.
///
/// # Errors
///
/// Which input is inconsistent, in words, when they cannot.
pub(super) fn checked_step(mut step: StepFloor, priced_ms: f64) -> Result<StepFloor, String> {
    let parts = [
        step.step_ms,
        step.floor_ms,
        step.above_floor_ms,
        step.unpriced_ms,
        step.idle_input_ms.unwrap_or(0.0),
        step.idle_sync_ms.unwrap_or(0.0),
        step.idle_other_ms,
        step.rest_ms,
        priced_ms,
    ];
    if parts.iter().any(|v| !v.is_finite()) {
        return Err("a part of the step is not a finite number: the trace's times or the work of its kernels are \
                    inconsistent, so the step is not split"
            .to_owned());
    }
    if step.step_ms <= 0.0 {
        return Err("the counted steps have no wall time: the step is not split".to_owned());
    }
    let slack = (step.step_ms * ROUNDING_SHARE).max(ROUNDING_MS);
    let idle = [step.idle_input_ms.unwrap_or(0.0), step.idle_sync_ms.unwrap_or(0.0), step.idle_other_ms];
    if step.unpriced_ms < -slack || priced_ms < -slack || idle.iter().any(|v| *v < -slack) {
        return Err(
            "a part of the step is negative: the trace's times are inconsistent, so the step is not split".to_owned()
        );
    }
    if step.floor_ms > priced_ms + slack {
        return Err(format!(
            "the priced kernels took {} ms per step, less than their floor of {} ms: the device limits are below \
             what this device reached (or the kernels' work is overstated), so the step is not split against them",
            ms(priced_ms),
            ms(step.floor_ms)
        ));
    }
    if step.rest_ms < -slack {
        return Err(format!(
            "the kernels (priced {} ms, not priced {} ms per step) and the device's idle time add up to more than \
             the step's wall time of {} ms: kernels overlap or are duplicated in the trace (see the warnings), so \
             the step is not split",
            ms(priced_ms),
            ms(step.unpriced_ms),
            ms(step.step_ms)
        ));
    }
    // Within rounding: a part just below zero is zero.
    let at_least_zero = |v: f64| zero(v.max(0.0));
    step.floor_ms = at_least_zero(step.floor_ms);
    step.above_floor_ms = at_least_zero(step.above_floor_ms);
    step.unpriced_ms = at_least_zero(step.unpriced_ms);
    step.idle_input_ms = step.idle_input_ms.map(at_least_zero);
    step.idle_sync_ms = step.idle_sync_ms.map(at_least_zero);
    step.idle_other_ms = at_least_zero(step.idle_other_ms);
    step.rest_ms = at_least_zero(step.rest_ms);
    Ok(step)
}

fn finite_row(r: &mut PricedRow) -> bool {
    let options = [r.floor_ms, r.above_floor_ms, r.efficiency];
    let fine = [r.ms_per_step, r.flops_per_step, r.bytes_per_step, r.achieved_flops, r.achieved_bandwidth, r.intensity]
        .iter()
        .chain(options.iter().flatten())
        .all(|v| v.is_finite());
    for v in [
        &mut r.ms_per_step,
        &mut r.flops_per_step,
        &mut r.bytes_per_step,
        &mut r.achieved_flops,
        &mut r.achieved_bandwidth,
        &mut r.intensity,
    ] {
        *v = zero(*v);
    }
    for v in [&mut r.floor_ms, &mut r.above_floor_ms, &mut r.efficiency].into_iter().flatten() {
        *v = zero(*v);
    }
    fine
}

fn finite_time_row(r: &mut TimeRow) -> bool {
    r.ms_per_step = zero(r.ms_per_step);
    r.share = zero(r.share);
    r.kernels_per_step = zero(r.kernels_per_step);
    r.ms_per_step.is_finite() && r.share.is_finite() && r.kernels_per_step.is_finite()
}

/// Makes every figure of `view` finite and never a negative zero: a row with a figure that
/// is not finite is left out, and a note says how many were; totals that are not finite
/// are zero, said in a note.
pub(super) fn keep_finite(view: &mut RooflineView) {
    let mut dropped = 0;
    for rows in [&mut view.by_layer, &mut view.by_op_kind, &mut view.by_phase, &mut view.by_kernel] {
        let before = rows.len();
        rows.retain_mut(finite_row);
        dropped += before - rows.len();
    }
    let before = view.unpriced.len();
    view.unpriced.retain_mut(finite_time_row);
    dropped += before - view.unpriced.len();
    if dropped > 0 {
        view.notes.push(format!(
            "{dropped} row(s) left out: a figure of theirs is not a finite number (the trace's times or work are \
             inconsistent)"
        ));
    }
    let totals = [&mut view.kernel_ms_per_step, &mut view.priced_ms_per_step, &mut view.priced_share];
    if totals.iter().any(|v| !v.is_finite()) {
        view.notes.push(
            "the kernel time per step is not a finite number (the trace's times are inconsistent): shown as 0"
                .to_owned(),
        );
    }
    for v in [&mut view.kernel_ms_per_step, &mut view.priced_ms_per_step, &mut view.priced_share] {
        *v = if v.is_finite() { zero(*v) } else { 0.0 };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(floor: f64, priced: f64, unpriced: f64, idle: f64) -> (StepFloor, f64) {
        let step_ms = 10.0;
        let rest = step_ms - (priced + unpriced + idle);
        let s = StepFloor {
            step_ms,
            floor_ms: floor,
            above_floor_ms: (priced - floor).max(0.0),
            unpriced_ms: unpriced,
            idle_input_ms: None,
            idle_sync_ms: Some(0.0),
            idle_other_ms: idle,
            rest_ms: rest,
        };
        (s, priced)
    }

    #[test]
    fn a_consistent_step_is_kept_and_adds_up() {
        let (s, priced) = step(2.0, 5.0, 1.0, 3.0);
        let s = checked_step(s, priced).unwrap();
        let sum = s.floor_ms + s.above_floor_ms + s.unpriced_ms + s.idle_other_ms + s.rest_ms;
        assert!((sum - s.step_ms).abs() < 1e-12, "{s:?}");
    }

    #[test]
    fn kernels_beyond_the_wall_time_are_named_not_split() {
        // Overlapping or duplicated kernels: 23.6 ms of kernels in a 10 ms step.
        let (s, priced) = step(2.0, 23.6, 0.0, 3.0);
        let why = checked_step(s, priced).unwrap_err();
        assert!(why.contains("kernels overlap or are duplicated"), "{why}");
        assert!(why.contains("priced 23.6000 ms") && why.contains("wall time of 10.0000 ms"), "{why}");
    }

    #[test]
    fn a_floor_above_the_kernels_time_names_the_limits() {
        let (s, priced) = step(7.0, 5.0, 0.0, 1.0);
        let why = checked_step(s, priced).unwrap_err();
        assert!(why.contains("less than their floor of 7.0000 ms") && why.contains("device limits"), "{why}");
    }

    #[test]
    fn figures_that_are_not_finite_are_never_split() {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let (mut s, priced) = step(2.0, 5.0, 1.0, 3.0);
            s.floor_ms = bad;
            assert!(checked_step(s, priced).unwrap_err().contains("not a finite number"));
        }
        let (mut s, priced) = step(2.0, 5.0, 1.0, 3.0);
        s.step_ms = 0.0;
        assert!(checked_step(s, priced).unwrap_err().contains("no wall time"));
    }

    #[test]
    fn rounding_below_zero_is_zero_and_never_negative_zero() {
        let (mut s, priced) = step(0.0, 5.0, 1.0, 4.0);
        s.rest_ms = -1e-9;
        s.floor_ms = -0.0;
        let s = checked_step(s, priced).unwrap();
        assert!(s.rest_ms == 0.0 && s.rest_ms.is_sign_positive() && s.floor_ms.is_sign_positive(), "{s:?}");
    }

    #[test]
    fn rows_that_are_not_finite_are_left_out_with_a_note() {
        let row = |name: &str, ms: f64| PricedRow {
            name: name.into(),
            ms_per_step: ms,
            flops_per_step: 0.0,
            bytes_per_step: -0.0,
            achieved_flops: 0.0,
            achieved_bandwidth: 0.0,
            intensity: 0.0,
            floor_ms: Some(-0.0),
            above_floor_ms: None,
            bound: None,
            dtype: "f32".into(),
            efficiency: None,
        };
        let mut view = RooflineView {
            steps: 1,
            roofs: None,
            no_floor: None,
            kernel_ms_per_step: f64::INFINITY,
            priced_ms_per_step: -0.0,
            priced_share: -0.0,
            step: None,
            step_problem: None,
            by_layer: vec![row("ok", 1.0), row("bad", f64::NAN)],
            by_op_kind: vec![],
            by_phase: vec![],
            by_kernel: vec![],
            unpriced: vec![],
            notes: vec![],
        };
        keep_finite(&mut view);
        assert_eq!(view.by_layer.len(), 1);
        assert!(
            view.by_layer[0].bytes_per_step.is_sign_positive() && view.by_layer[0].floor_ms.unwrap().is_sign_positive()
        );
        assert_eq!((view.kernel_ms_per_step, view.priced_share.is_sign_positive()), (0.0, true));
        assert_eq!(view.notes.len(), 2, "{:?}", view.notes);
        assert_eq!(format!("{:.1}%", view.priced_share * 100.0), "0.0%");
    }
}
