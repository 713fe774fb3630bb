//! Section 3, the device: busy and idle by cause per step, the host
//! against the device, copies and kernels. Each absent part says "not
//! observed" with the report's reason; none is shown as a zero or as an
//! empty chart.

use std::fmt::Write as _;

use steptrace::analysis::{CopyView, DeviceSteps, DeviceView, KernelTable, Report};

use super::charts;
use super::markup::{bytes, count, esc, esc_cut, facts, figure, median_p90, not_observed, pct, table, Cell};
use crate::cmd::report::render::ms;

/// Kernels in the chart and the table (`--json` has up to 50).
const TOP_KERNELS: usize = 15;

/// Copy sizes listed.
const COPY_SIZES: usize = 24;

pub(super) fn section(o: &mut String, r: &Report) {
    let d = &r.device;
    o.push_str("<section id=\"device\">\n<h2>3. Device</h2>\n");
    busy_idle(o, d);
    host_device(o, d);
    copies(o, d);
    kernels(o, d);
    super::attribution::section(o, d);
    super::roofline::section(o, d);
    super::memory::section(o, r.memory.as_ref());
    if !d.notes.is_empty() {
        o.push_str("<h3>How to read these figures</h3>\n<ul class=\"notes\">\n");
        for n in &d.notes {
            let _ = writeln!(o, "<li>{}</li>", esc(n));
        }
        o.push_str("</ul>\n");
    }
    o.push_str("</section>\n");
}

/// The reason the report gives for an absent `part`, else the general one.
fn why<'a>(d: &'a DeviceView, part: &str) -> &'a str {
    d.not_observed
        .iter()
        .find(|(p, _)| *p == part)
        .map(|(_, why)| why.as_str())
        .or(d.not_observed_reason.as_deref())
        .unwrap_or("the trace has no device events for it")
}

fn busy_idle(o: &mut String, d: &DeviceView) {
    o.push_str("<h3>Busy and idle per step</h3>\n");
    if d.devices.is_empty() {
        let reason = if d.observed { why(d, "per step") } else { why(d, "device busy and idle") };
        not_observed(o, "device busy and idle", reason);
        return;
    }
    for dev in &d.devices {
        device(o, dev);
    }
}

fn device(o: &mut String, dev: &DeviceSteps) {
    let _ = writeln!(
        o,
        "<h3>{} <span class=\"muted\">(median per counted step, n={})</span></h3>",
        esc(&dev.device),
        dev.busy_ms.n
    );
    let no_input = (!dev.input_seen).then_some("no input span (data.load, data.wait) in the steps");
    let no_wait = (!dev.wait_seen).then_some("no waiting span (sync) in the steps");
    let rows = [
        ("busy", Some(&dev.busy_ms), Some(&dev.busy_share), None),
        ("idle while the host read input", dev.idle_input_ms.as_ref(), dev.idle_input_share.as_ref(), no_input),
        ("idle while the host waited in sync", dev.idle_sync_ms.as_ref(), dev.idle_sync_share.as_ref(), no_wait),
        ("idle elsewhere (launching, host work)", Some(&dev.idle_other_ms), Some(&dev.idle_other_share), None),
        ("busy while the host waited (the healthy side of a sync)", Some(&dev.busy_while_host_waits_ms), None, no_wait),
    ];
    let rows = rows
        .into_iter()
        .map(|(what, v, share, absent)| match (absent, v) {
            (None, Some(v)) => vec![
                Cell::Text(what.to_owned()),
                Cell::Num(ms(v.median)),
                Cell::Num(ms(v.p90)),
                Cell::Num(share.map_or_else(|| "—".to_owned(), |s| pct(s.median))),
            ],
            (why, _) => vec![
                Cell::Text(what.to_owned()),
                Cell::Wide(format!("<strong>not observed</strong> — {}", esc(why.unwrap_or("not in the trace"))), 3),
            ],
        })
        .collect();
    table(o, &["", "median ms", "p90 ms", "share of the step (median)"], rows);
    match charts::device_steps(dev) {
        Some(Ok(svg)) => figure(
            o,
            &svg,
            "Each bar is one counted step's wall time: the device's busy time (the union of its kernels, copies and \
             memsets), then its idle time split by what the step's host thread was doing.",
        ),
        Some(Err(e)) => not_observed(o, "per-step chart", &format!("the chart could not be drawn: {e}")),
        None => not_observed(o, "per-step chart", "no counted step"),
    }
}

