//! What the files say of their ranks, checked before any figure.
//!
//! A file's rank comes from its `distributedInfo` (steptrace's rank files
//! and torch.profiler's alike), from steptrace's `metadata.distributed`
//! (or a partial file's header), else from a `rank<N>` in its name. Claims
//! that cannot hold are refused, naming the file, since every figure of a
//! rank comparison is keyed on them:
//!
//! - a rank at or beyond the world size, or a world size of 0;
//! - `distributedInfo` and `metadata.distributed` naming different ranks
//!   or world sizes;
//! - files that disagree on the world size, or whose clocks start at
//!   different times (steptrace's `clock.epoch_unix_ms`): different runs;
//! - two files claiming the same rank in one cycle (or holding the same
//!   steps of one rank): one of them is not that rank's.
//!
//! What leaves the figures right but incomplete is a warning: ranks of
//! the world size without a file, a `distributedInfo` that is not a rank,
//! a file whose run cannot be told (no steptrace clock, while the others
//! have one).

use std::collections::{BTreeMap, BTreeSet};

use super::super::input::ReportSource;
use super::super::ReportError;
use super::{rank_of, spans, spans_text};
use crate::display::label;
use crate::format::{DistributedInfo, Steptrace, DISTRIBUTED_INFO};

/// The most characters of a file's value quoted in a message.
const QUOTE_CHARS: usize = 120;

/// What the files say of their ranks, once checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RankCheck {
    /// The world size the files agree on; 0 when none says it.
    pub world_size: u32,
    /// The ranks the files hold.
    pub ranks: BTreeSet<u32>,
    /// The ranks of the world size that no file holds, as inclusive
    /// ranges (`(2, 199)`: ranks 2 to 199): a file may claim any world
    /// size.
    pub missing: Vec<(u32, u32)>,
    /// What is doubtful in the files (each names its file).
    pub warnings: Vec<String>,
}

impl RankCheck {
    /// Whether any file says a rank.
    #[must_use]
    pub fn any(&self) -> bool {
        !self.ranks.is_empty()
    }

    /// The warning that ranks are missing, ending with `consequence`;
    /// `None` when every rank of the world size has a file.
    #[must_use]
    pub fn missing_warning(&self, consequence: &str) -> Option<String> {
        if self.missing.is_empty() {
            return None;
        }
        let present = spans_text(&spans(self.ranks.iter().copied()));
        let world = if self.world_size > 0 { self.world_size.to_string() } else { "an unknown world size".to_owned() };
        Some(format!(
            "no file of rank(s) [{}] of {world} (the files hold rank(s) [{present}]): {consequence}",
            spans_text(&self.missing)
        ))
    }
}

/// One file's rank, as far as it says it.
struct Claim<'a> {
    path: &'a str,
    trace: &'a dyn ReportSource,
    info: DistributedInfo,
    /// The world size the file declares (`None`: it does not say).
    world: Option<u32>,
    cycle: Option<u64>,
    epoch: Option<u64>,
}

