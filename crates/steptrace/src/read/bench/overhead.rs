//! The profiler's cost measured inside one process (`steptrace bench
//! --profile interleaved`).
//!
//! Two processes of one command differ by more than the profiler costs (up
//! to 5% between processes on the H200, against an effect of about 1%), so
//! a difference between processes cannot show that cost. Here each process
//! is its own control: its [`Schedule`] interleaves many short cycles, such
//! as `wait=7,warmup=1,active=2`, so that wait steps (the profiler
//! installed, spans gated) and active steps (recording) share one weights
//! trajectory, one set of caches and one clock.
//!
//! # Phases
//!
//! Every step gets its [`Phase`] from the schedule ([`Phase::of`]): `skip`
//! before `skip_first`, then `wait`, `warmup` and `active` by the cycle,
//! and `after` once `repeat` cycles are done. Only wait, warmup and active
//! steps inside the measured range are measured ([`label_steps`]). Each step
//! also has its slot: its position inside its phase in its cycle (the
//! first wait step after a window is slot 0), so that a cost that lands on
//! one position shows up.
//!
//! # Figures
//!
//! - **Per process and phase:** n, median and IQR of the measured steps
//!   ([`ProcessRecord::phases`]), and the median of each slot.
//! - **Per process:** active/wait and warmup/wait, the ratio of the phase
//!   medians, with the bootstrap interval of [`compare`](super::compare)
//!   (steps resampled within each phase). That interval treats the steps
//!   of one process as independent draws and knows nothing of the other
//!   processes: it understates the uncertainty, so no verdict is drawn
//!   from it.
//! - **Per condition, over its processes** ([`PairedRatio`]): the spread
//!   (min, median, max) of the per-process ratios; their median, with a
//!   bootstrap interval over processes; and the verdict of `compare`'s
//!   rule. Each process's steps are divided by its own wait median, so its
//!   wait side is exactly 1 and its active side is its ratio: `compare`'s
//!   bootstrap and rule then apply unchanged to the processes as runs (too
//!   few processes, an interval that contains 1, a difference within the
//!   spread of the ratios, or one below the threshold, each mean "no
//!   measurable difference").
//! - **Across processes** ([`CrossProcess`]): device activity's own cost
//!   (the active/wait ratios of `auto` processes against those of `off`
//!   processes) and the baseline (the wait medians of profiled processes
//!   against those of the same steps in processes with no profiler).
//!   These compare processes, so they carry a warning: they cannot
//!   resolve a 1% effect.
//! - **The null check** ([`NullCheck`]): the ratios of processes with no
//!   profiler, whose phases are labels only. A verdict there fails the
//!   check: the bench cannot resolve a difference of that size, and every
//!   verdict of that size or less is suspect.
//! - **Steps in no phase:** a schedule with `repeat` leaves the steps
//!   after its last cycle in no phase; they are measured by no figure, and
//!   the result warns ([`PhaseCounts::warning`]).
//!
//! # Too few processes
//!
//! The bootstrap interval of a median of 5 values or fewer is their range:
//! a resample's median is the smallest value more often than 1 time in 40.
//! The range of `n` values holds the true median only with probability
//! 1 − 2^(1−n) (50% for 2 values, 94% for 5), so below
//! [`MIN_PROCESSES_FOR_INTERVAL`] the interval is marked as the range
//! ([`PairedRatio::interval_is_range`]) and never called a 95% interval.
//! And `compare`'s rule, applied to 2 or 3 processes that do not differ,
//! calls a difference measurable about 1 time in 4 (2) or 1 in 12 (3)
//! under normal noise (1 in 40 with 4, below 1 in 100 from 5): below
//! [`MIN_PROCESSES_FOR_VERDICT`] no verdict is drawn.
//!
//! A [`Condition`] is what a process ran with: device activity `auto`
//! (recorded on CUDA, "not observed" elsewhere), `off` (host spans only),
//! or no profiler at all, whose phases are labels only: its active/wait
//! ratio is the null check of the method.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::compare::{ratio_interval, RESAMPLES};
use super::result::{check_tag, Fingerprint, StatsRecord};
use super::BenchError;
use crate::collect::Schedule;
use crate::format::device::ActivityStatus;
use crate::read::analysis::{median, Stats};