fn host_device(o: &mut String, d: &DeviceView) {
    o.push_str("<h3>Host against device</h3>\n");
    let mut rows: Vec<(&str, String)> = Vec::new();
    match (&d.launch, &d.launches_per_step) {
        (Some(l), _) => {
            rows.push(("launches per step", esc(&median_p90(&l.launches_per_step, "launches"))));
            let matched = format!("{} kernels matched to their launch, {} not", l.matched_kernels, l.unmatched_kernels);
            let before = if l.before_launch > 0 {
                format!("; {} start before their launch call and are left out: inconsistent input", l.before_launch)
            } else {
                String::new()
            };
            let latency = l.launch_to_start_us.as_ref().map_or_else(
                || format!("not meaningful: inconsistent input ({matched}{before})"),
                |s| format!("median {} µs, p90 {} µs ({matched}{before})", ms(s.median), ms(s.p90)),
            );
            rows.push(("launch to kernel start", esc(&latency)));
            rows.push((
                "host ahead",
                esc(&format!(
                    "{} — the end of the last kernel launched in the step minus the end of its last launch call; \
                     large: the host queued work well ahead (device-bound); near zero or below: launch-bound",
                    median_p90(&l.host_ahead_ms, "ms")
                )),
            ));
        }
        (None, Some(s)) => {
            rows.push(("launches per step", esc(&median_p90(s, "launches (host spans)"))));
            rows.push(("launch to kernel start, host ahead", absent(why(d, "launch"))));
        }
        (None, None) => {
            let reason = if d.observed {
                why(d, "launch")
            } else {
                "no launch span in the trace (steptrace: record with --detail internals)"
            };
            rows.push(("launches per step", absent(reason)));
            rows.push(("launch to kernel start, host ahead", absent(why(d, "launch"))));
        }
    }
    match (&d.waiting_ms_per_step, &d.waiting_share) {
        (Some(w), share) => {
            let share = share.as_ref().map_or_else(String::new, |s| format!("; median {} of the step", pct(s.median)));
            rows.push(("host waiting for the device", esc(&format!("{}{share}", median_p90(w, "ms")))));
        }
        (None, _) => rows.push(("host waiting for the device", absent("no sync span in the steps"))),
    }
    facts(o, &rows);
}

/// "not observed: why", as the value of a key/value row.
fn absent(why: &str) -> String {
    format!("<strong>not observed</strong> — {}", esc_cut(why, 2000))
}

fn copies(o: &mut String, d: &DeviceView) {
    o.push_str("<h3>Copies</h3>\n");
    let Some(c) = &d.copies else {
        not_observed(o, "copies", why(d, "copies"));
        return;
    };
    let _ = writeln!(
        o,
        "<p>{} per step, {} per step (medians).</p>",
        esc(&count(c.per_step.median)),
        esc(&bytes(c.bytes_per_step.median))
    );
    let rows = c
        .directions
        .iter()
        .map(|dir| {
            vec![
                Cell::Text(dir.direction.to_owned()),
                Cell::Num(count(dir.per_step.median)),
                Cell::Num(bytes(dir.bytes_per_step.median)),
            ]
        })
        .collect();
    table(o, &["direction", "copies per step (median)", "bytes per step (median)"], rows);
    sizes(o, c);
}

