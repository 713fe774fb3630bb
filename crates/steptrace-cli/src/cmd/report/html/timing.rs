//! Section 2, step time: the window rate as the headline, the steady
//! spread beside it, startup kept apart, and the step plot of `--plot`.

use std::fmt::Write as _;

use steptrace::analysis::{Report, Stats};
use steptrace::display::LABEL_CHARS;

use super::markup::{esc, esc_cut, facts, figure, not_observed};
use crate::cmd::report::render::ms;

fn spread(s: &Stats, unit: &str) -> String {
    format!("n={}: min {}, median {}, p90 {}, max {} {unit}", s.n, ms(s.min), ms(s.median), ms(s.p90), ms(s.max))
}

pub(super) fn section(o: &mut String, r: &Report) {
    let t = &r.timing;
    o.push_str("<section id=\"steps\">\n<h2>2. Step time</h2>\n");
    let _ = writeln!(
        o,
        "<p class=\"muted\">Unit: {}; wall clock between ProfilerStep#N boundaries, never a sum of spans.</p>",
        esc(t.unit)
    );
    match &t.window {
        // Never a figure to quote that cannot be a time.
        Some(w) if w.ms_per_step > 0.0 && w.ms_per_step.is_finite() => {
            let rate = w.samples_per_s.map_or_else(
                || " <span class=\"muted\">(samples/s: batch size unknown, pass --batch N)</span>".to_owned(),
                |x| format!(" = {} samples/s", esc(&format!("{x:.0}"))),
            );
            let _ = writeln!(o, "<p class=\"headline\">{} ms/step{rate}</p>", esc(&ms(w.ms_per_step)));
            let _ = writeln!(
                o,
                "<p>The figure to quote: {} ms of wall time over {} steady steps (the window rate; startup steps \
                 excluded).</p>",
                esc(&ms(w.wall_ms)),
                w.steps
            );
        }
        _ => not_observed(
            o,
            "ms/step",
            if t.steady_ms.is_some() {
                "the steady steps span no positive wall time: there is no figure to quote"
            } else {
                "no steady step recorded: there is no figure to quote"
            },
        ),
    }
    let mut rows = Vec::new();
    if let Some(s) = &t.steady_ms {
        rows.push(("steady steps", esc(&spread(s, "ms/step"))));
    }
    if let Some(s) = &t.steady_samples_per_s {
        rows.push(("steady samples/s", esc(&spread(s, "samples/s"))));
    }
    rows.push(("startup", startup(r)));
    if let Some(s) = &r.run.startup {
        let mut parts: Vec<String> = Vec::new();
        if let Some(x) = s.setup_ms {
            parts.push(format!("setup {} ms", ms(x)));
        }
        if let Some(x) = s.first_step_ms {
            parts.push(format!("first step {} ms", ms(x)));
        }
        if let Some(c) = &s.cubecl_cache {
            parts.push(format!("cubecl cache {c}"));
        }
        parts.extend(s.extra.iter().map(|(k, v)| format!("{k} {v}")));
        rows.push(("measured by the run before any window", esc_cut(&parts.join(", "), LABEL_CHARS * 4)));
    }
    facts(o, &rows);
    match crate::cmd::plot::svg(r) {
        Ok(svg) => figure(
            o,
            &svg,
            "Each recorded step's wall time; shaded: one recorded window (one trace file); red dots: startup \
             steps (kept out of the steady figures), red line: the end of the declared startup.",
        ),
        Err(e) => not_observed(o, "step-time plot", &e.to_string()),
    }
    o.push_str("</section>\n");
}

fn startup(r: &Report) -> String {
    let t = &r.timing;
    let declared =
        r.run.startup_steps.map_or_else(String::new, |n| format!(" (steps 0..{n} declared startup by the run)"));
    let listed: Vec<String> =
        t.steps.iter().filter(|s| s.startup).map(|s| format!("#{} {} ms", s.step, ms(s.ms))).collect();
    let text = if listed.is_empty() {
        format!("no startup step in these traces{declared}")
    } else {
        format!("{}{declared}; kept out of the steady figures", listed.join(", "))
    };
    esc(&text)
}
