//! An out-of-memory that explains itself: when a step fails because the device could not
//! allocate, what the run held, what it asked for, and the largest batch that would have fit.
//!
//! cubecl says which allocation failed in its error's text ([`classify`]): `can't allocate
//! buffer of size: N` (one allocation larger than the device's pools accept in one piece) or
//! `out of device memory allocating N bytes` (the device had no room left); a driver's or a
//! launch's out-of-memory says so without a size. burn surfaces it where the step waits for
//! the device (the loss read or the step's sync), because its fusion queue runs the step's
//! operations there.
//!
//! What the report holds, and how each figure is known ([`OutOfMemory`]):
//! - the failed request and the device's limits (its capacity and its largest allocation,
//!   from cubecl's device properties);
//! - what the allocator held after the failure, and the categories steptrace can name in it
//!   (parameters and optimizer state exact, from the model and the optimizer's record);
//! - the largest allocations it can see: cubecl lists no live allocations one by one, so these
//!   are the failed request, the largest allocation each memory pool has served, the largest
//!   parameter and the input batch;
//! - the bytes a sample needs, from the highest `--memory` sample of a completed step at this
//!   batch when there is one, else from the failure itself: at least what the allocator held
//!   plus the request, which is a lower bound. The batch that would have fit follows from it,
//!   as an upper bound, and from the failed request where it was too large for one
//!   allocation (a tensor that grows with the batch: its size over the batch size).

use serde::Serialize;

use crate::backend::{MemoryLimits, MemorySnapshot};
use crate::memory::Parameters;

/// Which limit the step hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shortage {
    /// One allocation larger than the device's pools accept in one piece (cubecl's
    /// `BufferTooBig`): it can never fit, however empty the device is.
    TooLargeForOneAllocation,
    /// The device had no room left for an allocation (cubecl's `OutOfMemory`, or a driver's
    /// or a launch's out-of-memory).
    DeviceFull,
}

impl Shortage {
    /// What it means, in a few words.
    pub fn meaning(self) -> &'static str {
        match self {
            Shortage::TooLargeForOneAllocation => "one allocation larger than the device accepts in one piece",
            Shortage::DeviceFull => "the device had no memory left for an allocation",
        }
    }
}

/// Whether an error's text says the device could not allocate, and the bytes asked for when
/// it says them.
pub fn classify(error: &str) -> Option<(Shortage, Option<u64>)> {
    if let Some(size) = number_after(error, "can't allocate buffer of size: ") {
        return Some((Shortage::TooLargeForOneAllocation, Some(size)));
    }
    if let Some(size) = number_after(error, "out of device memory allocating ") {
        return Some((Shortage::DeviceFull, Some(size)));
    }
    let lower = error.to_ascii_lowercase();
    ["out of memory", "out-of-memory", "out_of_memory", "out_of_device_memory", "can't allocate buffer"]
        .iter()
        .any(|m| lower.contains(m))
        .then_some((Shortage::DeviceFull, None))
}

/// The decimal number right after `marker` in `text`.
fn number_after(text: &str, marker: &str) -> Option<u64> {
    let start = text.find(marker)? + marker.len();
    let digits: String = text[start..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The first line of an error, and its root cause (the line after its last `Caused by:`) when
/// there is one, without the backtraces cubecl appends: what a trace's cut reason and a
/// console line can carry.
pub fn brief(error: &str) -> String {
    let lines: Vec<&str> = error.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let mut text: String = lines.first().copied().unwrap_or("unknown error").to_owned();
    if let Some(at) = lines.iter().rposition(|l| *l == "Caused by:") {
        if let Some(cause) = lines.get(at + 1) {
            text.push_str(": ");
            text.push_str(cause);
        }
    }
    const MAX: usize = 400;
    if text.len() > MAX {
        let cut = (0..=MAX).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

/// One of the largest allocations steptrace can see, and how it sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Allocation {
    /// What it is: `the failed request`, `the largest allocation pool 2 has served`,
    /// `parameter hidden1.weight [128, 4096]`, `the input batch`.
    pub description: String,
    /// Its bytes.
    pub bytes: u64,
}

/// One category of what the allocator held after the failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Category {
    /// `parameters`, `optimizer_state`, `other` or `unattributed`.
    pub name: &'static str,
    /// Its bytes (`unattributed` is what the categories count beyond in use).
    pub bytes: i64,
}

/// A figure with the side it errs on and how it was obtained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bounded {
    /// The figure.
    pub value: u64,
    /// `at least`, `at most` or `about`.
    pub bound: &'static str,
    /// How it was obtained.
    pub method_note: String,
}

/// A figure, or why it is not known (in JSON: the figure's fields, or `{"not_known": why}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Estimate {
    /// The figure.
    Known(Bounded),
    /// Why it is not known.
    NotKnown {
        /// Why.
        not_known: String,
    },
}

