//! The report of a run of several ranks: the ranks side by side, the
//! slowest rank step by step, the straggler; `--rank N` gives one rank's
//! whole report instead.

use std::fmt::Write as _;

use comfy_table::CellAlignment;
use steptrace::analysis::{RankReport, Stats};
use steptrace::read::display::{block, escape};

use super::render::ms;

/// Steps listed in the per-step table; `--json` has all of them.
const STEP_ROWS: usize = 24;

fn median(s: &Option<Stats>) -> String {
    s.as_ref().map_or_else(|| "not observed".to_owned(), |s| ms(s.median))
}

/// The ranks compared, in reading order.
pub(super) fn render(r: &RankReport) -> String {
    let mut o = String::new();
    let files: usize = r.ranks.iter().map(|x| x.files.len()).sum();
    let backend = r.backend.as_deref().map(|b| format!(", connected by {}", escape(b))).unwrap_or_default();
    let _ = writeln!(o, "steptrace report: {} ranks of {}{backend}, {files} file(s)", r.ranks.len(), r.world_size);
    for w in &r.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
    if let Some(label) = r.reports.first().and_then(|rep| rep.run.backend.as_deref()) {
        let _ = writeln!(o, "backend: {}", escape(label));
    }
    let which = if r.steady_only { "steady steps every rank recorded" } else { "steps every rank recorded, startup included" };
    let _ = writeln!(o, "\n== Ranks (per step, median over the {} {which})", r.steps.len());
    let mut table = crate::console::table();
    table.set_header(["rank", "step ms", "work ms", "collective ms", "input ms", "device busy ms", "slowest in"]);
    for x in &r.ranks {
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
        let mut table = crate::console::table();
        let mut header = vec!["step".to_owned()];
        header.extend(r.ranks.iter().map(|x| format!("rank {}", x.rank)));
        header.extend(["slowest".to_owned(), "lag ms".to_owned()]);
        table.set_header(header);
        for s in r.steps.iter().take(STEP_ROWS) {
            let mut row = vec![s.step.to_string()];
            row.extend(r.ranks.iter().map(|x| {
                s.ranks.iter().find(|c| c.rank == x.rank).map_or_else(|| "-".to_owned(), |c| ms(c.work_ms))
            }));
            row.extend([format!("rank {}", s.slowest), ms(s.lag_ms)]);
            table.add_row(row);
        }
        right_align(&mut table, r.ranks.len() + 3);
        let _ = writeln!(o, "{table}");
        if r.steps.len() > STEP_ROWS {
            let _ = writeln!(o, "({} more steps; --json shows them)", r.steps.len() - STEP_ROWS);
        }
    }

    super::render::hypothesis_list(&mut o, &r.hypotheses);
    for note in &r.notes {
        let _ = writeln!(o, "note: {note}");
    }
    let _ = writeln!(o, "note: `--rank N` prints rank N's whole report (spans, device, its own hypotheses)");
    block(&o).into_owned()
}

fn right_align(table: &mut comfy_table::Table, columns: usize) {
    for i in 1..columns {
        if let Some(col) = table.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
}
