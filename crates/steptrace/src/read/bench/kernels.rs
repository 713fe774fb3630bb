//! Kernels in bench results, and two sides compared kernel by kernel.
//!
//! A `steptrace bench --profile active` run records, beside its step
//! times, a [`KernelRecord`]: the [`KernelSummary`] of the kernels in its
//! traces (built from the report's [`KernelTable`]), or why there were
//! none. Absent is not zero: a run without kernel events says
//! [`KernelRecord::NotObserved`] with the reason, never a table of zeros.
//!
//! [`compare_kernels`](super::compare_kernels) puts two sides (two bench results, or two traces)
//! next to each other: every kernel name of either side, ranked by the
//! absolute change of its device time per step, matched by exact name.
//! When the names do not match (burn's cubecl kernels against PyTorch's
//! cuBLAS and ATen kernels share none), the comparison says so
//! ([`NameMatch::matched`](super::NameMatch::matched)) and the [classes](KernelClass#rules) are what
//! remains comparable.
//!
//! The classes and their keyword rules are documented on [`KernelClass`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::result::BenchResult;
use crate::read::analysis::{KernelTable, Report};

/// Names are said to match when the names both sides share carry at least
/// this share of each side's kernel time.
pub const MATCH_SHARE: f64 = 0.5;

/// The kernels of one run (or one side), or why there are none.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum KernelRecord {
    /// The traces held kernels.
    Observed(KernelSummary),
    /// They did not, and why (never reported as zero).
    NotObserved {
        /// Why, as the report says it.
        reason: String,
    },
}

/// Kernels by device time per step, as a bench result stores them.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct KernelSummary {
    /// Steps counted (the trace's steady steps; over runs, their sum).
    pub steps: usize,
    /// Kernels per step (mean).
    pub kernels_per_step: f64,
    /// Device busy per step (union of kernel, copy and memset intervals),
    /// ms (mean).
    pub busy_ms_per_step: f64,
    /// Sum of kernel durations per step, ms (a sum, not elapsed time).
    pub kernel_ms_per_step: f64,
    /// The heaviest kernels first.
    pub rows: Vec<KernelSummaryRow>,
    /// Kernel time per step of the names beyond `rows`, ms.
    pub others_ms_per_step: f64,
    /// Names beyond `rows`.
    pub others: usize,
}

/// One kernel name of a [`KernelSummary`].
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct KernelSummaryRow {
    /// The name as written.
    pub name: String,
    /// A shorter form ([`short_name`](crate::read::analysis::short_name)).
    pub label: String,
    /// Calls per step.
    pub calls_per_step: f64,
    /// Device time per step, ms.
    pub ms_per_step: f64,
    /// Mean per call, µs.
    pub mean_us: f64,
    /// The most frequent grid, when the trace gives one.
    pub grid: Option<[u64; 3]>,
    /// The most frequent block.
    pub block: Option<[u64; 3]>,
    /// Device time over device busy time.
    pub share_of_busy: f64,
}

// === impl KernelRecord ===

impl KernelRecord {
    /// The kernels of a report, or the reason the report gives for their
    /// absence.
    #[must_use]
    pub fn from_report(report: &Report) -> KernelRecord {
        match &report.device.kernels {
            Some(table) => KernelRecord::Observed(KernelSummary::from_table(table)),
            None => {
                let part =
                    report.device.not_observed.iter().find(|(part, _)| *part == "kernels").map(|(_, why)| why.clone());
                let reason = report.device.not_observed_reason.clone().or(part);
                KernelRecord::NotObserved {
                    reason: reason.unwrap_or_else(|| "the traces hold no kernel events".to_owned()),
                }
            }
        }
    }

    /// The summary, when kernels were observed.
    #[must_use]
    pub fn summary(&self) -> Option<&KernelSummary> {
        match self {
            KernelRecord::Observed(s) => Some(s),
            KernelRecord::NotObserved { .. } => None,
        }
    }

    /// One side of a comparison from a bench result: the
    /// [mean](KernelSummary::mean) of its runs that observed kernels, and
    /// notes on the runs that did not.
    #[must_use]
    pub fn of_bench(result: &BenchResult) -> (KernelRecord, Vec<String>) {
        let runs = &result.kernels;
        let observed: Vec<&KernelSummary> = runs.iter().filter_map(KernelRecord::summary).collect();
        let absent = runs.iter().find_map(|r| match r {
            KernelRecord::NotObserved { reason } => Some(reason.clone()),
            KernelRecord::Observed(_) => None,
        });
        let mut notes = Vec::new();
        if let Some(mean) = KernelSummary::mean(&observed) {
            if observed.len() < runs.len() {
                notes.push(format!(
                    "kernels observed in {} of {} runs: the figures are the mean of those",
                    observed.len(),
                    runs.len()
                ));
            }
            return (KernelRecord::Observed(mean), notes);
        }
        let reason = absent.unwrap_or_else(|| {
            "not recorded: the bench ran without --profile active (or with a steptrace that did not record kernels)"
                .to_owned()
        });
        (KernelRecord::NotObserved { reason }, notes)
    }
}

