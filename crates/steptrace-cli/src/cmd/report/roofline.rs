//! The report's "how fast could it be" section: the step against its device floor, and the
//! layers, op kinds and phases ranked by their kernel time above the floor.

use std::fmt::Write as _;

use steptrace::analysis::{rate, PricedRow, RooflineView};
use steptrace::display::label;

use super::attribution::right;

/// A duration in ms; an exact 0 as `0`.
fn ms(v: f64) -> String {
    if v == 0.0 {
        "0".to_owned()
    } else {
        super::render::ms(v)
    }
}

/// Rows of each table in the text report (`--json` has them all).
const ROWS: usize = 10;

/// Characters of a name in the first column.
const NAME_CHARS: usize = 40;

pub(super) fn render_roofline(o: &mut String, r: &RooflineView) {
    let _ = writeln!(o, "\n== How fast could it be (kernels priced against the device's limits, per step)");
    let _ = writeln!(
        o,
        "priced        {} of {} ms kernel time per step ({:.1}%) over {} steps",
        ms(r.priced_ms_per_step),
        ms(r.kernel_ms_per_step),
        r.priced_share * 100.0,
        r.steps
    );
    match (&r.roofs, &r.no_floor) {
        (Some(roofs), _) => {
            let dtypes: Vec<String> =
                roofs.throughput.iter().map(|(d, v)| format!("{d} {}", rate(*v, "FLOP/s"))).collect();
            let _ = writeln!(
                o,
                "limits        {} memory, {}\n              ({}{}, measured {}, from {})",
                rate(roofs.bandwidth, "B/s"),
                dtypes.join(", "),
                roofs.device,
                if roofs.cpu { ", CPU figures" } else { "" },
                roofs.measured_at,
                roofs.from
            );
        }
        (None, Some(why)) => {
            let _ = writeln!(o, "floor         not computed: {why}");
        }
        (None, None) => {}
    }
    if let Some(s) = &r.step {
        let share = |v: f64| if s.step_ms > 0.0 { format!("{:>5.1}%", v / s.step_ms * 100.0) } else { String::new() };
        let _ = writeln!(o, "step          {} ms, of which:", ms(s.step_ms));
        let rows: [(&str, Option<f64>, &str); 7] = [
            ("floor (the least the priced work takes)", Some(s.floor_ms), ""),
            ("kernel time above the floor", Some(s.above_floor_ms), ""),
            ("kernels not priced", Some(s.unpriced_ms), ""),
            ("device idle: host reading input", s.idle_input_ms, "no input span in the steps"),
            ("device idle: host waiting (sync)", s.idle_sync_ms, "no waiting span in the steps"),
            ("device idle: launching, host work", Some(s.idle_other_ms), ""),
            ("the rest (copies; less overlapping kernels)", Some(s.rest_ms), ""),
        ];
        for (what, v, why) in rows {
            match v {
                Some(v) => {
                    let _ = writeln!(o, "  {what:<44} {:>9} ms  {}", ms(v), share(v));
                }
                None => {
                    let _ = writeln!(o, "  {what:<44} not observed: {why}");
                }
            }
        }
    }
    table(o, "layer (span path)", &r.by_layer);
    table(o, "op kind", &r.by_op_kind);
    table(o, "phase", &r.by_phase);
    table(o, "kernel", &r.by_kernel);
    if r.unpriced.is_empty() {
        let _ = writeln!(o, "not priced: none");
    } else {
        let mut t = crate::console::table();
        t.set_header(["not priced (reason)", "ms/step", "share", "kernels"]);
        for row in r.unpriced.iter().take(ROWS) {
            t.add_row([
                label(&row.name, 60).into_owned(),
                ms(row.ms_per_step),
                format!("{:.1}%", row.share * 100.0),
                format!("{:.1}", row.kernels_per_step),
            ]);
        }
        right(&mut t, 1..4);
        let _ = writeln!(o, "{t}");
    }
    for note in &r.notes {
        let _ = writeln!(o, "note: {note}");
    }
}

fn table(o: &mut String, first: &str, rows: &[PricedRow]) {
    if rows.is_empty() {
        return;
    }
    let floors = rows.iter().any(|r| r.floor_ms.is_some());
    let mut t = crate::console::table();
    if floors {
        t.set_header([first, "ms/step", "floor", "above", "bound", "of roof", "FLOP/B", "achieved"]);
    } else {
        t.set_header([first, "ms/step", "FLOP/B", "FLOP/s", "bytes/s"]);
    }
    for row in rows.iter().take(ROWS) {
        let name = label(&row.name, NAME_CHARS).into_owned();
        // The rate of the limit that bounds it.
        let achieved = match row.bound {
            Some("compute") => rate(row.achieved_flops, "FLOP/s"),
            _ => rate(row.achieved_bandwidth, "B/s"),
        };
        if floors {
            t.add_row([
                name,
                ms(row.ms_per_step),
                row.floor_ms.map_or_else(|| "-".into(), ms),
                row.above_floor_ms.map_or_else(|| "-".into(), ms),
                row.bound.unwrap_or("-").to_owned(),
                row.efficiency.map_or_else(|| "-".into(), |e| format!("{:.1}%", e * 100.0)),
                format!("{:.2}", row.intensity),
                achieved,
            ]);
        } else {
            t.add_row([
                name,
                ms(row.ms_per_step),
                format!("{:.2}", row.intensity),
                rate(row.achieved_flops, "FLOP/s"),
                rate(row.achieved_bandwidth, "B/s"),
            ]);
        }
    }
    right(&mut t, 1..if floors { 7 } else { 5 });
    let _ = writeln!(o, "{t}");
    if rows.len() > ROWS {
        let _ = writeln!(o, "({} more rows; --json has them all)", rows.len() - ROWS);
    }
}
