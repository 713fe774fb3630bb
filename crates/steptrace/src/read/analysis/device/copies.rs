//! Copies per step: how many, how many bytes, which way, and which sizes
//! come back every step.

use std::collections::BTreeMap;

use serde::Serialize;

use super::events::WorkKind;
use crate::read::analysis::loaded::Loaded;
use crate::read::analysis::stats::Stats;
use crate::read::analysis::steps::StepRow;

/// Copies below this size are scalars or tiny parameters, not tensor data.
pub const SMALL_COPY_BYTES: u64 = 1024;

/// Copies of the counted steps.
#[derive(Clone, Debug, Serialize)]
pub struct CopyView {
    /// Copies that start in the step.
    pub per_step: Stats,
    /// Bytes copied per step.
    pub bytes_per_step: Stats,
    /// Per direction (`HtoD`, `DtoH`, ...).
    pub directions: Vec<CopyDirection>,
    /// Per direction and size, most frequent first.
    pub sizes: Vec<CopySize>,
    /// The sizes of the batch's own tensors, and how they are known.
    pub batch: BatchCopies,
    /// Host-to-device copies under [`SMALL_COPY_BYTES`], not the batch,
    /// present in every counted step: `None` if there are none.
    pub small_uploads_every_step: Option<SmallUploads>,
}

/// One direction.
#[derive(Clone, Debug, Serialize)]
pub struct CopyDirection {
    /// `HtoD`, `DtoH`, `DtoD`, `HtoH`, `PtoP` or `other`.
    pub direction: &'static str,
    /// Copies per step.
    pub per_step: Stats,
    /// Bytes per step.
    pub bytes_per_step: Stats,
}

/// Copies of one size in one direction.
#[derive(Clone, Debug, Serialize)]
pub struct CopySize {
    /// The direction.
    pub direction: &'static str,
    /// Bytes per copy (`None`: the trace does not say).
    pub bytes: Option<u64>,
    /// Copies over all counted steps.
    pub calls: usize,
    /// Copies per counted step, on average.
    pub per_step: f64,
    /// Counted steps holding at least one.
    pub steps_with: usize,
    /// Whether every counted step holds the same number of them.
    pub every_step: bool,
    /// Whether the size is one of the batch's tensors (see [`BatchCopies`]).
    pub batch: bool,
    /// The spans that made the tensors these copies uploaded, most copies first, where the
    /// trace says (`--detail ops` on CUDA): `loss`, `forward > embedding`.
    pub spans: Vec<String>,
}

/// How the batch's copies are told apart.
#[derive(Clone, Debug, Serialize)]
pub struct BatchCopies {
    /// The batch tensors' sizes, bytes.
    pub bytes: Vec<u64>,
    /// `transfer.h2d arguments`, `a multiple of the batch size (heuristic)`,
    /// `assumed: the largest uploads made once per step ...` or `unknown`.
    pub from: &'static str,
}

/// Small uploads repeated every step.
#[derive(Clone, Debug, Serialize)]
pub struct SmallUploads {
    /// Per step.
    pub per_step: f64,
    /// The smallest, bytes.
    pub min_bytes: u64,
    /// The largest, bytes.
    pub max_bytes: u64,
}

