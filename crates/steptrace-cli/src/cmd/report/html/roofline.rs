//! "How fast could it be" on the HTML page: the step split around its device floor, the
//! layers ranked by time above their floor, and a roofline chart (log-log: arithmetic
//! intensity against achieved throughput, one point per layer and per op kind, the measured
//! roofs drawn).

use std::fmt::Write as _;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use steptrace::analysis::{rate, DeviceView, PricedRow, RooflineView, Roofs};
use steptrace::display::label;

use super::markup::{esc, figure, not_observed, pct, table, Cell};
use crate::cmd::report::render::ms;

/// Rows of each table.
const ROWS: usize = 15;

type DrawResult = Result<String, Box<dyn std::error::Error>>;

pub(super) fn section(o: &mut String, d: &DeviceView) {
    let Some(r) = &d.roofline else { return };
    o.push_str("<h3>How fast could it be</h3>\n");
    let _ = writeln!(
        o,
        "<p>{} of {} ms kernel time per step priced ({}), over {} counted steps: each fused block's minimum bytes \
         and FLOPs, from burn's operations, against the device's measured limits.</p>",
        esc(&ms(r.priced_ms_per_step)),
        esc(&ms(r.kernel_ms_per_step)),
        esc(&pct(r.priced_share)),
        r.steps
    );
    match (&r.roofs, &r.no_floor) {
        (Some(roofs), _) => limits(o, roofs),
        (None, Some(why)) => not_observed(o, "the device floor", why),
        (None, None) => {}
    }
    if let Some(s) = &r.step {
        let share = |v: f64| if s.step_ms > 0.0 { pct(v / s.step_ms) } else { String::new() };
        let mut rows = Vec::new();
        let parts: [(&str, Option<f64>); 7] = [
            ("floor: the least the priced work takes", Some(s.floor_ms)),
            ("kernel time above the floor", Some(s.above_floor_ms)),
            ("kernels not priced", Some(s.unpriced_ms)),
            ("device idle: host reading input", s.idle_input_ms),
            ("device idle: host waiting (sync)", s.idle_sync_ms),
            ("device idle: launching, host work", Some(s.idle_other_ms)),
            ("the rest (copies; less overlapping kernels)", Some(s.rest_ms)),
        ];
        for (what, v) in parts {
            rows.push(match v {
                Some(v) => vec![Cell::Text(what.into()), Cell::Num(ms(v)), Cell::Num(share(v))],
                None => vec![Cell::Text(what.into()), Cell::Num("not observed".into()), Cell::Num(String::new())],
            });
        }
        let _ = writeln!(o, "<p>The step, {} ms, of which:</p>", esc(&ms(s.step_ms)));
        table(o, &["part of the step", "ms/step", "share"], rows);
    }
    priced(o, "layer (span path)", &r.by_layer);
    priced(o, "op kind", &r.by_op_kind);
    priced(o, "phase", &r.by_phase);
    priced(o, "kernel", &r.by_kernel);
    if let Some(roofs) = &r.roofs {
        match chart(r, roofs) {
            Ok(svg) => figure(
                o,
                &svg,
                "Roofline: arithmetic intensity (FLOPs per byte) against achieved FLOP/s, log-log; the sloped roof is \
                 the measured bandwidth, the flat ones the measured throughput by dtype; dots are layers, squares op \
                 kinds",
            ),
            Err(e) => not_observed(o, "the roofline chart", &format!("it could not be drawn: {e}")),
        }
    }
    if !r.unpriced.is_empty() {
        let rows = r
            .unpriced
            .iter()
            .take(ROWS)
            .map(|t| vec![Cell::Text(t.name.clone()), Cell::Num(ms(t.ms_per_step)), Cell::Num(pct(t.share))])
            .collect();
        table(o, &["not priced (reason)", "ms/step", "share"], rows);
    }
    for note in &r.notes {
        let _ = writeln!(o, "<p class=\"muted\">{}</p>", esc(note));
    }
}

fn limits(o: &mut String, roofs: &Roofs) {
    let dtypes: Vec<String> = roofs.throughput.iter().map(|(d, v)| format!("{d} {}", rate(*v, "FLOP/s"))).collect();
    let _ = writeln!(
        o,
        "<p>Limits: {} memory, {} — measured on {}{} ({}), from {}.</p>",
        esc(&rate(roofs.bandwidth, "B/s")),
        esc(&dtypes.join(", ")),
        esc(&roofs.device),
        if roofs.cpu { ", CPU figures" } else { "" },
        esc(&roofs.measured_at),
        esc(&roofs.from)
    );
}

fn priced(o: &mut String, first: &str, rows: &[PricedRow]) {
    if rows.is_empty() {
        return;
    }
    let dash = || "-".to_owned();
    let body = rows
        .iter()
        .take(ROWS)
        .map(|r| {
            vec![
                Cell::Text(r.name.clone()),
                Cell::Num(ms(r.ms_per_step)),
                Cell::Num(r.floor_ms.map_or_else(dash, ms)),
                Cell::Num(r.above_floor_ms.map_or_else(dash, ms)),
                Cell::Text(r.bound.unwrap_or("-").to_owned()),
                Cell::Num(r.efficiency.map_or_else(dash, pct)),
                Cell::Num(format!("{:.2}", r.intensity)),
                Cell::Num(rate(r.achieved_flops, "FLOP/s")),
                Cell::Num(rate(r.achieved_bandwidth, "B/s")),
            ]
        })
        .collect();
    table(o, &[first, "ms/step", "floor", "above", "bound", "of roof", "FLOP/B", "FLOP/s", "bytes/s"], body);
}

