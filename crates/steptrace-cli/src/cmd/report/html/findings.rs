//! Section 5: hypotheses (possibilities to test, not verdicts), each with
//! its evidence, next experiment and exact command; the checks not
//! examined; warnings and notes.

use std::fmt::Write as _;

use steptrace::analysis::Report;
use steptrace::display::LABEL_CHARS;

use super::markup::{esc, esc_cut};
use crate::convert::enable_hint;

pub(super) fn section(o: &mut String, r: &Report) {
    o.push_str("<section id=\"hypotheses\">\n<h2>5. Hypotheses <span class=\"muted\">(possibilities to test, not verdicts)</span></h2>\n");
    if r.hypotheses.is_empty() {
        o.push_str("<p>None of the checks fired on these traces.</p>\n");
    }
    for (i, h) in r.hypotheses.iter().enumerate() {
        let _ = writeln!(
            o,
            "<div class=\"hyp\">\n<h3>{}. {} <span class=\"muted\">[{}]</span></h3>",
            i + 1,
            esc(&h.hypothesis),
            esc(h.id)
        );
        let _ = writeln!(o, "<p><strong>Evidence:</strong> {}</p>", esc(&h.evidence));
        let _ = writeln!(o, "<p><strong>Next experiment:</strong> {}</p>", esc(&h.next));
        match (&h.command, &h.experiment) {
            (Some(cmd), _) => {
                let _ = writeln!(o, "<pre>{}</pre>", esc(cmd));
            }
            (None, Some(_)) => {
                o.push_str("<p class=\"muted\">No command: the trace does not say how the run was made.</p>\n");
            }
            (None, None) => {}
        }
        o.push_str("</div>\n");
    }
    if !r.not_examined.is_empty() {
        o.push_str("<h3>Not examined</h3>\n<ul class=\"notes\">\n");
        for n in &r.not_examined {
            let hint = n.enable.as_ref().map(|c| format!(" ({})", enable_hint(c))).unwrap_or_default();
            let _ = writeln!(o, "<li><strong>{}</strong>: {}{}</li>", esc(n.check), esc(&n.why), esc(&hint));
        }
        o.push_str("</ul>\n");
    }
    o.push_str("</section>\n");
    notes(o, r);
}

fn notes(o: &mut String, r: &Report) {
    o.push_str("<section id=\"notes\">\n<h3>Warnings and notes</h3>\n");
    if r.warnings.is_empty() && r.anomalies.is_empty() && r.notes.is_empty() {
        o.push_str("<p>No warning.</p>\n");
    }
    if !r.warnings.is_empty() {
        o.push_str("<ul class=\"notes\">\n");
        for w in &r.warnings {
            let _ = writeln!(o, "<li><strong>warning:</strong> {}</li>", esc(w));
        }
        o.push_str("</ul>\n");
    }
    if !r.anomalies.is_empty() {
        o.push_str("<p>Run anomalies (instants the run wrote):</p>\n<ul class=\"notes\">\n");
        for (step, what) in &r.anomalies {
            let at = step.map_or_else(|| "outside the steps".to_owned(), |s| format!("step {s}"));
            let _ = writeln!(o, "<li>{}: {}</li>", esc(&at), esc_cut(what, LABEL_CHARS));
        }
        o.push_str("</ul>\n");
    }
    if !r.notes.is_empty() {
        o.push_str("<ul class=\"notes\">\n");
        for n in &r.notes {
            let _ = writeln!(o, "<li>note: {}</li>", esc(n));
        }
        o.push_str("</ul>\n");
    }
    o.push_str("</section>\n");
}
