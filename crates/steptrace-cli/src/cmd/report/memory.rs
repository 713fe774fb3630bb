//! The report's memory section (`train --memory`): in use and reserved at each point of the
//! step, the highest sample and where it fell, what holds it by category, and headroom.

use std::fmt::Write as _;

use comfy_table::CellAlignment;
use steptrace::analysis::MemoryView;

/// A change in MB with its sign, in KB when under 1 MB (a growth of a few KB must not read as
/// `89.2 MB to 89.2 MB`).
fn change(delta_mb: f64) -> String {
    if delta_mb == 0.0 {
        "no change".to_owned()
    } else if delta_mb.abs() < 1.0 {
        format!("{:+.1} KB", delta_mb * 1024.0)
    } else {
        format!("{}{} MB", if delta_mb > 0.0 { "+" } else { "-" }, mb(delta_mb.abs()))
    }
}

fn mb(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

pub(super) fn render_memory(o: &mut String, m: &MemoryView) {
    let _ = writeln!(o, "\n== Device memory (MB, median over {} steps)", m.steps);
    let mut t = crate::console::table();
    t.set_header(["after", "in use", "reserved", "in use max"]);
    for p in &m.points {
        t.add_row([
            p.after.clone(),
            mb(p.in_use_mb.median),
            p.reserved_mb.as_ref().map_or_else(|| "not observed".to_owned(), |r| mb(r.median)),
            mb(p.in_use_mb.max),
        ]);
    }
    for i in 1..4 {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let _ = writeln!(o, "{t}");
    let _ = writeln!(
        o,
        "highest       {} MB in use (max {} MB), most often after {} (the highest sample: a peak between \
         samples is not seen)",
        mb(m.highest_mb.median),
        mb(m.highest_mb.max),
        m.highest_after
    );
    if let Some(over) = &m.pool_overhead_mb {
        let _ = writeln!(o, "pool overhead {} MB reserved beyond in use at the highest sample", mb(over.median));
    }
    match (m.device_mb, m.headroom_mb) {
        (Some(device), Some(headroom)) => {
            let _ = writeln!(
                o,
                "headroom      {} MB of the device's {} MB left at the highest reserved sample ({:.1}%)",
                mb(headroom),
                mb(device),
                headroom / device * 100.0
            );
        }
        _ => {
            let _ = writeln!(o, "headroom      not observed (the trace does not give the device's memory)");
        }
    }
    if !m.categories.is_empty() {
        let mut t = crate::console::table();
        t.set_header(["at the highest sample", "MB", "share"]);
        for c in &m.categories {
            t.add_row([c.name.replace('_', " "), mb(c.mb), format!("{:.1}%", c.share * 100.0)]);
        }
        for i in 1..3 {
            if let Some(c) = t.column_mut(i) {
                c.set_cell_alignment(CellAlignment::Right);
            }
        }
        let _ = writeln!(o, "{t}");
    }
    if !m.not_observed.is_empty() {
        let _ = writeln!(o, "not observed: {}", m.not_observed.join(", "));
    }
    if let Some(g) = &m.reserved_growth {
        let _ = writeln!(
            o,
            "reserved at the step boundary: {} MB to {} MB ({}), growing in {} of {} steps",
            mb(g.first_mb),
            mb(g.last_mb),
            change(g.last_mb - g.first_mb),
            g.rising_steps,
            g.compared
        );
    }
}
