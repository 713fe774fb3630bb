//! The document, and section 1: what the run was, its fallback first, and
//! the files read.

use std::fmt::Write as _;

use steptrace::analysis::{Producer, Report};

use super::markup::{esc, esc_cut, facts, STYLE};
use super::{device, findings, spans, timing, viewers};

/// The most characters of manifest prose (backend, fallback reason) shown.
const PROSE_CHARS: usize = 600;

/// Nothing may load: no script, no font, no image, from anywhere, and no
/// form target; inline style only. A name that got past the escaping could
/// still neither run nor fetch anything.
const POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'";

/// The whole page, sections in reading order.
pub(super) fn page(r: &Report, top: usize) -> String {
    let mut o = String::with_capacity(64 * 1024);
    let backend = r.run.backend.as_deref().map_or_else(|| "backend not recorded".to_owned(), |b| esc_cut(b, 120));
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{POLICY}\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"steptrace {}\">\n\
         <title>steptrace report: {backend}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n",
        env!("CARGO_PKG_VERSION")
    );
    o.push_str(
        "<nav><a href=\"#run\">run</a><a href=\"#steps\">step time</a><a href=\"#device\">device</a>\
         <a href=\"#spans\">spans</a><a href=\"#hypotheses\">hypotheses</a><a href=\"#viewers\">open the traces</a></nav>\n",
    );
    run(&mut o, r);
    timing::section(&mut o, r);
    device::section(&mut o, r);
    spans::section(&mut o, r, top);
    findings::section(&mut o, r);
    viewers::section(&mut o, r);
    o.push_str("</main>\n</body>\n</html>\n");
    o
}

/// Section 1: the backend and its fallback, the workload, the files.
fn run(o: &mut String, r: &Report) {
    let run = &r.run;
    let prose = |text: &str| esc_cut(text, PROSE_CHARS);
    o.push_str("<section id=\"run\">\n");
    let _ = writeln!(
        o,
        "<h1>steptrace report — {}</h1>",
        run.backend.as_deref().map_or_else(|| "backend not recorded in the trace".to_owned(), prose)
    );
    if let Some(reason) = &run.fallback_reason {
        let _ = writeln!(
            o,
            "<p class=\"banner fallback\">FALLBACK: not the requested backend ({}). This is not a GPU measurement: \
             its timings describe the backend it fell back to.</p>",
            prose(reason)
        );
    }
    if !r.device.observed || r.device.devices.is_empty() {
        let why =
            r.device.not_observed_reason.as_deref().unwrap_or("the trace has no device work in the counted steps");
        // The report's reason may say it already.
        let why = why.strip_prefix("device activity not observed: ").unwrap_or(why);
        let _ = writeln!(
            o,
            "<p class=\"banner unobserved\">Device activity not observed: {}. No device figure below is a zero: each says \
             \"not observed\".</p>",
            prose(why)
        );
    }
    let or_unknown = |v: &Option<String>| v.as_deref().map_or_else(|| "not recorded in the trace".to_owned(), prose);
    let batch = match run.batch_size {
        Some(b) => {
            let from = match run.batch_size_from {
                "option" => "given with --batch",
                "manifest" => "from the run's manifest",
                other => other,
            };
            format!("{b} samples per step ({})", esc(from))
        }
        None => "unknown (not in the trace: pass --batch N for samples/s)".to_owned(),
    };
    let mut rows = vec![
        ("model", or_unknown(&run.model)),
        ("dataset", or_unknown(&run.dataset)),
        ("batch", batch),
        ("schedule", run.schedule.as_ref().map_or_else(|| "not recorded in the trace".to_owned(), |s| prose(&s.text))),
        ("device", or_unknown(&run.device)),
    ];
    if let Some(policy) = &run.sync_policy {
        let meaning = run.sync_meaning.as_deref().map_or_else(String::new, |m| format!(" ({})", prose(m)));
        rows.push(("sync", format!("{}{meaning}", prose(policy))));
    }
    if let Some(n) = run.startup_steps {
        rows.push(("startup", format!("steps 0..{n} declared startup by the run (kept apart)")));
    }
    if let Some(cmd) = &run.command {
        rows.push(("command", format!("<code>{}</code>", esc_cut(cmd, 2000))));
    }
    facts(o, &rows);
    files(o, r);
    if !r.warnings.is_empty() {
        let _ = writeln!(
            o,
            "<p class=\"banner warnings\">{} warning(s) about the input: see <a href=\"#notes\">Warnings and notes</a>.</p>",
            r.warnings.len()
        );
    }
    o.push_str("</section>\n");
}

fn files(o: &mut String, r: &Report) {
    let _ = writeln!(o, "<h3>Files read ({})</h3>\n<ul class=\"files\">", r.sources.len());
    for s in &r.sources {
        let mut flags = vec![
            match s.producer {
                Producer::Steptrace => "steptrace",
                Producer::TorchProfiler => "torch.profiler",
                Producer::Other => "another Chrome trace writer",
            }
            .to_owned(),
            format!("{} events", s.events),
            format!("{} format", s.format),
        ];
        if let Some(c) = s.cycle {
            flags.push(format!("cycle {c}"));
        }
        if s.unfinished || s.path.ends_with(".partial") {
            flags.push("cut short: a .partial file steptrace never finished; complete events only".to_owned());
        } else if s.truncated {
            flags.push("cut short (crash mid-window): complete events only".to_owned());
        }
        if s.unclosed_spans > 0 {
            flags.push(format!("{} spans without an end", s.unclosed_spans));
        }
        if let Some(reason) = &s.partial_reason {
            flags.push(format!("partial cycle: {reason}"));
        }
        let _ = writeln!(o, "<li><code>{}</code> — {}</li>", esc(&s.path), esc_cut(&flags.join("; "), PROSE_CHARS));
    }
    o.push_str("</ul>\n");
}
