//! The straggler: a rank the others keep waiting for.

use serde::Serialize;

use super::super::hypotheses::{ms, Hypothesis};
use super::super::stats::Stats;
use super::{lag, RankStep, RankSummary};

/// A rank is a straggler when its median lag is at least this share of
/// the median step (and it is the slowest in at least half the steps).
pub const STRAGGLER_MIN_SHARE: f64 = 0.05;

/// A rank is a straggler when it is the slowest in at least this share of
/// the compared steps.
const STRAGGLER_MIN_STEPS: f64 = 0.5;

/// Another rank's figure this many times the straggler's own counts as
/// "the same"; beyond, it is a difference worth naming.
const SAME: f64 = 1.25;

/// The persistently slowest rank.
#[derive(Clone, Debug, Serialize)]
pub struct Straggler {
    /// The rank.
    pub rank: u32,
    /// Steps in which it was the slowest.
    pub slowest_steps: usize,
    /// Steps compared.
    pub steps: usize,
    /// Per step: its work less the median work of the other ranks, ms.
    pub lag_ms: Stats,
    /// The median lag over the median step time (all ranks).
    pub lag_share: f64,
    /// The other ranks' time in collectives per step (each step's median
    /// over those ranks), ms; `None`: not observed.
    pub others_wait_ms: Option<Stats>,
}

/// The straggler among `ranks`, if one rank is the slowest in at least half
/// of `steps` by at least [`STRAGGLER_MIN_SHARE`] of a step.
pub(super) fn find(ranks: &[RankSummary], steps: &[RankStep]) -> Option<Straggler> {
    if ranks.len() < 2 || steps.is_empty() {
        return None;
    }
    let candidate = ranks.iter().max_by_key(|r| r.slowest_steps)?;
    if (candidate.slowest_steps as f64) < STRAGGLER_MIN_STEPS * steps.len() as f64 {
        return None;
    }
    let lags: Vec<f64> = steps.iter().map(|s| lag(&s.ranks, candidate.rank)).collect();
    let lag_ms = Stats::of(&lags)?;
    let all_steps: Vec<f64> = steps.iter().flat_map(|s| s.ranks.iter().map(|c| c.step_ms)).collect();
    let step = Stats::of(&all_steps)?.median;
    let lag_share = if step > 0.0 { lag_ms.median / step } else { 0.0 };
    if lag_ms.median <= 0.0 || lag_share < STRAGGLER_MIN_SHARE {
        return None;
    }
    let waits: Option<Vec<f64>> = steps
        .iter()
        .map(|s| {
            let others: Option<Vec<f64>> =
                s.ranks.iter().filter(|c| c.rank != candidate.rank).map(|c| c.collective_ms).collect();
            others.and_then(|o| super::super::stats::median(&o))
        })
        .collect();
    Some(Straggler {
        rank: candidate.rank,
        slowest_steps: candidate.slowest_steps,
        steps: steps.len(),
        lag_ms,
        lag_share,
        others_wait_ms: waits.and_then(|w| Stats::of(&w)),
    })
}

/// The median of `pick` over the ranks other than `rank`.
fn others_median(ranks: &[RankSummary], rank: u32, pick: impl Fn(&RankSummary) -> Option<f64>) -> Option<f64> {
    let values: Option<Vec<f64>> = ranks.iter().filter(|r| r.rank != rank).map(&pick).collect();
    values.and_then(|v| super::super::stats::median(&v))
}

/// The straggler as an observation, a hypothesis and the next experiment.
pub(super) fn hypothesis(s: &Straggler, ranks: &[RankSummary]) -> Hypothesis {
    let own = ranks.iter().find(|r| r.rank == s.rank);
    let mut evidence = format!(
        "rank {} was the slowest in {} of {} steps; its work per step (step time less time in collectives) exceeds \
         the other ranks' median by {} (median; p90 {}, max {}), {:.0}% of a step",
        s.rank,
        s.slowest_steps,
        s.steps,
        ms(s.lag_ms.median),
        ms(s.lag_ms.p90),
        ms(s.lag_ms.max),
        s.lag_share * 100.0
    );
    match &s.others_wait_ms {
        Some(w) => {
            evidence.push_str(&format!("; the other ranks wait {} per step in collectives (median)", ms(w.median)))
        }
        None => evidence.push_str("; the ranks' waiting in collectives is not observed (no collective spans)"),
    }

    // Where the extra work sits: input, device, or neither.
    let compare = |pick: &dyn Fn(&RankSummary) -> Option<f64>| {
        let mine = own.and_then(pick)?;
        let theirs = others_median(ranks, s.rank, pick)?;
        Some((mine, theirs))
    };
    let input = compare(&|r| r.input_ms.as_ref().map(|x| x.median));
    let device = compare(&|r| r.device_busy_ms.as_ref().map(|x| x.median));
    let mut causes = Vec::new();
    if let Some((mine, theirs)) = input {
        evidence.push_str(&format!("; its step thread reads input {} per step against {}", ms(mine), ms(theirs)));
        if mine - theirs > 0.5 * s.lag_ms.median && mine > SAME * theirs {
            causes.push(format!("its input pipeline (data loading on rank {})", s.rank));
        }
    }
    if let Some((mine, theirs)) = device {
        evidence.push_str(&format!("; its device is busy {} per step against {}", ms(mine), ms(theirs)));
        if mine - theirs > 0.5 * s.lag_ms.median && mine > SAME * theirs {
            causes.push(
                "its device: more work (an uneven split of the batch) or a slower device (clocks, temperature, \
                 another process on it)"
                    .to_owned(),
            );
        }
    }
    let hypothesis = match causes.as_slice() {
        [] if input.is_none() && device.is_none() => format!(
            "rank {} does more work per step, or runs slower, and every other rank waits for it at each collective",
            s.rank
        ),
        [] => format!(
            "rank {}'s extra time is neither input nor device work: its host side is slower (launch overhead, CPU \
             contention, memory or thread placement), and the other ranks wait for it",
            s.rank
        ),
        found => format!("rank {} is held back by {}; the other ranks wait for it", s.rank, found.join(", and by ")),
    };
    Hypothesis {
        id: "straggler",
        evidence,
        hypothesis,
        next: format!(
            "rerun with rank {}'s device swapped with another rank's in the device list: if the lag moves with the \
             device, the device is slow; if it stays with rank {}, compare that rank's input and host spans with the \
             others'. Confirm outside the profiler: `steptrace bench` on each device alone, same seed, repeated runs",
            s.rank, s.rank
        ),
        experiment: None,
        command: None,
    }
}
