//! "Which op, which layer" on the HTML page: the device-time tree by span path (indented, with
//! a bar of each path's total), and kernel time by op kind and by phase, with the attributed
//! share and what is not attributed, by reason.

use std::fmt::Write as _;

use steptrace::analysis::{AttributionView, DeviceView, TimeRow};

use super::markup::{esc, not_observed, pct, table, Cell};
use crate::cmd::report::render::ms;

pub(super) fn section(o: &mut String, d: &DeviceView) {
    if d.kernels.is_none() {
        return;
    }
    o.push_str("<h3>Which op, which layer</h3>\n");
    let Some(a) = &d.attribution else {
        let why = d.not_observed.iter().find(|(part, _)| *part == "attribution").map_or("not in the trace", |(_, w)| w);
        not_observed(o, "kernel attribution", why);
        return;
    };
    let _ = writeln!(
        o,
        "<p>{} of {} ms kernel time per step attributed to a burn op and a span path ({}), over {} counted steps.</p>",
        esc(&ms(a.attributed_ms_per_step)),
        esc(&ms(a.kernel_ms_per_step)),
        esc(&pct(a.attributed_share)),
        a.steps
    );
    tree(o, a);
    rows(o, "op kind", &a.by_op_kind);
    rows(o, "phase", &a.by_phase);
    if !a.unattributed.is_empty() {
        rows(o, "not attributed (reason)", &a.unattributed);
    }
    if a.inferred_ms_per_step > 0.0 {
        let _ = writeln!(
            o,
            "<p class=\"muted\">{} ms per step of backward and optimizer kernels are named by the forward layer whose \
             tensors they read: an inference (burn's autodiff does not say which forward op a backward op \
             differentiates).</p>",
            esc(&ms(a.inferred_ms_per_step))
        );
    }
    if a.named_by_module_ms_per_step > 0.0 {
        let _ = writeln!(
            o,
            "<p class=\"muted\">Layer names: {} ms per step from spans, {} ms from the model's module tree (the path \
             of the parameters a kernel's operations read, where no layer span was open).</p>",
            esc(&ms(a.named_by_spans_ms_per_step)),
            esc(&ms(a.named_by_module_ms_per_step))
        );
    }
}

/// The span paths as an indented tree, each with a bar of its total.
fn tree(o: &mut String, a: &AttributionView) {
    let widest = a.by_span.iter().map(|r| r.total_ms).fold(0.0, f64::max).max(f64::MIN_POSITIVE);
    let rows = a
        .by_span
        .iter()
        .map(|r| {
            let bar = format!(
                "<span style=\"display:inline-block;height:0.8em;background:#4a7ab5;width:{:.1}%\"></span>",
                r.total_ms / widest * 100.0
            );
            vec![
                Cell::Html(format!(
                    "<span style=\"padding-left:{}em\" title=\"{}\">{}</span>",
                    r.depth * 2,
                    esc(&r.path),
                    esc(&r.name)
                )),
                Cell::Num(ms(r.self_ms)),
                Cell::Num(ms(r.total_ms)),
                Cell::Num(pct(r.share)),
                Cell::Num(format!("{:.1}", r.kernels_per_step)),
                Cell::Html(bar),
            ]
        })
        .collect();
    o.push_str("<p>Device time by span path (a tree: self is the path's own kernels, total includes the paths below it; ms per step).</p>\n");
    table(o, &["span path", "self ms", "total ms", "share", "kernels/step", "total"], rows);
}

fn rows(o: &mut String, first: &str, rows: &[TimeRow]) {
    let cells = rows
        .iter()
        .map(|r| {
            vec![
                Cell::Text(r.name.clone()),
                Cell::Num(ms(r.ms_per_step)),
                Cell::Num(pct(r.share)),
                Cell::Num(format!("{:.1}", r.kernels_per_step)),
            ]
        })
        .collect();
    table(o, &[first, "ms/step", "share", "kernels/step"], cells);
}
