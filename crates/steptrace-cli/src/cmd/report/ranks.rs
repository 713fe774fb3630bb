//! The report of a run of several ranks: the ranks side by side, the
//! slowest rank step by step, the straggler; `--rank N` gives one rank's
//! whole report instead.

use std::fmt::Write as _;

use comfy_table::CellAlignment;
use steptrace::analysis::{RankReport, Stats};
use steptrace::display::{block, escape};

use super::render::ms;

/// Steps listed in the per-step table; `--json` has all of them.
const STEP_ROWS: usize = 24;

/// Up to this many ranks, the per-step table has a column per rank and the rank table a
/// row per rank; beyond it, the per-step table shows the fastest, median and slowest rank,
/// and the rank table the [`RANK_ENDS`] slowest and fastest (`--json` has every rank).
const RANK_COLUMNS: usize = 8;
const RANK_ENDS: usize = 8;

fn median(s: &Option<Stats>) -> String {
    s.as_ref().map_or_else(|| "not observed".to_owned(), |s| ms(s.median))
}

/// The ranks compared, in reading order.
pub(super) fn render(r: &RankReport) -> String {
    let mut o = String::new();
    let files: usize = r.ranks.iter().map(|x| x.files.len()).sum();
    let backend = r.backend.as_deref().map(|b| format!(", connected by {}", escape(b))).unwrap_or_default();
    let _ = writeln!(o, "steptrace report: {} ranks of {}{backend}, {files} file(s)", r.ranks.len(), r.world_size);
    // Files cut short, as the report of one rank lists them.
    for s in r.reports.iter().flat_map(|rep| &rep.sources) {
        let flags = super::render::source_flags(s);
        if !flags.is_empty() {
            let _ = writeln!(o, "  {}  [{}]", escape(&s.path), flags.join("; "));
        }
    }
    for w in &r.warnings {
        let _ = writeln!(o, "warning: {}", escape(w));
    }
    if let Some(label) = r.reports.first().and_then(|rep| rep.run.backend.as_deref()) {
        let _ = writeln!(o, "backend: {}", escape(label));
    }
    let which =
        if r.steady_only { "steady steps every rank recorded" } else { "steps every rank recorded, startup included" };
    let _ = writeln!(o, "\n== Ranks (per step, median over the {} {which})", r.steps.len());
    let mut table = crate::console::table();
    table.set_header(["rank", "step ms", "work ms", "collective ms", "input ms", "device busy ms", "slowest in"]);
    let shown = shown_ranks(r);
    for x in shown.iter().map(|&i| &r.ranks[i]) {
        table.add_row([
            x.rank.to_string(),
            median(&x.step_ms),
            median(&x.work_ms),
            median(&x.collective_ms),
            median(&x.input_ms),
            median(&x.device_busy_ms),
            format!("{} of {}", x.slowest_steps, r.steps.len()),
        ]);
    }
    right_align(&mut table, 7);
    let _ = writeln!(o, "{table}");
    if shown.len() < r.ranks.len() {
        let _ = writeln!(
            o,
            "({} ranks: the {RANK_ENDS} with the most and the {RANK_ENDS} with the least median work are shown; \
             --json shows every rank)",
            r.ranks.len()
        );
    }
    let _ = writeln!(
        o,
        "work = step less time in collectives: in a synchronised step the fast ranks wait for the slow one, so \
         their step times come out alike and only the work tells them apart"
    );
    if let Some(why) = &r.collective_not_observed {
        let _ = writeln!(o, "collective: {why}");
    }
    for x in r.ranks.iter().filter(|x| x.device_busy_ms.is_none()) {
        if let Some(why) = &x.device_not_observed {
            let _ = writeln!(o, "device of rank {}: not observed ({why})", x.rank);
        }
    }

    if !r.steps.is_empty() {
        let _ = writeln!(o, "\n== Slowest rank per step (work ms; lag = its work less the others' median)");
        let _ = writeln!(o, "{}", step_table(r));
        if r.steps.len() > STEP_ROWS {
            let _ = writeln!(o, "({} more steps; --json shows them)", r.steps.len() - STEP_ROWS);
        }
        if r.steps.iter().any(|s| s.tied) {
            let _ = writeln!(
                o,
                "tie: the ranks with the most work in that step did the same within {} ms; it counts for no rank",
                steptrace::analysis::TIE_MS
            );
        }
    }

    super::render::hypothesis_list(&mut o, &r.hypotheses);
    for note in &r.notes {
        let _ = writeln!(o, "note: {note}");
    }
    let _ = writeln!(o, "note: `--rank N` prints rank N's whole report (spans, device, its own hypotheses)");
    block(&o).into_owned()
}