/// The format tag of overhead results this crate writes and reads.
///
/// Versioned as [`BENCH_FORMAT`](super::BENCH_FORMAT) is: only the major
/// version is checked, and a field added with a default keeps it.
pub const OVERHEAD_FORMAT: &str = "steptrace-overhead/1";

/// The name part of [`OVERHEAD_FORMAT`], before the major version.
const OVERHEAD_FORMAT_NAME: &str = "steptrace-overhead/";

/// The major version of [`OVERHEAD_FORMAT`].
const OVERHEAD_FORMAT_MAJOR: u64 = 1;

// === phases: see overhead_phases.rs ===

#[path = "overhead_phases.rs"]
mod phases;

pub use phases::{label_steps, Phase, PhaseCounts, PhasedStep};

// === one process ===

/// What a process ran with. See the [module documentation](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// The profiler with `--device-activity auto`: host spans, and device
    /// activity where the backend records it (CUDA).
    Auto,
    /// The profiler with `--device-activity off`: host spans only.
    Off,
    /// No subscriber at all (`--no-profile`): the phases are labels only.
    NoProfile,
}

impl Condition {
    /// The name on the console.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Condition::Auto => "auto",
            Condition::Off => "off",
            Condition::NoProfile => "no-profile",
        }
    }
}

/// A ratio of two phase medians inside one process, with the bootstrap
/// interval of steps resampled within each phase (an understatement: see
/// the [module documentation](self#figures)).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseRatio {
    /// Median of the phase over median of the wait steps.
    pub ratio: f64,
    /// 95% bootstrap interval; with fewer than
    /// [`MIN_PROCESSES_FOR_INTERVAL`] steps in a phase, only a range.
    pub interval: (f64, f64),
    /// Whether `interval` is only a range: a phase had too few measured
    /// steps for a 95% interval (see [too few
    /// processes](self#too-few-processes); steps count as values here).
    #[serde(default)]
    pub interval_is_range: bool,
}

/// Figures of one process's measured steps, per phase (none when the
/// phase has no measured step).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseFigures {
    /// Wait steps, ms.
    pub wait: Option<StatsRecord>,
    /// Warmup steps, ms.
    pub warmup: Option<StatsRecord>,
    /// Active steps, ms.
    pub active: Option<StatsRecord>,
}

/// The median of one slot of one phase in one process.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SlotFigure {
    /// The phase.
    pub phase: Phase,
    /// The position inside the phase, from 0.
    pub slot: u64,
    /// Measured steps in that slot.
    pub n: usize,
    /// Their median, ms.
    pub median_ms: f64,
    /// That median over the process's wait median.
    pub over_wait: f64,
}

/// One process as run: its raw steps and what it reported.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessRun {
    /// What it ran with.
    pub condition: Condition,
    /// Whether device activity was recorded, or why not.
    pub device_activity: ActivityStatus,
    /// Whether CUPTI stayed enabled between its windows (its wait steps then ran with it on).
    pub cupti_kept: bool,
    /// Its first step (startup), ms.
    pub first_step_ms: f64,
    /// Its cubecl cache as it reported it (`warm`, `cold`, `not applicable`).
    pub cache: String,
    /// The loss of its first step.
    pub first_loss: Option<f64>,
    /// The loss of its last step.
    pub final_loss: Option<f64>,
    /// Every step, labelled ([`label_steps`]).
    pub steps: Vec<PhasedStep>,
}

