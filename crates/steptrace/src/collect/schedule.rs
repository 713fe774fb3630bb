//! The profiling schedule: which steps are skipped, warmed up and recorded.
//!
//! [`Schedule`] follows `torch.profiler.schedule(wait, warmup, active, repeat,
//! skip_first, skip_first_wait)` step for step:
//!
//! - the first `skip_first` steps do nothing ([`Action::None`]);
//! - then cycles of `wait + warmup + active` steps follow: `wait` steps of
//!   [`Action::None`], `warmup` steps of [`Action::Warmup`], then `active`
//!   steps of [`Action::Record`], the last of which is
//!   [`Action::RecordAndSave`]: the cycle's trace file is written when that
//!   step ends;
//! - `repeat` bounds the number of cycles (`0` means no bound);
//! - `skip_first_wait` drops the wait phase of the first cycle only.
//!
//! Steps are numbered from 0, like torch's `ProfilerStep#N`.
//!
//! [`Schedule::on_demand`] (`"on-demand"`) records nothing by itself: every
//! step is [`Action::None`] until someone asks the running process for a
//! capture (see [`capture`](crate::collect::capture)); each capture is then a cycle
//! of `warmup` and `active` steps.
//!
//! # Examples
//!
//! ```
//! use steptrace::{Action, Schedule};
//!
//! let schedule: Schedule = "wait=1,warmup=1,active=2,repeat=1".parse()?;
//! let actions: Vec<Action> = (0..5).map(|step| schedule.action(step)).collect();
//! assert_eq!(
//!     actions,
//!     [Action::None, Action::Warmup, Action::Record, Action::RecordAndSave, Action::None]
//! );
//! # Ok::<(), steptrace::ScheduleError>(())
//! ```

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// What the profiler does during one step.
///
/// See the [module documentation](crate::collect::schedule) for how a [`Schedule`]
/// maps steps to actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Nothing is collected: spans take the cheapest path.
    None,
    /// The collector runs but what it collects is discarded, so that its
    /// start-up cost stays out of the recorded window.
    Warmup,
    /// Spans are kept.
    Record,
    /// Spans are kept, and the cycle's trace is saved when this step ends.
    RecordAndSave,
}

impl Action {
    /// Whether spans of a step with this action end up in a trace file.
    pub fn records(self) -> bool {
        matches!(self, Action::Record | Action::RecordAndSave)
    }

    /// Whether the collector runs during a step with this action
    /// (warmup or recording).
    pub fn collects(self) -> bool {
        !matches!(self, Action::None)
    }

    pub(crate) fn to_u8(self) -> u8 {
        match self {
            Action::None => 0,
            Action::Warmup => 1,
            Action::Record => 2,
            Action::RecordAndSave => 3,
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::None => "none",
            Action::Warmup => "warmup",
            Action::Record => "record",
            Action::RecordAndSave => "record_and_save",
        })
    }
}

/// A schedule with torch.profiler's semantics.
///
/// Build one with [`Schedule::new`] or parse it from a string such as
/// `"skip_first=2,wait=1,warmup=1,active=3,repeat=2"`. See the
/// [module documentation](crate::collect::schedule).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Schedule {
    skip_first: u64,
    wait: u64,
    warmup: u64,
    active: u64,
    repeat: u64,
    skip_first_wait: bool,
    on_demand: bool,
}