impl Estimate {
    /// The figure, when known.
    pub fn known(&self) -> Option<&Bounded> {
        match self {
            Estimate::Known(b) => Some(b),
            Estimate::NotKnown { .. } => None,
        }
    }

    /// Why it is not known, when it is not.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Estimate::Known(_) => None,
            Estimate::NotKnown { not_known } => Some(not_known),
        }
    }
}

impl From<Result<Bounded, String>> for Estimate {
    fn from(r: Result<Bounded, String>) -> Estimate {
        match r {
            Ok(b) => Estimate::Known(b),
            Err(not_known) => Estimate::NotKnown { not_known },
        }
    }
}

/// One measured point of the probe ([`Probe`]): what the pools held after two training steps
/// of a fresh model at `batch` samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ProbePoint {
    /// Samples per batch.
    pub batch: u64,
    /// Bytes the pools reserved from the device after the two steps.
    pub reserved: u64,
    /// Bytes in use then.
    pub in_use: u64,
}

/// With `--memory`, after the failure: a fresh model trained for two steps at two smaller
/// batches, the pools emptied before each, to measure what one sample costs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Probe {
    /// The two points, when both ran.
    pub points: Vec<ProbePoint>,
    /// Bytes per sample, from the points.
    pub per_sample: Option<Bounded>,
    /// The largest batch that fits, from them.
    pub fitting_batch: Option<Bounded>,
    /// Batches that could not be measured, and what else kept a figure out of reach.
    pub problems: Vec<String>,
}

/// The bounds the failure alone gives, kept beside a probe's measurement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailureBounds {
    /// Bytes per sample, at least.
    pub per_sample: Estimate,
    /// The batch that fits, at most.
    pub fitting_batch: Estimate,
}

/// What a step that ran out of device memory held and asked for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutOfMemory {
    /// The step that failed.
    pub step: u64,
    /// Which limit it hit.
    pub shortage: Shortage,
    /// The bytes the failed allocation asked for, where the error says them.
    pub requested_bytes: Option<u64>,
    /// The run's batch size.
    pub batch_size: u64,
    /// The last phase whose operations had been registered when the failure surfaced
    /// (`None`: `forward` had not returned), and where it surfaced.
    pub reached_phase: Option<&'static str>,
    /// Whether the step's phases are marked at all (`false`: a burn-train `TrainStep` without
    /// `learner::forward`, `loss` or `backward`, so `reached_phase` says nothing).
    pub phases_observed: bool,
    /// Where burn reported the failure (`the loss read`, `the step's sync`, ...).
    pub surfaced_at: &'static str,
    /// The device's capacity and largest allocation, where its runtime states them.
    pub limits: Option<MemoryLimits>,
    /// What the allocator held after the failure (`None`: not observed).
    pub at_failure: Option<MemorySnapshot>,
    /// The categories of `at_failure`.
    pub categories: Vec<Category>,
    /// The largest allocations steptrace can see, largest first.
    pub largest: Vec<Allocation>,
    /// Bytes one sample of the batch needs (activations, temporaries and its share of the
    /// input), or why it is not known.
    pub per_sample: Estimate,
    /// The largest batch that would have fit, or why it is not known.
    pub fitting_batch: Estimate,
    /// What steptrace could not observe, and why.
    pub not_observed: Vec<String>,
    /// The measurement after the failure (`--memory`), when one was tried. Where it gave its
    /// figures, `per_sample` and `fitting_batch` are its figures, and `failure_bounds` keeps
    /// what the failure alone said.
    pub probe: Option<Probe>,
    /// What the failure alone said, where a probe's figures replaced it.
    pub failure_bounds: Option<FailureBounds>,
}

impl OutOfMemory {
    /// Takes `probe`'s figures as the report's, keeping the failure's bounds beside them.
    pub fn with_probe(mut self, probe: Option<Probe>) -> OutOfMemory {
        let measured = probe.as_ref().map(|p| (p.per_sample.clone(), p.fitting_batch.clone()));
        if let Some((per_sample, fits)) = measured.filter(|(p, f)| p.is_some() || f.is_some()) {
            let bounds =
                FailureBounds { per_sample: self.per_sample.clone(), fitting_batch: self.fitting_batch.clone() };
            if let Some(p) = per_sample {
                self.per_sample = Estimate::Known(p);
            }
            // Where nothing measured replaces it, the failure's bound stays the report's figure.
            if let Some(f) = fits {
                self.fitting_batch = Estimate::Known(f);
            }
            self.failure_bounds = Some(bounds);
        }
        self.probe = probe;
        self
    }
}