/// The ranks the rank table lists, as indices into `r.ranks` in rank order: all of them, or
/// beyond [`RANK_COLUMNS`] the [`RANK_ENDS`] with the most and the least median work.
fn shown_ranks(r: &RankReport) -> Vec<usize> {
    if r.ranks.len() <= RANK_COLUMNS.max(2 * RANK_ENDS) {
        return (0..r.ranks.len()).collect();
    }
    let work = |i: usize| r.ranks[i].work_ms.as_ref().map_or(f64::NEG_INFINITY, |s| s.median);
    let mut by_work: Vec<usize> = (0..r.ranks.len()).collect();
    by_work.sort_by(|&a, &b| work(b).total_cmp(&work(a)).then(a.cmp(&b)));
    let mut shown: Vec<usize> =
        by_work[..RANK_ENDS].iter().chain(&by_work[by_work.len() - RANK_ENDS..]).copied().collect();
    shown.sort_unstable();
    shown
}

/// The per-step table: a column per rank, or beyond [`RANK_COLUMNS`] ranks the fastest, the
/// median and the slowest rank's work.
fn step_table(r: &RankReport) -> comfy_table::Table {
    let wide = r.ranks.len() <= RANK_COLUMNS;
    let mut table = crate::console::table();
    let mut header = vec!["step".to_owned()];
    if wide {
        header.extend(r.ranks.iter().map(|x| format!("rank {}", x.rank)));
    } else {
        header.extend(["fastest".to_owned(), "median".to_owned()]);
    }
    header.extend(["slowest".to_owned(), "lag ms".to_owned()]);
    table.set_header(header);
    for s in r.steps.iter().take(STEP_ROWS) {
        let mut row = vec![s.step.to_string()];
        if wide {
            row.extend(
                r.ranks.iter().map(|x| {
                    s.ranks.iter().find(|c| c.rank == x.rank).map_or_else(|| "-".to_owned(), |c| ms(c.work_ms))
                }),
            );
        } else {
            let mut work: Vec<(f64, u32)> = s.ranks.iter().map(|c| (c.work_ms, c.rank)).collect();
            work.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let fastest = work.first().map_or_else(|| "-".to_owned(), |(w, rank)| format!("{} (rank {rank})", ms(*w)));
            let median = if work.is_empty() { "-".to_owned() } else { ms(work[work.len() / 2].0) };
            row.extend([fastest, median]);
        }
        let slowest = s.ranks.iter().find(|c| c.rank == s.slowest).map(|c| c.work_ms);
        let slowest = match (s.tied, wide, slowest) {
            (true, _, _) => "tie".to_owned(),
            (false, true, _) | (false, false, None) => format!("rank {}", s.slowest),
            (false, false, Some(w)) => format!("{} (rank {})", ms(w), s.slowest),
        };
        row.extend([slowest, if s.tied { "-".to_owned() } else { ms(s.lag_ms) }]);
        table.add_row(row);
    }
    let columns = if wide { r.ranks.len() + 3 } else { 5 };
    right_align(&mut table, columns);
    table
}

fn right_align(table: &mut comfy_table::Table, columns: usize) {
    for i in 1..columns {
        if let Some(col) = table.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
}
