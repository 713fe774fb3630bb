//! `steptrace peaks`: the device's measured limits, from the cache or measured now.

use std::process::ExitCode;

use anyhow::Context;
use steptrace_burn::backend::{self, CacheConfig};
use steptrace_burn::peaks::{self, Measured, Peaks, PeaksCache, PeaksKey};

use crate::args::PeaksArgs;
use crate::console::{say, warn};

pub fn run(a: PeaksArgs) -> anyhow::Result<ExitCode> {
    // With --json, stdout holds the JSON alone: every other line goes to stderr.
    let note: fn(&str) = if a.json { warn } else { say };
    let selection =
        backend::select(crate::convert::backend_choice(a.backend)).context("cannot choose the backend to measure")?;
    note(&format!("backend: {}", selection.label()));
    let cache = PeaksCache::default();
    let key = PeaksKey::of(&selection);
    let cached = if a.remeasure {
        note("measuring again (--remeasure)");
        None
    } else {
        match cache.load(&key) {
            Ok(found) => found,
            Err(e) => {
                warn(&format!("steptrace: warning: {e}; measuring again"));
                None
            }
        }
    };
    let (peaks, path, from_cache) = match cached {
        Some(found) => (found.peaks, found.path, true),
        None => {
            note(&format!(
                "measuring {} on {} (seconds on a CPU, about a minute on a GPU; nothing else should run on it meanwhile)",
                selection.device, selection.kind
            ));
            // Before the device opens: cubecl's autotune results are kept between measurements.
            let _ = backend::configure_cubecl_cache(&CacheConfig::default());
            let peaks = peaks::measure(&selection).context("cannot measure the device's peaks")?;
            let path = match cache.store(&key, &peaks) {
                Ok(path) => path,
                Err(e) => {
                    warn(&format!("steptrace: warning: {e}; the figures below are not kept"));
                    cache.path(&key)
                }
            };
            (peaks, path, false)
        }
    };
    let path_text = steptrace::settings::home_relative(&path);
    if from_cache {
        note(&format!(
            "from the cache: {path_text} (measured {}; {}); --remeasure measures again",
            peaks.measured_at, peaks.software
        ));
    } else {
        note(&format!("cache file: {path_text} (runs on this device put these figures in their traces)"));
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&peaks).context("cannot write the peaks as JSON")?);
        return Ok(ExitCode::SUCCESS);
    }
    print_table(&peaks);
    Ok(ExitCode::SUCCESS)
}

/// The table: each figure measured, its spread, the published figure and the share of it.
fn print_table(peaks: &Peaks) {
    if peaks.cpu {
        say(&format!("CPU figures: {} is a CPU; these are its limits as burn reaches them, not a GPU's", peaks.device));
    }
    let mut table = crate::console::table();
    table.set_header([
        if peaks.cpu { "figure (CPU)" } else { "figure" },
        "measured",
        "spread",
        "published",
        "% of pub.",
        "method",
    ]);
    let bandwidth = peaks.published.get("bandwidth");
    let mut rows: Vec<(String, &Measured, Unit, Option<f64>)> = Vec::new();
    for (name, m) in [("read", &peaks.read), ("write", &peaks.write), ("copy", &peaks.copy)] {
        if let Some(m) = m {
            rows.push((name.to_owned(), m, Unit::Bytes, bandwidth.map(|p| p.value)));
        }
    }
    for (dtype, m) in &peaks.flops {
        rows.push((format!("{dtype} matmul"), m, Unit::Flops, peaks.published.get(dtype).map(|p| p.value)));
    }
    if let Some(m) = &peaks.launch_us {
        rows.push(("launch".to_owned(), m, Unit::Micros, None));
    }
    for (name, m, unit, published) in rows {
        table.add_row([
            name,
            unit.show(m.value),
            format!("{:.1}%", m.spread * 100.0),
            published.map_or_else(|| "-".to_owned(), |p| unit.show(p)),
            published.map_or_else(|| "-".to_owned(), |p| format!("{:.0}%", m.value / p * 100.0)),
            m.method.clone(),
        ]);
    }
    crate::console::out(&table);
    say("measured: the fastest run (read, write, copy: memory bandwidth; launch: an empty launch's cost); spread: (slowest run - fastest run) / fastest run; % of pub.: of the datasheet's figure");
    if peaks.published.is_empty() {
        say(&format!("published: none known for {} (steptrace knows the H200 and H100 SXM datasheets)", peaks.device));
    }
    for (what, p) in &peaks.published {
        say(&format!("published {what}: {}", p.source));
    }
    for problem in &peaks.problems {
        say(&format!("note: {problem}"));
    }
}

/// How a figure is shown.
#[derive(Clone, Copy)]
enum Unit {
    /// Bytes/s, as GB/s or TB/s (10^9, 10^12).
    Bytes,
    /// FLOP/s, as GFLOP/s or TFLOP/s.
    Flops,
    /// µs.
    Micros,
}

impl Unit {
    fn show(self, v: f64) -> String {
        match self {
            Unit::Bytes if v >= 1e12 => format!("{:.2} TB/s", v / 1e12),
            Unit::Bytes => format!("{:.1} GB/s", v / 1e9),
            Unit::Flops if v >= 1e12 => format!("{:.1} TFLOP/s", v / 1e12),
            Unit::Flops => format!("{:.1} GFLOP/s", v / 1e9),
            Unit::Micros => format!("{v:.2} µs"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Unit;

    #[test]
    fn units() {
        assert_eq!(Unit::Bytes.show(4.8e12), "4.80 TB/s");
        assert_eq!(Unit::Bytes.show(12.34e9), "12.3 GB/s");
        assert_eq!(Unit::Flops.show(989e12), "989.0 TFLOP/s");
        assert_eq!(Unit::Flops.show(53.2e9), "53.2 GFLOP/s");
        assert_eq!(Unit::Micros.show(4.567), "4.57 µs");
    }
}
