//! Device memory per step (`--memory`): what the allocator holds after each phase and at the
//! step boundary, and what holds it, by category.
//!
//! Each sample is two counter events at one moment:
//! - [`counters::DEVICE_MEMORY`]: `in_use` (bytes in live allocations) and `reserved` (bytes the
//!   pools hold from the device);
//! - [`counters::MEMORY_CATEGORIES`]: `parameters`, `optimizer_state`, `gradients`,
//!   `input_batch`, and `other` (activations and temporaries: what in use leaves), or
//!   `unattributed` (negative) when the categories come to more than in use.
//!
//! How each category is obtained ([`METHOD`]):
//! - parameters: every float parameter's elements times its element size, from the model;
//! - optimizer state: every tensor of the optimizer's record, elements times element size, read
//!   once after the first optimizer update (Adam makes its state then and keeps its size); 0
//!   before that update, where there is none;
//! - gradients: one per trainable parameter, of its shape, held from the end of `backward` until
//!   the optimizer consumes them;
//! - input batch: the batch's tensors as copied, held until `backward` has used the graph that
//!   keeps the input.
//!
//! Samples are taken in recorded steps only. The step's start is always sampled: before the
//! batch is copied, the device holds what the step before left (the step boundary). When each
//! step ends with a sync, that sample's question is queued for cubecl's device thread at the
//! end of the step before, after its sync, without waiting ([`backend::MemoryAsker`]): it is
//! answered behind every task already queued and ahead of the next step's, and read before the
//! batch's copy. Without a sync, or on a runtime whose queue steptrace cannot reach, the training
//! thread asks and waits (through burn without a sync, which first runs what burn's fusion still
//! holds). With `--memory-phases`, a sample after each phase too: burn's fusion holds a phase's
//! operations back until something flushes them, so such a sample flushes first, which cuts
//! fusion at the phase boundaries of recorded steps, and then waits for cubecl's device thread
//! (docs/benchmarks.md has the costs).

use std::time::Instant;

use burn::module::{Module, Param};
use burn::prelude::{Device, Tensor};
use steptrace::format::names::{counters, BACKWARD, COUNTER_TARGET, FORWARD, LOSS};

use crate::backend::{self, MemorySnapshot};
use crate::modules::{walk, ParamVisitor};

/// How the categories are obtained, for the manifest.
pub(crate) const METHOD: &str = "parameters: elements x element size of every float parameter; optimizer state: \
    elements x element size of every tensor of the optimizer's record, read once after its first update \
    (0 before it); gradients: one per trainable parameter, of its shape, from the end of backward until \
    the optimizer consumes them; input batch: the batch's tensors as copied, until backward; other \
    (activations, temporaries): in use less the rest. Sampled at the start of recorded steps, before the \
    batch is copied (what the step before left): when steps end with a sync, asked of the device thread \
    at the step before's end without waiting, and read before the copy; with --memory-phases also after \
    each phase, flushing burn's fusion queue first, and waiting. Never a device sync.";

/// How many query times a run keeps for its summary (512 KiB), however long it runs.
const QUERY_TIMES_KEPT: usize = 65_536;

/// The sample taken at the step boundary: the step's start, before its batch is copied.
pub(crate) const STEP_START: &str = counters::STEP_START;

/// The model's float parameters: their bytes (elements times element size), and the largest
/// one with its path in the module (`hidden1.weight`) and shape.
#[derive(Debug, Clone, Default)]
pub(crate) struct Parameters {
    pub(crate) bytes: u64,
    pub(crate) largest: Option<(String, u64, Vec<usize>)>,
}

/// Each float parameter adds its bytes, and the largest is kept.
impl ParamVisitor for Parameters {
    fn float<const D: usize>(&mut self, path: &str, param: &Param<Tensor<D>>) {
        let value = param.val();
        let shape = value.shape().to_vec();
        let elements = shape.iter().fold(1u64, |n, &d| n.saturating_mul(d as u64));
        let bytes = elements.saturating_mul(value.dtype().size() as u64);
        self.bytes = self.bytes.saturating_add(bytes);
        if self.largest.as_ref().is_none_or(|(_, b, _)| bytes > *b) {
            self.largest = Some((path.to_owned(), bytes, shape));
        }
    }
}

/// The float parameters of `model` ([`Parameters`]).
pub(crate) fn parameters<M: Module>(model: &M) -> Parameters {
    let mut found = Parameters::default();
    walk(model, &mut found);
    found
}