/// One process with its figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcessRecord {
    /// Its place in the run order, from 0.
    pub index: usize,
    /// What it ran with.
    pub condition: Condition,
    /// Whether device activity was recorded, or why not.
    pub device_activity: ActivityStatus,
    /// Whether CUPTI stayed enabled between its windows, so that its wait steps ran with CUPTI
    /// on too (absent in results written before this was recorded).
    #[serde(default)]
    pub cupti_kept: bool,
    /// Its first step (startup), ms.
    pub first_step_ms: f64,
    /// Its cubecl cache as it reported it.
    pub cache: String,
    /// The loss of its first step.
    pub first_loss: Option<f64>,
    /// The loss of its last step.
    pub final_loss: Option<f64>,
    /// Figures per phase.
    pub phases: PhaseFigures,
    /// Active median over wait median.
    pub active_over_wait: Option<PhaseRatio>,
    /// Warmup median over wait median.
    pub warmup_over_wait: Option<PhaseRatio>,
    /// Median per slot, phase by phase.
    pub slots: Vec<SlotFigure>,
    /// Every step, with its phase.
    pub steps: Vec<PhasedStep>,
}

impl ProcessRecord {
    /// The process's figures, computed from its measured steps.
    #[must_use]
    pub fn new(index: usize, run: ProcessRun) -> ProcessRecord {
        let of = |phase: Phase| -> Vec<f64> {
            run.steps.iter().filter(|s| s.measured && s.phase == phase).map(|s| s.ms).collect()
        };
        let (wait, warmup, active) = (of(Phase::Wait), of(Phase::Warmup), of(Phase::Active));
        let stats = |v: &[f64]| Stats::of(v).map(StatsRecord::from);
        let ratio = |v: &[f64]| -> Option<PhaseRatio> {
            let (num, den) = (median(v)?, median(&wait)?);
            let interval = ratio_interval(&wait, v, 1.0)?;
            let interval_is_range = v.len().min(wait.len()) < MIN_PROCESSES_FOR_INTERVAL;
            Some(PhaseRatio { ratio: num / den, interval, interval_is_range })
        };
        let wait_median = median(&wait);
        let mut by_slot: BTreeMap<(Phase, u64), Vec<f64>> = BTreeMap::new();
        for s in run.steps.iter().filter(|s| s.measured) {
            by_slot.entry((s.phase, s.slot)).or_default().push(s.ms);
        }
        let slots = by_slot
            .into_iter()
            .filter_map(|((phase, slot), v)| {
                let m = median(&v)?;
                Some(SlotFigure { phase, slot, n: v.len(), median_ms: m, over_wait: m / wait_median? })
            })
            .collect();
        ProcessRecord {
            index,
            condition: run.condition,
            device_activity: run.device_activity,
            cupti_kept: run.cupti_kept,
            first_step_ms: run.first_step_ms,
            cache: run.cache,
            first_loss: run.first_loss,
            final_loss: run.final_loss,
            phases: PhaseFigures { wait: stats(&wait), warmup: stats(&warmup), active: stats(&active) },
            active_over_wait: ratio(&active),
            warmup_over_wait: ratio(&warmup),
            slots,
            steps: run.steps,
        }
    }

    /// Whether device activity was recorded.
    #[must_use]
    pub fn observed(&self) -> bool {
        self.device_activity == ActivityStatus::Observed
    }
}

// === over processes: see overhead_figures.rs ===

#[path = "overhead_figures.rs"]
mod figures;

pub use figures::{
    ConditionSummary, CrossProcess, NullCheck, PairedRatio, SlotRatio, Spread, MIN_PROCESSES_FOR_INTERVAL,
    MIN_PROCESSES_FOR_VERDICT,
};

// === the result ===

/// How an overhead bench was set up.
#[derive(Clone, Debug, PartialEq)]
pub struct OverheadSetup {
    /// What was run.
    pub fingerprint: Fingerprint,
    /// The backend label, with any fallback and its reason.
    pub backend_label: String,
    /// The schedule every process ran.
    pub schedule: Schedule,
    /// Steps skipped before measuring (the schedule's `skip_first`).
    pub warmup: u64,
    /// Measured steps per process.
    pub steps: u64,
    /// Samples per step.
    pub batch_size: u64,
    /// Smallest relative difference worth claiming.
    pub threshold: f64,
}

/// The warning of every comparison across processes.
pub const CROSS_PROCESS_WARNING: &str = "cross-process: processes of one command differ by up to 5% (H200), more \
     than the profiler costs, so this cannot resolve a ~1% effect; the in-process ratios are the measurement";