/// An invalid schedule, or a schedule string that could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// `active` was zero: a schedule must record at least one step per cycle.
    #[error("invalid schedule: active must be at least 1 (got active=0)")]
    ZeroActive,
    /// A `key=value` pair named a key that schedules do not have.
    #[error(
        "invalid schedule: unknown key `{key}` (valid keys: skip_first, wait, warmup, active, repeat, skip_first_wait)"
    )]
    UnknownKey {
        /// The unknown key as written.
        key: String,
    },
    /// A key's value was not a non-negative integer.
    #[error("invalid schedule: `{key}` must be a non-negative integer, got `{value}`")]
    BadValue {
        /// The key whose value is wrong.
        key: String,
        /// The value as written.
        value: String,
    },
    /// A part of the string was not of the form `key=value`.
    #[error("invalid schedule: expected `key=value`, got `{part}`")]
    NotKeyValue {
        /// The offending part of the string.
        part: String,
    },
    /// A key was given twice.
    #[error("invalid schedule: `{key}` is given more than once")]
    Duplicate {
        /// The repeated key.
        key: String,
    },
    /// An on-demand schedule named a key other than `warmup` and `active`.
    #[error("invalid schedule: `{key}` does not apply to an on-demand schedule (it takes warmup and active only: \"on-demand,warmup=1,active=3\")")]
    OnDemandKey {
        /// The key as written.
        key: String,
    },
    /// `active` was not given.
    #[error("invalid schedule: `active` is required (e.g. \"wait=1,warmup=1,active=2\")")]
    MissingActive,
    /// `wait + warmup + active` does not fit in a step count.
    #[error("invalid schedule: `{key}`={value} makes a cycle (wait + warmup + active) longer than {} steps", u64::MAX)]
    Overflow {
        /// The key whose value overflowed the cycle length.
        key: &'static str,
        /// Its value.
        value: u64,
    },
}

impl Schedule {
    /// A schedule of endless cycles of `wait`, `warmup` and `active` steps,
    /// with no steps skipped first.
    ///
    /// `active` must be at least 1. A `warmup` of 0 is allowed but
    /// [`warning`](Schedule::warning) then explains why it skews results.
    ///
    /// # Examples
    ///
    /// ```
    /// let schedule = steptrace::Schedule::new(1, 1, 2)?.with_repeat(3);
    /// assert_eq!(schedule.cycle_len(), 4);
    /// assert!(steptrace::Schedule::new(1, 1, 0).is_err());
    /// # Ok::<(), steptrace::ScheduleError>(())
    /// ```
    pub fn new(wait: u64, warmup: u64, active: u64) -> Result<Schedule, ScheduleError> {
        if active == 0 {
            return Err(ScheduleError::ZeroActive);
        }
        // The cycle length must be a step count: name the value that tips it
        // over (the largest of the three).
        if wait.checked_add(warmup).and_then(|n| n.checked_add(active)).is_none() {
            let (key, value) = [("wait", wait), ("warmup", warmup), ("active", active)]
                .into_iter()
                .max_by_key(|&(_, v)| v)
                .unwrap_or(("active", active));
            return Err(ScheduleError::Overflow { key, value });
        }
        Ok(Schedule { skip_first: 0, wait, warmup, active, repeat: 0, skip_first_wait: false, on_demand: false })
    }

    /// A schedule that records only when asked: every step is
    /// [`Action::None`] until a capture is requested (see
    /// [`capture`](crate::collect::capture)); a capture is then `warmup` steps and
    /// `active` steps (a request may ask for another number of active
    /// steps). `active` must be at least 1.
    ///
    /// # Examples
    ///
    /// ```
    /// let schedule = steptrace::Schedule::on_demand(1, 3)?;
    /// assert!(schedule.is_on_demand());
    /// assert_eq!(schedule.action(0), steptrace::Action::None);
    /// assert_eq!(schedule.to_string(), "on-demand,warmup=1,active=3");
    /// assert_eq!(schedule, "on-demand".parse()?);
    /// # Ok::<(), steptrace::ScheduleError>(())
    /// ```
    pub fn on_demand(warmup: u64, active: u64) -> Result<Schedule, ScheduleError> {
        let mut schedule = Schedule::new(0, warmup, active)?;
        schedule.on_demand = true;
        Ok(schedule)
    }

    /// Whether the schedule records only when asked ([`Schedule::on_demand`]).
    pub fn is_on_demand(&self) -> bool {
        self.on_demand
    }

