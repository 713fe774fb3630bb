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
//!   against those of the same steps in processes with no profiler). These compare processes, so they carry a warning: they
//!   cannot resolve a 1% effect.
//!
//! A [`Condition`] is what a process ran with: device activity `auto`
//! (recorded on CUDA, "not observed" elsewhere), `off` (host spans only),
//! or no profiler at all, whose phases are labels only: its active/wait
//! ratio is the null check of the method.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::compare::{range, ratio_interval, rule, Evidence, Verdict, RESAMPLES};
use super::result::{check_tag, Fingerprint, StatsRecord};
use super::BenchError;
use crate::analysis::{median, Stats};
use crate::collect::{Action, Schedule};
use crate::format::device::ActivityStatus;

/// The format tag of overhead results this crate writes and reads.
///
/// Versioned as [`BENCH_FORMAT`](super::BENCH_FORMAT) is: only the major
/// version is checked, and a field added with a default keeps it.
pub const OVERHEAD_FORMAT: &str = "steptrace-overhead/1";

/// The name part of [`OVERHEAD_FORMAT`], before the major version.
const OVERHEAD_FORMAT_NAME: &str = "steptrace-overhead/";

/// The major version of [`OVERHEAD_FORMAT`].
const OVERHEAD_FORMAT_MAJOR: u64 = 1;

// === phases ===

/// Where a step lies in the schedule. See the [module
/// documentation](self#phases).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Before `skip_first` (startup: compilation, autotune).
    Skip,
    /// The profiler installed, spans gated.
    Wait,
    /// The collector started, what it collects discarded.
    Warmup,
    /// Recording.
    Active,
    /// After the last of `repeat` cycles.
    After,
}

impl Phase {
    /// The phase of `step` under `schedule`, from the schedule's own
    /// [`action`](Schedule::action) and [`cycle_of`](Schedule::cycle_of).
    ///
    /// # Examples
    ///
    /// ```
    /// use steptrace::bench::Phase;
    ///
    /// let s: steptrace::Schedule = "skip_first=1,wait=2,warmup=1,active=1,repeat=1".parse()?;
    /// let phases: Vec<Phase> = (0..6).map(|step| Phase::of(&s, step)).collect();
    /// use Phase::*;
    /// assert_eq!(phases, [Skip, Wait, Wait, Warmup, Active, After]);
    /// # Ok::<(), steptrace::ScheduleError>(())
    /// ```
    #[must_use]
    pub fn of(schedule: &Schedule, step: u64) -> Phase {
        match (schedule.cycle_of(step), schedule.action(step)) {
            (None, _) if step < schedule.skip_first() => Phase::Skip,
            (None, _) => Phase::After,
            (Some(_), Action::None) => Phase::Wait,
            (Some(_), Action::Warmup) => Phase::Warmup,
            (Some(_), Action::Record | Action::RecordAndSave) => Phase::Active,
        }
    }

    /// The name, as in the JSON.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Phase::Skip => "skip",
            Phase::Wait => "wait",
            Phase::Warmup => "warmup",
            Phase::Active => "active",
            Phase::After => "after",
        }
    }

    /// Whether steps of this phase are measured (wait, warmup, active).
    #[must_use]
    pub fn in_cycle(self) -> bool {
        matches!(self, Phase::Wait | Phase::Warmup | Phase::Active)
    }
}

/// One step of one process, with its place in the schedule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhasedStep {
    /// The step (`ProfilerStep#N`).
    pub step: u64,
    /// Its wall time, ms.
    pub ms: f64,
    /// Its phase.
    pub phase: Phase,
    /// Its cycle, from 0 (none for skip and after steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycle: Option<u64>,
    /// Its position inside its phase in its cycle, from 0.
    pub slot: u64,
    /// Whether it counts: a wait, warmup or active step inside the
    /// measured range.
    pub measured: bool,
}

/// Measured steps per phase, as a schedule lays them out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseCounts {
    /// Wait steps.
    pub wait: u64,
    /// Warmup steps.
    pub warmup: u64,
    /// Active steps.
    pub active: u64,
}

impl PhaseCounts {
    /// How many steps of each phase `schedule` puts in `measured`, so that
    /// a schedule without wait or without active steps there is refused
    /// before anything runs.
    ///
    /// # Examples
    ///
    /// ```
    /// use steptrace::bench::PhaseCounts;
    ///
    /// let s: steptrace::Schedule = "skip_first=10,wait=7,warmup=1,active=2".parse()?;
    /// let c = PhaseCounts::of(&s, 10..310);
    /// assert_eq!((c.wait, c.warmup, c.active), (210, 30, 60));
    /// # Ok::<(), steptrace::ScheduleError>(())
    /// ```
    #[must_use]
    pub fn of(schedule: &Schedule, measured: Range<u64>) -> PhaseCounts {
        let mut c = PhaseCounts::default();
        for step in measured {
            match Phase::of(schedule, step) {
                Phase::Wait => c.wait += 1,
                Phase::Warmup => c.warmup += 1,
                Phase::Active => c.active += 1,
                Phase::Skip | Phase::After => {}
            }
        }
        c
    }
}

