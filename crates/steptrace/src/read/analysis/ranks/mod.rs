//! A run of several ranks, read together: each rank's own [`Report`], and
//! the ranks compared step by step.
//!
//! Each file says its rank in `distributedInfo` (steptrace's rank files
//! and torch.profiler's distributed traces alike). Before any figure,
//! [`check_ranks`] refuses claims that cannot hold (a rank beyond the world
//! size, ranks of different runs, one rank twice in a cycle) and warns of
//! ranks without a file. For every step that all ranks recorded in their
//! steady state, each rank's figures are:
//!
//! - **step**: its `ProfilerStep#N` wall time;
//! - **collective**: the time its threads spent in collectives (spans
//!   [`is_collective`](crate::format::names::is_collective) accepts) inside
//!   the step: mostly waiting for the other ranks; "not observed" (never
//!   zero) when the rank has no such span;
//! - **work**: step less collective, what the rank itself needed. In a
//!   synchronised step every rank's step time comes out alike, since the
//!   fast ranks wait in the collective for the slow one: the step time
//!   cannot tell the slow rank, its work can;
//! - **device busy**: the union of its device's kernels and copies, when
//!   the trace holds device activity.
//!
//! The slowest rank of a step is the one with the most work; its **lag**
//! is its work less the median work of the other ranks. When another rank
//! did as much work (within [`TIE_MS`]), the step is a tie and no rank is
//! its slowest. A rank that is the slowest in at least half the steps, by
//! a lag of at least [`STRAGGLER_MIN_SHARE`] of the median step, is
//! reported as a straggler, with a hypothesis and the next experiment.
//!
//! A step that not every rank recorded is left out of the comparison,
//! with a warning; each rank's own report's warnings are the comparison's
//! too. A warning that several ranks give is said once, naming them
//! (`ranks 0–199: ...`).
//!
//! Per-rank traces show each rank's host and device and where the ranks
//! wait for each other. They do not show the link between devices (NVLink,
//! PCIe, the network between nodes): a collective's time is waiting and
//! transfer together.

mod check;
mod straggler;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::hypotheses::Hypothesis;
use super::input::{LoadedTrace, ReportSource};
use super::loaded::Loaded;
use super::report::build_parts;
use super::spans::{union_length, Span};
use super::stats::Stats;
use super::{Report, ReportError, ReportOptions};
use crate::format::names::{is_collective, is_input};
use crate::format::DistributedInfo;
use crate::read::reader::Trace;

pub use check::{check_ranks, RankCheck};
pub use straggler::{Straggler, STRAGGLER_MIN_SHARE};

/// The ranks of one run, compared: which rank is slow, and whether every
/// rank ran the same steps of the same run.
#[derive(Clone, Debug, Serialize)]
pub struct RankReport {
    /// How many ranks the run had (from `distributedInfo`).
    pub world_size: u32,
    /// What connected them, as the files say.
    pub backend: Option<String>,
    /// Each rank's figures, in rank order.
    pub ranks: Vec<RankSummary>,
    /// Each compared step, in order.
    pub steps: Vec<RankStep>,
    /// Whether the steps compared are steady ones (else every common step
    /// is compared, startup included, and a note says so).
    pub steady_only: bool,
    /// Whether every rank's steps hold collective spans; if not, why the
    /// waiting is not observed.
    pub collective_not_observed: Option<String>,
    /// The persistently slowest rank, when there is one.
    pub straggler: Option<Straggler>,
    /// Possibilities, each with evidence and a next experiment.
    pub hypotheses: Vec<Hypothesis>,
    /// What is wrong with the input.
    pub warnings: Vec<String>,
    /// Other remarks.
    pub notes: Vec<String>,
    /// Each rank's own report, in rank order.
    pub reports: Vec<Report>,
}

/// One rank's figures over the compared steps.
#[derive(Clone, Debug, Serialize)]
pub struct RankSummary {
    /// The rank.
    pub rank: u32,
    /// Its files.
    pub files: Vec<String>,
    /// Step time, ms.
    pub step_ms: Option<Stats>,
    /// Step less collective, ms.
    pub work_ms: Option<Stats>,
    /// In collectives, ms per step; `None`: not observed.
    pub collective_ms: Option<Stats>,
    /// The step thread reading input, ms per step; `None`: not observed.
    pub input_ms: Option<Stats>,
    /// Its device busy, ms per step; `None`: not observed.
    pub device_busy_ms: Option<Stats>,
    /// Why the device is not observed, when it is not.
    pub device_not_observed: Option<String>,
    /// Steps in which it alone was the slowest (a tie counts for no rank).
    pub slowest_steps: usize,
}

