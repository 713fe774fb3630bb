//! Host launches against device work: how many, how long a kernel waits
//! between its launch and its start, and how far the host runs ahead.

use serde::Serialize;

use super::consistency::before_its_launch;
use super::events::WorkKind;
use crate::read::analysis::loaded::Loaded;
use crate::read::analysis::stats::Stats;
use crate::read::analysis::steps::StepRow;

/// Launches matched to their kernels by correlation id.
#[derive(Clone, Debug, Serialize)]
pub struct LaunchView {
    /// Launch calls (`cuLaunchKernel`, `cudaLaunchKernel`, ...) that start
    /// in the step, on any host thread.
    pub launches_per_step: Stats,
    /// Kernels of the counted steps whose launch is in the trace.
    pub matched_kernels: usize,
    /// Kernels of the counted steps whose launch is not (it fell before
    /// the window, or the tracer did not record it).
    pub unmatched_kernels: usize,
    /// From the start of the launch call to the start of its kernel, µs, over the matched
    /// kernels that start after their launch; `None` when none does.
    pub launch_to_start_us: Option<Stats>,
    /// Matched kernels that start before their launch call: a negative time no device can
    /// take (the host's and the device's clocks disagree, or the input is inconsistent).
    /// They are left out of [`launch_to_start_us`](Self::launch_to_start_us).
    pub before_launch: usize,
    /// Per step: the end of the last kernel launched in the step minus the
    /// end of the step's last launch call, ms. Large: the host queued work
    /// well ahead of the device (device-bound). Near zero or below: each
    /// kernel ran as soon as it was launched (launch-bound).
    pub host_ahead_ms: Stats,
}

/// `None` when no kernel of the counted steps can be matched to a launch.
pub(crate) fn launch_view(loaded: &[Loaded], steps: &[(usize, &StepRow)]) -> Option<LaunchView> {
    let (mut counts, mut latency, mut ahead) = (Vec::new(), Vec::new(), Vec::new());
    let (mut matched, mut unmatched, mut before_launch) = (0, 0, 0);
    // Per file: (launch start, launch end, kernel end), by launch start.
    let pairs: Vec<Vec<(f64, f64, f64)>> = loaded
        .iter()
        .map(|l| {
            let mut v: Vec<(f64, f64, f64)> = l
                .device
                .work
                .iter()
                .filter(|w| w.kind == WorkKind::Kernel)
                .filter_map(|w| {
                    w.correlation.and_then(|c| l.device.launches.get(&c)).map(|la| (la.start, la.end, w.end))
                })
                .collect();
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            v
        })
        .collect();
    for (i, step) in steps {
        let d = &loaded[*i].device;
        counts.push(d.launches_in(step.start, step.end) as f64);
        let (mut last_kernel_end, mut last_launch_end) = (None::<f64>, None::<f64>);
        for w in d.starting_in(step.start, step.end).filter(|w| w.kind == WorkKind::Kernel) {
            let Some(launch) = w.correlation.and_then(|c| d.launches.get(&c)) else {
                unmatched += 1;
                continue;
            };
            matched += 1;
            if before_its_launch(w, launch) {
                before_launch += 1;
            } else {
                latency.push((w.start - launch.start).max(0.0));
            }
        }
        // Kernels launched in this step, wherever they ran.
        let pairs = &pairs[*i];
        let first = pairs.partition_point(|p| p.0 < step.start);
        for &(_, launch_end, kernel_end) in pairs[first..].iter().take_while(|p| p.0 < step.end) {
            last_kernel_end = Some(last_kernel_end.map_or(kernel_end, |e| e.max(kernel_end)));
            last_launch_end = Some(last_launch_end.map_or(launch_end, |e| e.max(launch_end)));
        }
        if let (Some(k), Some(l)) = (last_kernel_end, last_launch_end) {
            ahead.push((k - l) / 1000.0);
        }
    }
    if matched == 0 {
        return None;
    }
    Some(LaunchView {
        launches_per_step: Stats::of(&counts)?,
        matched_kernels: matched,
        unmatched_kernels: unmatched,
        launch_to_start_us: Stats::of(&latency),
        before_launch,
        host_ahead_ms: Stats::of(&ahead)?,
    })
}