    /// Sets how many cycles run (`0`: no bound).
    pub fn with_repeat(mut self, repeat: u64) -> Schedule {
        self.repeat = repeat;
        self
    }

    /// Sets how many steps are skipped before the first cycle.
    pub fn with_skip_first(mut self, skip_first: u64) -> Schedule {
        self.skip_first = skip_first;
        self
    }

    /// Drops the wait phase of the first cycle.
    pub fn with_skip_first_wait(mut self, skip_first_wait: bool) -> Schedule {
        self.skip_first_wait = skip_first_wait;
        self
    }

    /// Steps skipped before the first cycle.
    pub fn skip_first(&self) -> u64 {
        self.skip_first
    }
    /// Steps of [`Action::None`] at the start of each cycle.
    pub fn wait(&self) -> u64 {
        self.wait
    }
    /// Steps of [`Action::Warmup`] in each cycle.
    pub fn warmup(&self) -> u64 {
        self.warmup
    }
    /// Recorded steps in each cycle.
    pub fn active(&self) -> u64 {
        self.active
    }
    /// Number of cycles, `0` for no bound.
    pub fn repeat(&self) -> u64 {
        self.repeat
    }
    /// Whether the first cycle's wait phase is dropped.
    pub fn skip_first_wait(&self) -> bool {
        self.skip_first_wait
    }

    /// Steps in one cycle: `wait + warmup + active` ([`Schedule::new`]
    /// refuses a sum that does not fit).
    pub fn cycle_len(&self) -> u64 {
        self.wait.saturating_add(self.warmup).saturating_add(self.active)
    }

    /// A warning about this schedule, if it has a known weakness.
    ///
    /// Like torch.profiler, a schedule without warmup is accepted with a
    /// warning: the collector's own start-up then lands in the first
    /// recorded step.
    pub fn warning(&self) -> Option<&'static str> {
        if self.on_demand && self.warmup == 0 {
            return Some("on-demand schedule has warmup=0: the collector's start-up cost will land in each capture's first recorded step");
        }
        (self.warmup == 0).then_some(
            "schedule has warmup=0: the collector's start-up cost will land in the first recorded step and skew it",
        )
    }

    /// The action for step `step` (numbered from 0).
    ///
    /// This is torch.profiler's `schedule_fn`, step for step.
    pub fn action(&self, step: u64) -> Action {
        self.position(step).map_or(Action::None, |p| p.action)
    }

    /// The cycle that step `step` belongs to, if it warms up or records.
    pub fn cycle_of(&self, step: u64) -> Option<u64> {
        self.position(step).map(|p| p.cycle)
    }

    /// The steps that the schedule records, among the first `steps` steps,
    /// grouped by cycle in order.
    ///
    /// # Examples
    ///
    /// ```
    /// let schedule: steptrace::Schedule = "wait=1,warmup=1,active=2,repeat=2".parse()?;
    /// assert_eq!(schedule.recorded_cycles(10), vec![vec![2, 3], vec![6, 7]]);
    /// # Ok::<(), steptrace::ScheduleError>(())
    /// ```
    pub fn recorded_cycles(&self, steps: u64) -> Vec<Vec<u64>> {
        let mut cycles: Vec<(u64, Vec<u64>)> = Vec::new();
        for step in 0..steps {
            let Some(p) = self.position(step) else { continue };
            if !p.action.records() {
                continue;
            }
            match cycles.last_mut() {
                Some((cycle, list)) if *cycle == p.cycle => list.push(step),
                _ => cycles.push((p.cycle, vec![step])),
            }
        }
        cycles.into_iter().map(|(_, list)| list).collect()
    }

    fn position(&self, step: u64) -> Option<Position> {
        if self.on_demand || step < self.skip_first {
            return None;
        }
        // u128: `step + wait` and the phase bounds cannot overflow, however
        // large the schedule's values.
        let mut step = u128::from(step - self.skip_first);
        let (wait, warmup) = (u128::from(self.wait), u128::from(self.warmup));
        if self.skip_first_wait {
            step += wait;
        }
        let len = u128::from(self.cycle_len());
        let cycle = step / len;
        if self.repeat > 0 && cycle >= u128::from(self.repeat) {
            return None;
        }
        let m = step % len;
        let action = if m < wait {
            Action::None
        } else if m < wait + warmup {
            Action::Warmup
        } else if m < len - 1 {
            Action::Record
        } else {
            Action::RecordAndSave
        };
        Some(Position { cycle: u64::try_from(cycle).unwrap_or(u64::MAX), action })
    }
}