/// One step, across the ranks.
#[derive(Clone, Debug, Serialize)]
pub struct RankStep {
    /// `N` of `ProfilerStep#N`.
    pub step: u64,
    /// Each rank, in rank order.
    pub ranks: Vec<RankCell>,
    /// The rank with the most work (with [`tied`](Self::tied), the lowest
    /// of the ranks that did as much).
    pub slowest: u32,
    /// Whether another rank did as much work as `slowest` (within
    /// [`TIE_MS`]): the step has no single slowest rank, and counts for
    /// none in [`RankSummary::slowest_steps`].
    pub tied: bool,
    /// Its work less the median work of the other ranks, ms.
    pub lag_ms: f64,
}

/// One rank in one step.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankCell {
    /// The rank.
    pub rank: u32,
    /// Step wall time, ms.
    pub step_ms: f64,
    /// Step less collective, ms.
    pub work_ms: f64,
    /// In collectives, ms; `None`: not observed.
    pub collective_ms: Option<f64>,
    /// The step thread reading input, ms; `None`: not observed.
    pub input_ms: Option<f64>,
    /// Device busy, ms; `None`: not observed.
    pub device_busy_ms: Option<f64>,
}

/// The rank a trace belongs to: its `distributedInfo`, else steptrace's
/// metadata, else a `rank<N>` in its file name (world size unknown, 0).
#[must_use]
pub fn rank_of(path: &str, trace: &(impl ReportSource + ?Sized)) -> Option<DistributedInfo> {
    let trace = trace.trace();
    DistributedInfo::from_top_level(&trace.metadata)
        .or_else(|| trace.steptrace().ok().flatten().and_then(|s| s.distributed().cloned()))
        .or_else(|| rank_in_name(path).map(|rank| DistributedInfo::new("", rank, 0)))
}

/// `N` of the first `rank<N>` (or `rank_<N>`, `rank-<N>`) in the file name.
fn rank_in_name(path: &str) -> Option<u32> {
    let name = path.rsplit(['/', '\\']).next()?.to_ascii_lowercase();
    name.match_indices("rank").find_map(|(at, _)| {
        let rest = name[at + 4..].trim_start_matches(['_', '-']);
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    })
}

impl RankReport {
    /// Whether `files` hold more than one rank: then they are reported
    /// with [`RankReport::build`] rather than [`Report::build`].
    #[must_use]
    pub fn applies<T: ReportSource>(files: &[(String, T)]) -> bool {
        let mut ranks = files.iter().filter_map(|(p, t)| rank_of(p, t)).map(|i| i.rank);
        ranks.next().is_some_and(|first| ranks.any(|r| r != first))
    }

    /// Reports each rank's files, then compares the ranks.
    ///
    /// # Errors
    ///
    /// When no file is given, the files' ranks cannot hold ([`check_ranks`]:
    /// a rank beyond the world size, different runs, one rank twice in a
    /// cycle, a file without a rank among files with one), or a rank's
    /// files fail [`Report::build`] (unreadable metadata).
    pub fn build(files: &[(String, Trace)], options: &ReportOptions) -> Result<RankReport, ReportError> {
        let loaded = files.iter().map(|(path, trace)| (path.clone(), LoadedTrace::of(trace))).collect();
        RankReport::build_loaded(loaded, options)
    }

