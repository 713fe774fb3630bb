//! The device side of a final file: kernels, copies and memsets on one
//! process track per device with a thread track per stream, the launches
//! on the threads that made them, and a flow from each launch to its
//! kernel (see [`format::device`](crate::format::device)).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::window::Window;
use crate::collect::device::DeviceWindow;
use crate::collect::sink::DeviceOutcome;
use crate::format::device::{
    cats, device_pid, device_process_name, stream_thread_name, ActivityStatus, DeviceActivity, DeviceProperties,
};
use crate::format::names::meta;
use crate::labels::LabelScanner;

/// Host tids of launching threads start here, away from steptrace's own
/// thread ids.
pub(super) const LAUNCH_TID_BASE: u64 = 1_000_000;

/// The device lines of a file, and what its metadata says of them.
pub(super) struct DeviceLines {
    pub(super) lines: Vec<Vec<u8>>,
    pub(super) activity: Option<DeviceActivity>,
    pub(super) properties: Vec<DeviceProperties>,
}

/// The device events of a cycle that fall inside the window.
pub(super) fn device_lines(
    outcome: &DeviceOutcome,
    reason: Option<&str>,
    w: &Window,
    labels: &mut LabelScanner,
) -> DeviceLines {
    let none = |activity| DeviceLines { lines: Vec::new(), activity, properties: Vec::new() };
    match outcome {
        DeviceOutcome::NotCollected => none(reason.map(DeviceActivity::not_observed)),
        DeviceOutcome::Failed(why) => none(Some(DeviceActivity::not_observed(why.clone()))),
        DeviceOutcome::Window(window) => write_window(window, w, labels),
    }
}

