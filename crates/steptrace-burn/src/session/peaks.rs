//! The device's measured limits in a session's run: found in the peaks cache, never measured
//! (see [`crate::peaks`]).

use steptrace::format::peaks::{Peaks, PEAKS};
use steptrace::Profiler;

use crate::backend::Selection;
use crate::peaks::{PeaksCache, PeaksError, PeaksKey};
use steptrace::terminal::{say, warn};

/// The cached peaks of the selection's device, with the console line that says where they
/// came from, or why there are none (when `console`); `profiled`: whether the run writes
/// traces (which then carry them).
pub(super) fn find(selection: &Selection, console: bool, profiled: bool) -> Option<Peaks> {
    let cache = PeaksCache::default();
    let found = cache.load(&PeaksKey::of(selection));
    if console {
        say_found(selection, &found, profiled);
    }
    found.ok().flatten().map(|c| c.peaks)
}

/// Puts `peaks` in the manifest of every trace `profiler` saves.
pub(super) fn record(profiler: &Profiler, peaks: &Peaks) {
    let Ok(value) = serde_json::to_value(peaks) else { return };
    profiler.update_manifest(|m| {
        m.extra.insert(PEAKS.to_owned(), value);
    });
}

fn say_found(selection: &Selection, found: &Result<Option<crate::peaks::CachedPeaks>, PeaksError>, profiled: bool) {
    let measure = format!("`steptrace peaks --backend {}`", selection.kind);
    match found {
        Ok(Some(cached)) => say(&format!(
            "peaks: this device's measured limits{} from {} (measured {}){}",
            if cached.peaks.cpu { " (CPU figures)" } else { "" },
            steptrace::settings::home_relative(&cached.path),
            steptrace::display::line(&cached.peaks.measured_at),
            if profiled { ": every trace of this run carries them" } else { "" }
        )),
        // The CPU backend runs no kernel to price, and an unprofiled run writes no trace.
        Ok(None) if !profiled || selection.kind == crate::backend::BackendKind::Cpu => {}
        Ok(None) => say(&format!(
            "peaks: none measured for this device (run {measure}): until then kernels cannot be priced against its limits"
        )),
        Err(e) => warn(&format!(
            "steptrace: warning: {e}; kernels cannot be priced against this device's limits until {measure} is run for it (it measures again)"
        )),
    }
}