    /// Reports each rank's files, then compares the ranks, as
    /// [`build`](Self::build) does, from files read as [`LoadedTrace`]s,
    /// which it consumes.
    ///
    /// # Errors
    ///
    /// As for [`build`](Self::build).
    pub fn build_loaded(files: Vec<(String, LoadedTrace)>, options: &ReportOptions) -> Result<RankReport, ReportError> {
        if files.is_empty() {
            return Err(ReportError::NoTrace);
        }
        let check = check_ranks(&files)?;
        let mut by_rank: BTreeMap<u32, Vec<(String, LoadedTrace)>> = BTreeMap::new();
        let mut backends = Vec::new();
        for (path, trace) in files {
            let info = rank_of(&path, &trace).ok_or_else(|| ReportError::NoRank { path: path.clone() })?;
            if !info.backend.is_empty() {
                backends.push(info.backend.clone());
            }
            by_rank.entry(info.rank).or_default().push((path, trace));
        }
        let mut warnings = check.warnings.clone();
        let mut notes = Vec::new();
        warnings.extend(check.missing_warning("the comparison covers the ranks given only"));
        let world_size = check.world_size.max(check.ranks.iter().next_back().map_or(0, |r| r.saturating_add(1)));
        backends.sort();
        backends.dedup();

        let mut reports = Vec::new();
        let mut lanes = Vec::new();
        let mut own = Vec::new();
        for (rank, rank_files) in by_rank {
            let paths: Vec<String> = rank_files.iter().map(|(p, _)| p.clone()).collect();
            let (report, loaded) = build_parts(rank_files, options)?;
            // What each rank's own report says of its files, here too.
            own.extend(report.warnings.iter().map(|w| (rank, w.clone())));
            lanes.push(Lane::of(rank, paths, &loaded, &report));
            reports.push(report);
        }
        // One line per message, however many ranks say it.
        warnings.extend(by_message(own, ": "));
        warnings.extend(by_message(left_out(&lanes), " "));
        let (keys, steady_only) = common_steps(&lanes);
        if !steady_only && !keys.is_empty() {
            notes.push(
                "no step is steady on every rank: the comparison includes startup steps (compilation and autotune \
                 differ between ranks)"
                    .into(),
            );
        }
        if keys.is_empty() {
            notes.push("the ranks share no recorded step: nothing to compare step by step".into());
        }
        let steps: Vec<RankStep> = keys.iter().map(|&step| compare_step(step, &lanes)).collect();
        let collective_not_observed = lanes
            .iter()
            .find(|l| !l.collective_seen)
            .map(|l| format!("rank {}'s steps hold no collective span (all-reduce, NCCL): its waiting for the other ranks is not observed, and its work is its whole step", l.rank));
        let ranks: Vec<RankSummary> =
            lanes.iter().zip(&reports).map(|(lane, report)| summary(lane, report, &steps)).collect();
        let straggler = straggler::find(&ranks, &steps);
        let hypotheses = straggler.iter().map(|s| straggler::hypothesis(s, &ranks)).collect();
        if straggler.is_none() && steps.len() > 1 && ranks.len() > 1 {
            notes.push(format!(
                "no straggler: no rank is the slowest in at least half of the {} steps by {:.0}% of a step or more",
                steps.len(),
                STRAGGLER_MIN_SHARE * 100.0
            ));
        }
        notes.push(
            "per-rank traces show each rank's host and device and where ranks wait for each other; they do not show \
             the link between devices or nodes: a collective's time is waiting and transfer together"
                .into(),
        );
        Ok(RankReport {
            world_size,
            backend: (!backends.is_empty()).then(|| backends.join(", ")),
            ranks,
            steps,
            steady_only,
            collective_not_observed,
            straggler,
            hypotheses,
            warnings,
            notes,
            reports,
        })
    }
}

/// What one rank's files give per step.
struct Lane {
    rank: u32,
    files: Vec<String>,
    /// Each recorded step's figures, by step number.
    steps: BTreeMap<u64, LaneStep>,
    collective_seen: bool,
    input_seen: bool,
}

#[derive(Clone, Copy)]
struct LaneStep {
    startup: bool,
    step_ms: f64,
    collective_ms: f64,
    input_ms: f64,
    device_busy_ms: Option<f64>,
}

impl Lane {
    fn of(rank: u32, files: Vec<String>, loaded: &[Loaded], report: &Report) -> Lane {
        // Only the spans the figures read, once per file: collectives, and input spans.
        let picked: Vec<(Vec<&Span>, Vec<&Span>)> = loaded
            .iter()
            .map(|l| {
                let spans = l.spans.spans.iter();
                spans.filter(|s| is_collective(&s.name) || is_input(&s.name)).partition(|s| is_collective(&s.name))
            })
            .collect();
        let device = report.device.devices.iter().max_by(|a, b| a.busy_ms.median.total_cmp(&b.busy_ms.median));
        let mut collective_seen = false;
        let mut input_seen = false;
        let mut steps = BTreeMap::new();
        for row in &report.timing.steps {
            let Some((collectives, inputs)) = picked.get(row.source) else { continue };
            // The union of `spans` within the step, ms; whether any was there.
            let within = |spans: &mut dyn Iterator<Item = &Span>| {
                let parts: Vec<(f64, f64)> = spans
                    .filter(|s| s.end > row.start && s.start < row.end)
                    .map(|s| (s.start.max(row.start), s.end.min(row.end)))
                    .collect();
                (!parts.is_empty(), union_length(parts) / 1000.0)
            };
            let (has_collective, collective_ms) = within(&mut collectives.iter().copied());
            let (has_input, input_ms) = within(&mut inputs.iter().copied().filter(|s| s.thread == row.thread));
            collective_seen |= has_collective;
            input_seen |= has_input;
            let device_busy_ms = device.and_then(|d| d.steps.iter().find(|s| s.step == row.step)).map(|s| s.busy_ms);
            steps.insert(
                row.step,
                LaneStep { startup: row.startup, step_ms: row.ms, collective_ms, input_ms, device_busy_ms },
            );
        }
        Lane { rank, files, steps, collective_seen, input_seen }
    }
}

