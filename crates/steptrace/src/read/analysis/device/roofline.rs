//! How fast could this step be: every priced kernel against the device's measured limits.
//!
//! A kernel is *priced* when its fused block carries its minimum work
//! ([`BlockWork`]: FLOPs and bytes, from burn's operations) and every operation of the block
//! has a cost rule. A block's kernels are priced together, against their summed time. With
//! the device's measured [`Peaks`](crate::format::peaks::Peaks) (from the trace's manifest,
//! or given to the report), each
//! block gets a **floor**: the larger of its bytes over the bandwidth and its FLOPs over the
//! throughput of its dtype; what its kernels took beyond that is its time **above the floor**.
//! A block whose arithmetic intensity (FLOPs per byte) is below the ridge point (throughput
//! over bandwidth) is **memory-bound**, else **compute-bound**.
//!
//! The figures are summed per op kind, per layer (span path) and per phase, per counted step,
//! and the step is split into: the floor, kernel time above it, kernels that could not be
//! priced, the device idle by cause (while the host read input, waited, or did anything else:
//! launching), and the rest of the step's wall time (copies, overlap). Kernels that cannot be
//! priced are listed by reason, never dropped: among them blocks whose work is not plausible
//! (see [`MAX_BLOCK_BYTES`]) and blocks whose kernels took no time.
//!
//! Every figure is checked before the view is given out (`roofline_checks`): the limits
//! are usable ones ([`Roofs`]), nothing is infinite, not a number or a negative zero, and
//! the step is split only when its parts add up to it; otherwise
//! [`RooflineView::step_problem`] says which input is inconsistent.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Serialize;

use super::busy::DeviceSteps;
use super::events::WorkKind;
use super::limits::Roofs;
use super::TimeRow;
use crate::format::device::attribution::{is_attributed, is_tied_to_span};
use crate::format::device::BlockWork;
use crate::read::analysis::loaded::Loaded;
use crate::read::analysis::steps::StepRow;

/// The most bytes one run of a block can plausibly move: 1 PB.
pub const MAX_BLOCK_BYTES: f64 = 1e15;

/// The most FLOPs one run of a block can plausibly take: 1e18.
pub const MAX_BLOCK_FLOPS: f64 = 1e18;

/// The least time a run of a block's kernels can take to be priced, µs (1 ns): below it a
/// floor has no time to be compared with.
pub const MIN_BLOCK_US: f64 = 1e-3;

/// One group's work and time, per counted step.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PricedRow {
    /// The op kind, the span path or the phase.
    pub name: String,
    /// Priced kernel time per step, ms.
    pub ms_per_step: f64,
    /// FLOPs per step.
    pub flops_per_step: f64,
    /// Bytes per step.
    pub bytes_per_step: f64,
    /// FLOP/s achieved (FLOPs over kernel time).
    pub achieved_flops: f64,
    /// Bytes/s achieved.
    pub achieved_bandwidth: f64,
    /// FLOPs per byte.
    pub intensity: f64,
    /// The floor per step, ms; `None` without measured limits.
    pub floor_ms: Option<f64>,
    /// Kernel time above the floor per step, ms.
    pub above_floor_ms: Option<f64>,
    /// `memory` or `compute`: which limit sets most of its floor.
    pub bound: Option<&'static str>,
    /// The dtype most of its FLOPs ran in (`f32`, `f16`, `bf16`): the throughput roof it
    /// is held against.
    pub dtype: String,
    /// Its floor over its time: how close it runs to the device's limits. Above 1 it ran
    /// faster than the measured limits allow (see [`RooflineView::notes`]).
    pub efficiency: Option<f64>,
}

