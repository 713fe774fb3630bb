//! `--plot`: step times across the run as an SVG, startup and windows
//! marked. The SVG backend writes text as `<text>` elements, so no font
//! file is needed.

use std::fs::OpenOptions;
use std::io::{ErrorKind, Write};
use std::path::Path;

use anyhow::{bail, Context};
use plotters::prelude::*;
use steptrace::analysis::Report;
use steptrace::display::{escape, label};

/// The plot as an SVG document (`<svg ...>...</svg>`), for `--plot` and
/// the HTML page.
///
/// # Errors
///
/// When the report has no step times, or plotters fails to draw.
pub fn svg(report: &Report) -> anyhow::Result<String> {
    if report.timing.steps.is_empty() {
        bail!("no ProfilerStep#N spans in these traces: there are no step times to plot");
    }
    draw(report).map_err(|e| anyhow::anyhow!("cannot draw the plot: {e}"))
}

/// Writes `bytes` to `path`, a new file: an existing file is refused and
/// left as it is; a failed write removes what it began.
pub(crate) fn write_new(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let shown = escape(&path.display().to_string()).into_owned();
    let folder = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(folder) = folder.filter(|f| !f.is_dir()) {
        bail!("cannot create {shown}: the folder {} does not exist", escape(&folder.display().to_string()));
    }
    let mut file = match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == ErrorKind::AlreadyExists => {
            bail!("{shown} already exists: an existing file is never overwritten")
        }
        Err(err) => return Err(err).with_context(|| format!("cannot create {shown}")),
    };
    if let Err(err) = file.write_all(bytes).and_then(|()| file.sync_all()) {
        drop(file);
        let _ = std::fs::remove_file(path);
        return Err(err).with_context(|| format!("cannot write {shown}"));
    }
    Ok(())
}

fn draw(report: &Report) -> Result<String, Box<dyn std::error::Error>> {
    let steps = &report.timing.steps;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 480)).into_drawing_area();
        root.fill(&WHITE)?;
        let first = steps.iter().map(|s| s.step).min().unwrap_or(0) as f64;
        let last = steps.iter().map(|s| s.step).max().unwrap_or(0) as f64;
        let top = steps.iter().map(|s| s.ms).fold(0.0, f64::max) * 1.1;
        let title = match &report.run.backend {
            Some(b) => format!("ms per step ({})", label(b, 80)),
            None => "ms per step".to_owned(),
        };
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d((first - 0.5)..(last + 0.5), 0.0..top.max(1e-3))?;
        chart.configure_mesh().x_desc("step (ProfilerStep#N)").y_desc("ms/step (wall clock)").draw()?;

        // Each file is one recorded window: shade it.
        for source in 0..report.sources.len() {
            let in_window: Vec<f64> = steps.iter().filter(|s| s.source == source).map(|s| s.step as f64).collect();
            if let (Some(a), Some(b)) = (in_window.first(), in_window.last()) {
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(a - 0.5, 0.0), (b + 0.5, top)],
                    RGBColor(230, 238, 250).filled(),
                )))?;
            }
        }
        if let Some(n) = report.run.startup_steps {
            let x = n as f64 - 0.5;
            if x > first - 0.5 && x < last + 0.5 {
                chart
                    .draw_series(LineSeries::new([(x, 0.0), (x, top)], RED.stroke_width(2)))?
                    .label("end of startup")
                    .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], RED));
            }
        }
        if let Some(s) = &report.timing.steady_ms {
            chart
                .draw_series(LineSeries::new([(first - 0.5, s.median), (last + 0.5, s.median)], BLACK.mix(0.5)))?
                .label(format!("steady median {:.3} ms", s.median))
                .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK.mix(0.5)));
        }
        for source in 0..report.sources.len() {
            let points: Vec<(f64, f64)> =
                steps.iter().filter(|s| s.source == source).map(|s| (s.step as f64, s.ms)).collect();
            chart.draw_series(LineSeries::new(points, BLUE))?;
        }
        chart
            .draw_series(
                steps.iter().filter(|s| !s.startup).map(|s| Circle::new((s.step as f64, s.ms), 3, BLUE.filled())),
            )?
            .label("steady step")
            .legend(|(x, y)| Circle::new((x + 8, y), 3, BLUE.filled()));
        chart
            .draw_series(
                steps.iter().filter(|s| s.startup).map(|s| Circle::new((s.step as f64, s.ms), 4, RED.filled())),
            )?
            .label("startup step")
            .legend(|(x, y)| Circle::new((x + 8, y), 4, RED.filled()));
        chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.9)).draw()?;
        root.present()?;
    }
    Ok(svg)
}
