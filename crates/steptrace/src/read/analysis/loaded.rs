//! What the report knows of each file and of the run: the spans rebuilt
//! from it, its steps, who wrote it, and the manifest.

use serde::Serialize;

use super::ops::BackendOps;
use super::spans::{Span, Spans};
use super::steps::StepRow;
use crate::format::names::meta;
use crate::format::{device, Manifest, ScheduleInfo, Steptrace};
#[cfg(test)]
use crate::read::reader::Trace;
use crate::read::reader::TraceEvent;
use serde_json::Map;

/// Who wrote a trace, as far as its content tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Producer {
    /// `steptrace train` or another program using steptrace's sink.
    Steptrace,
    /// torch.profiler (Kineto).
    TorchProfiler,
    /// Any other Chrome trace.
    Other,
}

/// What the run was, from the steptrace manifest (absent elsewhere).
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunInfo {
    /// Backend label, with the fallback and its reason when there is one.
    pub backend: Option<String>,
    /// `cuda`, `wgpu` or `cpu`.
    pub backend_kind: Option<String>,
    /// The device.
    pub device: Option<String>,
    /// Why the requested backend was not used; `None` if it was.
    pub fallback_reason: Option<String>,
    /// The sync policy.
    pub sync_policy: Option<String>,
    /// What the sync policy means for the numbers.
    pub sync_meaning: Option<String>,
    /// Samples per step.
    pub batch_size: Option<u64>,
    /// Where the batch size came from: `manifest`, `option` or `unknown`.
    pub batch_size_from: &'static str,
    /// Model name.
    pub model: Option<String>,
    /// Dataset name.
    pub dataset: Option<String>,
    /// Steps declared as startup by the run (`0..startup_steps`).
    pub startup_steps: Option<u64>,
    /// Startup figures the run measured before any window.
    pub startup: Option<crate::format::StartupInfo>,
    /// Prefetch threads of the run.
    pub prefetch_workers: Option<u64>,
    /// Steps the run was asked for.
    pub steps: Option<u64>,
    /// The schedule of the run.
    pub schedule: Option<ScheduleInfo>,
    /// The command that reproduces the run, when the manifest allows.
    pub command: Option<String>,
    /// The device's measured limits the run found (`steptrace peaks`), from its manifest.
    pub peaks: Option<crate::format::peaks::Peaks>,
    /// Why the manifest's limits cannot be used, when it holds some that do not read.
    pub peaks_problem: Option<String>,
    /// Figures of the manifest or the options left out as implausible (a batch size of 0 or
    /// of 2^62, a million prefetch threads), each said with why: the report warns of them.
    pub implausible: Vec<String>,
}

/// The largest batch size the report takes as given: 2^30 samples per step. Past it, the
/// figures made from it (samples/s, a larger batch to try) are left out.
pub const MAX_PLAUSIBLE_BATCH: u64 = 1 << 30;

/// The most prefetch threads the report takes as given: 2^16.
pub const MAX_PLAUSIBLE_WORKERS: u64 = 1 << 16;

