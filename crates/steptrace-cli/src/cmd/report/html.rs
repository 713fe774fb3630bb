//! `report --html FILE`: the report as one self-contained HTML page, to
//! open from `file://` with no network.
//!
//! The page holds everything inline: the style sheet, and the charts as
//! SVG drawn by plotters (no font file). It loads nothing: no script, no
//! font, no image, no link to anywhere, and its Content-Security-Policy
//! forbids them all. Sections, in reading order:
//!
//! 1. the run: backend, a FALLBACK banner with its reason, a banner when
//!    the device is not observed; model, dataset, batch, schedule, files;
//! 2. step time: the window rate (ms/step, samples/s), the steady spread,
//!    startup apart, and the step plot of `--plot`;
//! 3. the device: busy and idle by cause per step, host against device,
//!    copies, top kernels; "not observed" with the reason for each absent
//!    part;
//! 4. the span table and its footnotes;
//! 5. hypotheses with their commands, checks not examined, warnings and
//!    notes;
//! 6. how to open each trace file in Perfetto UI or speedscope.
//!
//! Every string from a trace is escaped ([`markup::esc`]); the file is
//! created new, never written over an existing one.

mod attribution;
mod charts;
mod device;
mod findings;
mod markup;
mod memory;
mod page;
mod roofline;
mod spans;
mod timing;
mod viewers;

use steptrace::analysis::Report;

/// The page of `report`, its span table cut at `top` rows.
pub(super) fn page(report: &Report, top: usize) -> String {
    page::page(report, top)
}

#[cfg(test)]
mod tests {
    use steptrace::analysis::{Report, ReportOptions};
    use steptrace::reader::parse_trace;

    fn report(json: &str) -> Report {
        let trace = parse_trace(json.as_bytes()).expect("a trace");
        Report::build(&[("t<b>&.json".to_owned(), trace)], &ReportOptions::default()).expect("a report")
    }

    #[test]
    fn hostile_names_are_escaped_everywhere() {
        let evil = r#"<script>alert(\"x\")</script> & <img src=x onerror=alert(1)>"#;
        let mut events = Vec::new();
        for n in 0..4 {
            let ts = f64::from(n) * 1000.0;
            events.push(format!(r#"{{"ph":"X","name":"ProfilerStep#{n}","pid":1,"tid":1,"ts":{ts},"dur":900}}"#));
            events.push(format!(r#"{{"ph":"X","name":"{evil}","pid":1,"tid":1,"ts":{},"dur":100}}"#, ts + 10.0));
        }
        let page = super::page(&report(&format!("[{}]", events.join(","))), 20);
        assert!(!page.contains("<script") && !page.contains("<img"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;img"), "{page}");
        assert!(page.contains("t&lt;b&gt;&amp;.json"), "{page}");
        assert!(!page.contains("http://") && !page.contains("https://"), "{page}");
    }

    #[test]
    fn a_trace_without_steps_or_device_says_not_observed() {
        let page = super::page(&report(r#"[{"ph":"X","name":"work","pid":1,"tid":1,"ts":0,"dur":5}]"#), 20);
        for id in ["run", "steps", "device", "spans", "hypotheses", "viewers"] {
            assert!(page.contains(&format!("<section id=\"{id}\"")), "{id}");
        }
        assert!(page.contains("step-time plot: not observed"), "{page}");
        assert!(page.contains("device busy and idle: not observed"), "{page}");
        assert!(!page.contains("<svg"), "no empty chart");
    }
}
