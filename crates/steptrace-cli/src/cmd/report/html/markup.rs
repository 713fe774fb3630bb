//! The page's building blocks: escaping, tables, "not observed" boxes and
//! the style sheet.
//!
//! Every string that comes from a trace (names, paths, manifest prose,
//! reasons) goes through [`esc`] or [`esc_cut`]: control characters are
//! first written as visible escapes ([`display`](steptrace::display)),
//! then `& < > " '` become entities, so a name can neither close a tag
//! nor open one, in text or in an attribute value.

use std::fmt::Write as _;

use steptrace::analysis::Stats;
use steptrace::display::{escape, label};

use crate::cmd::report::render::ms;

/// `text`, safe in HTML text and in a quoted attribute value.
pub(super) fn esc(text: &str) -> String {
    entities(&escape(text))
}

/// `text` cut after `max` characters (with its length), then [`esc`].
pub(super) fn esc_cut(text: &str, max: usize) -> String {
    entities(&label(text, max))
}

fn entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// One cell of a [`table`].
pub(super) enum Cell {
    /// Text, escaped when written.
    Text(String),
    /// A figure, escaped and right-aligned.
    Num(String),
    /// Markup the caller built from escaped parts.
    Html(String),
    /// Markup across this many columns.
    Wide(String, usize),
}

