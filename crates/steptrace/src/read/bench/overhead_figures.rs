//! The figures over processes of an overhead bench: per condition, the
//! spread of the per-process ratios, their median with an interval and
//! `compare`'s verdict ([`PairedRatio`]); comparisons across processes
//! ([`CrossProcess`]); and the null check ([`NullCheck`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::super::compare::{range, ratio_interval, rule, Evidence, Verdict};
use super::{Condition, Phase, PhaseRatio, ProcessRecord};
use crate::read::analysis::{median, Stats};

/// Processes (per side) a verdict needs: see [too few
/// processes](super#too-few-processes).
pub const MIN_PROCESSES_FOR_VERDICT: usize = 4;

/// Values (per side) below which a bootstrap interval of their median is
/// only their range: see [too few processes](super#too-few-processes).
pub const MIN_PROCESSES_FOR_INTERVAL: usize = 6;

/// Why `n` processes (per side) give no verdict; `None` when they are
/// enough.
fn too_few(n: usize, per: &str) -> Option<String> {
    match n {
        n if n >= MIN_PROCESSES_FOR_VERDICT => None,
        0 | 1 => Some(format!(
            "one process{per} shows no spread between processes: rerun with --runs {MIN_PROCESSES_FOR_VERDICT} or more"
        )),
        n => Some(format!(
            "{n} processes{per} are too few for a verdict (with fewer than {MIN_PROCESSES_FOR_VERDICT}, chance alone \
             often passes the rule: the range of 2 values misses 1 half the time when nothing differs): rerun with \
             --runs {MIN_PROCESSES_FOR_VERDICT} or more ({MIN_PROCESSES_FOR_INTERVAL} or more for a 95% interval)"
        )),
    }
}

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
/// See the [figures](super#figures) of the method.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairedRatio {
    /// Each process's ratio, in the order of [`ConditionSummary::processes`]
    /// (a process without the phase is left out).
    pub per_process: Vec<f64>,
    /// Their spread.
    pub spread: Spread,
    /// Their median.
    pub ratio: f64,
    /// 95% bootstrap interval of the median, processes resampled; with
    /// fewer than [`MIN_PROCESSES_FOR_INTERVAL`] processes, only the range
    /// of their ratios (see `interval_is_range`).
    pub interval: (f64, f64),
    /// Whether `interval` is only the range (min–max) of the ratios, too
    /// few for a 95% interval (see [too few
    /// processes](super#too-few-processes)).
    #[serde(default)]
    pub interval_is_range: bool,
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
    /// // Five processes: the "interval" is their range.
    /// assert!(p.interval_is_range && p.interval == (1.028, 1.032));
    /// let same = PairedRatio::of(&[1.0, 1.0, 1.0, 1.0], 0.01).unwrap();
    /// assert!(matches!(same.verdict, Verdict::NoMeasurableDifference { .. }));
    /// // Two processes 8% above 1 are no evidence of anything.
    /// let two = PairedRatio::of(&[1.081, 1.096], 0.01).unwrap();
    /// assert!(matches!(two.verdict, Verdict::NoMeasurableDifference { ref reason } if reason.contains("too few")));
    /// ```
    #[must_use]
    pub fn of(per_process: &[f64], threshold: f64) -> Option<PairedRatio> {
        let spread = Spread::of(per_process)?;
        // Each process's own wait median, normalised: exactly 1.
        let ones = vec![1.0; per_process.len()];
        let interval = ratio_interval(&ones, per_process, 1.0)?;
        let why = too_few(per_process.len(), "");
        let verdict = rule(
            &Evidence {
                ratio: spread.median,
                interval,
                difference: (spread.median - 1.0).abs(),
                spread: range(per_process),
                unit: "",
                spread_of: "the per-process ratios",
                too_few: why.as_deref(),
            },
            threshold,
        );
        Some(PairedRatio {
            per_process: per_process.to_vec(),
            ratio: spread.median,
            spread,
            interval,
            interval_is_range: per_process.len() < MIN_PROCESSES_FOR_INTERVAL,
            verdict,
        })
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
    pub(super) fn of(condition: Condition, processes: &[&ProcessRecord], threshold: f64) -> ConditionSummary {
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
    /// 95% bootstrap interval (processes resampled); with fewer than
    /// [`MIN_PROCESSES_FOR_INTERVAL`] processes on a side, only the range
    /// of the resampled ratios (see `interval_is_range`).
    pub interval: (f64, f64),
    /// Whether `interval` is only a range, too few processes for a 95%
    /// interval (see [too few processes](super#too-few-processes)).
    #[serde(default)]
    pub interval_is_range: bool,
    /// The larger spread (max − min) of the two sides.
    pub spread: f64,
    /// `compare`'s verdict.
    pub verdict: Verdict,
    /// Why this is not the measurement.
    pub warning: String,
}

impl CrossProcess {
    pub(super) fn of(
        a: (&str, Vec<f64>),
        b: (&str, Vec<f64>),
        unit: &str,
        threshold: f64,
        warning: &str,
    ) -> Option<CrossProcess> {
        let (ma, mb) = (median(&a.1)?, median(&b.1)?);
        let interval = ratio_interval(&a.1, &b.1, 1.0)?;
        let ratio = mb / ma;
        let spread = range(&a.1).max(range(&b.1));
        let fewest = a.1.len().min(b.1.len());
        let why = too_few(fewest, " per side");
        let verdict = rule(
            &Evidence {
                ratio,
                interval,
                difference: (mb - ma).abs(),
                spread,
                unit,
                spread_of: "the processes",
                too_few: why.as_deref(),
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
            interval_is_range: fewest < MIN_PROCESSES_FOR_INTERVAL,
            spread,
            verdict,
            warning: warning.to_owned(),
        })
    }
}

/// The null check of a bench with `--baseline`: the active/wait and
/// warmup/wait ratios of processes with no profiler at all, whose phases
/// are labels only. Any difference they show is the measurement's own
/// noise: a verdict of that size or less elsewhere in the bench is
/// suspect.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct NullCheck {
    /// How far the no-profile processes' ratios moved from 1: the larger
    /// |median ratio − 1| of active/wait and warmup/wait (0.0884 for 8.84%).
    pub moved: f64,
    /// Whether `compare`'s rule called either ratio measurable: the null
    /// check failed, and the bench cannot resolve a difference of that
    /// size.
    pub failed: bool,
}

