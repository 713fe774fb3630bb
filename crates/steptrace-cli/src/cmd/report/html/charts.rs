//! The page's SVG charts, drawn with plotters' SVG backend, which writes
//! text as `<text>` elements (no font file) and escapes it: per-step
//! device busy and idle by cause (stacked bars), and the top kernels
//! (horizontal bars). The step-time plot is `--plot`'s
//! ([`plot::svg`](crate::cmd::plot::svg)).
//!
//! A chart is only drawn from figures that exist: the callers say "not
//! observed" instead when a part is absent.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use steptrace::analysis::{DeviceStep, DeviceSteps, KernelRow};
use steptrace::display::{escape, label};

use crate::cmd::report::render::ms;

type DrawResult = Result<String, Box<dyn std::error::Error>>;

/// The parts of a step, bottom to top, with their colours.
const PARTS: [(&str, RGBColor); 4] = [
    ("device busy", RGBColor(47, 111, 219)),
    ("idle: host reading input", RGBColor(232, 163, 61)),
    ("idle: host waiting (sync)", RGBColor(201, 79, 79)),
    ("idle: elsewhere (launching, host work)", RGBColor(185, 190, 198)),
];

fn part(s: &DeviceStep, i: usize) -> f64 {
    let v = [s.busy_ms, s.idle_input_ms, s.idle_sync_ms, s.idle_other_ms][i];
    if v.is_finite() {
        v.max(0.0)
    } else {
        0.0
    }
}

/// One stacked bar per counted step of `dev`: busy, then idle by cause;
/// `None` when it has no step.
pub(super) fn device_steps(dev: &DeviceSteps) -> Option<DrawResult> {
    (!dev.steps.is_empty()).then(|| draw_device_steps(dev))
}

fn draw_device_steps(dev: &DeviceSteps) -> DrawResult {
    let steps = &dev.steps;
    let n = steps.len();
    let top = steps
        .iter()
        .map(|s| (0..4).map(|i| part(s, i)).sum::<f64>().max(s.step_ms))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 400)).into_drawing_area();
        root.fill(&WHITE)?;
        let (plot, legend) = root.split_horizontally(720);
        let mut chart = ChartBuilder::on(&plot)
            .caption(format!("device busy and idle per step ({})", label(&dev.device, 48)), ("sans-serif", 17))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(-0.5..(n as f64 - 0.5), 0.0..(top * 1.08).max(1e-3))?;
        let step_at = |x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
                format!("#{}", steps[i as usize].step)
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(RGBColor(236, 238, 241))
            .max_light_lines(1)
            .x_labels(n.min(20))
            .x_label_formatter(&step_at)
            .x_desc("counted step (ProfilerStep#N)")
            .y_desc("ms of the step (wall clock)")
            .draw()?;
        let half = 0.36;
        for (k, (_, color)) in PARTS.iter().enumerate() {
            chart.draw_series(steps.iter().enumerate().map(|(i, s)| {
                let base: f64 = (0..k).map(|j| part(s, j)).sum();
                let x = i as f64;
                Rectangle::new([(x - half, base), (x + half, base + part(s, k))], color.filled())
            }))?;
        }
        // A cause the trace cannot see is drawn as nothing and named so.
        let mut parts: Vec<(String, RGBColor)> = PARTS.iter().map(|(n, c)| ((*n).to_owned(), *c)).collect();
        for (k, seen) in [(1, dev.input_seen), (2, dev.wait_seen)] {
            if !seen {
                parts[k].0.push_str(" (not observed)");
            }
        }
        legend_box(&legend, &parts)?;
        root.present()?;
    }
    Ok(svg)
}

/// A legend in its own area: a swatch and a name per part.
fn legend_box(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    parts: &[(String, RGBColor)],
) -> Result<(), Box<dyn std::error::Error>> {
    let style = ("sans-serif", 13).into_font().color(&BLACK);
    for (i, (name, color)) in parts.iter().rev().enumerate() {
        let y = 60 + i as i32 * 26;
        area.draw(&Rectangle::new([(8, y - 7), (22, y + 7)], color.filled()))?;
        area.draw(&Text::new(name.clone(), (30, y), style.clone().pos(Pos::new(HPos::Left, VPos::Center))))?;
    }
    area.draw(&Text::new(
        "(top to bottom of each bar)".to_string(),
        (8, 60 + parts.len() as i32 * 26),
        ("sans-serif", 12).into_font().color(&RGBColor(87, 96, 106)).pos(Pos::new(HPos::Left, VPos::Center)),
    ))?;
    Ok(())
}