/// What [`explain`] is given: the run's state at the failure.
pub(crate) struct Facts<'a> {
    pub(crate) step: u64,
    pub(crate) shortage: Shortage,
    pub(crate) requested: Option<u64>,
    pub(crate) batch_size: u64,
    pub(crate) batch_bytes: u64,
    pub(crate) reached: Option<&'static str>,
    pub(crate) surfaced_at: &'static str,
    pub(crate) parameters: &'a Parameters,
    /// The optimizer's state, once read (`None` before its first update).
    pub(crate) optimizer_state: Option<u64>,
    pub(crate) limits: Option<MemoryLimits>,
    pub(crate) at_failure: Option<MemorySnapshot>,
    /// The largest allocation each pool served, and its page size, largest first.
    pub(crate) pools: &'a [(u64, u64)],
    /// The highest `--memory` sample of a completed step: in use, and the gradients and
    /// optimizer state it held, where it fell.
    pub(crate) highest: Option<Sample>,
}

/// A `--memory` sample of a completed step, with the categories known at it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    pub(crate) in_use: u64,
    pub(crate) gradients: u64,
    pub(crate) optimizer_state: u64,
    pub(crate) after: &'static str,
    pub(crate) step: u64,
    /// Whether samples were taken inside the step (`--memory-phases`) or only at its end.
    pub(crate) inside_step: bool,
}

/// Adam keeps two moments per parameter: its state once it has updated, where it has not yet.
const ADAM_MOMENTS: u64 = 2;

/// Builds the report from what the run knew at the failure.
pub(crate) fn explain(f: &Facts<'_>) -> OutOfMemory {
    let mut not_observed = Vec::new();
    let params = f.parameters.bytes;
    let optimizer = f.optimizer_state.unwrap_or(0);
    let categories = match f.at_failure {
        Some(m) => {
            let rest = m.bytes_in_use as i64 - params as i64 - optimizer as i64;
            let mut c = vec![Category { name: "parameters", bytes: params as i64 }];
            if f.optimizer_state.is_some() {
                c.push(Category { name: "optimizer_state", bytes: optimizer as i64 });
            }
            c.push(Category { name: if rest >= 0 { "other" } else { "unattributed" }, bytes: rest });
            c
        }
        None => {
            not_observed.push(
                "what the allocator held after the failure: the backend does not report memory in use".to_owned(),
            );
            Vec::new()
        }
    };
    if f.limits.is_none_or(|l| l.capacity.is_none()) {
        not_observed.push("the device's capacity: its runtime states none".to_owned());
    }
    let largest = largest(f);
    let per_sample = per_sample(f);
    let fitting_batch = per_sample.as_ref().map_err(Clone::clone).and_then(|p| fitting_batch(f, p));
    OutOfMemory {
        step: f.step,
        shortage: f.shortage,
        requested_bytes: f.requested,
        batch_size: f.batch_size,
        reached_phase: f.reached,
        phases_observed: true,
        surfaced_at: f.surfaced_at,
        limits: f.limits,
        at_failure: f.at_failure,
        categories,
        largest,
        per_sample: per_sample.into(),
        fitting_batch: fitting_batch.into(),
        not_observed,
        probe: None,
        failure_bounds: None,
    }
}

/// The largest allocations steptrace can see, largest first, at most six.
fn largest(f: &Facts<'_>) -> Vec<Allocation> {
    let mut seen = Vec::new();
    if let Some(bytes) = f.requested {
        seen.push(Allocation { description: "the failed request (not allocated)".to_owned(), bytes });
    }
    for (i, &(bytes, page)) in f.pools.iter().take(3).enumerate() {
        let rank = ["", "second ", "third "][i];
        seen.push(Allocation {
            description: format!(
                "the {rank}largest allocation a memory pool has served since the start (pages of {page} B)"
            ),
            bytes,
        });
    }
    if let Some((path, bytes, shape)) = &f.parameters.largest {
        seen.push(Allocation { description: format!("the largest parameter, {path} {shape:?}"), bytes: *bytes });
    }
    if f.batch_bytes > 0 {
        seen.push(Allocation {
            description: format!("the input batch ({} samples, input and target)", f.batch_size),
            bytes: f.batch_bytes,
        });
    }
    seen.sort_by_key(|a| std::cmp::Reverse(a.bytes));
    seen.truncate(6);
    seen
}

