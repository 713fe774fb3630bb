//! The human-readable report: its sections in reading order.
//!
//! Everything a trace holds (names, keys, paths, manifest prose) reaches
//! the terminal through [`display`](steptrace::display): control
//! characters escaped, long labels cut with their length; the whole text
//! is escaped once more at the end, as a last guard.

use std::fmt::Write as _;

use comfy_table::CellAlignment;
use steptrace::analysis::{Hypothesis, Report, Source, Stats, Timing};
use steptrace::display::{block, escape, label, LABEL_CHARS};
use steptrace::format::Figure;

use crate::convert::enable_hint;

/// Longest cold-start line shown (the breakdown and its source are long, but bounded).
const COLD_START_CHARS: usize = 800;

/// The most characters of manifest prose (backend, fallback reason) shown.
const PROSE_CHARS: usize = 400;

/// Characters of a span name in the table; `--json` has them whole.
const CELL_CHARS: usize = 56;

/// A duration in ms, at a readable precision; never a 300-digit column.
pub(super) fn ms(v: f64) -> String {
    if !v.is_finite() {
        "n/a".to_owned()
    } else if v.abs() >= 1e7 {
        format!("{v:.3e}")
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else if v >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

pub(super) fn stats_line(s: &Stats, unit: &str) -> String {
    format!("n={}  min {}  median {}  p90 {}  max {} {unit}", s.n, ms(s.min), ms(s.median), ms(s.p90), ms(s.max))
}

/// The human-readable report: its sections in reading order.
pub(super) fn render(r: &Report, top: usize) -> String {
    let mut out = String::new();
    render_sources(&mut out, r);
    render_run(&mut out, r);
    render_timing(&mut out, r);
    render_spans(&mut out, r, top);
    super::device::render_device(&mut out, r);
    if r.device.kernels.is_some() {
        let why = r.device.not_observed.iter().find(|(part, _)| *part == "attribution").map(|(_, why)| why.as_str());
        super::attribution::render_attribution(&mut out, r.device.attribution.as_ref(), why);
    }
    if let Some(roofline) = &r.device.roofline {
        super::roofline::render_roofline(&mut out, roofline);
    }
    if let Some(m) = &r.memory {
        super::memory::render_memory(&mut out, m);
    }
    render_hypotheses(&mut out, r);
    block(&out).into_owned()
}

/// The files read, and what is wrong with them.
fn render_sources(o: &mut String, r: &Report) {
    let producers: Vec<String> = r.sources.iter().map(|s| format!("{:?}", s.producer).to_lowercase()).collect();
    let _ = writeln!(o, "steptrace report: {} file(s) from {}", r.sources.len(), producers[0]);
    for s in &r.sources {
        let flags = source_flags(s);
        let flags = if flags.is_empty() { String::new() } else { format!("  [{}]", flags.join("; ")) };
        let _ = writeln!(o, "  {} ({} events, {} format){flags}", escape(&s.path), s.events, s.format);
    }
    for w in &r.warnings {
        let _ = writeln!(o, "warning: {}", escape(w));
    }
}

/// What is wrong with a file as a whole (cut short, unfinished, spans
/// without an end, a partial cycle), as `report` and `compare` say it.
pub(crate) fn source_flags(s: &Source) -> Vec<String> {
    let mut flags = Vec::new();
    if s.unfinished || s.path.ends_with(".partial") {
        flags.push(
            "cut short: a .partial file steptrace never finished (a crash, a second Ctrl-C, a failed write or a failed host allocation inside the cycle); complete \
             events only"
                .to_owned(),
        );
    } else if s.truncated {
        flags.push("cut short (crash mid-window): complete events only".to_owned());
    }
    if s.unclosed_spans > 0 {
        flags.push(format!("{} spans without an end", s.unclosed_spans));
    }
    if let Some(reason) = &s.partial_reason {
        flags.push(format!("partial cycle: {}", label(reason, PROSE_CHARS)));
    }
    if let Some(captured) = &s.captured {
        flags.push(label(captured, PROSE_CHARS).into_owned());
    }
    flags
}

/// What the run was, its fallback first.
fn render_run(o: &mut String, r: &Report) {
    let run = &r.run;
    let prose = |text: &str| label(text, PROSE_CHARS).into_owned();
    if let Some(backend) = &run.backend {
        let _ = writeln!(o, "backend: {}", prose(backend));
    }
    if let Some(reason) = &run.fallback_reason {
        let _ = writeln!(o, "FALLBACK: not the requested backend ({}); this is not a GPU measurement", prose(reason));
    }
    if let (Some(model), Some(data)) = (&run.model, &run.dataset) {
        let batch = run.batch_size.map_or_else(|| "?".to_owned(), |b| b.to_string());
        let _ = writeln!(o, "workload: {} on {}, batch {batch}", prose(model), prose(data));
    }
    if let (Some(policy), Some(meaning)) = (&run.sync_policy, &run.sync_meaning) {
        let _ = writeln!(o, "sync: {} ({})", prose(policy), prose(meaning));
    }
}

/// Step time: the headline.
fn render_timing(o: &mut String, r: &Report) {
    let run = &r.run;
    let t = &r.timing;
    let _ = writeln!(o, "\n== Step time (unit: {}; wall clock between ProfilerStep#N boundaries)", t.unit);
    match (&t.steady_ms, &t.window) {
        // Never a figure to quote that cannot be a time.
        (Some(s), Some(w)) if w.ms_per_step > 0.0 && w.ms_per_step.is_finite() => {
            let _ = writeln!(o, "steady   {}", stats_line(s, "ms/step"));
            if let Some(rate) = &t.steady_samples_per_s {
                let _ = writeln!(o, "         {}", stats_line(rate, "samples/s"));
            }
            let rate = w.samples_per_s.map_or_else(String::new, |x| format!(" = {x:.0} samples/s"));
            let _ = writeln!(
                o,
                "window   {} ms wall over {} steady steps = {} ms/step{rate}  <- the figure to quote",
                ms(w.wall_ms),
                w.steps,
                ms(w.ms_per_step)
            );
        }
        (Some(s), _) => {
            let _ = writeln!(o, "steady   {}", stats_line(s, "ms/step"));
            let _ = writeln!(o, "window   no positive wall time over the steady steps: no figure to quote");
        }
        (None, _) => {
            let _ = writeln!(o, "steady   no steady step recorded");
        }
    }
    let startup: Vec<String> =
        t.steps.iter().filter(|s| s.startup).map(|s| format!("#{} {} ms", s.step, ms(s.ms))).collect();
    let declared =
        run.startup_steps.map_or_else(String::new, |n| format!(" (steps 0..{n} declared startup by the run)"));
    if startup.is_empty() {
        let _ = writeln!(o, "startup  no startup step in these traces{declared}");
    } else {
        let _ = writeln!(o, "startup  {}{declared}; kept out of the steady figures", startup.join(", "));
    }
    if let Some(s) = &run.startup {
        let mut parts: Vec<String> = Vec::new();
        if let Some(x) = s.setup_ms {
            parts.push(format!("setup_ms {}", ms(x)));
        }
        if let Some(x) = s.first_step_ms {
            parts.push(format!("first_step_ms {}", ms(x)));
        }
        if let Some(c) = &s.cubecl_cache {
            parts.push(format!("cubecl_cache {}", label(c, LABEL_CHARS)));
        }
        parts.extend(
            s.extra.iter().map(|(k, v)| format!("{} {}", label(k, LABEL_CHARS), label(&v.to_string(), LABEL_CHARS))),
        );
        let _ = writeln!(o, "         measured by the run: {}", parts.join(", "));
        match &s.cold_start {
            Some(Figure::Known(cold)) => {
                for line in cold.lines() {
                    let _ = writeln!(o, "         cold start: {}", label(&line, COLD_START_CHARS));
                }
            }
            Some(Figure::Absent(why)) => {
                let _ = writeln!(o, "         cold start: {}", label(why, COLD_START_CHARS));
            }
            None => {}
        }
    }
    let listed: Vec<String> =
        t.steps.iter().filter(|s| !s.startup).map(|s| format!("#{} {}", s.step, ms(s.ms))).collect();
    if listed.len() > 24 {
        let (head, tail) = (&listed[..12], &listed[listed.len() - 12..]);
        let _ = writeln!(o, "steps    {}  …  {}  (--json lists all)", head.join("  "), tail.join("  "));
    } else if !listed.is_empty() {
        let _ = writeln!(o, "steps    {}", listed.join("  "));
    }
}

/// The span table.
fn render_spans(o: &mut String, r: &Report, top: usize) {
    let _ = writeln!(o, "\n== Spans (recorded wall time {} ms)", ms(r.spans.wall_ms));
    let mut table = crate::console::table();
    table.set_header(["span", "calls", "threads", "total ms", "self ms", "mean ms", "busy ms", "share", "timing"]);
    // Device events (kernels, copies) belong in the device section's kernel and op tables: a
    // long kernel name would wrap into many lines of this narrow first column.
    let host = r.spans.rows.iter().filter(|row| row.timing != Timing::Device);
    let device_names = r.spans.rows.iter().filter(|row| row.timing == Timing::Device).count();
    for row in host.take(top) {
        table.add_row([
            label(&row.name, CELL_CHARS).into_owned(),
            row.calls.to_string(),
            row.threads.to_string(),
            ms(row.total_ms),
            ms(row.self_ms),
            ms(row.mean_ms),
            ms(row.busy_ms),
            format!("{:.1}%", row.share * 100.0),
            timing(row.timing).to_owned(),
        ]);
    }
    for i in 1..8 {
        if let Some(col) = table.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    let _ = writeln!(o, "{table}");
    let host_rows = r.spans.rows.len() - device_names;
    if host_rows > top {
        let _ = writeln!(o, "({} more span names; --top N or --json shows them)", host_rows - top);
    }
    if device_names > 0 {
        let _ = writeln!(
            o,
            "({device_names} device event names (kernels, copies) are in the device section's tables; --json has them \
             here too)"
        );
    }
    for line in &r.spans.footer {
        let _ = writeln!(o, "note: {line}");
    }
}

/// Hypotheses, checks not examined, anomalies and notes.
fn render_hypotheses(o: &mut String, r: &Report) {
    hypothesis_list(o, &r.hypotheses);
    for n in &r.not_examined {
        let hint = n.enable.as_ref().map(|c| format!(" ({})", enable_hint(c))).unwrap_or_default();
        let _ = writeln!(o, "not examined: {}: {}{hint}", n.check, n.why);
    }
    if !r.anomalies.is_empty() {
        let _ = writeln!(o, "\nrun anomalies:");
        for (step, what) in &r.anomalies {
            let at = step.map_or_else(|| "outside the steps".to_owned(), |s| format!("step {s}"));
            let _ = writeln!(o, "  {at}: {}", label(what, LABEL_CHARS));
        }
    }
    for note in &r.notes {
        let _ = writeln!(o, "note: {note}");
    }
}

/// The hypotheses section's heading and its numbered items.
pub(super) fn hypothesis_list(o: &mut String, hypotheses: &[Hypothesis]) {
    let _ = writeln!(o, "\n== Hypotheses (possibilities to test, not verdicts)");
    if hypotheses.is_empty() {
        let _ = writeln!(o, "none of the checks fired on these traces");
    }
    for (i, h) in hypotheses.iter().enumerate() {
        let _ = writeln!(o, "{}. [{}] {}", i + 1, h.id, h.hypothesis);
        let _ = writeln!(o, "   evidence: {}", h.evidence);
        let _ = writeln!(o, "   next:     {}", h.next);
        if let Some(cmd) = &h.command {
            let _ = writeln!(o, "   run:      {cmd}");
        }
    }
}

fn timing(t: Timing) -> &'static str {
    match t {
        Timing::HostLaunch => "host launch",
        Timing::Synced => "incl. device",
        Timing::Mixed => "mixed",
        Timing::Device => "device",
        Timing::Synchronous => "synchronous",
        Timing::Waiting => "waiting",
        Timing::Unknown => "?",
    }
}
