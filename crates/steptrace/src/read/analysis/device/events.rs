//! Device work and host launches, read with their arguments: what the
//! device view needs beyond the spans (devices, streams, correlation ids,
//! grids, bytes and copy directions).
//!
//! The shapes are those of torch.profiler (Kineto) and of steptrace's CUPTI
//! bridge (see [`format::device`](crate::format::device)): device events
//! are `X` events of category `kernel`, `gpu_memcpy` or `gpu_memset`; a
//! launch is a host `X` event whose name contains `LaunchKernel` and whose
//! `correlation` matches its kernel's.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::consistency::{sift, DeviceIssues};
use crate::format::device::{cats, is_launch, BlockWork};
use crate::format::names::{args, meta, TRANSFER_H2D};
use crate::read::analysis::order::sort_stable_by;
use crate::read::reader::{plausible_dur, plausible_ts, Name, Names, TraceEvent, TrackId};

/// What a device event did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WorkKind {
    Kernel,
    Memcpy,
    Memset,
}

/// One interval of device work.
#[derive(Clone, Debug)]
pub(crate) struct Work {
    pub(crate) kind: WorkKind,
    pub(crate) name: Name,
    /// The device: `args.device`, else the process track.
    pub(crate) device: DeviceId,
    /// The process track it was written on.
    pub(crate) pid: Option<TrackId>,
    /// The stream: `args.stream`, else the thread track; `None` when neither is given.
    pub(crate) stream: Option<StreamId>,
    pub(crate) correlation: Option<u64>,
    pub(crate) start: f64,
    pub(crate) end: f64,
    pub(crate) grid: Option<[u64; 3]>,
    pub(crate) block: Option<[u64; 3]>,
    pub(crate) bytes: Option<u64>,
    /// `HtoD`, `DtoH`, `DtoD`, `HtoH`, `PtoP` or `other` (copies only).
    pub(crate) direction: Option<&'static str>,
    /// What the kernel ran for, where the trace says (`args.attribution` and its fields).
    pub(crate) attributed: Option<Box<Attributed>>,
    /// Whether it cannot be as written: it overlaps another kernel on its stream, or shares
    /// a single-kernel launch with another kernel (see [`consistency`](super::consistency)).
    pub(crate) inconsistent: bool,
}

/// A stream, as the trace names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum StreamId {
    /// `args.stream`.
    Index(u64),
    /// No `stream` argument: the thread track.
    Track(TrackId),
}

/// A kernel's attribution, as its arguments give it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Attributed {
    /// How it was attributed, or why not (`args.attribution`).
    pub(crate) how: String,
    pub(crate) op_kind: Option<String>,
    pub(crate) ops: Option<String>,
    pub(crate) span: Option<String>,
    pub(crate) phase: Option<String>,
    /// How it was timed, when not by CUPTI (`args.timing`).
    pub(crate) timing: Option<String>,
    /// Its fused block's number in the window (`args["fused block"]`).
    pub(crate) block: Option<u64>,
    /// Its fused block's minimum work, where the trace prices it.
    pub(crate) work: Option<std::sync::Arc<BlockWork>>,
}

impl Attributed {
    fn read(e: &crate::read::reader::TraceEvent) -> Option<Attributed> {
        let text = |key: &str| e.arg(key).and_then(Value::as_str).map(str::to_owned);
        let how = text("attribution")?;
        Some(Attributed {
            how,
            op_kind: text("op kind"),
            ops: text("ops"),
            span: text("span"),
            phase: text("phase"),
            timing: text("timing"),
            block: e.arg("fused block").and_then(Value::as_u64),
            work: read_work(e).map(std::sync::Arc::new),
        })
    }
}

/// A kernel's block work (`min flops`, `min bytes`, `compute dtype`, `unpriced ops`), when
/// its figures are finite and not negative.
fn read_work(e: &crate::read::reader::TraceEvent) -> Option<BlockWork> {
    let number = |key: &str| e.arg(key).and_then(Value::as_f64).filter(|v| v.is_finite() && *v >= 0.0);
    let (flops, bytes) = (number("min flops")?, number("min bytes")?);
    let mut work = BlockWork { flops, bytes, ..BlockWork::default() };
    work.dtype = e.arg("compute dtype").and_then(Value::as_str).unwrap_or("f32").to_owned();
    work.unpriced = e
        .arg("unpriced ops")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    Some(work)
}

/// A device, as the trace names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum DeviceId {
    /// `args.device`.
    Index(u64),
    /// No `device` argument: the process track.
    Track(Option<TrackId>),
}