/// Log-log roofline: the roofs, a dot per layer, a square per op kind.
fn chart(r: &RooflineView, roofs: &Roofs) -> DrawResult {
    let points: Vec<(&PricedRow, bool)> = r
        .by_layer
        .iter()
        .filter(|p| p.name.contains(" > "))
        .map(|p| (p, true))
        .chain(r.by_op_kind.iter().map(|p| (p, false)))
        .filter(|(p, _)| {
            p.intensity > 0.0 && p.achieved_flops > 0.0 && p.intensity.is_finite() && p.achieved_flops.is_finite()
        })
        .collect();
    let peak = roofs.throughput.values().copied().fold(0.0, f64::max);
    let ridge = peak / roofs.bandwidth;
    let lo_x = points.iter().map(|(p, _)| p.intensity).fold(ridge, f64::min) / 4.0;
    let hi_x = points.iter().map(|(p, _)| p.intensity).fold(ridge, f64::max) * 4.0;
    let lo_y = points.iter().map(|(p, _)| p.achieved_flops).fold(peak, f64::min) / 4.0;
    let hi_y = peak * 2.0;
    // plotters' log axes loop without end over an infinite or inverted range: a chart whose
    // limits or points do not give a finite, positive, increasing range is not drawn.
    if let Some(why) = unusable_range(roofs.bandwidth, peak, [lo_x, hi_x, lo_y, hi_y]) {
        return Err(why.into());
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 520)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("roofline ({})", label(&roofs.device, 60)), ("sans-serif", 17))
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(90)
            .build_cartesian_2d((lo_x..hi_x).log_scale(), (lo_y..hi_y).log_scale())?;
        chart
            .configure_mesh()
            .light_line_style(RGBColor(236, 238, 241))
            .x_desc("arithmetic intensity (FLOP per byte)")
            .y_desc("achieved FLOP/s")
            .y_label_formatter(&|v| rate(*v, "FLOP/s"))
            .x_label_formatter(&|v| format!("{v:.3}"))
            .draw()?;
        let roof_color = RGBColor(60, 60, 60);
        // Bandwidth: throughput = intensity × bandwidth, up to the highest flat roof.
        chart.draw_series(LineSeries::new(
            [(lo_x, lo_x * roofs.bandwidth), (ridge, peak)],
            roof_color.stroke_width(2),
        ))?;
        let style = ("sans-serif", 12).into_font().color(&roof_color).pos(Pos::new(HPos::Left, VPos::Bottom));
        for (dtype, v) in &roofs.throughput {
            let from = v / roofs.bandwidth;
            chart.draw_series(LineSeries::new([(from, *v), (hi_x, *v)], roof_color.stroke_width(2)))?;
            chart.draw_series(std::iter::once(Text::new(
                format!("{dtype} {}", rate(*v, "FLOP/s")),
                (from, *v),
                style.clone(),
            )))?;
        }
        chart.draw_series(std::iter::once(Text::new(
            format!("{} memory", rate(roofs.bandwidth, "B/s")),
            (lo_x * 1.2, lo_x * 1.2 * roofs.bandwidth),
            style.clone(),
        )))?;
        let layer = RGBColor(47, 111, 219);
        let kind = RGBColor(232, 163, 61);
        let label_style = ("sans-serif", 11).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
        for (p, is_layer) in &points {
            let at = (p.intensity, p.achieved_flops);
            if *is_layer {
                chart.draw_series(std::iter::once(Circle::new(at, 5, layer.filled())))?;
            } else {
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(at.0 / 1.06, at.1 / 1.12), (at.0 * 1.06, at.1 * 1.12)],
                    kind.filled(),
                )))?;
            }
            let name = label(&p.name, 32).into_owned();
            chart.draw_series(std::iter::once(EmptyElement::at(at) + Text::new(name, (8, 0), label_style.clone())))?;
        }
        root.present()?;
    }
    Ok(svg)
}

/// Why the chart's axes cannot be drawn from these limits and ranges, if they cannot.
fn unusable_range(bandwidth: f64, peak: f64, [lo_x, hi_x, lo_y, hi_y]: [f64; 4]) -> Option<String> {
    let usable = |v: f64| v.is_finite() && v > 0.0;
    if !usable(bandwidth) || !usable(peak) {
        return Some(format!(
            "its limits are not finite positive figures (bandwidth {bandwidth:e} B/s, peak {peak:e} FLOP/s)"
        ));
    }
    let ranges = [("intensity", lo_x, hi_x), ("throughput", lo_y, hi_y)];
    ranges
        .into_iter()
        .find(|&(_, lo, hi)| !(usable(lo) && usable(hi) && lo < hi))
        .map(|(axis, lo, hi)| format!("its {axis} axis would run from {lo:e} to {hi:e}, which a log scale cannot draw"))
}

#[cfg(test)]
mod range_tests {
    use super::unusable_range;

    #[test]
    fn limits_that_overflow_the_axes_are_refused_with_the_reason() {
        assert_eq!(unusable_range(4.8e12, 9.9e14, [1.0, 1e4, 1e9, 2e15]), None);
        let huge = unusable_range(4.8e12, f64::INFINITY, [1.0, f64::INFINITY, 1e9, f64::INFINITY]).expect("refused");
        assert!(huge.contains("not finite"), "{huge}");
        // A bandwidth so small that the ridge is infinite.
        let ridge = 1e15 / 1e-300;
        let tiny = unusable_range(1e-300, 1e15, [1.0, ridge * 4.0, 1e9, 2e15]).expect("refused");
        assert!(tiny.contains("intensity axis"), "{tiny}");
        assert!(unusable_range(1e12, 1e15, [4.0, 1.0, 1e9, 2e15]).is_some(), "an inverted range");
        assert!(unusable_range(0.0, 1e15, [1.0, 4.0, 1e9, 2e15]).is_some(), "a zero bandwidth");
    }
}