/// For each rank whose recorded steps are not all compared, what it lost:
/// a step another rank did not record cannot be compared.
fn left_out(lanes: &[Lane]) -> Vec<(u32, String)> {
    let Some((first, others)) = lanes.split_first() else { return Vec::new() };
    let common: BTreeSet<u64> =
        first.steps.keys().copied().filter(|k| others.iter().all(|l| l.steps.contains_key(k))).collect();
    let mut out = Vec::new();
    for lane in lanes {
        let alone: Vec<u64> = lane.steps.keys().copied().filter(|k| !common.contains(k)).collect();
        if alone.is_empty() {
            continue;
        }
        let shown: Vec<String> = alone.iter().take(8).map(|s| format!("#{s}")).collect();
        out.push((
            lane.rank,
            format!(
                "recorded {} step(s) that not every rank recorded ({}{}): left out of the comparison",
                alone.len(),
                shown.join(", "),
                if alone.len() > 8 { ", …" } else { "" }
            ),
        ));
    }
    out
}

/// `(rank, message)` pairs as one line per message, in the order first
/// said: `rank 3{joint}MESSAGE`, `ranks 0, 2{joint}MESSAGE`, `ranks
/// 0–199{joint}MESSAGE`. A run of 200 ranks that all say one thing says it
/// once.
fn by_message(pairs: Vec<(u32, String)>, joint: &str) -> Vec<String> {
    let mut groups: Vec<(String, Vec<u32>)> = Vec::new();
    for (rank, message) in pairs {
        match groups.iter_mut().find(|(m, _)| *m == message) {
            Some((_, ranks)) => ranks.push(rank),
            None => groups.push((message, vec![rank])),
        }
    }
    groups.into_iter().map(|(message, ranks)| format!("{}{joint}{message}", ranks_text(&ranks))).collect()
}

/// `rank 3`, `ranks 0, 2`, `ranks 0–3, 7`: `ranks` (in order) with
/// consecutive ones as a range.
fn ranks_text(ranks: &[u32]) -> String {
    let word = if ranks.len() == 1 { "rank" } else { "ranks" };
    format!("{word} {}", spans_text(&spans(ranks.iter().copied())))
}

/// Ranks in order as inclusive ranges of consecutive ones.
fn spans(ranks: impl IntoIterator<Item = u32>) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for r in ranks {
        match out.last_mut() {
            Some((_, end)) if end.checked_add(1) == Some(r) => *end = r,
            _ => out.push((r, r)),
        }
    }
    out
}

/// `0–3, 5, 7, 8`: inclusive ranges of ranks, a range of three or more
/// with a dash.
fn spans_text(spans: &[(u32, u32)]) -> String {
    let parts: Vec<String> = spans
        .iter()
        .map(|&(a, b)| match b.saturating_sub(a) {
            0 => a.to_string(),
            1 => format!("{a}, {b}"),
            _ => format!("{a}–{b}"),
        })
        .collect();
    parts.join(", ")
}

/// The steps every rank recorded, steady on every rank when there are
/// such steps (then `true`), else all common ones.
fn common_steps(lanes: &[Lane]) -> (Vec<u64>, bool) {
    let Some(first) = lanes.first() else { return (Vec::new(), true) };
    let common: Vec<u64> =
        first.steps.keys().copied().filter(|k| lanes.iter().all(|l| l.steps.contains_key(k))).collect();
    let steady: Vec<u64> =
        common.iter().copied().filter(|k| lanes.iter().all(|l| l.steps.get(k).is_some_and(|s| !s.startup))).collect();
    if steady.is_empty() {
        (common, false)
    } else {
        (steady, true)
    }
}