/// A table with `head` (static text) and `rows`.
pub(super) fn table(o: &mut String, head: &[&str], rows: Vec<Vec<Cell>>) {
    o.push_str("<table>\n<thead><tr>");
    for h in head {
        let _ = write!(o, "<th>{}</th>", esc(h));
    }
    o.push_str("</tr></thead>\n<tbody>\n");
    for row in rows {
        o.push_str("<tr>");
        for cell in row {
            match cell {
                Cell::Text(t) => {
                    let _ = write!(o, "<td class=\"name\">{}</td>", esc(&t));
                }
                Cell::Num(t) => {
                    let _ = write!(o, "<td class=\"n\">{}</td>", esc(&t));
                }
                Cell::Html(h) => {
                    let _ = write!(o, "<td class=\"name\">{h}</td>");
                }
                Cell::Wide(h, columns) => {
                    let _ = write!(o, "<td class=\"name\" colspan=\"{columns}\">{h}</td>");
                }
            }
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody>\n</table>\n");
}

/// A key/value list; values are markup built from escaped parts.
pub(super) fn facts(o: &mut String, rows: &[(&str, String)]) {
    o.push_str("<dl class=\"kv\">\n");
    for (k, v) in rows {
        let _ = writeln!(o, "<dt>{}</dt><dd>{v}</dd>", esc(k));
    }
    o.push_str("</dl>\n");
}

/// "not observed" and why (escaped here): never a zero, never an empty
/// chart.
pub(super) fn not_observed(o: &mut String, what: &str, why: &str) {
    let _ =
        writeln!(o, "<p class=\"absent\"><strong>{}: not observed</strong> — {}</p>", esc(what), esc_cut(why, 2000));
}

/// A figure with its caption; `svg` is a plotters document.
pub(super) fn figure(o: &mut String, svg: &str, caption: &str) {
    let _ = writeln!(o, "<figure>\n{}\n<figcaption>{}</figcaption>\n</figure>", inline_svg(svg), esc(caption));
}

/// A plotters SVG document made fit to sit inside the page: without its
/// namespace declaration (HTML needs none, and the page then names no URL
/// of its own at all) and with a role for screen readers.
fn inline_svg(svg: &str) -> String {
    svg.replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1).replacen("<svg ", "<svg role=\"img\" ", 1)
}

/// `median X (p90 Y)` in ms, with the unit.
pub(super) fn median_p90(s: &Stats, unit: &str) -> String {
    format!("median {} {unit} (p90 {}, n={})", ms(s.median), ms(s.p90), s.n)
}

/// A share (0 to 1) as a percentage; a value outside 0 to 100% is no share, and is never
/// shown as one.
pub(super) fn pct(v: f64) -> String {
    crate::cmd::report::device::share(v, 1)
}

/// Bytes, with KiB/MiB beside them from 1 KiB up.
pub(super) fn bytes(n: f64) -> String {
    if !n.is_finite() {
        return "n/a".to_owned();
    }
    let kib = n / 1024.0;
    if kib >= 1024.0 {
        format!("{n:.0} B ({:.1} MiB)", kib / 1024.0)
    } else if kib >= 1.0 {
        format!("{n:.0} B ({kib:.1} KiB)")
    } else {
        format!("{n:.0} B")
    }
}

/// A count per step: whole when it is whole.
pub(super) fn count(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The style sheet: readable at 1200 px, printable, no font file.
pub(super) const STYLE: &str = r#"
:root { color-scheme: light; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: #1b1f24; background: #fff; margin: 0; }
main { max-width: 1160px; margin: 0 auto; padding: 12px 20px 48px; }
h1 { font-size: 24px; margin: 10px 0 6px; overflow-wrap: anywhere; }
h2 { font-size: 20px; border-bottom: 2px solid #d0d7de; padding-bottom: 4px; margin-top: 34px; }
h3 { font-size: 16px; margin: 22px 0 6px; overflow-wrap: anywhere; }
nav { font-size: 13px; color: #57606a; }
nav a { color: #0a58ca; margin-right: 12px; }
.banner { padding: 10px 14px; border-radius: 6px; margin: 10px 0; font-weight: 600; overflow-wrap: anywhere; }
.fallback { background: #ffe3e0; border: 2px solid #cf222e; color: #82071e; }
.unobserved, .warnings { background: #fff8c5; border: 2px solid #bf8700; color: #4d2d00; }
.absent { background: #f6f8fa; border-left: 4px solid #bf8700; padding: 6px 10px; overflow-wrap: anywhere; }
.headline { font-size: 26px; font-weight: 700; margin: 6px 0; }
.muted { color: #57606a; font-size: 13px; }
table { border-collapse: collapse; margin: 8px 0 12px; font-size: 13px; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.name { max-width: 560px; overflow-wrap: anywhere; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 8px 0; }
dl.kv dt { font-weight: 600; }
dl.kv dd { margin: 0; overflow-wrap: anywhere; }
pre { background: #f6f8fa; border: 1px solid #d0d7de; border-radius: 4px; padding: 8px 10px;
      white-space: pre-wrap; overflow-wrap: anywhere; font-size: 13px; }
code { font-size: 13px; overflow-wrap: anywhere; }
svg { max-width: 100%; height: auto; display: block; }
figure { margin: 12px 0; }
figcaption { font-size: 13px; color: #57606a; }
.hyp { border: 1px solid #d0d7de; border-radius: 6px; padding: 6px 14px; margin: 10px 0; }
ul.files li, ul.notes li { overflow-wrap: anywhere; }
@media print {
  nav { display: none; }
  body { font-size: 10.5pt; }
  main { max-width: none; padding: 0; }
  h2 { break-after: avoid; }
  figure, .hyp, tr { break-inside: avoid; }
  .banner, .absent, th { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_controls_are_escaped() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"y\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;y&quot;"
        );
        assert_eq!(esc("a\u{1b}[2J\u{202e}"), "a\\x1b[2J\\u{202e}");
        assert_eq!(esc_cut(&"<".repeat(10), 3), "&lt;&lt;&lt;… (10 bytes)");
    }

    #[test]
    fn svg_loses_its_namespace_url() {
        let svg = "<svg width=\"1\" height=\"1\" viewBox=\"0 0 1 1\" xmlns=\"http://www.w3.org/2000/svg\">\n</svg>";
        let inline = inline_svg(svg);
        assert!(!inline.contains("http") && inline.starts_with("<svg role=\"img\" width"), "{inline}");
    }

    #[test]
    fn figures_are_readable() {
        assert_eq!(bytes(16384.0), "16384 B (16.0 KiB)");
        assert_eq!(bytes(12.0), "12 B");
        assert_eq!(count(3.0), "3");
        assert_eq!(count(2.5), "2.5");
        assert_eq!(pct(0.256), "25.6%");
        assert_eq!(pct(1.0 + 1e-12), "100.0%");
        for impossible in [38.42, -0.2, f64::INFINITY, f64::NAN] {
            assert_eq!(pct(impossible), "not meaningful: inconsistent input");
        }
    }
}