/// What `steptrace bench --profile interleaved --json` writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OverheadResult {
    /// `steptrace-overhead/1`.
    pub format: String,
    /// What was run.
    pub fingerprint: Fingerprint,
    /// The backend label, with any fallback and its reason.
    pub backend_label: String,
    /// The schedule every process ran.
    pub schedule: String,
    /// Steps skipped before measuring.
    pub warmup: u64,
    /// Measured steps per process.
    pub steps: u64,
    /// Measured steps per phase in each process.
    pub phase_counts: PhaseCounts,
    /// Samples per step.
    pub batch_size: u64,
    /// Smallest relative difference worth claiming.
    pub threshold: f64,
    /// Bootstrap resamples of every interval.
    pub resamples: usize,
    /// Each condition's processes: active/wait, warmup/wait, slots.
    pub conditions: Vec<ConditionSummary>,
    /// Device activity's own cost: the active/wait ratios of `auto`
    /// processes against those of `off` processes (when device activity
    /// was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_activity: Option<CrossProcess>,
    /// Wait steps against processes with no profiler (`--baseline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<CrossProcess>,
    /// The null check (`--baseline`): how far the no-profile processes'
    /// ratios moved from 1, and whether the rule called that measurable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub null_check: Option<NullCheck>,
    /// What to keep in mind.
    pub warnings: Vec<String>,
    /// Every process in run order, with every step.
    pub processes: Vec<ProcessRecord>,
}

impl OverheadResult {
    /// The result of `processes`, in run order.
    ///
    /// # Errors
    ///
    /// [`BenchError::NoRun`] when no process has a measured step, and
    /// [`BenchError::Invalid`] for a step time that is zero, negative or
    /// not finite.
    pub fn new(setup: OverheadSetup, processes: Vec<ProcessRecord>) -> Result<OverheadResult, BenchError> {
        if !processes.iter().any(|p| p.steps.iter().any(|s| s.measured)) {
            return Err(BenchError::NoRun);
        }
        for p in &processes {
            if let Some(s) = p.steps.iter().find(|s| !(s.ms > 0.0 && s.ms.is_finite())) {
                return Err(BenchError::Invalid {
                    what: format!("process {} step {} ms", p.index, s.step),
                    value: s.ms,
                });
            }
        }
        let threshold = setup.threshold;
        let mut conditions = Vec::new();
        for c in [Condition::Auto, Condition::Off, Condition::NoProfile] {
            let of: Vec<&ProcessRecord> = processes.iter().filter(|p| p.condition == c).collect();
            if !of.is_empty() {
                conditions.push(ConditionSummary::of(c, &of, threshold));
            }
        }
        let active = |c: Condition| -> Vec<f64> {
            processes.iter().filter(|p| p.condition == c).filter_map(|p| p.active_over_wait).map(|r| r.ratio).collect()
        };
        let device_activity = if processes.iter().any(|p| p.condition == Condition::Auto && p.observed()) {
            CrossProcess::of(
                ("active/wait of the off processes (host spans only)", active(Condition::Off)),
                ("active/wait of the auto processes (host spans and device activity)", active(Condition::Auto)),
                "",
                threshold,
                CROSS_PROCESS_WARNING,
            )
        } else {
            None
        };
        let wait = |c: Condition| -> Vec<f64> {
            processes
                .iter()
                .filter(|p| p.condition == c)
                .filter_map(|p| p.phases.wait.as_ref().map(|w| w.median))
                .collect()
        };
        // The profiled side: the auto processes, else (--device-activity off) the off ones.
        let profiled = Some(wait(Condition::Auto)).filter(|v| !v.is_empty()).unwrap_or_else(|| wait(Condition::Off));
        let baseline = CrossProcess::of(
            ("wait-labelled steps of the no-profile processes (median ms/step)", wait(Condition::NoProfile)),
            ("wait steps of the profiled processes (median ms/step)", profiled),
            " ms/step",
            threshold,
            CROSS_PROCESS_WARNING,
        );
        let mut warnings = Vec::new();
        if setup.fingerprint.get("fallback").and_then(Value::as_bool) == Some(true) {
            warnings.push(format!("a fallback backend: these figures do not describe a GPU ({})", setup.backend_label));
        }
        let first = processes.first().and_then(|p| p.first_loss);
        if processes.iter().any(|p| p.first_loss != first) {
            warnings.push("the processes did not all start from the same state (first losses differ)".into());
        }
        let last = processes.first().and_then(|p| p.final_loss);
        if processes.iter().any(|p| p.final_loss != last) {
            warnings.push(
                "final losses differ between processes: the computation was not the same in every process (on cubecl \
                 backends autotune may choose other kernels per process)"
                    .into(),
            );
        }
        if let Some(w) = setup.schedule.warning() {
            warnings.push(format!("{w}: the collector's start-up then counts as an active step"));
        }
        let measured = setup.warmup..setup.warmup.saturating_add(setup.steps);
        warnings.extend(PhaseCounts::warning(&setup.schedule, measured.clone()));
        let null_check = conditions.iter().find(|c| c.condition == Condition::NoProfile).and_then(NullCheck::of);
        warnings.extend(null_check.and_then(|n| n.warning(threshold)));
        let fewest = conditions.iter().map(|c| c.processes.len()).min().unwrap_or(0);
        if fewest < MIN_PROCESSES_FOR_VERDICT {
            warnings.push(format!(
                "{fewest} process{} per condition: too few for a verdict ({MIN_PROCESSES_FOR_VERDICT} or more needed) or a \
                 95% interval ({MIN_PROCESSES_FOR_INTERVAL} or more); the intervals shown are ranges: rerun with --runs \
                 {MIN_PROCESSES_FOR_INTERVAL}",
                if fewest == 1 { "" } else { "es" }
            ));
        } else if fewest < MIN_PROCESSES_FOR_INTERVAL {
            warnings.push(format!(
                "{fewest} processes per condition: too few for a 95% interval over processes ({MIN_PROCESSES_FOR_INTERVAL} \
                 or more); the intervals shown are ranges: rerun with --runs {MIN_PROCESSES_FOR_INTERVAL} for one"
            ));
        }
        Ok(OverheadResult {
            format: OVERHEAD_FORMAT.into(),
            fingerprint: setup.fingerprint,
            backend_label: setup.backend_label,
            schedule: setup.schedule.to_string(),
            warmup: setup.warmup,
            steps: setup.steps,
            phase_counts: PhaseCounts::of(&setup.schedule, measured),
            batch_size: setup.batch_size,
            threshold,
            resamples: RESAMPLES,
            conditions,
            device_activity,
            baseline,
            null_check,
            warnings,
            processes,
        })
    }