impl RunInfo {
    /// The run as its manifest (and schedule) describe it.
    pub(crate) fn new(
        manifest: Option<&Manifest>,
        schedule: Option<ScheduleInfo>,
        batch_option: Option<u64>,
    ) -> RunInfo {
        let m = manifest.cloned().unwrap_or_default();
        let (peaks, peaks_problem) = match m.extra.get(crate::format::peaks::PEAKS) {
            None => (None, None),
            Some(v) => match serde_json::from_value::<crate::format::peaks::Peaks>(v.clone()) {
                Ok(p) => (Some(p), None),
                Err(e) => (
                    None,
                    Some(format!(
                        "the manifest's device limits do not read ({}): no floor",
                        crate::display::line(&e.to_string())
                    )),
                ),
            },
        };
        let (mut batch_size, mut batch_size_from) = match (batch_option, m.batch_size) {
            (Some(b), _) => (Some(b), "option"),
            (None, Some(b)) => (Some(b), "manifest"),
            (None, None) => (None, "unknown"),
        };
        let mut implausible = Vec::new();
        if let Some(b) = batch_size.filter(|b| !(1..=MAX_PLAUSIBLE_BATCH).contains(b)) {
            let from = if batch_size_from == "option" { "given with the report" } else { "in the run's manifest" };
            implausible.push(format!(
                "the batch size {from}, {b}, is implausible (not between 1 and {MAX_PLAUSIBLE_BATCH}): it is left \
                 out, with the samples per second and the batch sizes to try"
            ));
            (batch_size, batch_size_from) = (None, "unknown");
        }
        let mut prefetch_workers = m.prefetch_workers;
        if let Some(w) = prefetch_workers.filter(|w| *w > MAX_PLAUSIBLE_WORKERS) {
            implausible.push(format!(
                "the run's manifest gives {w} prefetch threads, implausibly many (more than {MAX_PLAUSIBLE_WORKERS}): \
                 the count is left out"
            ));
            prefetch_workers = None;
        }
        RunInfo {
            backend: m.backend,
            backend_kind: m.backend_kind,
            device: m.device,
            fallback_reason: m.fallback_reason,
            sync_policy: m.sync_policy,
            sync_meaning: m.sync_meaning,
            batch_size,
            batch_size_from,
            model: m.model,
            dataset: m.dataset,
            startup_steps: m.startup_steps,
            startup: m.startup,
            prefetch_workers,
            steps: m.steps,
            schedule,
            command: m.command,
            peaks,
            peaks_problem,
            implausible,
        }
    }
}

/// A file that was read, with the spans rebuilt from it.
pub(crate) struct Loaded {
    pub(crate) spans: Spans,
    pub(crate) steps: Vec<StepRow>,
    pub(crate) producer: Producer,
    /// What the file's metadata says of device activity.
    pub(crate) activity: Option<device::ActivityStatus>,
    /// Device work and launches, with their arguments.
    pub(crate) device: super::device::DeviceEvents,
    /// `--memory`'s samples, by time.
    pub(crate) memory: Vec<super::memory::MemorySample>,
}

/// The names a report recognises: steptrace's own, the CUDA and Kineto
/// vocabulary, and what the backend crate registered.
pub(crate) struct Vocabulary<'a> {
    pub(crate) ops: &'a BackendOps,
}

impl Vocabulary<'_> {
    /// A host-side kernel launch.
    pub(crate) fn is_launch(&self, name: &str) -> bool {
        device::is_launch(name) || self.ops.launches.iter().any(|n| n == name)
    }

    /// A host-side upload, or a device-side host-to-device copy.
    pub(crate) fn is_upload(&self, span: &Span) -> bool {
        self.ops.uploads.contains(&span.name) || span.name.contains("Memcpy HtoD")
    }
}

/// Who wrote `trace`: steptrace when the file holds any part of
/// steptrace's own (its metadata, a partial file's header) or names its
/// host process as steptrace does (`steptrace: WORKER`, what remains of a
/// steptrace file cut short before its metadata); else torch.profiler
/// when it holds Kineto's top-level keys or event categories.
#[cfg(test)]
pub(crate) fn producer(trace: &Trace, steptrace: Option<&Steptrace>) -> Producer {
    let mut hints = ProducerHints::default();
    for event in &trace.events {
        hints.event(event);
    }
    hints.producer(&trace.metadata, steptrace)
}

/// What the first events of a file say of who wrote it: see [`producer`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ProducerHints {
    /// Events seen.
    seen: usize,
    /// Whether one of the first 64 events names the host process as
    /// steptrace does: its first line is `process_name` `steptrace: WORKER`.
    steptrace_process: bool,
    /// Whether one of the first 10,000 events is of one of Kineto's categories.
    kineto_category: bool,
}