// === impl KernelSummary ===

impl KernelSummary {
    /// Per-step figures of a report's kernel table.
    #[must_use]
    pub fn from_table(t: &KernelTable) -> KernelSummary {
        let steps = t.steps.max(1) as f64;
        let busy_ms_per_step = t.busy_ms / steps;
        KernelSummary {
            steps: t.steps,
            kernels_per_step: t.kernels_per_step.mean,
            busy_ms_per_step,
            kernel_ms_per_step: t.kernel_ms / steps,
            rows: t
                .rows
                .iter()
                .map(|r| KernelSummaryRow {
                    name: r.name.clone(),
                    label: r.label.clone(),
                    calls_per_step: r.calls_per_step,
                    ms_per_step: r.per_step_ms,
                    mean_us: r.mean_us,
                    grid: r.grid,
                    block: r.block,
                    share_of_busy: r.share_of_busy,
                })
                .collect(),
            others_ms_per_step: t.others_ms / steps,
            others: t.others,
        }
    }

    /// The mean of several runs' summaries, each run weighing the same; a
    /// name a run does not list counts 0 for it. `None` for no summary.
    #[must_use]
    pub fn mean(summaries: &[&KernelSummary]) -> Option<KernelSummary> {
        let n = summaries.len() as f64;
        let mean = |f: &dyn Fn(&KernelSummary) -> f64| summaries.iter().map(|s| f(s)).sum::<f64>() / n;
        if summaries.is_empty() {
            return None;
        }
        let busy = mean(&|s| s.busy_ms_per_step);
        let mut rows: BTreeMap<&str, KernelSummaryRow> = BTreeMap::new();
        for s in summaries {
            for r in &s.rows {
                let row = rows.entry(&r.name).or_insert_with(|| KernelSummaryRow {
                    calls_per_step: 0.0,
                    ms_per_step: 0.0,
                    grid: None,
                    block: None,
                    ..r.clone()
                });
                row.calls_per_step += r.calls_per_step / n;
                row.ms_per_step += r.ms_per_step / n;
                row.grid = row.grid.or(r.grid);
                row.block = row.block.or(r.block);
            }
        }
        let mut rows: Vec<KernelSummaryRow> = rows
            .into_values()
            .map(|mut r| {
                r.mean_us = if r.calls_per_step > 0.0 { r.ms_per_step * 1000.0 / r.calls_per_step } else { 0.0 };
                r.share_of_busy = if busy > 0.0 { r.ms_per_step / busy } else { 0.0 };
                r
            })
            .collect();
        rows.sort_by(|a, b| b.ms_per_step.total_cmp(&a.ms_per_step).then_with(|| a.name.cmp(&b.name)));
        Some(KernelSummary {
            steps: summaries.iter().map(|s| s.steps).sum(),
            kernels_per_step: mean(&|s| s.kernels_per_step),
            busy_ms_per_step: busy,
            kernel_ms_per_step: mean(&|s| s.kernel_ms_per_step),
            rows,
            others_ms_per_step: mean(&|s| s.others_ms_per_step),
            others: summaries.iter().map(|s| s.others).max().unwrap_or(0),
        })
    }

    /// The first figure that is negative or not finite, named.
    pub(crate) fn invalid(&self) -> Option<(String, f64)> {
        let totals = [
            ("kernels_per_step", self.kernels_per_step),
            ("busy_ms_per_step", self.busy_ms_per_step),
            ("kernel_ms_per_step", self.kernel_ms_per_step),
            ("others_ms_per_step", self.others_ms_per_step),
        ];
        let rows = self.rows.iter().enumerate().flat_map(|(i, r)| {
            [
                ("calls_per_step", r.calls_per_step),
                ("ms_per_step", r.ms_per_step),
                ("mean_us", r.mean_us),
                ("share_of_busy", r.share_of_busy),
            ]
            .map(|(what, v)| (format!("kernels.rows[{i}].{what}"), v))
        });
        totals
            .into_iter()
            .map(|(what, v)| (format!("kernels.{what}"), v))
            .chain(rows)
            .find(|(_, v)| !(v.is_finite() && *v >= 0.0))
    }
}

// === impl KernelClass ===