/// `(step, ms)` pairs with their phases under `schedule`; steps outside
/// `measured`, and skip and after steps, are kept but not measured.
///
/// # Examples
///
/// ```
/// use steptrace::bench::{label_steps, Phase};
///
/// let s: steptrace::Schedule = "skip_first=1,wait=2,warmup=1,active=2".parse()?;
/// let steps: Vec<(u64, f64)> = (0..8).map(|i| (i, 1.0)).collect();
/// let labelled = label_steps(&s, &steps, 1..7);
/// let slots: Vec<(Phase, u64)> = labelled.iter().map(|p| (p.phase, p.slot)).collect();
/// use Phase::*;
/// assert_eq!(slots, [(Skip, 0), (Wait, 0), (Wait, 1), (Warmup, 0), (Active, 0), (Active, 1), (Wait, 0), (Wait, 1)]);
/// assert!(!labelled[0].measured && labelled[1].measured && !labelled[7].measured);
/// # Ok::<(), steptrace::ScheduleError>(())
/// ```
#[must_use]
pub fn label_steps(schedule: &Schedule, steps: &[(u64, f64)], measured: Range<u64>) -> Vec<PhasedStep> {
    let mut out: Vec<PhasedStep> = Vec::with_capacity(steps.len());
    for &(step, ms) in steps {
        let phase = Phase::of(schedule, step);
        let cycle = if phase.in_cycle() { schedule.cycle_of(step) } else { None };
        let slot = match out.last() {
            Some(prev) if prev.phase == phase && prev.cycle == cycle && prev.step.checked_add(1) == Some(step) => {
                prev.slot + 1
            }
            _ => 0,
        };
        out.push(PhasedStep { step, ms, phase, cycle, slot, measured: phase.in_cycle() && measured.contains(&step) });
    }
    out
}

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
    /// 95% bootstrap interval.
    pub interval: (f64, f64),
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
            Some(PhaseRatio { ratio: num / den, interval: ratio_interval(&wait, v, 1.0)? })
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

// === over processes ===

/// Smallest, median and largest of a few values.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Smallest.
    pub min: f64,
    /// Median.
    pub median: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    fn of(v: &[f64]) -> Option<Spread> {
        let s = Stats::of(v)?;
        Some(Spread { min: s.min, median: s.median, max: s.max })
    }
}

/// One phase over the wait phase, over the processes of one condition.
/// See the [module documentation](self#figures).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairedRatio {
    /// Each process's ratio, in the order of [`ConditionSummary::processes`]
    /// (a process without the phase is left out).
    pub per_process: Vec<f64>,
    /// Their spread.
    pub spread: Spread,
    /// Their median.
    pub ratio: f64,
    /// 95% bootstrap interval of the median, processes resampled.
    pub interval: (f64, f64),
    /// `compare`'s verdict with A the wait steps and B this phase's:
    /// `b_slower` means this phase costs more than a wait step.
    pub verdict: Verdict,
}

impl PairedRatio {
    /// The figures of per-process ratios; `None` for no ratio.
    ///
    /// # Examples
    ///
    /// ```
    /// use steptrace::bench::{PairedRatio, Verdict};
    ///
    /// let p = PairedRatio::of(&[1.031, 1.029, 1.030, 1.032, 1.028], 0.01).unwrap();
    /// assert_eq!(p.ratio, 1.030);
    /// assert!(matches!(p.verdict, Verdict::BSlower { .. }));
    /// let same = PairedRatio::of(&[1.0, 1.0, 1.0], 0.01).unwrap();
    /// assert!(matches!(same.verdict, Verdict::NoMeasurableDifference { .. }));
    /// ```
    #[must_use]
    pub fn of(per_process: &[f64], threshold: f64) -> Option<PairedRatio> {
        let spread = Spread::of(per_process)?;
        // Each process's own wait median, normalised: exactly 1.
        let ones = vec![1.0; per_process.len()];
        let interval = ratio_interval(&ones, per_process, 1.0)?;
        let verdict = rule(
            &Evidence {
                ratio: spread.median,
                interval,
                difference: (spread.median - 1.0).abs(),
                spread: range(per_process),
                unit: "",
                spread_of: "the per-process ratios",
                too_few: (per_process.len() < 2)
                    .then_some("one process shows no spread between processes: rerun with --runs 3 or more"),
            },
            threshold,
        );
        Some(PairedRatio { per_process: per_process.to_vec(), ratio: spread.median, spread, interval, verdict })
    }
}