/// The step's wall time, split, in ms per counted step (means).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StepFloor {
    /// The step's wall time.
    pub step_ms: f64,
    /// The floor of the priced kernels: the least their work could take on this device.
    pub floor_ms: f64,
    /// Priced kernel time above the floor.
    pub above_floor_ms: f64,
    /// Kernel time that could not be priced.
    pub unpriced_ms: f64,
    /// The device idle while the host read input; `None` when the steps have no input span.
    pub idle_input_ms: Option<f64>,
    /// The device idle while the host waited for it; `None` without waiting spans.
    pub idle_sync_ms: Option<f64>,
    /// The device idle at other times: the host launching, or busy on its own.
    pub idle_other_ms: f64,
    /// What is left of the step: copies and memsets, minus kernels that overlap each other.
    pub rest_ms: f64,
}

/// The priced view of the device's kernels.
#[derive(Clone, Debug, Serialize)]
pub struct RooflineView {
    /// Counted steps.
    pub steps: usize,
    /// The limits; `None` when neither the trace nor the report was given any.
    pub roofs: Option<Roofs>,
    /// Why there is no floor, when there is none.
    pub no_floor: Option<String>,
    /// Kernel time per step, ms.
    pub kernel_ms_per_step: f64,
    /// Priced kernel time per step, ms.
    pub priced_ms_per_step: f64,
    /// Priced over all kernel time.
    pub priced_share: f64,
    /// The step split around the floor; `None` without limits or step boundaries, or when
    /// its parts would not add up to the step (see [`step_problem`](Self::step_problem)).
    pub step: Option<StepFloor>,
    /// Why the step is not split although there are limits: which input is inconsistent
    /// (kernels that overlap or are duplicated, limits below what the kernels reached). It is
    /// among the [`notes`](Self::notes) too.
    pub step_problem: Option<String>,
    /// By span path (layers), most time above the floor first (most time without limits).
    pub by_layer: Vec<PricedRow>,
    /// By op kind, in the same order.
    pub by_op_kind: Vec<PricedRow>,
    /// By phase, in the same order.
    pub by_phase: Vec<PricedRow>,
    /// By kernel name, in the same order; a block of several kernels shares its work among
    /// them by their time.
    pub by_kernel: Vec<PricedRow>,
    /// Kernel time not priced, by reason, heaviest first.
    pub unpriced: Vec<TimeRow>,
    /// How to read these figures, and what in them cannot be as measured.
    pub notes: Vec<String>,
}

/// One run of a fused block: its kernels' summed time and its work.
struct BlockRun {
    us: f64,
    /// Each of its kernels: name and time, µs.
    kernels: Vec<(String, f64)>,
    work: Arc<BlockWork>,
    op_kind: Option<String>,
    span: Option<String>,
    phase: Option<String>,
}

#[derive(Default)]
struct Sum {
    us: f64,
    flops: f64,
    bytes: f64,
    floor_us: f64,
    compute_floor_us: f64,
    /// FLOPs by compute dtype.
    dtypes: BTreeMap<String, f64>,
}

