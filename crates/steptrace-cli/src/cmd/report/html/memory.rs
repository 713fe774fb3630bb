//! Device memory on the HTML page (`train --memory`): in use against reserved at each point of
//! the step, as bars, and what holds the memory at the highest sample, as one stacked bar.

use std::fmt::Write as _;

use steptrace::analysis::MemoryView;

use super::markup::{esc, pct, table, Cell};

/// Colours of the categories, in the report's order.
const COLOURS: [(&str, &str); 6] = [
    ("parameters", "#4a7ab5"),
    ("optimizer_state", "#8cb369"),
    ("gradients", "#f4a259"),
    ("input_batch", "#bc4b51"),
    ("other", "#9e9e9e"),
    ("unattributed", "#5b3758"),
];

fn bar(share: f64, colour: &str) -> String {
    format!(
        "<span style=\"display:inline-block;height:0.8em;background:{colour};width:{:.1}%\"></span>",
        (share * 100.0).clamp(0.0, 100.0)
    )
}

pub(super) fn section(o: &mut String, m: Option<&MemoryView>) {
    let Some(m) = m else { return };
    o.push_str("<h3>Device memory</h3>\n");
    let widest = m
        .points
        .iter()
        .map(|p| p.reserved_mb.as_ref().map_or(p.in_use_mb.max, |r| r.median.max(p.in_use_mb.max)))
        .fold(f64::MIN_POSITIVE, f64::max);
    let rows = m
        .points
        .iter()
        .map(|p| {
            let reserved = p.reserved_mb.as_ref().map(|r| r.median);
            vec![
                Cell::Text(p.after.clone()),
                Cell::Num(format!("{:.2}", p.in_use_mb.median)),
                Cell::Num(reserved.map_or_else(|| "not observed".to_owned(), |r| format!("{r:.2}"))),
                Cell::Html(format!(
                    "{}<br>{}",
                    bar(p.in_use_mb.median / widest, "#4a7ab5"),
                    bar(reserved.unwrap_or(0.0) / widest, "#c8d6e5")
                )),
            ]
        })
        .collect();
    let _ = writeln!(
        o,
        "<p>MB, median over {} counted steps; bars: in use (dark) against reserved (light), to the largest.</p>",
        m.steps
    );
    table(o, &["after", "in use MB", "reserved MB", "in use / reserved"], rows);
    let _ = writeln!(
        o,
        "<p>Highest sample: {:.2} MB in use, most often after {} (the highest sample: a peak between samples is not \
         seen).{}</p>",
        m.highest_mb.median,
        esc(&m.highest_after),
        match (m.headroom_mb, m.device_mb) {
            (Some(h), Some(d)) => format!(" Headroom: {h:.0} MB of the device's {d:.0} MB."),
            _ => " Headroom: not observed (the trace does not give the device's memory).".to_owned(),
        }
    );
    if !m.categories.is_empty() {
        let mut stacked = String::from("<div style=\"display:flex;width:100%;height:1.2em\">");
        for c in &m.categories {
            let colour = COLOURS.iter().find(|(n, _)| *n == c.name).map_or("#000", |(_, col)| col);
            let _ = write!(
                stacked,
                "<span title=\"{}: {:.2} MB\" style=\"background:{colour};width:{:.2}%\"></span>",
                esc(&c.name.replace('_', " ")),
                c.mb,
                (c.share * 100.0).clamp(0.0, 100.0)
            );
        }
        stacked.push_str("</div>\n");
        o.push_str("<p>What holds it at the highest sample:</p>\n");
        o.push_str(&stacked);
        let rows = m
            .categories
            .iter()
            .map(|c| {
                let colour = COLOURS.iter().find(|(n, _)| *n == c.name).map_or("#000", |(_, col)| col);
                vec![
                    Cell::Html(format!(
                        "<span style=\"display:inline-block;width:0.8em;height:0.8em;background:{colour}\"></span> {}",
                        esc(&c.name.replace('_', " "))
                    )),
                    Cell::Num(format!("{:.3}", c.mb)),
                    Cell::Num(pct(c.share)),
                ]
            })
            .collect();
        table(o, &["category", "MB", "share of in use"], rows);
    }
    if !m.not_observed.is_empty() {
        let _ = writeln!(o, "<p class=\"muted\">Not observed: {}.</p>", esc(&m.not_observed.join(", ")));
    }
}
