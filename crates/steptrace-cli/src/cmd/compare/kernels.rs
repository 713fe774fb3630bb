//! The kernel part of `compare`: totals, then kernels ranked by the change
//! of their device time per step, or, when the names do not match, kernel
//! classes.

use std::fmt::Write;

use comfy_table::{CellAlignment, Table};
use steptrace::analysis::short_name;
use steptrace::bench::{KernelComparison, KernelOutcome, KernelRecord};
use steptrace::display::label;

/// Kernel rows shown (`--json` holds all of them).
const ROWS: usize = 15;

/// The kernel section of the comparison.
pub(super) fn render(k: &KernelOutcome) -> String {
    let mut o = String::from("\n== Kernels (device time per step, over the steady steps)\n");
    for (side, record) in [("A", &k.a), ("B", &k.b)] {
        if let KernelRecord::NotObserved { reason } = record {
            let _ = writeln!(o, "kernels {side}: not observed: {reason}");
        }
    }
    for note in &k.notes {
        let _ = writeln!(o, "note: {note}");
    }
    let Some(c) = &k.comparison else {
        let _ = writeln!(o, "no kernel comparison: it needs kernels on both sides");
        return o;
    };
    totals(&mut o, c);
    let n = &c.names;
    let shares = format!(
        "carrying {:.0}% of A's and {:.0}% of B's kernel time",
        n.common_share_a * 100.0,
        n.common_share_b * 100.0
    );
    if n.matched {
        let _ = writeln!(
            o,
            "kernel names match: {} in common ({shares}); {} only in A, {} only in B",
            n.common, n.only_a, n.only_b
        );
        by_name(&mut o, c);
    } else {
        let _ = writeln!(
            o,
            "kernel names do NOT match across the two sides: {} name(s) in common, {shares}. Different kernel \
             libraries name their kernels differently (burn's cubecl kernels against PyTorch's cuBLAS and ATen kernels \
             share none), so kernels cannot be paired by name; comparing by kernel class instead (per-name rows are in \
             --json)",
            n.common
        );
        by_class(&mut o, c);
    }
    o
}

/// Each side's totals and their difference.
fn totals(o: &mut String, c: &KernelComparison) {
    let mut t = table(&["", "A", "B", "B − A"]);
    let (a, b) = (&c.a, &c.b);
    t.add_row([
        "device busy ms/step".to_owned(),
        ms(a.busy_ms_per_step),
        ms(b.busy_ms_per_step),
        change(c.busy_change_ms_per_step),
    ]);
    t.add_row([
        "kernels/step".to_owned(),
        format!("{:.1}", a.kernels_per_step),
        format!("{:.1}", b.kernels_per_step),
        signed1(b.kernels_per_step - a.kernels_per_step),
    ]);
    t.add_row([
        "kernel time ms/step (sum)".to_owned(),
        ms(a.kernel_ms_per_step),
        ms(b.kernel_ms_per_step),
        change(b.kernel_ms_per_step - a.kernel_ms_per_step),
    ]);
    t.add_row(["kernel names".to_owned(), a.names.to_string(), b.names.to_string(), String::new()]);
    right(&mut t, 1..4);
    let _ = writeln!(o, "{t}");
}

/// Kernels ranked by the absolute change of their device time per step.
fn by_name(o: &mut String, c: &KernelComparison) {
    let mut t = table(&["kernel", "class", "A ms/step", "B ms/step", "change", "calls/step A→B"]);
    for r in c.rows.iter().take(ROWS) {
        t.add_row([
            short_name(&r.name),
            r.class.title().to_owned(),
            opt_ms(r.a_ms_per_step),
            opt_ms(r.b_ms_per_step),
            change(r.change_ms_per_step),
            format!("{}→{}", calls(r.a_calls_per_step), calls(r.b_calls_per_step)),
        ]);
    }
    right(&mut t, 2..6);
    let _ = writeln!(o, "{t}");
    if c.rows.len() > ROWS {
        let _ = writeln!(o, "({} more names; --json lists all)", c.rows.len() - ROWS);
    }
    if c.rows.iter().all(|r| r.change_ms_per_step == 0.0) {
        let _ = writeln!(o, "no kernel's device time per step differs between A and B");
    }
}

/// Kernel classes ranked by the absolute change of their device time.
fn by_class(o: &mut String, c: &KernelComparison) {
    let mut t = table(&["class", "A ms/step", "B ms/step", "change", "calls/step A→B", "names A/B"]);
    for r in &c.classes {
        t.add_row([
            r.class.title().to_owned(),
            ms(r.a_ms_per_step),
            ms(r.b_ms_per_step),
            change(r.change_ms_per_step),
            format!("{:.1}→{:.1}", r.a_calls_per_step, r.b_calls_per_step),
            format!("{}/{}", r.a_names, r.b_names),
        ]);
    }
    let (ua, ub) = (c.a.unlisted_ms_per_step, c.b.unlisted_ms_per_step);
    if ua > 0.0 || ub > 0.0 {
        t.add_row([
            "(names beyond the listed ones)".to_owned(),
            ms(ua),
            ms(ub),
            change(ub - ua),
            String::new(),
            String::new(),
        ]);
    }
    right(&mut t, 1..6);
    let _ = writeln!(o, "{t}");
    let _ = writeln!(
        o,
        "note: classes are read from kernel names by keyword (steptrace::bench::KernelClass documents the rules); a name \
         no rule recognises is `other`, never guessed"
    );
    for r in c.rows.iter().filter(|r| r.class == steptrace::bench::KernelClass::Other).take(3) {
        let side = if r.a_ms_per_step.is_some() { "A" } else { "B" };
        let _ = writeln!(o, "      other ({side}): {}", label(&short_name(&r.name), 96));
    }
}

fn table(header: &[&str]) -> Table {
    let mut t = crate::console::table();
    t.set_header(header.iter().copied());
    t
}

fn right(t: &mut Table, cols: std::ops::Range<usize>) {
    for i in cols {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
}

fn ms(v: f64) -> String {
    format!("{v:.4}")
}

fn opt_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_owned(), ms)
}

/// A change: `0` when exactly nothing changed, else signed.
fn change(v: f64) -> String {
    if v == 0.0 {
        "0".to_owned()
    } else {
        format!("{v:+.4}")
    }
}

fn signed1(v: f64) -> String {
    if v == 0.0 {
        "0".to_owned()
    } else {
        format!("{v:+.1}")
    }
}

fn calls(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_owned(), |c| format!("{c:.1}"))
}