fn sizes(o: &mut String, c: &CopyView) {
    let batch = if c.batch.bytes.is_empty() {
        "no size is known to be the batch's".to_owned()
    } else {
        let sizes: Vec<String> = c.batch.bytes.iter().map(|b| bytes(*b as f64)).collect();
        format!("the batch's tensors are {}", sizes.join(", "))
    };
    let _ = writeln!(
        o,
        "<p>Copy sizes, those repeated every step first; {} (known from: {}).</p>",
        esc(&batch),
        esc(c.batch.from)
    );
    let rows = c
        .sizes
        .iter()
        .take(COPY_SIZES)
        .map(|s| {
            vec![
                Cell::Text(s.direction.to_owned()),
                Cell::Num(s.bytes.map_or_else(|| "not given".to_owned(), |b| bytes(b as f64))),
                Cell::Num(count(s.per_step)),
                Cell::Num(s.steps_with.to_string()),
                Cell::Text(if s.every_step { "yes" } else { "no" }.to_owned()),
                Cell::Text(if s.batch { "batch" } else { "not the batch" }.to_owned()),
            ]
        })
        .collect();
    table(o, &["direction", "bytes per copy", "per step", "steps with it", "every step", "batch?"], rows);
    if c.sizes.len() > COPY_SIZES {
        let _ = writeln!(o, "<p class=\"muted\">{} more sizes (--json lists them).</p>", c.sizes.len() - COPY_SIZES);
    }
    if let Some(s) = &c.small_uploads_every_step {
        let _ = writeln!(
            o,
            "<p>{} small host-to-device copies ({}–{} B each) run every step besides the batch.</p>",
            esc(&count(s.per_step)),
            s.min_bytes,
            s.max_bytes
        );
    }
}

fn kernels(o: &mut String, d: &DeviceView) {
    o.push_str("<h3>Top kernels</h3>\n");
    let Some(k) = &d.kernels else {
        not_observed(o, "kernels", why(d, "kernels"));
        return;
    };
    let _ = writeln!(
        o,
        "<p>{} kernels per step (median), {} of them under 10 µs; over {} counted steps.</p>",
        esc(&count(k.kernels_per_step.median)),
        esc(&count(k.short_per_step.median)),
        k.steps
    );
    let top = &k.rows[..k.rows.len().min(TOP_KERNELS)];
    match charts::kernels(top) {
        Some(Ok(svg)) => figure(
            o,
            &svg,
            "Device time per counted step of each kernel name, summed over its calls; numbers as in the table.",
        ),
        Some(Err(e)) => not_observed(o, "kernel chart", &format!("the chart could not be drawn: {e}")),
        None => not_observed(o, "kernels", why(d, "kernels")),
    }
    kernel_table(o, k, top.len());
}

fn kernel_table(o: &mut String, k: &KernelTable, shown: usize) {
    let dims = |d: Option<[u64; 3]>| d.map_or_else(|| "—".to_owned(), |[x, y, z]| format!("{x}×{y}×{z}"));
    let rows = k
        .rows
        .iter()
        .take(shown)
        .enumerate()
        .map(|(i, row)| {
            let name = format!("<span title=\"{}\">{}</span>", esc_cut(&row.name, 4000), esc(&row.label));
            let grids = if row.grids > 1 { format!(" (+{} more)", row.grids - 1) } else { String::new() };
            vec![
                Cell::Num(format!("{}", i + 1)),
                Cell::Html(name),
                Cell::Num(format!("{:.1}", row.calls_per_step)),
                Cell::Num(ms(row.per_step_ms)),
                Cell::Num(ms(row.mean_us)),
                Cell::Num(format!("{}{grids}", dims(row.grid))),
                Cell::Num(dims(row.block)),
                Cell::Num(pct(row.share_of_busy)),
            ]
        })
        .collect();
    table(o, &["#", "kernel", "calls/step", "ms/step", "mean µs", "grid", "block", "share of busy"], rows);
    let more = k.rows.len().saturating_sub(shown) + k.others;
    if more > 0 {
        let _ = writeln!(o, "<p class=\"muted\">{more} more kernel names (--json has the first 50).</p>");
    }
    if k.inconsistent_kernels > 0 {
        let _ = writeln!(
            o,
            "<p class=\"absent\"><strong>inconsistent input</strong> — {} of these kernels overlap another on their \
             stream or share a launch: calls, ms/step and mean µs rest on inconsistent input (see the warnings).</p>",
            k.inconsistent_kernels
        );
    }
    let _ = writeln!(
        o,
        "<p class=\"muted\">share of busy = the time the kernel ran (its calls that overlap counted once) over the \
         device's busy time ({} ms over the counted steps); kernels on several streams can overlap, so the shares \
         may add up to more than 100%. Hover a name for the full one.</p>",
        esc(&ms(k.busy_ms))
    );
}