/// Bytes one sample needs: from the highest sample of a completed step, else from the
/// failure (a lower bound).
fn per_sample(f: &Facts<'_>) -> Result<Bounded, String> {
    if f.batch_size == 0 {
        return Err("the batch size is 0".to_owned());
    }
    let bound = per_sample_by_memory(f);
    // The step holds its input batch: a bound below the batch's own bytes per sample says
    // less than the report's own table does.
    let input = f.batch_bytes.div_ceil(f.batch_size);
    match bound {
        Ok(b) if b.value >= input => Ok(b),
        Err(_) if input == 0 => bound,
        other => Ok(Bounded {
            value: input,
            bound: "at least",
            method_note: format!(
                "the input batch's own bytes over the batch size, which the step holds{}",
                match other {
                    Ok(b) => format!(" (more than {} B from {})", b.value, b.method_note),
                    Err(_) => String::new(),
                }
            ),
        }),
    }
}

/// [`per_sample`] from the allocator's figures alone.
fn per_sample_by_memory(f: &Facts<'_>) -> Result<Bounded, String> {
    if let Some(s) = f.highest {
        let fixed = f.parameters.bytes + s.gradients + s.optimizer_state;
        let activations = s.in_use.saturating_sub(fixed);
        if activations > 0 {
            let where_ = if s.inside_step {
                "the highest of the samples taken after each phase"
            } else {
                "the highest of the samples taken at step starts (--memory-phases samples inside the step, where the peak is)"
            };
            return Ok(Bounded {
                value: activations.div_ceil(f.batch_size),
                bound: "at least",
                method_note: format!(
                    "in use less parameters, gradients and optimizer state, over the batch size, at {where_}: {}",
                    if s.after == crate::memory::STEP_START {
                        format!("the start of step {}", s.step)
                    } else {
                        format!("after {} of step {}", s.after, s.step)
                    }
                ),
            });
        }
    }
    let held = f.at_failure.map_or(0, |m| m.bytes_in_use);
    let needed = held
        .saturating_add(f.requested.unwrap_or(0))
        .saturating_sub(f.parameters.bytes + f.optimizer_state.unwrap_or(0));
    if needed == 0 {
        return Err("neither a completed step's sample nor the failure says how much a sample needs (run a smaller batch with --memory --memory-phases to measure it)".to_owned());
    }
    let held_note = if f.at_failure.is_some() {
        "what the allocator held after the failure plus the failed request"
    } else {
        "the failed request alone (memory in use not observed)"
    };
    Ok(Bounded {
        value: needed.div_ceil(f.batch_size),
        bound: "at least",
        method_note: format!(
            "{held_note}, less parameters and optimizer state, over the batch size: the step needed that and more (no completed step at this batch was sampled; --memory measures one)"
        ),
    })
}

/// The largest batch that would have fit, by `per_sample` against the device's capacity, and
/// by the failed request against its largest allocation.
fn fitting_batch(f: &Facts<'_>, per_sample: &Bounded) -> Result<Bounded, String> {
    let params = f.parameters.bytes;
    let optimizer = f.optimizer_state.unwrap_or(ADAM_MOMENTS * params);
    let fixed = params + params + optimizer;
    let mut fits: Vec<(u64, String)> = Vec::new();
    if let Some(capacity) = f.limits.and_then(|l| l.capacity) {
        if capacity <= fixed {
            return Err(format!(
                "parameters, gradients and optimizer state ({fixed} B) alone fill the device's {capacity} B: no batch fits"
            ));
        }
        let optimizer_note = if f.optimizer_state.is_some() {
            "as measured"
        } else {
            "Adam's two moments per parameter, as after its first update"
        };
        fits.push((
            (capacity - fixed) / per_sample.value.max(1),
            format!(
                "the device's {capacity} B, less parameters, gradients and optimizer state ({optimizer_note}): {fixed} B, over {} B per sample ({}), before the pools' overhead",
                per_sample.value, per_sample.bound
            ),
        ));
    }
    if let (Shortage::TooLargeForOneAllocation, Some(requested), Some(limits)) = (f.shortage, f.requested, f.limits) {
        if requested > 0 {
            let scaled = (u128::from(f.batch_size) * u128::from(limits.max_allocation) / u128::from(requested)) as u64;
            fits.push((
                scaled,
                format!(
                    "the failed request of {requested} B at batch {} against the largest allocation, {} B, if that tensor grows with the batch",
                    f.batch_size, limits.max_allocation
                ),
            ));
        }
    }
    let Some((batch, note)) = fits.into_iter().min_by_key(|(b, _)| *b) else {
        return Err("the device's capacity is not known (its runtime states none)".to_owned());
    };
    if batch >= f.batch_size {
        return Err(format!(
            "the figures seen ({} B per sample, {}) would fit batch {} on this device, yet it failed: the step needs more than they show (run a smaller batch with --memory --memory-phases to measure it)",
            per_sample.value, per_sample.bound, f.batch_size
        ));
    }
    Ok(Bounded { value: batch, bound: "at most", method_note: note })
}

#[cfg(test)]
#[path = "oom_tests.rs"]
mod tests;