/// Kernels by device time per step, heaviest on top, numbered as in the
/// table; `None` when there is no row.
pub(super) fn kernels(rows: &[KernelRow]) -> Option<DrawResult> {
    (!rows.is_empty()).then(|| draw_kernels(rows))
}

fn draw_kernels(rows: &[KernelRow]) -> DrawResult {
    let n = rows.len();
    let top = rows.iter().map(|r| r.per_step_ms).filter(|v| v.is_finite()).fold(0.0, f64::max);
    let height = 90 + 30 * n as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, height)).into_drawing_area();
        root.fill(&WHITE)?;
        // Row i sits at y = n - 1 - i, so that the first row is on top.
        let name_at = |y: &f64| {
            let j = y.round();
            if (y - j).abs() < 1e-6 && j >= 0.0 && (j as usize) < n {
                let i = n - 1 - j as usize;
                format!("{}. {}", i + 1, mid_cut(&rows[i].label, 44))
            } else {
                String::new()
            }
        };
        let mut chart = ChartBuilder::on(&root)
            .caption("top kernels by device time per step", ("sans-serif", 17))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(340)
            .build_cartesian_2d(0.0..(top * 1.35).max(1e-6), -0.5..(n as f64 - 0.5))?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .light_line_style(RGBColor(236, 238, 241))
            .max_light_lines(1)
            .y_labels(n)
            .y_label_formatter(&name_at)
            .y_label_style(("sans-serif", 12))
            .x_desc("device ms per counted step (sum of the kernel's calls)")
            .draw()?;
        let color = RGBColor(47, 111, 219);
        chart.draw_series(rows.iter().enumerate().map(|(i, r)| {
            let y = (n - 1 - i) as f64;
            Rectangle::new([(0.0, y - 0.34), (r.per_step_ms.max(0.0), y + 0.34)], color.filled())
        }))?;
        let style = ("sans-serif", 12).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
        chart.draw_series(rows.iter().enumerate().map(|(i, r)| {
            let y = (n - 1 - i) as f64;
            let text =
                format!("{} ms, {} of busy", ms(r.per_step_ms), crate::cmd::report::device::share(r.share_of_busy, 0));
            EmptyElement::at((r.per_step_ms.max(0.0), y)) + Text::new(text, (5, 0), style.clone())
        }))?;
        root.present()?;
    }
    Ok(svg)
}

/// `text` (control characters escaped) in at most `max` characters, cut in
/// the middle so that names differing at their end stay apart:
/// `matmul_entry_lhs_f32…acc_f32_acc_size_4`. A length suffix that
/// [`label`] added (`… (300 bytes)`) is dropped first.
fn mid_cut(text: &str, max: usize) -> String {
    let text = escape(text);
    let text = match text.rfind("… (") {
        Some(at) if text.ends_with(" bytes)") => &text[..at],
        _ => &text[..],
    };
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= max {
        return text.to_owned();
    }
    let tail = max * 2 / 5;
    let head = max - tail - 1;
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - tail..]);
    out
}

#[cfg(test)]
mod tests {
    use super::mid_cut;

    #[test]
    fn long_names_are_cut_in_the_middle() {
        assert_eq!(mid_cut("short", 44), "short");
        let cut = mid_cut("matmul_entry_lhs_f32_lhs_size_4_rhs_f32_rhs_size_4_acc_f32_acc_size_4", 30);
        assert!(cut.starts_with("matmul_entry_lhs_…") && cut.ends_with("_acc_size_4"), "{cut}");
        assert_eq!(cut.chars().count(), 30);
        assert_eq!(mid_cut(&format!("{}… (300 bytes)", "k".repeat(96)), 10), "kkkkk…kkkk");
        assert_eq!(mid_cut("a\u{1b}b", 44), "a\\x1bb");
    }
}