/// Checks what `files` say of their ranks.
///
/// # Errors
///
/// [`ReportError::RankConflict`] for a claim that cannot hold (see the
/// rules of [`RankReport`](super::RankReport)), [`ReportError::MixedRuns`] for ranks of different
/// runs, [`ReportError::NoRank`] for a file without a rank among files with
/// one.
pub fn check_ranks<T: ReportSource>(files: &[(String, T)]) -> Result<RankCheck, ReportError> {
    let mut warnings = Vec::new();
    let mut claims = Vec::new();
    let mut unranked = None;
    for (path, trace) in files {
        match claim(path, trace, &mut warnings)? {
            Some(c) => claims.push(c),
            None => unranked = unranked.or(Some(path)),
        }
    }
    if claims.is_empty() {
        return Ok(RankCheck { warnings, ..RankCheck::default() });
    }
    if let Some(path) = unranked {
        return Err(ReportError::NoRank { path: path.clone() });
    }
    // One world size.
    let declared = claims.iter().find(|c| c.world.is_some());
    for c in &claims {
        if let (Some(d), Some(w)) = (declared, c.world) {
            if Some(w) != d.world {
                return Err(conflict(
                    c.path,
                    format!(
                        "it says world size {w}, {} says {}: the files of one run agree on it; report each run separately",
                        d.path,
                        d.world.unwrap_or(0)
                    ),
                ));
            }
        }
    }
    // One clock.
    let timed = claims.iter().find(|c| c.epoch.is_some());
    for c in &claims {
        match (timed, c.epoch) {
            (Some(t), Some(e)) if Some(e) != t.epoch => {
                return Err(ReportError::MixedRuns { path: c.path.to_owned(), first: t.path.to_owned() });
            }
            (Some(t), None) => warnings.push(format!(
                "{}: no steptrace clock (its metadata is missing: cut short, or not written by steptrace), unlike {}: \
                 it cannot be told to come from the same run",
                c.path, t.path
            )),
            _ => {}
        }
    }
    // One file per rank and cycle.
    let mut by_rank: BTreeMap<u32, Vec<&Claim<'_>>> = BTreeMap::new();
    for c in &claims {
        by_rank.entry(c.info.rank).or_default().push(c);
    }
    for (rank, same) in &by_rank {
        same_rank(*rank, same)?;
    }
    let ranks: BTreeSet<u32> = by_rank.keys().copied().collect();
    let world_size = declared.and_then(|d| d.world).unwrap_or(0);
    let span = if world_size > 0 { world_size } else { ranks.iter().next_back().map_or(0, |r| r.saturating_add(1)) };
    // The gaps between the ranks held, as ranges: never one entry per rank of the world size.
    let mut missing = Vec::new();
    let mut next = 0u32;
    for &r in ranks.iter().filter(|&&r| r < span) {
        if r > next {
            missing.push((next, r - 1));
        }
        next = r + 1;
    }
    if next < span {
        missing.push((next, span - 1));
    }
    Ok(RankCheck { world_size, ranks, missing, warnings })
}

/// The rank `trace` (read from `path`) claims, checked on its own.
fn claim<'a>(
    path: &'a str,
    source: &'a dyn ReportSource,
    warnings: &mut Vec<String>,
) -> Result<Option<Claim<'a>>, ReportError> {
    let trace = source.trace();
    let st: Option<Steptrace> = trace.steptrace().ok().flatten();
    let raw = trace.metadata.get(DISTRIBUTED_INFO);
    let top = DistributedInfo::from_top_level(&trace.metadata);
    if let (Some(value), None) = (raw, &top) {
        warnings.push(format!(
            "{path}: its distributedInfo is not a rank ({}): ignored",
            label(&value.to_string(), QUOTE_CHARS)
        ));
    }
    let meta = st.as_ref().and_then(|s| s.distributed().cloned());
    let top_world = match raw.filter(|_| top.is_some()).and_then(|v| v.get("world_size")) {
        None => None,
        Some(v) if v.is_null() => None,
        Some(v) => match v.as_u64().and_then(|w| u32::try_from(w).ok()) {
            Some(w) => Some(w),
            None => {
                let quoted = label(&v.to_string(), QUOTE_CHARS).into_owned();
                return Err(conflict(
                    path,
                    format!("its distributedInfo gives world size {quoted}, not a count of ranks"),
                ));
            }
        },
    };
    if let (Some(t), Some(m)) = (&top, &meta) {
        if t.rank != m.rank || top_world.is_some_and(|w| w != m.world_size) {
            return Err(conflict(
                path,
                format!(
                    "its distributedInfo says rank {} of {}, its metadata.distributed rank {} of {}: the file does not \
                     say which rank it is",
                    t.rank,
                    top_world.map_or_else(|| "?".to_owned(), |w| w.to_string()),
                    m.rank,
                    m.world_size
                ),
            ));
        }
        if t.backend != m.backend && !t.backend.is_empty() {
            warnings.push(format!(
                "{path}: its distributedInfo says backend {}, its metadata.distributed {}",
                label(&t.backend, QUOTE_CHARS),
                label(&m.backend, QUOTE_CHARS)
            ));
        }
    }
    let Some(info) = rank_of(path, source) else { return Ok(None) };
    let world = top_world.or(meta.as_ref().map(|m| m.world_size));
    match world {
        Some(0) => {
            return Err(conflict(
                path,
                format!("it says rank {} of world size 0: a run has at least one rank", info.rank),
            ));
        }
        Some(w) if info.rank >= w => {
            return Err(conflict(
                path,
                format!("it says rank {} of {w}: the ranks of a run of {w} are 0 to {}", info.rank, w - 1),
            ));
        }
        _ => {}
    }
    let cycle = st.as_ref().and_then(Steptrace::cycle);
    let epoch = st.as_ref().and_then(Steptrace::epoch_unix_ms);
    Ok(Some(Claim { path, trace: source, info, world, cycle, epoch }))
}

