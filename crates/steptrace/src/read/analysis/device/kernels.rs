//! Kernels by device time: which ones the step's device time is made of.

use std::collections::HashMap;

use serde::Serialize;

use super::events::{Work, WorkKind};
use super::intervals::Set;
use crate::display::label;
use crate::read::analysis::loaded::Loaded;
use crate::read::analysis::stats::{median, Stats};
use crate::read::analysis::steps::StepRow;

/// Kernels shorter than this are "small" launches, µs.
pub const SHORT_KERNEL_US: f64 = 10.0;

/// Rows kept in the table (the rest are summed in `others_ms`).
const ROWS: usize = 50;

/// Kernels of the counted steps, grouped by name.
#[derive(Clone, Debug, Serialize)]
pub struct KernelTable {
    /// Counted steps.
    pub steps: usize,
    /// Kernels per step.
    pub kernels_per_step: Stats,
    /// Kernels under [`SHORT_KERNEL_US`] per step.
    pub short_per_step: Stats,
    /// Sum of kernel durations over the counted steps, ms (a sum, not
    /// elapsed time: kernels on several streams overlap).
    pub kernel_ms: f64,
    /// Device busy over the counted steps, all devices, ms: the
    /// denominator of each row's share.
    pub busy_ms: f64,
    /// Kernels of the counted steps that cannot be as written: each overlaps another kernel
    /// on its stream (which runs one kernel at a time), or shares the correlation id of a
    /// single-kernel launch with another kernel. When not zero, the sums (`kernel_ms`,
    /// `total_ms`, `per_step_ms`, `mean_us`) rest on inconsistent input; the shares, made
    /// of elapsed time, stay within 100%.
    pub inconsistent_kernels: usize,
    /// The heaviest kernels first, at most 50.
    pub rows: Vec<KernelRow>,
    /// Kernel time of the names beyond the table, ms.
    pub others_ms: f64,
    /// Names beyond the table.
    pub others: usize,
}

/// One kernel name.
#[derive(Clone, Debug, Serialize)]
pub struct KernelRow {
    /// The name as written.
    pub name: String,
    /// A shorter, terminal-safe form (`void`, parameter lists and deep
    /// template arguments dropped).
    pub label: String,
    /// Calls over the counted steps.
    pub calls: usize,
    /// Calls per counted step.
    pub calls_per_step: f64,
    /// Total device time, ms.
    pub total_ms: f64,
    /// Device time per counted step, ms.
    pub per_step_ms: f64,
    /// Mean per call, µs.
    pub mean_us: f64,
    /// The most frequent grid, when the trace gives one.
    pub grid: Option<[u64; 3]>,
    /// The most frequent block.
    pub block: Option<[u64; 3]>,
    /// Distinct grids it ran with.
    pub grids: usize,
    /// Elapsed time while at least one of its calls ran, within the counted steps, ms (calls
    /// that overlap are counted once).
    pub busy_ms: f64,
    /// [`busy_ms`](Self::busy_ms) over the device busy time of the counted steps: 0 to 1.
    pub share_of_busy: f64,
    /// Median over the counted steps of the time it ran within the step over the step's
    /// wall time: 0 to 1.
    pub share_of_step: f64,
    /// Calls under [`SHORT_KERNEL_US`].
    pub short_calls: usize,
}

pub(crate) fn kernel_table(loaded: &[Loaded], steps: &[(usize, &StepRow)], busy_ms: f64) -> Option<KernelTable> {
    let mut groups: HashMap<&str, Vec<&Work>> = HashMap::new();
    let (mut per_step, mut short_per_step) = (Vec::new(), Vec::new());
    let mut inconsistent_kernels = 0;
    for (i, step) in steps {
        let (mut n, mut short) = (0.0, 0.0);
        for w in loaded[*i].device.starting_in(step.start, step.end).filter(|w| w.kind == WorkKind::Kernel) {
            n += 1.0;
            if w.end - w.start < SHORT_KERNEL_US {
                short += 1.0;
            }
            inconsistent_kernels += usize::from(w.inconsistent);
            groups.entry(w.name.as_str()).or_default().push(w);
        }
        per_step.push(n);
        short_per_step.push(short);
    }
    if groups.is_empty() {
        return None;
    }
    let n_steps = steps.len() as f64;
    let ran = elapsed(loaded, steps);
    let mut rows: Vec<KernelRow> = groups
        .into_iter()
        .map(|(name, calls)| {
            let (ran_us, share_of_step) = ran.get(name).copied().unwrap_or_default();
            let total_us: f64 = calls.iter().map(|w| w.end - w.start).sum();
            let (grid, grids) = most_frequent(calls.iter().map(|w| w.grid));
            let (block, _) = most_frequent(calls.iter().map(|w| w.block));
            KernelRow {
                name: name.to_owned(),
                label: short_name(name),
                calls: calls.len(),
                calls_per_step: calls.len() as f64 / n_steps,
                total_ms: total_us / 1000.0,
                per_step_ms: total_us / 1000.0 / n_steps,
                mean_us: total_us / calls.len() as f64,
                grid,
                block,
                grids,
                busy_ms: ran_us / 1000.0,
                share_of_busy: if busy_ms > 0.0 { (ran_us / 1000.0 / busy_ms).clamp(0.0, 1.0) } else { 0.0 },
                share_of_step,
                short_calls: calls.iter().filter(|w| w.end - w.start < SHORT_KERNEL_US).count(),
            }
        })
        .collect();
    rows.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms).then_with(|| a.name.cmp(&b.name)));
    let kernel_ms = rows.iter().map(|r| r.total_ms).sum();
    let rest = rows.split_off(rows.len().min(ROWS));
    Some(KernelTable {
        steps: steps.len(),
        kernels_per_step: Stats::of(&per_step)?,
        short_per_step: Stats::of(&short_per_step)?,
        kernel_ms,
        busy_ms,
        inconsistent_kernels,
        rows,
        others_ms: rest.iter().fold(0.0, |sum, r| sum + r.total_ms),
        others: rest.len(),
    })
}