/// A host call that launched a kernel.
#[derive(Clone, Debug)]
pub(crate) struct Launch {
    pub(crate) start: f64,
    pub(crate) end: f64,
}

/// The device side of one file.
#[derive(Clone, Debug, Default)]
pub(crate) struct DeviceEvents {
    /// Device work, ordered by start.
    pub(crate) work: Vec<Work>,
    /// Launches by correlation id.
    pub(crate) launches: HashMap<u64, Launch>,
    /// Launch calls, correlated or not, ordered by start: `(start, end)`.
    pub(crate) launch_calls: Vec<(f64, f64)>,
    /// The byte sizes of the batch's tensors, from the `transfer.h2d`
    /// spans' arguments (steptrace traces since they carry them).
    pub(crate) batch_bytes: Vec<u64>,
    /// The longest work interval, µs: how far back an event overlapping a
    /// time can start.
    pub(crate) longest: f64,
    /// Process names of device tracks (`GPU 0: NVIDIA H200`).
    pub(crate) process_names: HashMap<Option<TrackId>, String>,
    /// Streaming multiprocessors of the first device that gives a count
    /// (`deviceProperties[].numSms`).
    pub(crate) sms: Option<u64>,
    /// Global memory of the first device that gives it, bytes
    /// (`deviceProperties[].totalGlobalMem`).
    pub(crate) total_memory: Option<u64>,
    /// What cannot be in the kernel events; the copies among them are left out of `work`.
    pub(crate) issues: DeviceIssues,
}

impl DeviceEvents {
    /// The display name of a device: its process track's name when that
    /// names a GPU (`GPU 0: NVIDIA H200`), else `GPU N` or the track.
    pub(crate) fn device_name(&self, id: &DeviceId) -> String {
        let pid = self.work.iter().find(|w| &w.device == id).map(|w| w.pid.clone());
        let named = pid.and_then(|p| self.process_names.get(&p)).filter(|n| n.starts_with("GPU"));
        if let Some(name) = named {
            return name.clone();
        }
        match id {
            DeviceId::Index(n) => format!("GPU {n}"),
            DeviceId::Track(pid) => {
                format!("device track {}", pid.as_ref().map_or_else(|| "?".into(), ToString::to_string))
            }
        }
    }

    /// Work that overlaps `[from, to)`, on any device.
    pub(crate) fn overlapping(&self, from: f64, to: f64) -> impl Iterator<Item = &Work> + '_ {
        // Work is ordered by start; a long event that began earlier still
        // overlaps, so scan from the first event that could.
        let first = self.work.partition_point(|w| w.start < from - self.longest);
        self.work[first..].iter().take_while(move |w| w.start < to).filter(move |w| w.end > from)
    }

    /// Work that starts in `[from, to)`.
    pub(crate) fn starting_in(&self, from: f64, to: f64) -> impl Iterator<Item = &Work> + '_ {
        let first = self.work.partition_point(|w| w.start < from);
        self.work[first..].iter().take_while(move |w| w.start < to)
    }

    /// Launch calls that start in `[from, to)`.
    pub(crate) fn launches_in(&self, from: f64, to: f64) -> usize {
        let first = self.launch_calls.partition_point(|l| l.0 < from);
        self.launch_calls[first..].iter().take_while(|l| l.0 < to).count()
    }

    /// The devices that did work, in order.
    pub(crate) fn devices(&self) -> Vec<DeviceId> {
        let mut ids: Vec<DeviceId> = self.work.iter().map(|w| w.device.clone()).collect();
        ids.sort();
        ids.dedup();
        ids
    }
}

/// Reads the device events and launches of a trace one event at a time,
/// as a file is read: the device work and launches are kept, not the
/// events.
#[derive(Debug, Default)]
pub(crate) struct DeviceEventsBuilder {
    out: DeviceEvents,
    /// Correlation ids of graph launches, which run many kernels each.
    graphs: HashSet<u64>,
}