fn compare_step(step: u64, lanes: &[Lane]) -> RankStep {
    let cells: Vec<RankCell> = lanes
        .iter()
        .filter_map(|l| {
            let s = l.steps.get(&step)?;
            let collective = l.collective_seen.then_some(s.collective_ms);
            Some(RankCell {
                rank: l.rank,
                step_ms: s.step_ms,
                work_ms: s.step_ms - collective.unwrap_or(0.0),
                collective_ms: collective,
                input_ms: l.input_seen.then_some(s.input_ms),
                device_busy_ms: s.device_busy_ms,
            })
        })
        .collect();
    // The lowest rank of those with the most work.
    let top = cells.iter().rev().max_by(|a, b| a.work_ms.total_cmp(&b.work_ms));
    let (slowest, top_ms) = top.map_or((0, 0.0), |c| (c.rank, c.work_ms));
    let tied = cells.iter().any(|c| c.rank != slowest && top_ms - c.work_ms <= TIE_MS);
    let lag_ms = lag(&cells, slowest);
    RankStep { step, ranks: cells, slowest, tied, lag_ms }
}

/// Ranks whose work in a step is within this many ms of the slowest
/// rank's (1 µs, a trace's resolution) tie with it: identical ranks have
/// no slowest.
pub const TIE_MS: f64 = 0.001;

/// `rank`'s work less the median work of the other ranks of the step (0
/// for a rank alone).
pub(crate) fn lag(cells: &[RankCell], rank: u32) -> f64 {
    let Some(own) = cells.iter().find(|c| c.rank == rank) else { return 0.0 };
    let others: Vec<f64> = cells.iter().filter(|c| c.rank != rank).map(|c| c.work_ms).collect();
    super::stats::median(&others).map_or(0.0, |m| own.work_ms - m)
}

fn summary(lane: &Lane, report: &Report, steps: &[RankStep]) -> RankSummary {
    let cells: Vec<&RankCell> = steps.iter().filter_map(|s| s.ranks.iter().find(|c| c.rank == lane.rank)).collect();
    let of = |f: &dyn Fn(&RankCell) -> Option<f64>| -> Option<Stats> {
        let values: Option<Vec<f64>> = cells.iter().map(|c| f(c)).collect();
        values.and_then(|v| Stats::of(&v))
    };
    let device_busy_ms = of(&|c| c.device_busy_ms);
    RankSummary {
        rank: lane.rank,
        files: lane.files.clone(),
        step_ms: of(&|c| Some(c.step_ms)),
        work_ms: of(&|c| Some(c.work_ms)),
        collective_ms: of(&|c| c.collective_ms),
        input_ms: of(&|c| c.input_ms),
        device_not_observed: device_busy_ms.is_none().then(|| {
            report
                .device
                .not_observed_reason
                .clone()
                .unwrap_or_else(|| "the trace holds no device events in these steps".into())
        }),
        device_busy_ms,
        slowest_steps: steps.iter().filter(|s| !s.tied && s.slowest == lane.rank).count(),
    }
}

#[cfg(test)]
mod tests {
    use super::{by_message, rank_in_name, ranks_text};

    #[test]
    fn what_several_ranks_say_is_said_once() {
        let pairs = |ranks: &[u32], m: &str| ranks.iter().map(|&r| (r, m.to_owned())).collect::<Vec<_>>();
        let mut said = pairs(&(0..200).collect::<Vec<_>>(), "x");
        said.extend(pairs(&[3], "y"));
        said.extend(pairs(&[0, 1, 2, 5, 7, 8], "z"));
        assert_eq!(by_message(said, ": "), ["ranks 0–199: x", "rank 3: y", "ranks 0–2, 5, 7, 8: z"]);
        assert_eq!(ranks_text(&[4, 5]), "ranks 4, 5");
    }

    #[test]
    fn ranks_read_from_file_names() {
        assert_eq!(rank_in_name("run/ddp.rank3-of-4.cycle0.trace.json"), Some(3));
        assert_eq!(rank_in_name("out/worker_rank_12.json"), Some(12));
        assert_eq!(rank_in_name("rank/trace.json"), None);
        assert_eq!(rank_in_name("ranking.json"), None);
    }
}
