//! The span summary: per span name, calls, self time, busy time and what
//! the duration measures.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use super::loaded::{window_of, Loaded, RunInfo};
use super::spans::union_length;
use crate::format::device::is_device_cat;
use crate::format::names::{is_wait, step_number, STEP_ROW, SYNC};

/// One row of the span summary.
#[derive(Clone, Debug, Serialize)]
pub struct SpanRow {
    /// Span name (`ProfilerStep#*` groups the step markers).
    pub name: String,
    /// Number of spans.
    pub calls: usize,
    /// Number of threads it ran on.
    pub threads: usize,
    /// Sum of durations over calls and threads, ms (not elapsed time).
    pub total_ms: f64,
    /// Sum of self times (duration minus direct children), ms.
    pub self_ms: f64,
    /// Mean duration, ms.
    pub mean_ms: f64,
    /// Elapsed time while at least one call ran (union over threads), ms.
    pub busy_ms: f64,
    /// `busy_ms` over the recorded wall time.
    pub share: f64,
    /// What the duration measures.
    pub timing: Timing,
}

/// What a span's duration measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Timing {
    /// Host time only: device work it queued may still be running after
    /// it ends (no sync inside).
    HostLaunch,
    /// Every call ends with a sync inside it: includes the device work
    /// queued by this thread.
    Synced,
    /// Some calls contain a sync, others not.
    Mixed,
    /// A device-side event (kernel, copy) timed by the device.
    Device,
    /// A synchronous backend (the CPU): host time is device time.
    Synchronous,
    /// Waiting for the device.
    Waiting,
    /// Nothing is known about the device (foreign trace).
    Unknown,
}
/// The span summary table.
#[derive(Clone, Debug, Serialize)]
pub struct SpanTable {
    /// Recorded wall time the shares refer to, ms: the extent of the step
    /// windows (or of the trace, without steps).
    pub wall_ms: f64,
    /// Rows, by self time, largest first.
    pub rows: Vec<SpanRow>,
    /// What the figures mean.
    pub footer: Vec<String>,
}

// Accumulation and classification of rows stay together: each row's timing
// depends on counts gathered in the same pass.
pub(crate) fn span_table(loaded: &[Loaded], run: &RunInfo) -> SpanTable {
    #[derive(Default)]
    struct Acc {
        calls: usize,
        threads: BTreeSet<String>,
        total: f64,
        self_us: f64,
        synced: usize,
        device: usize,
        busy: f64,
    }
    let mut acc: BTreeMap<String, Acc> = BTreeMap::new();
    let mut wall = 0.0;
    for l in loaded {
        let Some((w0, w1)) = window_of(l) else { continue };
        wall += w1 - w0;
        let mut intervals: HashMap<&str, Vec<(f64, f64)>> = HashMap::new();
        let synced = l.spans.with_descendant_named(SYNC);
        for (s, &synced) in l.spans.spans.iter().zip(&synced) {
            if s.end < w0 || s.start > w1 {
                continue;
            }
            let name = if step_number(&s.name).is_some() { STEP_ROW } else { s.name.as_str() };
            let a = acc.entry(name.to_owned()).or_default();
            a.calls += 1;
            a.threads.insert(format!("{:?}", s.thread));
            a.total += s.dur();
            a.self_us += s.self_us;
            if is_device_cat(s.cat.as_deref()) {
                a.device += 1;
            } else if synced {
                a.synced += 1;
            }
            intervals.entry(name).or_default().push((s.start.max(w0), s.end.min(w1)));
        }
        for (name, list) in intervals {
            if let Some(a) = acc.get_mut(name) {
                a.busy += union_length(list);
            }
        }
    }
    // A trace with device events (torch.profiler with CUDA activity) has
    // asynchronous host spans, as steptrace's GPU backends do.
    let has_device = loaded.iter().any(|l| l.spans.spans.iter().any(|s| is_device_cat(s.cat.as_deref())));
    let kind = run.backend_kind.as_deref().or(has_device.then_some("gpu"));
    let mut rows: Vec<SpanRow> = acc
        .into_iter()
        .map(|(name, a)| {
            let timing = if a.device == a.calls {
                Timing::Device
            } else if is_wait(&name) {
                Timing::Waiting
            } else if kind == Some("cpu") {
                Timing::Synchronous
            } else if kind.is_none() {
                Timing::Unknown
            } else if a.synced == a.calls {
                Timing::Synced
            } else if a.synced == 0 {
                Timing::HostLaunch
            } else {
                Timing::Mixed
            };
            SpanRow {
                calls: a.calls,
                threads: a.threads.len(),
                total_ms: a.total / 1000.0,
                self_ms: a.self_us / 1000.0,
                mean_ms: a.total / 1000.0 / a.calls as f64,
                busy_ms: a.busy / 1000.0,
                share: if wall > 0.0 { a.busy / wall } else { 0.0 },
                timing,
                name,
            }
        })
        .collect();
    rows.sort_by(|a, b| b.self_ms.total_cmp(&a.self_ms).then(a.name.cmp(&b.name)));
    let mut footer = vec![
        "total and self are sums over calls and threads: they are not elapsed time".to_owned(),
        "busy is elapsed time while at least one call ran (overlap between threads counted once); share = busy / \
         recorded wall time"
            .to_owned(),
    ];
    if rows.iter().any(|r| r.timing == Timing::HostLaunch || r.timing == Timing::Mixed) {
        footer.push(
            "host launch = no sync inside: the span ends when the work is queued, not when the device finishes it"
                .into(),
        );
    }
    SpanTable { wall_ms: wall / 1000.0, rows, footer }
}
