//! The device section of the text report: busy and idle by cause, host
//! launch against device work, copies and the top kernels; each absent
//! part says "not observed" and why.

use std::fmt::Write as _;

use comfy_table::CellAlignment;
use steptrace::analysis::{DeviceView, Report, Stats};
use steptrace::display::label;

use super::render::{ms, stats_line};

/// Kernels shown in the text report (`--json` has up to 50).
const TOP_KERNELS: usize = 10;

/// Characters of a kernel name in the table, so that it fits 100 columns.
const KERNEL_CHARS: usize = 40;

/// A share of the step, as a percentage.
fn pct(s: &Stats) -> String {
    share(s.median, 1)
}

/// A share (0 to 1) as a percentage with `digits` decimals; a value outside 0 to 100% is
/// no share, and is never printed as one.
pub(super) fn share(v: f64, digits: usize) -> String {
    const ROUNDING: f64 = 1e-6;
    if !v.is_finite() || !(-ROUNDING..=1.0 + ROUNDING).contains(&v) {
        return "not meaningful: inconsistent input".to_owned();
    }
    format!("{:.*}%", digits, v.clamp(0.0, 1.0) * 100.0)
}

/// Host, device and waiting.
pub(super) fn render_device(o: &mut String, r: &Report) {
    let d = &r.device;
    let _ = writeln!(o, "\n== Host, device, waiting");
    if d.devices.is_empty() {
        let reason = d.not_observed_reason.as_deref().unwrap_or("no device work in the counted steps");
        let _ = writeln!(o, "device time   not observed: {reason}");
    }
    for dev in &d.devices {
        let _ = writeln!(o, "{} (median per step over {} steps)", dev.device, dev.busy_ms.n);
        let rows = [
            ("busy", Some(&dev.busy_ms).zip(Some(&dev.busy_share)), ""),
            (
                "idle while the host read input",
                dev.idle_input_ms.as_ref().zip(dev.idle_input_share.as_ref()),
                "no input span (data.load, data.wait) in the steps",
            ),
            (
                "idle while the host waited (sync)",
                dev.idle_sync_ms.as_ref().zip(dev.idle_sync_share.as_ref()),
                "no waiting span (sync) in the steps",
            ),
            ("idle otherwise (launching, host work)", Some(&dev.idle_other_ms).zip(Some(&dev.idle_other_share)), ""),
        ];
        for (what, figures, why) in rows {
            match figures {
                Some((v, share)) => {
                    let _ = writeln!(o, "  {what:<40} {:>9} ms  {:>6} of the step", ms(v.median), pct(share));
                }
                None => {
                    let _ = writeln!(o, "  {what:<40} not observed: {why}");
                }
            }
        }
        let _ = writeln!(
            o,
            "  {:<40} {:>9} ms  (the device working while the host waits)",
            "busy while the host waited",
            ms(dev.busy_while_host_waits_ms.median)
        );
    }
    match &d.waiting_ms_per_step {
        Some(s) => {
            let share = d.waiting_share.as_ref().map_or(0.0, |s| s.median * 100.0);
            let _ = writeln!(o, "waiting       {} (median {share:.0}% of the step)", stats_line(s, "ms/step"));
        }
        None => {
            let _ = writeln!(o, "waiting       not observed: no sync span in the steps");
        }
    }
    launches(o, d);
    copies(o, d);
    kernels(o, d);
    for note in &d.notes {
        let _ = writeln!(o, "note: {note}");
    }
}

fn not_observed<'a>(d: &'a DeviceView, part: &str) -> &'a str {
    d.not_observed.iter().find(|(p, _)| *p == part).map_or("not in the trace", |(_, why)| why.as_str())
}

