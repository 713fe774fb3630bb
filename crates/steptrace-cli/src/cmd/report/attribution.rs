//! The report's "which op, which layer" section: kernel device time per step by burn op
//! kind, by the span path its operations were called in (a tree with self and total time),
//! and by phase; the share attributed, and what is not, by reason.

use std::fmt::Write as _;

use comfy_table::CellAlignment;
use steptrace::analysis::{AttributionView, TimeRow};
use steptrace::display::label;

use super::render::ms;

/// Rows of each table in the text report (`--json` has them all).
const ROWS: usize = 12;

/// Characters of a name in the first column.
const NAME_CHARS: usize = 44;

pub(super) fn render_attribution(o: &mut String, a: Option<&AttributionView>, why_not: Option<&str>) {
    let _ = writeln!(o, "\n== Which op, which layer (device time per step)");
    let Some(a) = a else {
        let _ =
            writeln!(o, "attribution   not observed: {}", why_not.unwrap_or("no kernel events in the counted steps"));
        return;
    };
    let _ = writeln!(
        o,
        "attributed    {} of {} ms kernel time per step ({:.1}%) over {} steps",
        ms(a.attributed_ms_per_step),
        ms(a.kernel_ms_per_step),
        a.attributed_share * 100.0,
        a.steps
    );
    for t in &a.timing {
        let _ = writeln!(o, "timed by      {}: {} ms per step", t.name, ms(t.ms_per_step));
    }
    table(o, "op kind", &a.by_op_kind);
    let mut t = crate::console::table();
    t.set_header(["span path", "self ms", "total ms", "share", "kernels"]);
    for row in a.by_span.iter().take(ROWS * 2) {
        let name = format!("{}{}", "  ".repeat(row.depth), row.name);
        t.add_row([
            label(&name, NAME_CHARS).into_owned(),
            ms(row.self_ms),
            ms(row.total_ms),
            format!("{:.1}%", row.share * 100.0),
            format!("{:.1}", row.kernels_per_step),
        ]);
    }
    right(&mut t, 1..5);
    let _ = writeln!(o, "{t}");
    if a.by_span.len() > ROWS * 2 {
        let _ = writeln!(o, "({} more span paths; --json has them all)", a.by_span.len() - ROWS * 2);
    }
    table(o, "phase", &a.by_phase);
    if a.unattributed.is_empty() {
        let _ = writeln!(o, "not attributed: none");
    } else {
        table(o, "not attributed (reason)", &a.unattributed);
    }
    if a.inferred_ms_per_step > 0.0 {
        let _ = writeln!(
            o,
            "note: {} ms per step of backward and optimizer kernels are named by the forward layer whose tensors \
             they read (burn's autodiff does not say which forward op a backward op differentiates): an inference",
            ms(a.inferred_ms_per_step)
        );
    }
    if a.named_by_module_ms_per_step > 0.0 {
        let _ = writeln!(
            o,
            "layer names: {} ms per step from steptrace's and your spans, {} ms from the model's module tree (the \
             path of the parameters a kernel's operations read, where no layer span was open)",
            ms(a.named_by_spans_ms_per_step),
            ms(a.named_by_module_ms_per_step)
        );
    }
    let _ = writeln!(o, "note: share = over all kernel time in the counted steps (a sum of kernel durations)");
}

fn table(o: &mut String, first: &str, rows: &[TimeRow]) {
    let mut t = crate::console::table();
    t.set_header([first, "ms/step", "share", "kernels"]);
    for row in rows.iter().take(ROWS) {
        t.add_row([
            label(&row.name, NAME_CHARS).into_owned(),
            ms(row.ms_per_step),
            format!("{:.1}%", row.share * 100.0),
            format!("{:.1}", row.kernels_per_step),
        ]);
    }
    right(&mut t, 1..4);
    let _ = writeln!(o, "{t}");
    if rows.len() > ROWS {
        let _ = writeln!(o, "({} more rows; --json has them all)", rows.len() - ROWS);
    }
}

/// Aligns `columns` of `t` to the right (the figures).
pub(super) fn right(t: &mut comfy_table::Table, columns: std::ops::Range<usize>) {
    for i in columns {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}