pub(crate) fn copy_view(loaded: &[Loaded], steps: &[(usize, &StepRow)], batch_size: Option<u64>) -> Option<CopyView> {
    let any = loaded.iter().any(|l| l.device.work.iter().any(|w| w.kind == WorkKind::Memcpy));
    if !any || steps.is_empty() {
        return None;
    }
    let mut declared: Vec<u64> = loaded.iter().flat_map(|l| l.device.batch_bytes.iter().copied()).collect();
    declared.sort_unstable();
    declared.dedup();
    // Per (direction, bytes): the count in each counted step.
    let mut counts: BTreeMap<(&'static str, Option<u64>), Vec<usize>> = BTreeMap::new();
    // Per (direction, bytes): how many copies each span made.
    let mut made_in: BTreeMap<(&'static str, Option<u64>), BTreeMap<String, usize>> = BTreeMap::new();
    let (mut per_step, mut bytes_per_step) = (Vec::new(), Vec::new());
    let mut by_step: Vec<BTreeMap<&'static str, (f64, f64)>> = Vec::with_capacity(steps.len());
    for (k, (i, step)) in steps.iter().enumerate() {
        let (mut n, mut bytes) = (0usize, 0u64);
        let mut dir_here: BTreeMap<&'static str, (f64, f64)> = BTreeMap::new();
        for w in loaded[*i].device.starting_in(step.start, step.end).filter(|w| w.kind == WorkKind::Memcpy) {
            let dir = w.direction.unwrap_or("other");
            n += 1;
            bytes = bytes.saturating_add(w.bytes.unwrap_or(0));
            let e = dir_here.entry(dir).or_default();
            e.0 += 1.0;
            e.1 += w.bytes.unwrap_or(0) as f64;
            let slot = counts.entry((dir, w.bytes)).or_insert_with(|| vec![0; steps.len()]);
            slot[k] += 1;
            if let Some(span) = w.attributed.as_ref().and_then(|a| a.span.as_ref()) {
                *made_in.entry((dir, w.bytes)).or_default().entry(span.clone()).or_default() += 1;
            }
        }
        per_step.push(n as f64);
        bytes_per_step.push(bytes as f64);
        by_step.push(dir_here);
    }
    let mut per_direction: BTreeMap<&'static str, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for dir in by_step.iter().flat_map(|m| m.keys().copied()) {
        per_direction.entry(dir).or_default();
    }
    for (dir, (c, b)) in &mut per_direction {
        for here in &by_step {
            let (n, bytes) = here.get(dir).copied().unwrap_or_default();
            c.push(n);
            b.push(bytes);
        }
    }
    let batch = match (declared.is_empty(), batch_size) {
        (false, _) => BatchCopies { bytes: declared, from: "transfer.h2d arguments" },
        (true, Some(b)) if b > 0 => {
            let mut bytes: Vec<u64> = counts
                .keys()
                .filter(|(dir, _)| *dir == "HtoD")
                .filter_map(|(_, bytes)| *bytes)
                .filter(|n| b.checked_mul(4).is_some_and(|least| *n >= least) && n % b == 0)
                .collect();
            bytes.dedup();
            BatchCopies { bytes, from: "a multiple of the batch size (heuristic)" }
        }
        _ => {
            // No sizes and no batch size: the one or two largest uploads that
            // come once in every step are read as the input and the target.
            let mut every: Vec<u64> = counts
                .iter()
                .filter(|((dir, bytes), per)| *dir == "HtoD" && bytes.is_some() && per.iter().all(|c| *c == 1))
                .filter_map(|((_, bytes), _)| *bytes)
                .collect();
            every.sort_unstable_by(|a, b| b.cmp(a));
            every.truncate(2);
            let from = if every.is_empty() {
                "unknown"
            } else {
                "assumed: the largest uploads made once per step (input and target); give the batch size to tell them \
                 apart by size"
            };
            BatchCopies { bytes: every, from }
        }
    };
    let total = steps.len();
    let mut sizes: Vec<CopySize> = counts
        .iter()
        .map(|(&(direction, bytes), per)| {
            let calls: usize = per.iter().sum();
            CopySize {
                direction,
                bytes,
                calls,
                per_step: calls as f64 / total as f64,
                steps_with: per.iter().filter(|c| **c > 0).count(),
                every_step: per.iter().all(|c| *c > 0 && *c == per[0]),
                batch: direction == "HtoD" && bytes.is_some_and(|b| batch.bytes.contains(&b)),
                spans: {
                    let mut spans: Vec<(&String, &usize)> =
                        made_in.get(&(direction, bytes)).map(|m| m.iter().collect()).unwrap_or_default();
                    spans.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
                    spans.into_iter().map(|(span, _)| span.clone()).collect()
                },
            }
        })
        .collect();
    sizes.sort_by(|a, b| b.every_step.cmp(&a.every_step).then(b.calls.cmp(&a.calls)).then(b.bytes.cmp(&a.bytes)));
    let small: Vec<&CopySize> = sizes
        .iter()
        .filter(|s| s.direction == "HtoD" && s.every_step && !s.batch && s.bytes.is_some_and(|b| b < SMALL_COPY_BYTES))
        .collect();
    let small_uploads_every_step = (!small.is_empty()).then(|| SmallUploads {
        per_step: small.iter().map(|s| s.per_step).sum(),
        min_bytes: small.iter().filter_map(|s| s.bytes).min().unwrap_or(0),
        max_bytes: small.iter().filter_map(|s| s.bytes).max().unwrap_or(0),
    });
    Some(CopyView {
        per_step: Stats::of(&per_step)?,
        bytes_per_step: Stats::of(&bytes_per_step)?,
        directions: per_direction
            .into_iter()
            .filter_map(|(direction, (c, b))| {
                Some(CopyDirection { direction, per_step: Stats::of(&c)?, bytes_per_step: Stats::of(&b)? })
            })
            .collect(),
        sizes,
        batch,
        small_uploads_every_step,
    })
}
