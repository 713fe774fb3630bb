//! Where each step of an overhead bench lies in its schedule: its
//! [`Phase`], the steps labelled ([`label_steps`]), and how many measured
//! steps each phase gets ([`PhaseCounts`]). See the [phases](super#phases)
//! of the method.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::collect::{Action, Schedule};

/// Where a step lies in the schedule. See the [phases](super#phases) of
/// the method.
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
        // Counted by cycles, not step by step: any step count is quick.
        let (a, b) = (below(schedule, measured.start), below(schedule, measured.end.max(measured.start)));
        PhaseCounts { wait: b[0] - a[0], warmup: b[1] - a[1], active: b[2] - a[2] }
    }

    /// Wait, warmup and active steps together.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.wait.saturating_add(self.warmup).saturating_add(self.active)
    }

    /// What to say when some of the `measured` steps fall in no phase (after
    /// the last of `repeat` cycles): they are left out of every figure.
    ///
    /// # Examples
    ///
    /// ```
    /// use steptrace::bench::PhaseCounts;
    ///
    /// let s: steptrace::Schedule = "skip_first=20,wait=2,active=1,repeat=1".parse()?;
    /// let w = PhaseCounts::warning(&s, 20..320).unwrap();
    /// assert!(w.starts_with("297 of the 300 measured steps fall after the schedule's last cycle"), "{w}");
    /// let endless: steptrace::Schedule = "skip_first=20,wait=2,active=1".parse()?;
    /// assert_eq!(PhaseCounts::warning(&endless, 20..320), None);
    /// # Ok::<(), steptrace::ScheduleError>(())
    /// ```
    #[must_use]
    pub fn warning(schedule: &Schedule, measured: Range<u64>) -> Option<String> {
        let steps = measured.end.saturating_sub(measured.start);
        let outside = steps - PhaseCounts::of(schedule, measured).total().min(steps);
        (outside > 0).then(|| {
            format!(
                "{outside} of the {steps} measured steps fall after the schedule's last cycle (repeat={}) and in no \
                 phase: no figure counts them; drop repeat from --schedule so that the cycles cover every measured step",
                schedule.repeat()
            )
        })
    }
}

/// Wait, warmup and active steps among steps `0..n` under `schedule`, as
/// [`Phase::of`] places them.
fn below(schedule: &Schedule, n: u64) -> [u64; 3] {
    let Some(steps) = n.checked_sub(schedule.skip_first()).filter(|&k| k > 0) else { return [0; 3] };
    let (wait, warmup, active) =
        (u128::from(schedule.wait()), u128::from(schedule.warmup()), u128::from(schedule.active()));
    let len = (wait + warmup + active).max(1);
    // Positions in the cycles, as the schedule counts them.
    let start = if schedule.skip_first_wait() { wait } else { 0 };
    let mut end = start + u128::from(steps);
    if schedule.repeat() > 0 {
        end = end.min(u128::from(schedule.repeat()) * len);
    }
    // Positions in 0..p whose place in their cycle lies in from..from + width.
    let upto = |p: u128, from: u128, width: u128| (p / len) * width + (p % len).saturating_sub(from).min(width);
    let count = |from: u128, width: u128| {
        let n = upto(end.max(start), from, width) - upto(start, from, width);
        u64::try_from(n).unwrap_or(u64::MAX)
    };
    [count(0, wait), count(wait, warmup), count(wait + warmup, active)]
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