impl ProducerHints {
    /// Reads the next event.
    pub(crate) fn event(&mut self, e: &TraceEvent) {
        let kineto_cats = [device::cats::KERNEL, device::cats::RUNTIME, "cpu_op", "python_function", "user_annotation"];
        if self.seen < 64 && !self.steptrace_process {
            self.steptrace_process = e.ph == "M"
                && e.name == meta::PROCESS_NAME
                && e.arg("name").and_then(serde_json::Value::as_str).is_some_and(|n| n.starts_with("steptrace: "));
        }
        if self.seen < 10_000 && !self.kineto_category {
            self.kineto_category = e.cat.as_deref().is_some_and(|c| kineto_cats.contains(&c));
        }
        self.seen = self.seen.saturating_add(1);
    }

    /// Who wrote the file whose top level is `metadata` (see [`producer`]).
    pub(crate) fn producer(
        &self,
        metadata: &Map<String, serde_json::Value>,
        steptrace: Option<&Steptrace>,
    ) -> Producer {
        // A steptrace file may hold Kineto's words too: `distributedInfo` on a
        // rank's file, CUPTI's kernel and runtime categories.
        if steptrace.is_some() || self.steptrace_process {
            return Producer::Steptrace;
        }
        let kineto_keys = ["schemaVersion", "deviceProperties", "distributedInfo", "traceName"];
        if kineto_keys.iter().any(|k| metadata.contains_key(*k)) || self.kineto_category {
            return Producer::TorchProfiler;
        }
        Producer::Other
    }
}

/// The window of a file: the extent of its steps, else of its spans.
pub(crate) fn window_of(l: &Loaded) -> Option<(f64, f64)> {
    let ends = |it: &mut dyn Iterator<Item = (f64, f64)>| {
        it.fold(None, |acc: Option<(f64, f64)>, (a, b)| Some(acc.map_or((a, b), |(s, e)| (s.min(a), e.max(b)))))
    };
    ends(&mut l.steps.iter().map(|s| (s.start, s.end)))
        .or_else(|| ends(&mut l.spans.spans.iter().map(|s| (s.start, s.end))))
}

#[cfg(test)]
mod tests {
    use super::{producer, Producer};
    use crate::read::reader::parse_trace;

    fn who(text: &str) -> Producer {
        let trace = parse_trace(text.as_bytes()).expect("a trace");
        let st = trace.steptrace().expect("readable");
        producer(&trace, st.as_ref())
    }

    #[test]
    fn steptrace_files_cut_short_are_still_steptraces() {
        // A rank's file cut before its metadata: distributedInfo and CUPTI's categories, steptrace's process name.
        let cut = r#"{"distributedInfo": {"backend": "threads", "rank": 1, "world_size": 2},
            "traceEvents":[{"args":{"name":"steptrace: ddp (rank 1 of 2)"},"name":"process_name","ph":"M","pid":1,"tid":0},
            {"cat":"kernel","name":"gemm","ph":"X","pid":2,"tid":7,"ts":1,"dur":2},"#;
        assert_eq!(who(cut), Producer::Steptrace);
        let partial = r#"[{"ph":"M","pid":1,"tid":0,"name":"steptrace_segment","args":{"worker":"w","cycle":0}},
            {"cat":"cuda_runtime","name":"cudaLaunchKernel","ph":"X","pid":1,"tid":1,"ts":1,"dur":2}]"#;
        assert_eq!(who(partial), Producer::Steptrace);
        let torch = r#"{"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 2},
            "traceEvents":[{"ph":"M","name":"process_name","pid":1,"tid":0,"args":{"name":"python3"}},
            {"cat":"cpu_op","name":"aten::mm","ph":"X","pid":1,"tid":1,"ts":1,"dur":2}]}"#;
        assert_eq!(who(torch), Producer::TorchProfiler);
        assert_eq!(who(r#"[{"ph":"X","name":"a","ts":1,"dur":2}]"#), Producer::Other);
    }
}
