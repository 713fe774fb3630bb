//! Section 4, the span table: per span name, with what its duration
//! measures, and the footnote that sums are not elapsed time.

use std::fmt::Write as _;

use steptrace::analysis::{Report, Timing};

use super::markup::{esc, esc_cut, pct, table, Cell};
use crate::cmd::report::render::ms;

/// Characters of a span name in the table; `--json` has them whole.
const NAME_CHARS: usize = 120;

pub(super) fn section(o: &mut String, r: &Report, top: usize) {
    let s = &r.spans;
    o.push_str("<section id=\"spans\">\n<h2>4. Spans</h2>\n");
    let _ = writeln!(o, "<p>Recorded wall time: {} ms (the extent of the step windows).</p>", esc(&ms(s.wall_ms)));
    if s.rows.is_empty() {
        o.push_str("<p class=\"absent\"><strong>no span</strong> in these traces.</p>\n</section>\n");
        return;
    }
    let rows = s
        .rows
        .iter()
        .take(top)
        .map(|row| {
            let (what, means) = timing(row.timing);
            vec![
                Cell::Html(format!(
                    "<span title=\"{}\">{}</span>",
                    esc_cut(&row.name, 4000),
                    esc_cut(&row.name, NAME_CHARS)
                )),
                Cell::Num(row.calls.to_string()),
                Cell::Num(row.threads.to_string()),
                Cell::Num(ms(row.total_ms)),
                Cell::Num(ms(row.self_ms)),
                Cell::Num(ms(row.mean_ms)),
                Cell::Num(ms(row.busy_ms)),
                Cell::Num(pct(row.share)),
                Cell::Html(format!("<span title=\"{}\">{}</span>", esc(means), esc(what))),
            ]
        })
        .collect();
    table(o, &["span", "calls", "threads", "total ms", "self ms", "mean ms", "busy ms", "share", "timing"], rows);
    if s.rows.len() > top {
        let _ = writeln!(
            o,
            "<p class=\"muted\">{} more span names (--top N or --json shows them).</p>",
            s.rows.len() - top
        );
    }
    o.push_str(
        "<p><strong>Sums are not elapsed time:</strong> total ms and self ms add up every call on every thread, \
         and spans nest, so the column can exceed the wall time. Step time comes from the step boundaries \
         (section 2).</p>\n<ul class=\"notes\">\n",
    );
    for line in &s.footer {
        let _ = writeln!(o, "<li>{}</li>", esc(line));
    }
    o.push_str(
        "<li>timing: host launch = host time only (device work it queued may still run after it ends); incl. \
         device = every call ends with a sync; mixed = some do; device = timed by the device; synchronous = \
         a synchronous backend (host time is device time); waiting = waiting for the device; ? = unknown.</li>\n\
         </ul>\n</section>\n",
    );
}

/// The timing column, and what it means (shown on hover).
fn timing(t: Timing) -> (&'static str, &'static str) {
    match t {
        Timing::HostLaunch => {
            ("host launch", "host time only: device work it queued may still be running after it ends")
        }
        Timing::Synced => ("incl. device", "every call ends with a sync: includes the device work this thread queued"),
        Timing::Mixed => ("mixed", "some calls contain a sync, others not"),
        Timing::Device => ("device", "a device-side event, timed by the device"),
        Timing::Synchronous => ("synchronous", "a synchronous backend: host time is device time"),
        Timing::Waiting => ("waiting", "waiting for the device"),
        Timing::Unknown => ("?", "nothing is known about the device (foreign trace)"),
    }
}