/// Refuses two files of rank `rank` that hold the same cycle, or the same
/// steps.
fn same_rank(rank: u32, same: &[&Claim<'_>]) -> Result<(), ReportError> {
    if same.len() < 2 {
        return Ok(());
    }
    let steps: Vec<_> = same.iter().map(|c| c.trace.step_numbers()).collect();
    for (b, later) in same.iter().enumerate() {
        for (a, earlier) in same.iter().enumerate().take(b) {
            if let (Some(x), Some(y)) = (earlier.cycle, later.cycle) {
                if x == y {
                    return Err(conflict(
                        later.path,
                        format!(
                            "it says rank {rank}, cycle {x}, as {} does: a cycle has one file per rank",
                            earlier.path
                        ),
                    ));
                }
                continue;
            }
            let shared: Vec<String> = steps[a].intersection(&steps[b]).take(4).map(|s| format!("#{s}")).collect();
            if !shared.is_empty() {
                return Err(conflict(
                    later.path,
                    format!(
                        "it says rank {rank}, as {} does, and both hold step(s) {}: one rank records a step once",
                        earlier.path,
                        shared.join(", ")
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn conflict(path: &str, reason: String) -> ReportError {
    ReportError::RankConflict { path: path.to_owned(), reason }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::read::reader::{parse_trace, Trace};

    /// A file of rank `rank` of `world` whose steps are `steps`, with
    /// steptrace metadata when `meta` holds it.
    fn file(name: &str, top: Option<Value>, meta: Option<Value>, steps: &[u64]) -> (String, Trace) {
        let events: Vec<Value> = steps
            .iter()
            .map(|&n| json!({"ph":"X","name":format!("ProfilerStep#{n}"),"pid":1,"tid":1,"ts":n * 1000,"dur":900}))
            .collect();
        let mut doc = json!({"traceEvents": events});
        if let Some(top) = top {
            doc[DISTRIBUTED_INFO] = top;
        }
        if let Some(meta) = meta {
            doc["metadata"] = meta;
        }
        (name.to_owned(), parse_trace(doc.to_string().as_bytes()).unwrap())
    }

    fn st(rank: u32, world: u32, cycle: u64, epoch: u64) -> Value {
        json!({"format": "steptrace-chrome-trace/1", "cycle": cycle, "clock": {"ts_unit": "us", "epoch_unix_ms": epoch},
               "distributed": {"backend": "threads", "rank": rank, "world_size": world}})
    }

    fn top(rank: u32, world: u32) -> Value {
        json!({"backend": "threads", "rank": rank, "world_size": world})
    }

    fn refused(files: &[(String, Trace)]) -> String {
        check_ranks(files).expect_err("refused").to_string()
    }

    #[test]
    fn one_runs_ranks_pass_and_missing_ranks_are_listed() {
        let files = [
            file("a", Some(top(0, 3)), Some(st(0, 3, 0, 9)), &[1, 2]),
            file("b", Some(top(2, 3)), Some(st(2, 3, 0, 9)), &[1, 2]),
        ];
        let check = check_ranks(&files).unwrap();
        assert_eq!((check.world_size, check.missing.clone()), (3, vec![(1, 1)]));
        assert!(check.warnings.is_empty(), "{:?}", check.warnings);
        assert!(check
            .missing_warning("so")
            .unwrap()
            .contains("no file of rank(s) [1] of 3 (the files hold rank(s) [0, 2]): so"));
        assert!(!check_ranks(&[file("plain", None, None, &[1])]).unwrap().any());
    }

    #[test]
    fn a_huge_world_is_listed_by_ranges() {
        // Nothing is listed rank by rank: a file may claim any world size.
        let check = check_ranks(&[
            file("a", Some(top(7, u32::MAX)), None, &[1]),
            file("b", Some(top(9, u32::MAX)), None, &[1]),
        ])
        .unwrap();
        assert_eq!(check.missing, [(0, 6), (8, 8), (10, u32::MAX - 1)]);
        let w = check.missing_warning("so").unwrap();
        assert!(
            w.starts_with(&format!(
                "no file of rank(s) [0–6, 8, 10–{}] of {} (the files hold rank(s) [7, 9]",
                u32::MAX - 1,
                u32::MAX
            )),
            "{w}"
        );
        // A rank near the top without a world size.
        let check = check_ranks(&[file("c", Some(json!({"rank": u32::MAX})), None, &[1])]).unwrap();
        assert_eq!((check.world_size, check.missing.clone()), (0, vec![(0, u32::MAX - 1)]));
        let check = check_ranks(&[
            file("d", Some(json!({"rank": 3})), None, &[1]),
            file("e", Some(json!({"rank": 1})), None, &[1]),
        ])
        .unwrap();
        assert_eq!(check.missing, [(0, 0), (2, 2)]);
    }

    #[test]
    fn impossible_ranks_are_refused_naming_the_file() {
        let e = refused(&[file("r5.json", Some(top(5, 4)), None, &[1])]);
        assert!(e.starts_with("r5.json: it says rank 5 of 4"), "{e}");
        let e = refused(&[file("w0.json", Some(top(0, 0)), None, &[1])]);
        assert!(e.contains("w0.json: it says rank 0 of world size 0"), "{e}");
        let e = refused(&[file("m.json", Some(top(1, 2)), Some(st(0, 2, 0, 9)), &[1])]);
        assert!(
            e.contains("m.json: its distributedInfo says rank 1 of 2, its metadata.distributed rank 0 of 2"),
            "{e}"
        );
        let bad = json!({"rank": 1, "world_size": -2});
        assert!(refused(&[file("n.json", Some(bad), None, &[1])]).contains("world size -2, not a count"));
    }

    #[test]
    fn files_of_different_runs_or_one_rank_twice_are_refused() {
        let e = refused(&[file("a", Some(top(0, 2)), None, &[1]), file("b", Some(top(1, 4)), None, &[1])]);
        assert!(e.starts_with("b: it says world size 4, a says 2"), "{e}");
        let e = refused(&[
            file("a", Some(top(0, 2)), Some(st(0, 2, 0, 9)), &[1]),
            file("b", Some(top(1, 2)), Some(st(1, 2, 0, 8)), &[1]),
        ]);
        assert!(e.starts_with("b does not come from the same run as a"), "{e}");
        let e = refused(&[
            file("a", Some(top(1, 2)), Some(st(1, 2, 0, 9)), &[1]),
            file("b", Some(top(1, 2)), Some(st(1, 2, 0, 9)), &[2]),
        ]);
        assert!(e.starts_with("b: it says rank 1, cycle 0, as a does"), "{e}");
        let e = refused(&[file("a", Some(top(1, 2)), None, &[1, 2]), file("b", Some(top(1, 2)), None, &[2, 3])]);
        assert!(e.contains("both hold step(s) #2"), "{e}");
        // Two windows of one rank (torch.profiler's repeat) are fine.
        assert!(check_ranks(&[file("a", Some(top(1, 2)), None, &[1]), file("b", Some(top(1, 2)), None, &[2])]).is_ok());
        let e = refused(&[file("a", Some(top(0, 2)), None, &[1]), file("plain", None, None, &[1])]);
        assert!(e.starts_with("plain says no rank"), "{e}");
    }

    #[test]
    fn doubtful_files_are_warnings() {
        let files = [file("a", Some(top(0, 2)), Some(st(0, 2, 0, 9)), &[1]), file("cut", Some(top(1, 2)), None, &[1])];
        let check = check_ranks(&files).unwrap();
        assert!(check.warnings.iter().any(|w| w.starts_with("cut: no steptrace clock")), "{:?}", check.warnings);
        let check = check_ranks(&[file("x", Some(json!({"rank": "one"})), None, &[1])]).unwrap();
        assert!(check.warnings[0].starts_with("x: its distributedInfo is not a rank"), "{:?}", check.warnings);
    }
}
