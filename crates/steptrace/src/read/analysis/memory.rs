//! Device memory per step, from `--memory`'s counter tracks ([`counters`]): in use and reserved
//! at each point of the step, the highest sample and where it fell, what holds it by category,
//! headroom against the device's memory, and whether reserved memory grows step after step.

use std::collections::BTreeMap;

use serde::Serialize;

use super::loaded::Loaded;
use super::stats::Stats;
use super::steps::StepRow;
use crate::format::names::counters::{self, STEP_END, STEP_START};
use crate::format::names::{BACKWARD, FORWARD, INFER_REQUEST, LOSS, OPTIMIZER, TRAIN_STEP};
use crate::read::reader::{TraceEvent, TrackId};

const PHASES: [&str; 4] = [FORWARD, LOSS, BACKWARD, OPTIMIZER];

/// One sample of the device's allocator, as the trace holds it.
#[derive(Clone, Debug, Default)]
pub(crate) struct MemorySample {
    pub(crate) ts: f64,
    pid: Option<TrackId>,
    tid: Option<TrackId>,
    pub(crate) in_use: Option<f64>,
    pub(crate) reserved: Option<f64>,
    /// Bytes per category (`parameters`, `optimizer_state`, ..., `other`, `unattributed`).
    pub(crate) categories: BTreeMap<String, f64>,
}

/// Reads the samples of a trace one event at a time, as a file is read:
/// each [`counters::DEVICE_MEMORY`] event, with the
/// [`counters::MEMORY_CATEGORIES`] event written right after it on the same
/// thread.
#[derive(Debug, Default)]
pub(crate) struct Samples(Vec<MemorySample>);

impl Samples {
    /// Reads the next event.
    pub(crate) fn event(&mut self, e: &TraceEvent) {
        if e.ph != "C" {
            return;
        }
        let out = &mut self.0;
        let Some(ts) = e.ts else { return };
        let series = |key: &str| e.arg(key).and_then(serde_json::Value::as_f64).filter(|v| v.is_finite());
        if e.name == counters::DEVICE_MEMORY {
            out.push(MemorySample {
                ts,
                pid: e.pid.clone(),
                tid: e.tid.clone(),
                // Traces before 0.2: one series, `bytes`, in use.
                in_use: series("in_use").or_else(|| series("bytes")),
                reserved: series("reserved"),
                categories: BTreeMap::new(),
            });
        } else if e.name == counters::MEMORY_CATEGORIES {
            let owner = out.iter_mut().rev().find(|s| s.pid == e.pid && s.tid == e.tid && s.ts <= ts);
            if let (Some(owner), Some(args)) = (owner, e.args.as_ref().and_then(serde_json::Value::as_object)) {
                for (key, value) in args {
                    if let Some(v) = value.as_f64().filter(|v| v.is_finite()) {
                        owner.categories.insert(key.clone(), v);
                    }
                }
            }
        }
    }

    /// The samples, by time.
    pub(crate) fn finish(self) -> Vec<MemorySample> {
        let mut out = self.0;
        out.sort_by(|a, b| a.ts.total_cmp(&b.ts));
        out
    }
}

/// Memory at one point of the step, over the counted steps, MB.
#[derive(Clone, Debug, Serialize)]
pub struct MemoryPoint {
    /// `step start`, after which phase (`forward`, `loss`, `backward`, `optimizer`), or `step
    /// end` (earlier traces).
    pub after: String,
    /// Bytes in live allocations, MB.
    pub in_use_mb: Stats,
    /// Bytes the allocator holds from the device, MB (`None`: not observed).
    pub reserved_mb: Option<Stats>,
}

/// One category at the highest sample, MB per step (median over the counted steps).
#[derive(Clone, Debug, Serialize)]
pub struct MemoryCategory {
    /// `parameters`, `optimizer_state`, `gradients`, `input_batch`, `other` or `unattributed`.
    pub name: String,
    /// Median over the counted steps, MB.
    pub mb: f64,
    /// Share of in use at the highest sample.
    pub share: f64,
}

/// Device memory per step (`--memory`).
#[derive(Clone, Debug, Serialize)]
pub struct MemoryView {
    /// Counted steps that hold a sample.
    pub steps: usize,
    /// In use and reserved at each point of the step, in the order of a step.
    pub points: Vec<MemoryPoint>,
    /// The highest in-use sample of each step, MB. It is the highest *sample*: the allocator
    /// keeps no high-water mark of bytes in use, so a peak between samples is not seen.
    pub highest_mb: Stats,
    /// Where the highest sample fell most often.
    pub highest_after: String,
    /// Reserved less in use at the highest sample, MB (pool overhead and fragmentation).
    pub pool_overhead_mb: Option<Stats>,
    /// The categories at the highest sample (empty: not observed).
    pub categories: Vec<MemoryCategory>,
    /// Categories not observed in this trace (`optimizer_state` before its first update, ...).
    pub not_observed: Vec<String>,
    /// The device's memory, MB (from `deviceProperties`; `None`: not observed).
    pub device_mb: Option<f64>,
    /// The device's memory less the highest reserved sample, MB.
    pub headroom_mb: Option<f64>,
    /// Reserved memory at the step boundary, first and last counted step, MB, and how many of
    /// the steps after the first grew it.
    pub reserved_growth: Option<ReservedGrowth>,
}

/// Reserved memory at each step's boundary (its start; the end in earlier traces), across the
/// counted steps.
#[derive(Clone, Debug, Serialize)]
pub struct ReservedGrowth {
    /// At the first counted step's boundary, MB.
    pub first_mb: f64,
    /// At the last counted step's boundary, MB.
    pub last_mb: f64,
    /// Steps whose boundary sample holds more than the step before's.
    pub rising_steps: usize,
    /// Steps compared (counted steps with a boundary sample, less one).
    pub compared: usize,
}

