//! Two traces' kernel time by burn op kind and by span path, side by side: which op and which
//! layer changed, not only which kernel name (`--detail ops` traces on both sides).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use steptrace::analysis::AttributionView;
use steptrace::display::{label, LABEL_CHARS};

/// A duration in ms, at a readable precision (as `report` writes it).
fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Rows shown per table in the text output (`--json` has them all).
const ROWS: usize = 12;

/// The two sides by op kind and by span path, or why not.
#[derive(Debug, Serialize)]
pub(super) struct OpsDiff {
    /// Kernel time per step by op kind, largest change first.
    pub(super) by_op_kind: Vec<DiffRow>,
    /// Kernel time per step by span path (each path's total), largest change first.
    pub(super) by_span: Vec<DiffRow>,
    /// Why there is no diff (a side has no attribution), else `None`.
    pub(super) not_observed: Option<String>,
}

/// One op kind or span path on both sides; `None` where a side has no such row.
#[derive(Debug, Serialize, PartialEq)]
pub(super) struct DiffRow {
    pub(super) name: String,
    pub(super) a_ms_per_step: Option<f64>,
    pub(super) b_ms_per_step: Option<f64>,
    /// B minus A, where both sides have the row.
    pub(super) change_ms: Option<f64>,
}

pub(super) fn diff(a: Option<&AttributionView>, b: Option<&AttributionView>) -> OpsDiff {
    let (Some(a), Some(b)) = (a, b) else {
        let side = match (a, b) {
            (None, None) => "neither trace",
            (None, _) => "trace A",
            _ => "trace B",
        };
        return OpsDiff {
            by_op_kind: Vec::new(),
            by_span: Vec::new(),
            not_observed: Some(format!(
                "{side} carries no kernel attribution (record both with `--detail ops`): no diff by op or span"
            )),
        };
    };
    let kinds = |v: &AttributionView| v.by_op_kind.iter().map(|r| (r.name.clone(), r.ms_per_step)).collect();
    let spans = |v: &AttributionView| v.by_span.iter().map(|r| (r.path.clone(), r.total_ms)).collect();
    OpsDiff { by_op_kind: rows(kinds(a), kinds(b)), by_span: rows(spans(a), spans(b)), not_observed: None }
}

fn rows(a: BTreeMap<String, f64>, b: BTreeMap<String, f64>) -> Vec<DiffRow> {
    let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
    names.sort();
    names.dedup();
    let mut out: Vec<DiffRow> = names
        .into_iter()
        .map(|n| {
            let (x, y) = (a.get(n).copied(), b.get(n).copied());
            DiffRow { name: n.clone(), a_ms_per_step: x, b_ms_per_step: y, change_ms: x.zip(y).map(|(x, y)| y - x) }
        })
        .collect();
    let size = |r: &DiffRow| r.change_ms.map_or_else(|| r.a_ms_per_step.or(r.b_ms_per_step).unwrap_or(0.0), f64::abs);
    out.sort_by(|p, q| size(q).total_cmp(&size(p)).then_with(|| p.name.cmp(&q.name)));
    out
}

pub(super) fn render(d: &OpsDiff) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\n== By op and span (kernel time per step, B - A)");
    if let Some(why) = &d.not_observed {
        let _ = writeln!(o, "not observed: {why}");
        return o;
    }
    for (first, rows) in [("op kind", &d.by_op_kind), ("span path", &d.by_span)] {
        let mut t = crate::console::table();
        t.set_header([first, "A ms/step", "B ms/step", "change"]);
        let cell = |v: Option<f64>| v.map_or_else(|| "not observed".to_owned(), ms);
        for r in rows.iter().take(ROWS) {
            let change = r
                .change_ms
                .map_or_else(|| "-".to_owned(), |c| format!("{}{}", if c >= 0.0 { "+" } else { "-" }, ms(c.abs())));
            // Cut, as every label from a file is: a table wraps a long cell in time that grows
            // with the square of its length.
            t.add_row([label(&r.name, LABEL_CHARS).into_owned(), cell(r.a_ms_per_step), cell(r.b_ms_per_step), change]);
        }
        let _ = writeln!(o, "{t}");
        if rows.len() > ROWS {
            let _ = writeln!(o, "({} more rows; --json has them all)", rows.len() - ROWS);
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_pair_by_name_and_the_largest_change_comes_first() {
        let a = BTreeMap::from([("matmul".to_owned(), 4.0), ("conv".to_owned(), 1.0), ("pool".to_owned(), 0.2)]);
        let b = BTreeMap::from([("matmul".to_owned(), 1.0), ("conv".to_owned(), 1.5), ("reduce".to_owned(), 0.3)]);
        let r = rows(a, b);
        let names: Vec<&str> = r.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["matmul", "conv", "reduce", "pool"]);
        assert_eq!(r[0].change_ms, Some(-3.0));
        assert_eq!((r[2].a_ms_per_step, r[2].b_ms_per_step, r[2].change_ms), (None, Some(0.3), None));
        let none = diff(None, None);
        assert!(none.not_observed.unwrap().contains("neither trace"));
    }
}