impl NullCheck {
    /// The null check of the `no-profile` condition, if it ran.
    pub(super) fn of(null: &ConditionSummary) -> Option<NullCheck> {
        let ratios: Vec<&PairedRatio> =
            [&null.active_over_wait, &null.warmup_over_wait].into_iter().flatten().collect();
        let moved = ratios.iter().map(|p| (p.ratio - 1.0).abs()).reduce(f64::max)?;
        let failed = ratios.iter().any(|p| !matches!(p.verdict, Verdict::NoMeasurableDifference { .. }));
        Some(NullCheck { moved, failed })
    }

    /// Whether `verdict` claims a difference no larger than what the null
    /// check moved: such a claim cannot be told from the measurement's
    /// noise.
    ///
    /// # Examples
    ///
    /// ```
    /// use steptrace::bench::overhead::NullCheck;
    /// use steptrace::bench::Verdict;
    ///
    /// let null = NullCheck { moved: 0.0884, failed: true };
    /// assert!(null.covers(&Verdict::BSlower { slowdown: 1.05 }));
    /// assert!(!null.covers(&Verdict::BSlower { slowdown: 1.20 }));
    /// assert!(!null.covers(&Verdict::NoMeasurableDifference { reason: String::new() }));
    /// ```
    #[must_use]
    pub fn covers(&self, verdict: &Verdict) -> bool {
        match verdict {
            Verdict::NoMeasurableDifference { .. } => false,
            Verdict::BSlower { slowdown } => slowdown - 1.0 <= self.moved,
            Verdict::BFaster { speedup } => 1.0 - 1.0 / speedup <= self.moved,
        }
    }

    /// What to say of it, if anything: a failed check, or one that moved
    /// by `threshold` or more without being called measurable.
    pub(super) fn warning(&self, threshold: f64) -> Option<String> {
        let pct = self.moved * 100.0;
        if self.failed {
            Some(format!(
                "the null check FAILED: with no profiler at all (the phases are labels only), the rule calls a \
                 difference of {pct:.2}% measurable; this bench cannot tell a difference of that size from noise, so \
                 every verdict here of {pct:.2}% or less is suspect (rerun with more --runs or --steps, on a quieter \
                 machine)"
            ))
        } else if self.moved >= threshold {
            Some(format!(
                "the null check moved by {pct:.2}% with no profiler at all (the phases are labels only; not called \
                 measurable): differences of that size are not resolved by these processes, so a verdict here of \
                 {pct:.2}% or less is suspect"
            ))
        } else {
            None
        }
    }
}