    /// The summary of `condition`, if it ran.
    #[must_use]
    pub fn condition(&self, condition: Condition) -> Option<&ConditionSummary> {
        self.conditions.iter().find(|c| c.condition == condition)
    }

    /// Reads a result from the JSON `bench --profile interleaved --json`
    /// writes.
    ///
    /// # Errors
    ///
    /// A format tag of a newer major version, or not an overhead result's,
    /// or JSON that does not hold one.
    ///
    /// # Examples
    ///
    /// ```
    /// use steptrace::bench::{BenchError, OverheadResult};
    ///
    /// let err = OverheadResult::from_json(br#"{"format":"steptrace-overhead/2"}"#).unwrap_err();
    /// assert!(matches!(err, BenchError::NewerFormat { .. }), "{err}");
    /// let err = OverheadResult::from_json(br#"{"format":"steptrace-bench/1"}"#).unwrap_err();
    /// assert!(matches!(err, BenchError::UnknownFormat { .. }), "{err}");
    /// ```
    pub fn from_json(bytes: &[u8]) -> Result<OverheadResult, BenchError> {
        let value: Value = serde_json::from_slice(bytes).map_err(BenchError::Json)?;
        if let Some(tag) = value.get("format").and_then(Value::as_str) {
            check_tag(tag, OVERHEAD_FORMAT_NAME, OVERHEAD_FORMAT_MAJOR, OVERHEAD_FORMAT)?;
        }
        OverheadResult::deserialize(value).map_err(BenchError::Json)
    }
}

#[cfg(test)]
#[path = "overhead_tests.rs"]
mod tests;