pub(crate) fn roofline_view(
    loaded: &[Loaded],
    steps: &[(usize, &StepRow)],
    roofs: Result<Roofs, String>,
    primary: Option<&DeviceSteps>,
) -> Option<RooflineView> {
    let (roofs, no_roofs) = match roofs {
        Ok(r) => (Some(r), None),
        Err(why) => (None, Some(why)),
    };
    let mut total_us = 0.0;
    let mut runs: Vec<BlockRun> = Vec::new();
    let mut unpriced: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    let mut any_attribution = false;
    for (i, step) in steps {
        let mut blocks: HashMap<u64, usize> = HashMap::new();
        for w in loaded[*i].device.starting_in(step.start, step.end).filter(|w| w.kind == WorkKind::Kernel) {
            let us = w.end - w.start;
            if !(us.is_finite() && us >= 0.0) {
                // The reader keeps no such event; nothing to price or to count.
                continue;
            }
            total_us += us;
            let mut skip = |why: String| {
                let e = unpriced.entry(why).or_default();
                e.0 += us;
                e.1 += 1.0;
            };
            let Some(a) = &w.attributed else {
                skip("the trace carries no attribution for it".into());
                continue;
            };
            any_attribution = true;
            if !is_attributed(&a.how) {
                skip(a.how.clone());
                continue;
            }
            let Some(work) = &a.work else {
                skip(
                    "the trace carries no cost figures for its block (recorded before steptrace priced kernels)".into(),
                );
                continue;
            };
            if !work.priced() {
                skip(format!("no cost rule for {}", work.unpriced.join(", ")));
                continue;
            }
            if let Some(why) = implausible(work) {
                skip(why);
                continue;
            }
            let span = a.span.clone().filter(|_| is_tied_to_span(&a.how));
            let kernel = (w.name.to_string(), us);
            match a.block.and_then(|b| blocks.get(&b).copied()) {
                Some(at) => {
                    runs[at].us += us;
                    runs[at].kernels.push(kernel);
                }
                None => {
                    if let Some(b) = a.block {
                        blocks.insert(b, runs.len());
                    }
                    let (op_kind, phase) = (a.op_kind.clone(), a.phase.clone());
                    runs.push(BlockRun { us, kernels: vec![kernel], work: work.clone(), op_kind, span, phase });
                }
            }
        }
    }
    if !any_attribution || steps.is_empty() {
        return None;
    }
    // A block whose kernels took (next to) no time has no time to hold against its floor.
    runs.retain(|r| {
        let timed = r.us >= MIN_BLOCK_US;
        if !timed {
            let e = unpriced.entry("its kernels took under 1 ns: no time to price".to_owned()).or_default();
            e.0 += r.us;
            e.1 += r.kernels.len() as f64;
        }
        timed
    });
    let n = steps.len() as f64;
    let priced_us: f64 = runs.iter().fold(0.0, |sum, r| sum + r.us);
    let mut by_layer: BTreeMap<String, Sum> = BTreeMap::new();
    let mut by_kind: BTreeMap<String, Sum> = BTreeMap::new();
    let mut by_phase: BTreeMap<String, Sum> = BTreeMap::new();
    let mut by_kernel: BTreeMap<String, Sum> = BTreeMap::new();
    let mut floor_us = 0.0;
    for r in &runs {
        let (floor, compute) = roofs.as_ref().map_or((0.0, 0.0), |roofs| roofs.floor_us(&r.work));
        floor_us += floor;
        let add = |map: &mut BTreeMap<String, Sum>, key: &str| {
            let s = map.entry(key.to_owned()).or_default();
            s.us += r.us;
            s.flops += r.work.flops;
            s.bytes += r.work.bytes;
            s.floor_us += floor;
            s.compute_floor_us += compute;
            *s.dtypes.entry(r.work.dtype.clone()).or_default() += r.work.flops;
        };
        add(&mut by_kind, r.op_kind.as_deref().unwrap_or("unknown"));
        if let Some(span) = &r.span {
            add(&mut by_layer, span);
        }
        if let Some(phase) =
            r.phase.as_deref().or_else(|| r.span.as_deref().map(|s| s.split(" > ").next().unwrap_or(s)))
        {
            add(&mut by_phase, phase);
        }
        // A block's work is shared among its kernels by their time.
        for (name, us) in &r.kernels {
            let share = if r.us > 0.0 { us / r.us } else { 1.0 / r.kernels.len() as f64 };
            let s = by_kernel.entry(name.clone()).or_default();
            s.us += us;
            s.flops += r.work.flops * share;
            s.bytes += r.work.bytes * share;
            s.floor_us += floor * share;
            s.compute_floor_us += compute * share;
            *s.dtypes.entry(r.work.dtype.clone()).or_default() += r.work.flops * share;
        }
    }
    let with_floor = roofs.is_some();
    let rows = |map: BTreeMap<String, Sum>| -> Vec<PricedRow> {
        let mut rows: Vec<PricedRow> = map.into_iter().map(|(name, s)| priced_row(name, &s, n, with_floor)).collect();
        rows.sort_by(|a, b| {
            let key = |r: &PricedRow| r.above_floor_ms.unwrap_or(r.ms_per_step);
            key(b).total_cmp(&key(a)).then_with(|| a.name.cmp(&b.name))
        });
        rows
    };
    let unpriced_us = total_us - priced_us;
    let split = roofs.as_ref().and_then(|_| {
        let d = primary?;
        let step_ms = d.steps.iter().map(|s| s.step_ms).sum::<f64>() / d.steps.len().max(1) as f64;
        let mean =
            |f: fn(&super::busy::DeviceStep) -> f64| d.steps.iter().map(f).sum::<f64>() / d.steps.len().max(1) as f64;
        let (floor_ms, priced_ms, unpriced_ms) =
            (floor_us / 1000.0 / n, priced_us / 1000.0 / n, unpriced_us / 1000.0 / n);
        let idle_input_ms = d.input_seen.then(|| mean(|s| s.idle_input_ms));
        let idle_sync_ms = d.wait_seen.then(|| mean(|s| s.idle_sync_ms));
        let idle_other_ms = mean(|s| s.idle_other_ms);
        let accounted =
            priced_ms + unpriced_ms + idle_input_ms.unwrap_or(0.0) + idle_sync_ms.unwrap_or(0.0) + idle_other_ms;
        let step = StepFloor {
            step_ms,
            floor_ms,
            above_floor_ms: (priced_ms - floor_ms).max(0.0),
            unpriced_ms,
            idle_input_ms,
            idle_sync_ms,
            idle_other_ms,
            rest_ms: step_ms - accounted,
        };
        // Kernels that cannot be as written are named first: they explain a split that does
        // not add up.
        Some(match doubtful_kernels(loaded, steps) {
            0 => super::roofline_checks::checked_step(step, priced_ms),
            n => Err(format!(
                "{n} kernel(s) of the trace start before the previous kernel on their stream ended, or share a \
                 single launch's correlation id with another (see the warnings): their time may be counted twice, \
                 so the step is not split"
            )),
        })
    });
    let (step, step_problem) = match split {
        Some(Ok(step)) => (Some(step), None),
        Some(Err(why)) => (None, Some(why)),
        None => (None, None),
    };
    let mut unpriced: Vec<TimeRow> = unpriced
        .into_iter()
        .map(|(name, (us, calls))| TimeRow {
            name,
            ms_per_step: us / 1000.0 / n,
            share: if total_us > 0.0 { us / total_us } else { 0.0 },
            kernels_per_step: calls / n,
        })
        .collect();
    unpriced.sort_by(|a, b| b.ms_per_step.total_cmp(&a.ms_per_step).then_with(|| a.name.cmp(&b.name)));
    let by_layer = rows(by_layer);
    let mut notes: Vec<String> = step_problem.iter().cloned().collect();
    if let Some(r) = &roofs {
        notes.push(format!(
            "floor = the larger of a block's minimum bytes over {} and its FLOPs over its dtype's measured throughput \
             (limits measured on {}, {}{}); minimum bytes read each input once and write each output once, so a \
             kernel that re-reads or pads moves more",
            rate(r.bandwidth, "B/s"),
            r.device,
            r.measured_at,
            if r.cpu { ", CPU figures" } else { "" }
        ));
        if !r.passed_over.is_empty() {
            notes.push(format!("passed over as unusable in the limits from {}: {}", r.from, r.passed_over.join("; ")));
        }
        let fast: Vec<&str> =
            by_layer.iter().filter(|r| r.efficiency.is_some_and(|e| e > 1.05)).map(|r| r.name.as_str()).collect();
        if !fast.is_empty() {
            notes.push(format!(
                "{} ran faster than their floor: the measured limits are below what they reached (their data may \
                 fit in a cache the limits' large tensors do not), so their time above the floor reads as 0",
                fast.join(", ")
            ));
        }
    }
    let mut view = RooflineView {
        notes,
        steps: steps.len(),
        no_floor: no_roofs,
        roofs,
        kernel_ms_per_step: total_us / 1000.0 / n,
        priced_ms_per_step: priced_us / 1000.0 / n,
        priced_share: if total_us > 0.0 { priced_us / total_us } else { 0.0 },
        step,
        step_problem,
        by_layer,
        by_op_kind: rows(by_kind),
        by_phase: rows(by_phase),
        by_kernel: rows(by_kernel),
        unpriced,
    };
    super::roofline_checks::keep_finite(&mut view);
    Some(view)
}