fn launches(o: &mut String, d: &DeviceView) {
    match (&d.launch, &d.launches_per_step) {
        (Some(l), _) => {
            let _ = writeln!(o, "launches      {}", stats_line(&l.launches_per_step, "per step"));
            let matched = format!("{} kernels matched to their launch, {} not", l.matched_kernels, l.unmatched_kernels);
            let before = if l.before_launch > 0 {
                format!("; {} start before their launch call, left out: inconsistent input", l.before_launch)
            } else {
                String::new()
            };
            match &l.launch_to_start_us {
                Some(s) => {
                    let _ = writeln!(
                        o,
                        "launch→start  median {} µs  p90 {} µs  ({matched}{before})",
                        ms(s.median),
                        ms(s.p90)
                    );
                }
                None => {
                    let _ = writeln!(o, "launch→start  not meaningful: inconsistent input ({matched}{before})");
                }
            }
            let _ = writeln!(
                o,
                "host ahead    median {} ms  (last kernel's end minus the host's last launch; near 0: launch-bound)",
                ms(l.host_ahead_ms.median)
            );
        }
        (None, Some(s)) => {
            let _ = writeln!(o, "launches      {}", stats_line(s, "per step"));
            if d.observed {
                let _ = writeln!(o, "launch→start  not observed: {}", not_observed(d, "launch"));
            }
        }
        (None, None) => {
            let why = if d.observed { not_observed(d, "launch") } else { "steptrace: record with --detail internals" };
            let _ = writeln!(o, "launches      not observed ({why})");
        }
    }
}

fn copies(o: &mut String, d: &DeviceView) {
    let Some(c) = &d.copies else {
        let _ = writeln!(o, "copies        not observed: {}", not_observed(d, "copies"));
        return;
    };
    let _ =
        writeln!(o, "copies        median {} per step, {} bytes per step", c.per_step.median, c.bytes_per_step.median);
    for dir in &c.directions {
        let _ = writeln!(
            o,
            "  {:<6} median {} per step, {} bytes per step",
            dir.direction, dir.per_step.median, dir.bytes_per_step.median
        );
    }
    let every: Vec<String> = c
        .sizes
        .iter()
        .filter(|s| s.every_step)
        .take(12)
        .map(|s| {
            let bytes = s.bytes.map_or_else(|| "? B".to_owned(), |b| format!("{b} B"));
            format!("{} {bytes} ×{}{}", s.direction, s.per_step, if s.batch { " (batch)" } else { "" })
        })
        .collect();
    if !every.is_empty() {
        let _ = writeln!(o, "  every step: {}", every.join(", "));
    }
    let _ = writeln!(o, "  batch copies told apart by: {}", c.batch.from);
    if let Some(s) = &c.small_uploads_every_step {
        let _ = writeln!(
            o,
            "  {:.0} small host-to-device copies ({}–{} B) run every step besides the batch",
            s.per_step, s.min_bytes, s.max_bytes
        );
    }
}

fn kernels(o: &mut String, d: &DeviceView) {
    let Some(k) = &d.kernels else {
        let _ = writeln!(o, "kernels       not observed: {}", not_observed(d, "kernels"));
        return;
    };
    let _ = writeln!(
        o,
        "kernels       median {} per step, {} under 10 µs; top kernels by device time over {} steps:",
        k.kernels_per_step.median, k.short_per_step.median, k.steps
    );
    let mut t = crate::console::table();
    t.set_header(["kernel", "calls/step", "ms/step", "mean µs", "grid", "block", "share"]);
    let dims = |d: Option<[u64; 3]>| d.map_or_else(|| "-".to_owned(), |[x, y, z]| format!("{x},{y},{z}"));
    for row in k.rows.iter().take(TOP_KERNELS) {
        t.add_row([
            label(&row.label, KERNEL_CHARS).into_owned(),
            format!("{:.1}", row.calls_per_step),
            ms(row.per_step_ms),
            ms(row.mean_us),
            dims(row.grid),
            dims(row.block),
            share(row.share_of_busy, 0),
        ]);
    }
    for i in 1..7 {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let _ = writeln!(o, "{t}");
    let more = k.rows.len().saturating_sub(TOP_KERNELS) + k.others;
    if more > 0 {
        let _ = writeln!(o, "({more} more kernel names; --json has the first 50)");
    }
    let _ = writeln!(
        o,
        "note: share = the time the kernel ran (its calls that overlap counted once) over device busy time; kernels \
         on several streams can overlap, so the shares may add up to more than 100%"
    );
}