/// Per kernel name: the elapsed time while at least one of its calls ran within the counted
/// steps (µs, summed over the steps), and the median over the steps of that time's share of
/// the step's wall time (0 to 1). Calls that began in an earlier step count where they run,
/// as for the device's busy time.
fn elapsed<'a>(loaded: &'a [Loaded], steps: &[(usize, &StepRow)]) -> HashMap<&'a str, (f64, f64)> {
    // Per name: its time in all, and its share of each step it ran in.
    let mut ran: HashMap<&str, (f64, Vec<f64>)> = HashMap::new();
    for (i, step) in steps {
        let mut here: HashMap<&str, Vec<(f64, f64)>> = HashMap::new();
        for w in loaded[*i].device.overlapping(step.start, step.end).filter(|w| w.kind == WorkKind::Kernel) {
            here.entry(w.name.as_str()).or_default().push((w.start, w.end));
        }
        for (name, intervals) in here {
            let us = Set::clipped(intervals, step.start, step.end).len();
            let e = ran.entry(name).or_default();
            e.0 += us;
            if step.end > step.start {
                e.1.push((us / (step.end - step.start)).clamp(0.0, 1.0));
            }
        }
    }
    let timed = steps.iter().filter(|(_, s)| s.end > s.start).count();
    ran.into_iter()
        .map(|(name, (us, mut shares))| {
            shares.resize(timed.max(shares.len()), 0.0);
            (name, (us, median(&shares).unwrap_or(0.0)))
        })
        .collect()
}

/// The most frequent value (ties: the smallest) and how many distinct
/// values there were.
fn most_frequent(values: impl Iterator<Item = Option<[u64; 3]>>) -> (Option<[u64; 3]>, usize) {
    let mut count: HashMap<[u64; 3], usize> = HashMap::new();
    for v in values.flatten() {
        *count.entry(v).or_default() += 1;
    }
    let distinct = count.len();
    let best = count.into_iter().max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0))).map(|(v, _)| v);
    (best, distinct)
}

const ANONYMOUS: &str = "(anonymous namespace)";

/// A kernel name a person can read: without a leading `void `, without
/// the parameter list, with template arguments nested deeper than one
/// level written `…`, and cut at 96 characters (terminal-safe).
///
/// `void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, ...)`
/// becomes `at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<…>, std::array<…> >`.
#[must_use]
pub fn short_name(name: &str) -> String {
    let name = name.trim();
    let name = name.strip_prefix("void ").unwrap_or(name);
    let mut out = String::with_capacity(name.len().min(128));
    let mut depth = 0usize;
    let mut skip = 0usize;
    for (at, c) in name.char_indices() {
        if skip > 0 {
            skip -= 1;
            if depth < 2 {
                out.push(c);
            }
            continue;
        }
        // `(anonymous namespace)` is part of a C++ name, not its parameters.
        if name[at..].starts_with(ANONYMOUS) {
            skip = ANONYMOUS.chars().count() - 1;
            if depth < 2 {
                out.push(c);
            }
            continue;
        }
        match c {
            '<' => {
                depth += 1;
                if depth == 2 {
                    out.push_str("<…");
                    continue;
                }
            }
            '>' => {
                depth = depth.saturating_sub(1);
                if depth == 1 {
                    out.push('>');
                    continue;
                }
            }
            // The parameter list starts at the first `(` outside templates.
            '(' if depth == 0 && !out.is_empty() && !out.ends_with("operator") => break,
            _ => {}
        }
        if depth < 2 {
            out.push(c);
        }
    }
    let out = if out.trim().is_empty() { name.to_owned() } else { out.trim().to_owned() };
    label(&out, 96).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_shortened_readably() {
        assert_eq!(
            short_name(
                "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, \
                 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
            ),
            "at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<…>, std::array<…> >"
        );
        assert_eq!(short_name("matmul_entry_lhs_f32"), "matmul_entry_lhs_f32");
        assert_eq!(short_name("(anonymous)"), "(anonymous)");
        assert_eq!(
            short_name("void at::native::(anonymous namespace)::softmax_warp<float, 4>(float*, int)"),
            "at::native::(anonymous namespace)::softmax_warp<float, 4>"
        );
        assert!(short_name(&"k".repeat(300)).contains("(300 bytes)"));
        assert_eq!(short_name("evil\u{1b}[2J"), "evil\\x1b[2J");
    }

    #[test]
    fn most_frequent_grid_and_distinct_count() {
        let v = [Some([1, 1, 1]), Some([2, 1, 1]), Some([2, 1, 1]), None];
        assert_eq!(most_frequent(v.into_iter()), (Some([2, 1, 1]), 2));
        assert_eq!(most_frequent([None].into_iter()), (None, 0));
    }
}
