//! The limits the priced report holds kernels against: the trace's own measured limits (its
//! manifest's [`Peaks`]), or those given to the report, each checked before use. A limit
//! that cannot price anything (zero, negative, not finite, implausible, or of another layout
//! version) is named with why; good limits are kept when others are bad.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::display::line;
use crate::format::device::BlockWork;
use crate::format::peaks::{device_key, unusable, Peaks, THROUGHPUT_RANGE};
use crate::read::analysis::loaded::RunInfo;

/// The limits the figures are priced against.
#[derive(Clone, Debug, Serialize)]
pub struct Roofs {
    /// The device the limits were measured on (one line, cut and escaped: see
    /// [`line`](crate::display::line)).
    pub device: String,
    /// The backend they were measured with (one line).
    pub backend: String,
    /// When (one line).
    pub measured_at: String,
    /// Bytes/s a kernel's bytes are priced against.
    pub bandwidth: f64,
    /// FLOP/s by dtype: the usable figures only (f32's among them).
    pub throughput: BTreeMap<String, f64>,
    /// Whether these are a CPU's figures (lavapipe, the CPU backend).
    pub cpu: bool,
    /// Where they came from: the trace's manifest, or a file given to the report.
    pub from: String,
    /// Figures of these limits that were passed over as unusable, each with why
    /// (`copy bandwidth 0 B/s: not positive`).
    pub passed_over: Vec<String>,
}

/// Where the trace's own limits come from, in words.
pub(crate) const FROM_TRACE: &str = "the trace's manifest";

/// Where limits given to the report come from, in words.
pub(crate) const FROM_OPTION: &str = "report --peaks";

impl Roofs {
    /// The limits of `peaks`, from `from`, when they can price work (see [`Peaks::check`]).
    ///
    /// # Errors
    ///
    /// Why they cannot, naming `from` and the unusable limit.
    pub(crate) fn of(peaks: &Peaks, from: &str) -> Result<Roofs, String> {
        peaks.check().map_err(|e| format!("the device limits from {from} are unusable: {e}"))?;
        let bandwidth =
            peaks.bandwidth().ok_or_else(|| format!("the device limits from {from} hold no usable bandwidth"))?;
        let throughput = peaks
            .flops
            .iter()
            .filter(|(_, m)| unusable(m.value, THROUGHPUT_RANGE).is_none())
            .map(|(k, m)| (k.clone(), m.value))
            .collect();
        Ok(Roofs {
            device: line(&peaks.device),
            backend: line(&peaks.backend),
            measured_at: line(&peaks.measured_at),
            bandwidth,
            throughput,
            cpu: peaks.cpu,
            from: from.to_owned(),
            passed_over: peaks.unusable_figures(),
        })
    }

    /// The throughput FLOPs of `dtype` are held against: its measured figure, else f32's.
    pub fn flops_for(&self, dtype: &str) -> f64 {
        self.throughput.get(dtype).or_else(|| self.throughput.get("f32")).copied().unwrap_or(f64::INFINITY)
    }

    /// The floor of a block's work, µs, and the part of it that its arithmetic sets.
    pub(super) fn floor_us(&self, work: &BlockWork) -> (f64, f64) {
        let memory = work.bytes / self.bandwidth * 1e6;
        let compute = work.flops / self.flops_for(&work.dtype) * 1e6;
        (memory.max(compute), if compute >= memory { memory.max(compute) } else { 0.0 })
    }
}

/// The limits to price against: those `given` to the report when they are usable, else the
/// trace's own. A given file that is unusable, or measured on another device than the
/// trace's (names compared whole, see [`device_key`]), is said in `warnings`.
///
/// # Errors
///
/// Why there is no floor: which limits are unusable and why, or that there are none.
pub(crate) fn pick_roofs(given: Option<&Peaks>, run: &RunInfo, warnings: &mut Vec<String>) -> Result<Roofs, String> {
    let own = match (&run.peaks, &run.peaks_problem) {
        (Some(p), _) => Roofs::of(p, FROM_TRACE),
        (None, Some(problem)) => Err(problem.clone()),
        (None, None) => Err(match run.device.as_deref() {
            Some(device) => format!(
                "the trace holds no measured limits for {}: run `steptrace peaks` on this device before the run (or \
                 give `report --peaks FILE`)",
                line(device)
            ),
            None => "the trace holds no measured device limits: run `steptrace peaks` on the device before the run \
                     (or give `report --peaks FILE`)"
                .to_owned(),
        }),
    };
    let Some(given) = given else { return own };
    match Roofs::of(given, FROM_OPTION) {
        Ok(roofs) => {
            if let Some(device) = run.device.as_deref().filter(|d| device_key(d) != device_key(&given.device)) {
                warnings.push(format!(
                    "the device limits given were measured on {}, the trace ran on {}: the floors price this run \
                     against another device",
                    line(&given.device),
                    line(device)
                ));
            }
            Ok(roofs)
        }
        Err(why) => {
            let instead = if own.is_ok() { "the trace's own limits are used instead" } else { "no floor" };
            warnings.push(format!("{why}: {instead}"));
            own.map_err(|own_why| format!("{why}; {own_why}"))
        }
    }
}

#[cfg(test)]
#[path = "limits_tests.rs"]
mod tests;