struct Position {
    cycle: u64,
    action: Action,
}

impl fmt::Display for Schedule {
    /// Writes the schedule in the form that [`FromStr`] parses.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.on_demand {
            return write!(f, "{ON_DEMAND},warmup={},active={}", self.warmup, self.active);
        }
        write!(
            f,
            "skip_first={},wait={},warmup={},active={},repeat={}",
            self.skip_first, self.wait, self.warmup, self.active, self.repeat
        )?;
        if self.skip_first_wait {
            f.write_str(",skip_first_wait=1")?;
        }
        Ok(())
    }
}

impl FromStr for Schedule {
    type Err = ScheduleError;

    /// Parses `key=value` pairs separated by commas (spaces allowed).
    ///
    /// Keys: `skip_first`, `wait`, `warmup`, `active` (required), `repeat`,
    /// `skip_first_wait` (`0`/`1`/`true`/`false`). Missing keys default to 0.
    fn from_str(s: &str) -> Result<Schedule, ScheduleError> {
        if let Some(rest) = s.trim().strip_prefix(ON_DEMAND) {
            return on_demand_from_str(rest);
        }
        let mut values: [Option<u64>; 6] = [None; 6];
        const KEYS: [&str; 6] = ["skip_first", "wait", "warmup", "active", "repeat", "skip_first_wait"];
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) =
                part.split_once('=').ok_or_else(|| ScheduleError::NotKeyValue { part: part.to_owned() })?;
            let (key, value) = (key.trim(), value.trim());
            let index =
                KEYS.iter().position(|k| *k == key).ok_or_else(|| ScheduleError::UnknownKey { key: key.to_owned() })?;
            let parsed = match (key, value) {
                ("skip_first_wait", "true") => Some(1),
                ("skip_first_wait", "false") => Some(0),
                (_, v) => v.parse::<u64>().ok(),
            }
            .ok_or_else(|| ScheduleError::BadValue { key: key.to_owned(), value: value.to_owned() })?;
            if values[index].replace(parsed).is_some() {
                return Err(ScheduleError::Duplicate { key: key.to_owned() });
            }
        }
        let get = |i: usize| values[i].unwrap_or(0);
        let active = values[3].ok_or(ScheduleError::MissingActive)?;
        Ok(Schedule::new(get(1), get(2), active)?
            .with_skip_first(get(0))
            .with_repeat(get(4))
            .with_skip_first_wait(get(5) != 0))
    }
}

/// The schedule string of [`Schedule::on_demand`].
const ON_DEMAND: &str = "on-demand";