/// Bytes of every tensor of the optimizer's record (elements times element size), or why they
/// cannot be read.
pub(crate) fn optimizer_bytes(optim: &burn::optim::ModuleOptimizer) -> Result<u64, String> {
    let bytes = optim.to_record().into_bytes().map_err(|e| format!("the optimizer's record cannot be read: {e}"))?;
    let tensors = burn_pack::Reader::from_bytes(bytes)
        .and_then(burn_pack::Reader::into_tensors)
        .map_err(|e| format!("the optimizer's record cannot be read: {e}"))?;
    Ok(tensors.iter().fold(0u64, |sum, t| {
        let elements = t.shape.iter().fold(1u64, |n, &d| n.saturating_mul(d as u64));
        sum.saturating_add(elements.saturating_mul(t.dtype.size() as u64))
    }))
}

/// Takes the samples of one run.
pub(crate) struct MemorySampler {
    device: Device,
    /// Whether this step is recorded (samples are taken in recorded steps only).
    pub(crate) on: bool,
    /// Whether to sample after each phase too, not only at the step's start.
    phases: bool,
    /// Whether each step ends with a sync, so that the step-start sample can ask cubecl
    /// directly, without burn-fusion's drain ([`backend::memory_usage_after_sync`]).
    step_end_synced: bool,
    /// Asks the device thread for the step-start sample without waiting (with
    /// `step_end_synced`, on CUDA and wgpu; `None`: the training thread asks and waits).
    asker: Option<backend::MemoryAsker>,
    /// The step-start question on its way, and how long asking took, ns.
    asked: Option<(backend::PendingUsage, u64)>,
    parameters: u64,
    /// `None` until the optimizer's record has been read.
    pub(crate) optimizer_state: Option<u64>,
    /// The current batch's bytes.
    pub(crate) batch: u64,
    /// The last sample, for the summary and an out-of-memory report.
    pub(crate) last: Option<(MemorySnapshot, &'static str)>,
    /// The highest in-use sample of the run, and where it fell.
    pub(crate) highest: Option<(MemorySnapshot, &'static str, u64)>,
    /// Samples the allocator did not answer.
    pub(crate) unanswered: u64,
    /// How long each answered query of the allocator kept the training thread waiting (the
    /// round trip, or for a question asked ahead what was left of it), ns: the first
    /// [`QUERY_TIMES_KEPT`] of the run.
    pub(crate) query_ns: Vec<u64>,
    /// How long each answered sample took the training thread (asking or waiting for the
    /// answer asked ahead, a phase sample's fusion flush and query, the counter events), ns: as many as
    /// `query_ns`.
    pub(crate) sample_ns: Vec<u64>,
}

impl MemorySampler {
    pub(crate) fn new(device: Device, parameters: u64, phases: bool, step_end_synced: bool) -> MemorySampler {
        let asker = if step_end_synced { backend::MemoryAsker::new(&device) } else { None };
        MemorySampler {
            device,
            on: false,
            phases,
            step_end_synced,
            asker,
            asked: None,
            parameters,
            optimizer_state: None,
            batch: 0,
            last: None,
            highest: None,
            unanswered: 0,
            query_ns: Vec::new(),
            sample_ns: Vec::new(),
        }
    }

    /// The allocator queries' round trips, for the summary: "N queries, median X µs (max Y µs)",
    /// over the kept ones, then what a whole sample took the training thread at the median.
    pub(crate) fn query_times(&self) -> Option<String> {
        let (median, max) = median_and_most(&self.query_ns)?;
        let us = |n: u64| n as f64 / 1_000.0;
        let mut text = format!(
            "{} allocator queries took {:.1} µs each at the median ({:.1} µs at most)",
            self.query_ns.len(),
            us(median),
            us(max)
        );
        if let Some((whole, _)) = median_and_most(&self.sample_ns) {
            let helper = if self.asker.is_some() {
                " (step-start queries asked ahead: their time is what was left to wait for)"
            } else {
                ""
            };
            text.push_str(&format!("; a whole sample took the training thread {:.1} µs{helper}", us(whole)));
        }
        Some(text)
    }

    /// Whether samples are taken after each phase too (`--memory-phases`).
    pub(crate) fn samples_phases(&self) -> bool {
        self.phases
    }

    /// A step ends, after its sync, and the next one is recorded as far as the schedule says:
    /// the next step's start sample is asked for now, without waiting, so that the device
    /// thread has the profiler's step and the next batch's read to answer in.
    pub(crate) fn ask_ahead(&mut self, next_recorded: bool) {
        if next_recorded && self.asked.is_none() {
            self.ask();
        }
    }

    fn ask(&mut self) {
        let Some(asker) = &self.asker else { return };
        let started = Instant::now();
        self.asked = asker.ask().map(|pending| (pending, elapsed_ns(started)));
    }

    /// A step begins (`recorded`: whether it is recorded). In a recorded step the start sample
    /// is asked for now unless [`ask_ahead`](Self::ask_ahead) did; [`step_start`](Self::step_start)
    /// takes the answer.
    pub(crate) fn begin_step(&mut self, recorded: bool) {
        self.on = recorded;
        if !recorded {
            // Asked ahead for a step that is not recorded after all (a capture or a cut short
            // changed the plan): the answer is not this step's to keep.
            self.asked = None;
        } else if self.asked.is_none() {
            self.ask();
        }
    }

    /// The step-start sample of step `step` (recorded steps only), taken before the batch is
    /// copied: the device thread's answer to the question asked ahead, or the training
    /// thread's own query.
    pub(crate) fn step_start(&mut self, step: u64) {
        if !self.on {
            return;
        }
        let started = Instant::now();
        let (answer, query_ns, asking_ns) = match self.asked.take() {
            Some((pending, asking_ns)) => {
                let answer = pending.wait();
                (answer, elapsed_ns(started), asking_ns)
            }
            None => {
                let answer = if self.step_end_synced {
                    backend::memory_usage_after_sync(&self.device)
                } else {
                    backend::memory_usage(&self.device)
                };
                (answer, elapsed_ns(started), 0)
            }
        };
        self.record(answer, STEP_START, step, query_ns, started, asking_ns);
    }

    /// Samples the allocator after the phase `after` of step `step`, with `--memory-phases`,
    /// when the step is recorded, and writes the two counter events.
    pub(crate) fn sample(&mut self, after: &'static str, step: u64) {
        if !self.on || !self.phases {
            return;
        }
        let started = Instant::now();
        // What the phase queued is allocated once the fusion queue is flushed.
        let _ = self.device.flush();
        let asked = Instant::now();
        let answer = backend::memory_usage(&self.device);
        self.record(answer, after, step, elapsed_ns(asked), started, 0);
    }

    /// Writes the counter events of a sample taken at `after` and keeps its figures; `started`
    /// is when the training thread began on it, `extra_ns` what it spent on it before then.
    fn record(
        &mut self,
        answer: Option<MemorySnapshot>,
        after: &'static str,
        step: u64,
        query_ns: u64,
        started: Instant,
        extra_ns: u64,
    ) {
        let Some(m) = answer else {
            self.unanswered += 1;
            return;
        };
        if self.query_ns.len() < QUERY_TIMES_KEPT {
            self.query_ns.push(query_ns);
        }
        tracing::info!(target: COUNTER_TARGET, in_use = m.bytes_in_use, reserved = m.bytes_reserved, "{}", counters::DEVICE_MEMORY);
        let gradients = if after == BACKWARD { self.parameters } else { 0 };
        let batch = if after == FORWARD || after == LOSS { self.batch } else { 0 };
        let optimizer = self.optimizer_state;
        let known = self.parameters + optimizer.unwrap_or(0) + gradients + batch;
        let other = m.bytes_in_use as i64 - known as i64;
        let (parameters, input_batch) = (self.parameters, batch);
        match (optimizer, other >= 0) {
            (Some(optimizer_state), true) => {
                tracing::info!(target: COUNTER_TARGET, parameters, optimizer_state, gradients,
                input_batch, other, "{}", counters::MEMORY_CATEGORIES)
            }
            (Some(optimizer_state), false) => tracing::info!(target: COUNTER_TARGET, parameters, optimizer_state,
                gradients, input_batch, unattributed = other, "{}", counters::MEMORY_CATEGORIES),
            (None, true) => tracing::info!(target: COUNTER_TARGET, parameters, gradients, input_batch, other,
                "{}", counters::MEMORY_CATEGORIES),
            (None, false) => tracing::info!(target: COUNTER_TARGET, parameters, gradients, input_batch,
                unattributed = other, "{}", counters::MEMORY_CATEGORIES),
        }
        if self.highest.is_none_or(|(h, _, _)| m.bytes_in_use > h.bytes_in_use) {
            self.highest = Some((m, after, step));
        }
        self.last = Some((m, after));
        if self.sample_ns.len() < QUERY_TIMES_KEPT {
            self.sample_ns.push(elapsed_ns(started).saturating_add(extra_ns));
        }
    }
}

fn elapsed_ns(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The median and the largest of `ns` (`None`: empty).
fn median_and_most(ns: &[u64]) -> Option<(u64, u64)> {
    let mut ns = ns.to_vec();
    ns.sort_unstable();
    Some((*ns.get(ns.len() / 2)?, *ns.last()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_times_give_the_median_and_the_most_or_nothing_before_a_query() {
        let mut m = MemorySampler::new(Device::flex(), 0, false, false);
        assert_eq!(m.query_times(), None, "no query, no figure");
        m.query_ns = vec![40_000, 12_000, 15_500];
        assert_eq!(m.query_times().unwrap(), "3 allocator queries took 15.5 µs each at the median (40.0 µs at most)");
        m.sample_ns = vec![90_000, 30_000, 20_000];
        assert!(
            m.query_times().unwrap().ends_with("; a whole sample took the training thread 30.0 µs"),
            "{:?}",
            m.query_times()
        );
    }
}