fn line(value: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

fn inside(w: &Window, start: f64) -> bool {
    start >= w.start && start <= w.end
}

/// One device event: a complete event with its arguments.
fn device_event(cat: &str, name: &str, pid: u64, tid: u64, start: f64, end: f64, args: &impl Serialize) -> Vec<u8> {
    line(&json!({
        "ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
        "ts": start, "dur": (end - start).max(0.0), "args": args,
    }))
}

// Kernels, copies, memsets, launches and flows are written in one pass
// each over the window's records; their counts feed the metadata below.
fn write_window(window: &DeviceWindow, w: &Window, labels: &mut LabelScanner) -> DeviceLines {
    let mut out = Tracks::default();
    let mut kernel_starts: Vec<(u64, u64, u64, f64)> = Vec::new();
    for k in &window.kernels {
        let a = &k.args;
        if out.event(w, cats::KERNEL, &k.name, (a.device, a.stream), (k.start_us, k.end_us), a) {
            labels.label("kernel name", &k.name);
            kernel_starts.push((a.correlation, device_pid(a.device), a.stream, k.start_us));
        }
    }
    for c in &window.copies {
        let mut args = c.args.clone();
        let dur_ns = (c.end_us - c.start_us) * 1000.0;
        args.gb_per_s = if dur_ns > 0.0 { c.args.bytes as f64 / dur_ns } else { 0.0 };
        let name = format!("Memcpy {}", c.args.kind);
        out.event(w, cats::MEMCPY, &name, (args.device, args.stream), (c.start_us, c.end_us), &args);
    }
    for m in &window.memsets {
        let a = &m.args;
        out.event(w, cats::MEMSET, "Memset", (a.device, a.stream), (m.start_us, m.end_us), a);
    }
    let Tracks { mut lines, streams, mut outside, mut written } = out;
    let (launch_lines, launched, launch_outside) = launches(window, w, &kernel_starts, labels);
    outside += launch_outside;
    *written.entry(cats::DRIVER).or_default() += launched.len() as u64;
    lines.extend(launch_lines);
    lines.extend(track_names(window, &streams));
    let orphan_kernels = if window.launches_unavailable.is_some() {
        0
    } else {
        kernel_starts.iter().filter(|(c, ..)| !launched.contains(c)).count() as u64
    };
    let mut problems = window.problems.clone();
    if let Some(why) = &window.launches_unavailable {
        problems.push(format!("launch records not collected: {why}"));
    }
    let activity = DeviceActivity {
        status: ActivityStatus::Observed,
        source: Some(window.source.clone()),
        kinds: window.kinds.clone(),
        written: written.into_iter().map(|(k, v)| (k.to_owned(), Value::from(v))).collect::<Map<_, _>>(),
        outside_window: outside,
        dropped_by_collector: window.dropped_by_collector,
        orphan_kernels,
        clock: window.clock.clone(),
        problems,
        collector_us: window
            .collector_us
            .iter()
            .map(|(k, v)| (k.clone(), Value::from((v * 10.0).round() / 10.0)))
            .collect(),
    };
    DeviceLines { lines, activity: Some(activity), properties: window.devices.clone() }
}

/// Device events inside the window, with their tracks and counts.
#[derive(Default)]
struct Tracks {
    lines: Vec<Vec<u8>>,
    streams: BTreeSet<(u64, u64)>,
    outside: u64,
    written: BTreeMap<&'static str, u64>,
}

impl Tracks {
    /// Writes one device event on its stream's track if it starts inside
    /// the window (else counts it outside); says whether it was written.
    fn event(
        &mut self,
        w: &Window,
        cat: &'static str,
        name: &str,
        (device, stream): (u32, u64),
        (start, end): (f64, f64),
        args: &impl Serialize,
    ) -> bool {
        if !inside(w, start) {
            self.outside += 1;
            return false;
        }
        let pid = device_pid(device);
        self.lines.push(device_event(cat, name, pid, stream, start, end, args));
        self.streams.insert((pid, stream));
        *self.written.entry(cat).or_default() += 1;
        true
    }
}

/// Launch events on their host threads, and the flows to their kernels.
/// Returns the lines, the correlations written, and the launches outside.
fn launches(
    window: &DeviceWindow,
    w: &Window,
    kernels: &[(u64, u64, u64, f64)],
    labels: &mut LabelScanner,
) -> (Vec<Vec<u8>>, HashSet<u64>, u64) {
    let by_correlation: BTreeMap<u64, (u64, u64, f64)> = kernels.iter().map(|&(c, p, s, t)| (c, (p, s, t))).collect();
    let mut lines = Vec::new();
    let mut written = HashSet::new();
    let mut outside = 0;
    let mut threads: BTreeMap<u64, Option<&str>> = BTreeMap::new();
    for l in &window.launches {
        if !inside(w, l.start_us) {
            outside += 1;
            continue;
        }
        let tid = LAUNCH_TID_BASE + l.thread;
        threads.insert(tid, l.thread_name.as_deref());
        let args = json!({ "correlation": l.correlation, "cbid": l.cbid });
        lines.push(line(&json!({
            "ph": "X", "cat": cats::DRIVER, "name": l.name, "pid": 1, "tid": tid,
            "ts": l.start_us, "dur": (l.end_us - l.start_us).max(0.0), "args": args,
        })));
        written.insert(l.correlation);
        if let Some(&(pid, stream, start)) = by_correlation.get(&l.correlation) {
            let flow = |ph: &str, pid: u64, tid: u64, ts: f64| {
                let mut f = json!({ "ph": ph, "cat": cats::FLOW, "name": cats::FLOW, "id": l.correlation,
                                    "pid": pid, "tid": tid, "ts": ts });
                if ph == "f" {
                    f["bp"] = json!("e");
                }
                line(&f)
            };
            lines.push(flow("s", 1, tid, l.start_us));
            lines.push(flow("f", pid, stream, start));
        }
    }
    for (tid, name) in threads {
        let name = format!("{} (kernel launches)", name.unwrap_or("launching thread"));
        labels.label("thread name", &name);
        lines.push(line(
            &json!({ "ph": "M", "pid": 1, "tid": tid, "name": meta::THREAD_NAME, "args": { "name": name } }),
        ));
    }
    (lines, written, outside)
}

/// Names for the device processes and their stream tracks.
fn track_names(window: &DeviceWindow, streams: &BTreeSet<(u64, u64)>) -> Vec<Vec<u8>> {
    let mut lines = Vec::new();
    let pids: BTreeSet<u64> = streams.iter().map(|(p, _)| *p).collect();
    for pid in pids {
        let device = (pid - device_pid(0)) as u32;
        let name = window.devices.iter().find(|d| d.id == device).map_or("GPU", |d| d.name.as_str());
        let process = device_process_name(device, name);
        let m = |n: &str, args: Value| line(&json!({ "ph": "M", "pid": pid, "tid": 0, "name": n, "args": args }));
        lines.push(m(meta::PROCESS_NAME, json!({ "name": process })));
        lines.push(m(meta::PROCESS_LABELS, json!({ "labels": process })));
        lines.push(m(meta::PROCESS_SORT_INDEX, json!({ "sort_index": pid })));
    }
    for &(pid, stream) in streams {
        lines.push(line(&json!({ "ph": "M", "pid": pid, "tid": stream, "name": meta::THREAD_NAME,
                                 "args": { "name": stream_thread_name(stream) } })));
    }
    lines
}