/// `on-demand` followed by nothing or by `,warmup=W,active=A` (either, any
/// order): by default one warmup step and 3 active steps a capture.
fn on_demand_from_str(rest: &str) -> Result<Schedule, ScheduleError> {
    let rest = rest.trim();
    let rest = match rest.strip_prefix(',') {
        Some(rest) => rest,
        None if rest.is_empty() => rest,
        None => return Err(ScheduleError::NotKeyValue { part: format!("{ON_DEMAND}{rest}") }),
    };
    let (mut warmup, mut active) = (None, None);
    for part in rest.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part.split_once('=').ok_or_else(|| ScheduleError::NotKeyValue { part: part.to_owned() })?;
        let (key, value) = (key.trim(), value.trim());
        let slot = match key {
            "warmup" => &mut warmup,
            "active" => &mut active,
            _ => return Err(ScheduleError::OnDemandKey { key: key.to_owned() }),
        };
        let parsed = value
            .parse::<u64>()
            .map_err(|_| ScheduleError::BadValue { key: key.to_owned(), value: value.to_owned() })?;
        if slot.replace(parsed).is_some() {
            return Err(ScheduleError::Duplicate { key: key.to_owned() });
        }
    }
    Schedule::on_demand(warmup.unwrap_or(1), active.unwrap_or(DEFAULT_CAPTURE_STEPS))
}

/// Active steps of a capture when neither the schedule nor the request says.
pub const DEFAULT_CAPTURE_STEPS: u64 = 3;

#[cfg(test)]
mod tests {
    use super::*;
    use Action::{None as N, Record as R, RecordAndSave as S, Warmup as W};

    /// torch.profiler.schedule's schedule_fn, transcribed literally (float
    /// division included) as an oracle.
    fn torch(skip_first: u64, wait: u64, warmup: u64, active: u64, repeat: u64, sfw: u64, step: u64) -> Action {
        if step < skip_first {
            return N;
        }
        let mut step = (step - skip_first) as f64;
        if sfw != 0 {
            step += wait as f64;
        }
        let num_steps = (wait + warmup + active) as f64;
        if repeat > 0 && step / num_steps >= repeat as f64 {
            return N;
        }
        let mod_step = step % num_steps;
        if mod_step < wait as f64 {
            N
        } else if mod_step < (wait + warmup) as f64 {
            W
        } else if mod_step < num_steps - 1.0 {
            R
        } else {
            S
        }
    }