/// Kernels of the counted steps' files that cannot be as written: overlapping another on
/// their stream, or sharing a single launch's correlation id.
fn doubtful_kernels(loaded: &[Loaded], steps: &[(usize, &StepRow)]) -> usize {
    let mut files: Vec<usize> = steps.iter().map(|(i, _)| *i).collect();
    files.dedup();
    files
        .iter()
        .map(|i| loaded[*i].device.issues.overlapping.count + loaded[*i].device.issues.shared_correlation.count)
        .sum()
}

/// Why a block's work cannot be priced, when its figures are not plausible: not finite,
/// negative, between 0 and 1, or above [`MAX_BLOCK_BYTES`] or [`MAX_BLOCK_FLOPS`].
fn implausible(work: &BlockWork) -> Option<String> {
    let bad = |v: f64, max: f64| !(v.is_finite() && (v == 0.0 || (1.0..=max).contains(&v)));
    (bad(work.bytes, MAX_BLOCK_BYTES) || bad(work.flops, MAX_BLOCK_FLOPS))
        .then(|| "its cost figures are not plausible (bytes or FLOPs not finite, negative, or out of range)".to_owned())
}

fn priced_row(name: String, s: &Sum, n: f64, with_floor: bool) -> PricedRow {
    let secs = s.us / 1e6;
    let rate = |v: f64| if secs > 0.0 { v / secs } else { 0.0 };
    let floor_ms = with_floor.then_some(s.floor_us / 1000.0 / n);
    PricedRow {
        ms_per_step: s.us / 1000.0 / n,
        flops_per_step: s.flops / n,
        bytes_per_step: s.bytes / n,
        achieved_flops: rate(s.flops),
        achieved_bandwidth: rate(s.bytes),
        intensity: if s.bytes > 0.0 { s.flops / s.bytes } else { 0.0 },
        above_floor_ms: floor_ms.map(|f| (s.us / 1000.0 / n - f).max(0.0)),
        bound: with_floor.then_some(if s.compute_floor_us * 2.0 >= s.floor_us && s.floor_us > 0.0 {
            "compute"
        } else {
            "memory"
        }),
        efficiency: floor_ms.filter(|_| s.us > 0.0).map(|f| f * n * 1000.0 / s.us),
        dtype: s.dtypes.iter().max_by(|a, b| a.1.total_cmp(b.1)).map_or_else(|| "f32".to_owned(), |(d, _)| d.clone()),
        floor_ms,
        name,
    }
}

/// `v` in units of `unit` with an SI prefix: `4.80 TB/s`, `312 GFLOP/s`; `not finite` for a
/// value that is not a finite number, never `inf` or `NaN`.
pub fn rate(v: f64, unit: &str) -> String {
    if !v.is_finite() {
        return "not finite".to_owned();
    }
    let v = v + 0.0;
    let (scaled, prefix) = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .iter()
        .find(|(f, _)| v >= *f)
        .map_or((v, ""), |(f, p)| (v / f, *p));
    if scaled >= 100.0 {
        format!("{scaled:.0} {prefix}{unit}")
    } else {
        format!("{scaled:.2} {prefix}{unit}")
    }
}
