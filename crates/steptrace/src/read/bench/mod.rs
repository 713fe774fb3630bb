//! Validation outside the profiler: bench results and their comparison.
//!
//! A [`BenchResult`] holds every raw step time of several runs of one
//! workload, its startup figures, its quality figures and a
//! [`Fingerprint`] of everything that defines the workload. [`compare`]
//! accepts two results only when their fingerprints differ in the declared
//! variable alone, and reports a time ratio with a bootstrap interval; it
//! never claims a difference smaller than the spread of the runs.
//! [`compare_kernels`] puts two sides' kernels next to each other, by name
//! or, when the names do not match, by [`KernelClass`]. An
//! [`OverheadResult`] measures the profiler's cost inside each process,
//! wait steps against active steps of one schedule ([`overhead`]
//! explains the method).

mod compare;
mod error;
mod kernel_comparison;
mod kernels;
pub mod overhead;
mod result;

pub use compare::{compare, Comparison, Verdict};
pub use error::BenchError;
pub use kernel_comparison::{
    compare_kernels, ClassChange, KernelChange, KernelComparison, KernelOutcome, KernelTotals, NameMatch,
};
pub use kernels::{KernelClass, KernelRecord, KernelSummary, KernelSummaryRow, MATCH_SHARE};
pub use overhead::{
    label_steps, Condition, ConditionSummary, CrossProcess, OverheadResult, OverheadSetup, PairedRatio, Phase,
    PhaseCounts, PhaseFigures, PhaseRatio, PhasedStep, ProcessRecord, ProcessRun, SlotFigure, SlotRatio, Spread,
    OVERHEAD_FORMAT,
};
pub use result::{BenchResult, Fingerprint, RunRecord, StatsRecord, Summary, BENCH_FORMAT};
