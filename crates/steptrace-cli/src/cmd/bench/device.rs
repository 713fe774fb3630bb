//! What a bench process's traces say about device activity: whether it was recorded, and
//! whether CUPTI stayed enabled between its windows.

use std::path::Path;

use steptrace::format::device::{ActivityStatus, DeviceActivity};
use steptrace::reader::parse_trace;
use steptrace_workload::Trained;

/// The name a window's opening cost carries in `device_activity.collector_us` when CUPTI was
/// still enabled from the window before (steptrace-cupti's `kept open` lap).
const KEPT_OPEN: &str = "kept open";

/// Whether the run's first trace holds device activity, or why not; and whether any of its
/// traces opened a window with CUPTI still enabled from the one before (then its wait steps
/// ran with CUPTI on too, and active/wait leaves that cost out).
pub(super) fn status(summary: &Trained) -> (ActivityStatus, bool) {
    let not = |reason: String| (ActivityStatus::NotObserved { reason }, false);
    let Some(first) = summary.traces.first() else {
        return not(match summary.trace_errors.as_slice() {
            [] => "the run wrote no trace".to_owned(),
            errors => format!("the run wrote no trace: {}", errors.join("; ")),
        });
    };
    let status = match activity(&first.path) {
        Ok(Some(activity)) => activity.status,
        Ok(None) => return not("the trace does not say".into()),
        Err(err) => return not(format!("its trace could not be read: {err:#}")),
    };
    let kept = summary.traces.iter().any(|t| {
        activity(&t.path).ok().flatten().is_some_and(|a| a.collector_us.keys().any(|k| k.ends_with(KEPT_OPEN)))
    });
    (status, kept)
}

/// The device activity a trace's metadata describes (`None`: it has none, or no steptrace
/// metadata).
fn activity(path: &Path) -> anyhow::Result<Option<DeviceActivity>> {
    let bytes = std::fs::read(path)?;
    let trace = parse_trace(&bytes)?;
    Ok(trace.steptrace()?.and_then(|st| st.metadata).and_then(|m| m.device_activity))
}