impl DeviceEventsBuilder {
    /// Reads the next event; `names` holds the names of its work.
    pub(crate) fn event(&mut self, e: &TraceEvent, names: &mut Names) {
        let out = &mut self.out;
        if e.ph == "M" {
            if e.name == meta::PROCESS_NAME {
                if let Some(Value::String(name)) = e.arg("name") {
                    out.process_names.insert(e.pid.clone(), name.clone());
                }
            }
            return;
        }
        if e.name == TRANSFER_H2D {
            for key in [args::INPUT_BYTES, args::TARGET_BYTES] {
                if let Some(n) = e.arg(key).and_then(as_u64) {
                    if !out.batch_bytes.contains(&n) {
                        out.batch_bytes.push(n);
                    }
                }
            }
        }
        if e.ph != "X" {
            return;
        }
        let (Some(ts), Some(dur)) = (e.ts.filter(|t| plausible_ts(*t)), e.dur.filter(|d| plausible_dur(*d))) else {
            return;
        };
        let correlation = e.arg("correlation").and_then(as_u64);
        let kind = match e.cat.as_deref() {
            Some(cats::KERNEL) => WorkKind::Kernel,
            Some(cats::MEMCPY) => WorkKind::Memcpy,
            Some(cats::MEMSET) => WorkKind::Memset,
            _ => {
                if let Some(c) = correlation.filter(|_| e.name.contains("GraphLaunch")) {
                    self.graphs.insert(c);
                }
                if is_launch(&e.name) {
                    out.launch_calls.push((ts, ts + dur));
                    if let Some(c) = correlation {
                        out.launches.insert(c, Launch { start: ts, end: ts + dur });
                    }
                }
                return;
            }
        };
        let device = e.arg("device").and_then(as_u64).map_or_else(|| DeviceId::Track(e.pid.clone()), DeviceId::Index);
        let direction = (kind == WorkKind::Memcpy).then(|| direction(e.arg("kind"), &e.name));
        let stream =
            e.arg("stream").and_then(as_u64).map(StreamId::Index).or_else(|| e.tid.clone().map(StreamId::Track));
        out.work.push(Work {
            kind,
            name: names.get(&e.name),
            device,
            pid: e.pid.clone(),
            stream,
            correlation,
            start: ts,
            end: ts + dur,
            grid: e.arg("grid").and_then(dims),
            block: e.arg("block").and_then(dims),
            bytes: e.arg("bytes").and_then(as_u64),
            direction,
            attributed: if kind == WorkKind::Memset { None } else { Attributed::read(e).map(Box::new) },
            inconsistent: false,
        });
    }

    /// The device events, with what `metadata` (the trace's top level)
    /// says of the devices.
    pub(crate) fn finish(self, metadata: &serde_json::Map<String, Value>) -> DeviceEvents {
        let mut out = self.out;
        let first = |key: &str| {
            metadata
                .get("deviceProperties")
                .and_then(Value::as_array)
                .and_then(|devices| devices.iter().find_map(|d| d.get(key).and_then(as_u64).filter(|n| *n > 0)))
        };
        out.sms = first("numSms");
        out.total_memory = first("totalGlobalMem");
        sort_stable_by(&mut out.work, |a, b| a.start.total_cmp(&b.start));
        out.issues = sift(&mut out.work, &out.launches, &self.graphs);
        out.longest = out.work.iter().map(|w| w.end - w.start).fold(0.0, f64::max);
        out.launch_calls.sort_by(|a, b| a.0.total_cmp(&b.0));
        out
    }
}

fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => {
            n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19).map(|f| f as u64))
        }
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// `[x, y, z]` from an array of three numbers.
fn dims(v: &Value) -> Option<[u64; 3]> {
    let a = v.as_array()?;
    if a.len() != 3 {
        return None;
    }
    Some([as_u64(&a[0])?, as_u64(&a[1])?, as_u64(&a[2])?])
}

/// The direction of a copy: steptrace's `args.kind`, else Kineto's name
/// (`Memcpy HtoD (Pageable -> Device)`).
fn direction(kind: Option<&Value>, name: &str) -> &'static str {
    const KNOWN: [&str; 5] = ["HtoD", "DtoH", "DtoD", "HtoH", "PtoP"];
    let from_kind = kind.and_then(Value::as_str).and_then(|k| KNOWN.iter().find(|d| **d == k).copied());
    from_kind
        .or_else(|| KNOWN.iter().find(|d| name.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w == **d)).copied())
        .unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn directions_come_from_args_or_names() {
        assert_eq!(direction(Some(&json!("DtoH")), "Memcpy"), "DtoH");
        assert_eq!(direction(None, "Memcpy HtoD (Pageable -> Device)"), "HtoD");
        assert_eq!(direction(Some(&json!("weird")), "Memcpy PtoP (Device -> Device)"), "PtoP");
        assert_eq!(direction(None, "Memcpy"), "other");
    }

    #[test]
    fn dims_need_three_numbers() {
        assert_eq!(dims(&json!([4, 2, 1])), Some([4, 2, 1]));
        assert_eq!(dims(&json!([4, 2])), None);
        assert_eq!(dims(&json!([4, -1, 1])), None);
    }
}