const MB: f64 = 1024.0 * 1024.0;

/// The point a sample at `ts` was taken at: [`STEP_END`] once the step's `train.step` (or
/// `infer.request`) has ended (how earlier traces sampled the boundary), else after the last
/// phase of the step that ended by then, else [`STEP_START`].
fn point_of(l: &Loaded, step: &StepRow, ts: f64) -> &'static str {
    let mut last: Option<(&'static str, f64)> = None;
    for (_, s) in l.spans.starting_in(step.start, step.end) {
        if s.thread != step.thread || s.end > ts {
            continue;
        }
        if s.name == TRAIN_STEP || s.name == INFER_REQUEST {
            return STEP_END;
        }
        if let Some(p) = PHASES.iter().find(|p| **p == s.name) {
            if last.is_none_or(|(_, end)| s.end >= end) {
                last = Some((p, s.end));
            }
        }
    }
    last.map_or(STEP_START, |(p, _)| p)
}

/// The points of a step in their order: its start, its phases, its end.
const POINTS: [&str; 6] = [STEP_START, FORWARD, LOSS, BACKWARD, OPTIMIZER, STEP_END];

pub(crate) fn memory_view(
    loaded: &[Loaded],
    steps: &[(usize, &StepRow)],
    device_bytes: Option<u64>,
) -> Option<MemoryView> {
    let mut at: BTreeMap<usize, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    let (mut highest, mut overhead, mut boundary_reserved) = (Vec::new(), Vec::new(), Vec::new());
    let mut where_highest: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut categories: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut shares: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut max_reserved: Option<f64> = None;
    let mut counted = 0;
    for (i, step) in steps {
        let l = &loaded[*i];
        let first = l.memory.partition_point(|s| s.ts < step.start);
        let here: Vec<&MemorySample> =
            l.memory[first..].iter().take_while(|s| s.ts < step.end).filter(|s| s.in_use.is_some()).collect();
        if here.is_empty() {
            continue;
        }
        counted += 1;
        let mut top: Option<(&MemorySample, &'static str)> = None;
        for s in &here {
            let point = point_of(l, step, s.ts);
            let order = POINTS.iter().position(|p| *p == point).unwrap_or(POINTS.len() - 1);
            let slot = at.entry(order).or_default();
            slot.0.push(s.in_use.unwrap_or(0.0) / MB);
            if let Some(r) = s.reserved {
                slot.1.push(r / MB);
                max_reserved = Some(max_reserved.map_or(r, |m: f64| m.max(r)));
                if point == STEP_START || point == STEP_END {
                    boundary_reserved.push(r / MB);
                }
            }
            if top.is_none_or(|(t, _)| s.in_use > t.in_use) {
                top = Some((s, point));
            }
        }
        let Some((top, point)) = top else { continue };
        let in_use = top.in_use.unwrap_or(0.0);
        highest.push(in_use / MB);
        *where_highest.entry(point).or_default() += 1;
        if let Some(r) = top.reserved {
            overhead.push((r - in_use) / MB);
        }
        for (name, bytes) in &top.categories {
            categories.entry(name.clone()).or_default().push(bytes / MB);
            shares.entry(name.clone()).or_default().push(if in_use > 0.0 { bytes / in_use } else { 0.0 });
        }
    }
    let highest_mb = Stats::of(&highest)?;
    let points = at
        .into_iter()
        .filter_map(|(order, (in_use, reserved))| {
            Some(MemoryPoint {
                after: POINTS[order].to_owned(),
                in_use_mb: Stats::of(&in_use)?,
                reserved_mb: Stats::of(&reserved),
            })
        })
        .collect();
    let order = ["parameters", "optimizer_state", "gradients", "input_batch", "other", "unattributed"];
    let mut cats: Vec<MemoryCategory> = categories
        .iter()
        .filter_map(|(name, mb)| {
            Some(MemoryCategory {
                name: name.clone(),
                mb: Stats::of(mb)?.median,
                share: Stats::of(shares.get(name)?)?.median,
            })
        })
        .collect();
    cats.sort_by_key(|c| order.iter().position(|o| *o == c.name).unwrap_or(order.len()));
    let not_observed = if cats.is_empty() {
        vec!["every category (the trace has no `device memory by category` track)".to_owned()]
    } else {
        order[..5].iter().filter(|o| !categories.contains_key(**o)).map(|o| (*o).to_owned()).collect()
    };
    let device_mb = device_bytes.filter(|b| *b > 0).map(|b| b as f64 / MB);
    let reserved_growth = (boundary_reserved.len() >= 2).then(|| ReservedGrowth {
        first_mb: boundary_reserved[0],
        last_mb: boundary_reserved[boundary_reserved.len() - 1],
        rising_steps: boundary_reserved.windows(2).filter(|w| w[1] > w[0]).count(),
        compared: boundary_reserved.len() - 1,
    });
    Some(MemoryView {
        steps: counted,
        points,
        highest_after: where_highest.into_iter().max_by_key(|(_, n)| *n).map(|(p, _)| p.to_owned()).unwrap_or_default(),
        highest_mb,
        pool_overhead_mb: Stats::of(&overhead),
        categories: cats,
        not_observed,
        headroom_mb: device_mb.zip(max_reserved).map(|(d, r)| d - r / MB),
        device_mb,
        reserved_growth,
    })
}