/// A slot's median over the wait median, as the median over processes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SlotRatio {
    /// The phase.
    pub phase: Phase,
    /// The position inside the phase, from 0.
    pub slot: u64,
    /// Median over processes of the slot's median over the wait median.
    pub over_wait: f64,
}

/// The processes of one condition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConditionSummary {
    /// The condition.
    pub condition: Condition,
    /// Its processes ([`ProcessRecord::index`]).
    pub processes: Vec<usize>,
    /// How many of them recorded device activity.
    pub device_activity_observed: usize,
    /// Active over wait.
    pub active_over_wait: Option<PairedRatio>,
    /// Warmup over wait.
    pub warmup_over_wait: Option<PairedRatio>,
    /// Every slot over the wait median.
    pub slots: Vec<SlotRatio>,
    /// The mean of the slots' ratios: a whole cycle's time over that of a
    /// cycle of wait steps, wherever in the cycle a cost lands (rough: a
    /// sum of slot medians, not a median of cycle sums).
    pub cycle_over_wait: Option<f64>,
}

impl ConditionSummary {
    fn of(condition: Condition, processes: &[&ProcessRecord], threshold: f64) -> ConditionSummary {
        let ratios = |f: fn(&ProcessRecord) -> Option<PhaseRatio>| -> Vec<f64> {
            processes.iter().filter_map(|p| f(p)).map(|r| r.ratio).collect()
        };
        let mut by_slot: BTreeMap<(Phase, u64), Vec<f64>> = BTreeMap::new();
        for s in processes.iter().flat_map(|p| &p.slots) {
            by_slot.entry((s.phase, s.slot)).or_default().push(s.over_wait);
        }
        let slots: Vec<SlotRatio> = by_slot
            .into_iter()
            .filter_map(|((phase, slot), v)| Some(SlotRatio { phase, slot, over_wait: median(&v)? }))
            .collect();
        let cycle_over_wait =
            (!slots.is_empty()).then(|| slots.iter().map(|s| s.over_wait).sum::<f64>() / slots.len() as f64);
        ConditionSummary {
            condition,
            processes: processes.iter().map(|p| p.index).collect(),
            device_activity_observed: processes.iter().filter(|p| p.observed()).count(),
            active_over_wait: PairedRatio::of(&ratios(|p| p.active_over_wait), threshold),
            warmup_over_wait: PairedRatio::of(&ratios(|p| p.warmup_over_wait), threshold),
            slots,
            cycle_over_wait,
        }
    }
}

/// Two sets of processes compared as `compare` compares runs: B's median
/// over A's, with `compare`'s bootstrap and verdict. Processes differ by
/// more than the profiler costs, so [`warning`](Self::warning) says what
/// this cannot resolve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CrossProcess {
    /// What A is.
    pub a: String,
    /// What B is.
    pub b: String,
    /// A's values, one per process.
    pub a_values: Vec<f64>,
    /// B's values, one per process.
    pub b_values: Vec<f64>,
    /// Median of B over median of A.
    pub ratio: f64,
    /// 95% bootstrap interval (processes resampled).
    pub interval: (f64, f64),
    /// The larger spread (max − min) of the two sides.
    pub spread: f64,
    /// `compare`'s verdict.
    pub verdict: Verdict,
    /// Why this is not the measurement.
    pub warning: String,
}

impl CrossProcess {
    fn of(a: (&str, Vec<f64>), b: (&str, Vec<f64>), unit: &str, threshold: f64, warning: &str) -> Option<CrossProcess> {
        let (ma, mb) = (median(&a.1)?, median(&b.1)?);
        let interval = ratio_interval(&a.1, &b.1, 1.0)?;
        let ratio = mb / ma;
        let spread = range(&a.1).max(range(&b.1));
        let verdict = rule(
            &Evidence {
                ratio,
                interval,
                difference: (mb - ma).abs(),
                spread,
                unit,
                spread_of: "the processes",
                too_few: (a.1.len() < 2 || b.1.len() < 2)
                    .then_some("one process per side shows no spread: rerun with --runs 3 or more"),
            },
            threshold,
        );
        Some(CrossProcess {
            a: a.0.to_owned(),
            b: b.0.to_owned(),
            a_values: a.1,
            b_values: b.1,
            ratio,
            interval,
            spread,
            verdict,
            warning: warning.to_owned(),
        })
    }
}

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
                return Err(BenchError::Invalid { what: format!("process {} step {} ms", p.index, s.step), value: s.ms });
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
            processes.iter().filter(|p| p.condition == c).filter_map(|p| p.phases.wait.as_ref().map(|w| w.median)).collect()
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