/// A coarse kind of kernel, read from its name.
///
/// # Rules
///
/// [`KernelClass::of`] reads the name, lowercased, without a leading
/// `void ` and without its parameter list (the types in a parameter list
/// say nothing of what the kernel does). The first rule that matches wins:
///
/// | class | the name contains |
/// |---|---|
/// | copy/fill/memset | `memset`, `memcpy`, `copy`, `fill`, `full_kernel`, `into_contiguous` |
/// | convolution | `conv` (not as part of `convert`), `im2col`, `col2im`, `fprop`, `dgrad`, `wgrad` |
/// | matmul/gemm | `gemm`, `gemv`, `matmul`, `xmma`, `cutlass`, `cublas` (cuBLAS's split-K reductions and epilogues belong to their GEMM) |
/// | reduction/softmax/norm | `reduce`, `reduction`, `softmax`, `argmax`, `argmin`, `norm` (not as part of `normal`, the random distribution) |
/// | elementwise/fused | `elementwise`, `elemwise`, `fuse`, `binop`, `unary`, `binary`, `multi_tensor_apply` (optimizer updates), `pointwise` |
/// | other | anything else (gathers, scatters, random numbers, unknown names) |
///
/// The rules are deliberately conservative: a name none of them recognises
/// stays `other` rather than being guessed into a class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelClass {
    /// Matrix products (GEMM, GEMV), with cuBLAS's helper kernels.
    Matmul,
    /// Convolutions.
    Convolution,
    /// Elementwise and fused elementwise kernels.
    Elementwise,
    /// Reductions, softmax and normalisation.
    Reduction,
    /// Copies, fills and memsets.
    CopyFill,
    /// Anything else.
    Other,
}

impl KernelClass {
    /// Every class, in the order of the rules' table.
    pub const ALL: [KernelClass; 6] = [
        KernelClass::CopyFill,
        KernelClass::Convolution,
        KernelClass::Matmul,
        KernelClass::Reduction,
        KernelClass::Elementwise,
        KernelClass::Other,
    ];

    /// The class of a kernel name; see the [rules](KernelClass#rules).
    ///
    /// # Examples
    ///
    /// ```
    /// use steptrace::bench::KernelClass;
    ///
    /// assert_eq!(KernelClass::of("matmul_entry_lhs_f32_lhs_size_4"), KernelClass::Matmul);
    /// assert_eq!(KernelClass::of("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >(int)"), KernelClass::CopyFill);
    /// assert_eq!(KernelClass::of("void scal_kernel<float>(cublasTransposeParams<float>)"), KernelClass::Other);
    /// ```
    #[must_use]
    pub fn of(name: &str) -> KernelClass {
        let head = head(name);
        let has = |words: &[&str]| words.iter().any(|w| head.contains(w));
        let conv = head.match_indices("conv").any(|(i, _)| !head[i..].starts_with("convert"));
        let norm = head.match_indices("norm").any(|(i, _)| !head[i..].starts_with("normal"));
        if has(&["memset", "memcpy", "copy", "fill", "full_kernel", "into_contiguous"]) {
            KernelClass::CopyFill
        } else if conv || has(&["im2col", "col2im", "fprop", "dgrad", "wgrad"]) {
            KernelClass::Convolution
        } else if has(&["gemm", "gemv", "matmul", "xmma", "cutlass", "cublas"]) {
            KernelClass::Matmul
        } else if norm || has(&["reduce", "reduction", "softmax", "argmax", "argmin"]) {
            KernelClass::Reduction
        } else if has(&[
            "elementwise",
            "elemwise",
            "fuse",
            "binop",
            "unary",
            "binary",
            "multi_tensor_apply",
            "pointwise",
        ]) {
            KernelClass::Elementwise
        } else {
            KernelClass::Other
        }
    }

    /// How the class is written in a table.
    #[must_use]
    pub fn title(self) -> &'static str {
        match self {
            KernelClass::Matmul => "matmul/gemm",
            KernelClass::Convolution => "convolution",
            KernelClass::Elementwise => "elementwise/fused",
            KernelClass::Reduction => "reduction/softmax/norm",
            KernelClass::CopyFill => "copy/fill/memset",
            KernelClass::Other => "other",
        }
    }
}

/// The name, lowercased, without `void ` and without its parameter list
/// (from the first `(` outside template arguments; `(anonymous
/// namespace)` is part of the name).
fn head(name: &str) -> String {
    let lower = name.trim().to_lowercase().replace("(anonymous namespace)", "anonymous_namespace");
    let lower = lower.strip_prefix("void ").unwrap_or(&lower);
    let mut depth = 0usize;
    let cut = lower.char_indices().find(|&(_, c)| {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            _ => {}
        }
        c == '(' && depth == 0
    });
    lower[..cut.map_or(lower.len(), |(i, _)| i)].to_owned()
}

#[cfg(test)]
#[path = "kernels_tests.rs"]
mod tests;