    #[test]
    fn matches_torch_on_many_tuples() {
        for skip_first in 0..4 {
            for wait in 0..4 {
                for warmup in 0..3 {
                    for active in 1..4 {
                        for repeat in 0..4 {
                            for sfw in 0..2 {
                                let s = Schedule::new(wait, warmup, active)
                                    .unwrap()
                                    .with_skip_first(skip_first)
                                    .with_repeat(repeat)
                                    .with_skip_first_wait(sfw == 1);
                                for step in 0..60 {
                                    assert_eq!(
                                        s.action(step),
                                        torch(skip_first, wait, warmup, active, repeat, sfw, step),
                                        "{s} step {step}"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn known_sequences() {
        let cases: &[(&str, &[Action])] = &[
            ("wait=1,warmup=1,active=2,repeat=1", &[N, W, R, S, N, N]),
            ("wait=0,warmup=0,active=1", &[S, S, S]),
            ("skip_first=2,wait=1,warmup=1,active=1,repeat=2", &[N, N, N, W, S, N, W, S, N]),
            ("wait=2,warmup=1,active=2,repeat=1,skip_first_wait=1", &[W, R, S, N, N]),
        ];
        for (text, expected) in cases {
            let s: Schedule = text.parse().unwrap();
            let got: Vec<Action> = (0..expected.len() as u64).map(|i| s.action(i)).collect();
            assert_eq!(&got, expected, "{text}");
        }
    }

    #[test]
    fn parse_errors_name_the_bad_key() {
        let err = "wait=1,warmpu=1,active=2".parse::<Schedule>().unwrap_err();
        assert_eq!(err, ScheduleError::UnknownKey { key: "warmpu".into() });
        assert!(err.to_string().contains("warmpu"));
        let err = "wait=x,active=2".parse::<Schedule>().unwrap_err();
        assert!(err.to_string().contains("`wait`") && err.to_string().contains("`x`"), "{err}");
        assert_eq!("active=0".parse::<Schedule>().unwrap_err(), ScheduleError::ZeroActive);
        assert_eq!("wait=1".parse::<Schedule>().unwrap_err(), ScheduleError::MissingActive);
        assert!(matches!("wait=1,wait=2,active=1".parse::<Schedule>(), Err(ScheduleError::Duplicate { .. })));
        assert!(matches!("wait 1,active=1".parse::<Schedule>(), Err(ScheduleError::NotKeyValue { .. })));
        assert!(matches!("active=-1".parse::<Schedule>(), Err(ScheduleError::BadValue { .. })));
    }

    #[test]
    fn overflowing_values_are_refused_naming_the_key_and_huge_ones_still_work() {
        let max = u64::MAX;
        let err = format!("wait={max},active=2").parse::<Schedule>().unwrap_err();
        assert_eq!(err, ScheduleError::Overflow { key: "wait", value: max });
        assert!(err.to_string().contains("`wait`"), "{err}");
        let err = format!("warmup=1,active={max}").parse::<Schedule>().unwrap_err();
        assert!(matches!(err, ScheduleError::Overflow { key: "active", .. }), "{err}");
        // Values that fit are fine, at any step.
        let s: Schedule = format!("wait={},warmup=0,active=1,skip_first_wait=1", max - 1).parse().unwrap();
        assert_eq!(s.action(0), S);
        assert_eq!(s.action(max), S);
        let s: Schedule = format!("skip_first={max},active=1").parse().unwrap();
        assert_eq!(s.action(max - 1), N);
        assert_eq!(s.action(max), S);
        let s: Schedule = format!("wait=0,warmup=1,active={}", max - 1).parse().unwrap();
        assert_eq!((s.action(0), s.action(1), s.action(max - 1)), (W, R, S));
    }

    #[test]
    fn display_round_trips_and_warmup_zero_warns() {
        let s: Schedule = " skip_first=3, wait=1 ,warmup=0,active=2,repeat=4,skip_first_wait=true".parse().unwrap();
        assert_eq!(s.to_string().parse::<Schedule>().unwrap(), s);
        assert!(s.warning().is_some());
        assert!("warmup=1,active=1".parse::<Schedule>().unwrap().warning().is_none());
    }

    #[test]
    fn on_demand_records_nothing_by_itself_and_parses_its_two_keys() {
        let s: Schedule = "on-demand".parse().unwrap();
        assert!(s.is_on_demand());
        assert_eq!((s.warmup(), s.active()), (1, DEFAULT_CAPTURE_STEPS));
        assert!((0..100).all(|step| s.action(step) == N && s.cycle_of(step).is_none()));
        assert!(s.recorded_cycles(100).is_empty());
        let s: Schedule = " on-demand , active=5,warmup=0".parse().unwrap();
        assert_eq!((s.warmup(), s.active()), (0, 5));
        assert_eq!(s.to_string().parse::<Schedule>().unwrap(), s);
        assert!(s.warning().unwrap().contains("capture"));
        assert!(!"warmup=1,active=3".parse::<Schedule>().unwrap().is_on_demand());
        let err = |t: &str| t.parse::<Schedule>().unwrap_err();
        assert_eq!(err("on-demand,wait=2"), ScheduleError::OnDemandKey { key: "wait".into() });
        assert_eq!(err("on-demand,active=0"), ScheduleError::ZeroActive);
        assert_eq!(err("on-demand,active=2,active=3"), ScheduleError::Duplicate { key: "active".into() });
        assert!(matches!(err("on-demandx"), ScheduleError::NotKeyValue { .. }));
        assert!(matches!(err("on-demand,active=x"), ScheduleError::BadValue { .. }));
    }

    #[test]
    fn recorded_cycles_groups_by_cycle() {
        let s: Schedule = "wait=0,warmup=0,active=2".parse().unwrap();
        assert_eq!(s.recorded_cycles(5), vec![vec![0, 1], vec![2, 3], vec![4]]);
        assert_eq!(s.cycle_of(3), Some(1));
    }
}
