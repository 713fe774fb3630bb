//! The report: step timing first, then the span summary, the device view
//! and hypotheses.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use serde_json::Value;

use super::device::{device_view, DeviceView};
use super::hypotheses::{hypotheses, Hypothesis, NotExamined};
use super::spans::{union_length, Spans};
use super::stats::Stats;
use super::steps::{step_number, steps_of, StepRow};
use crate::reader::{Trace, TraceFormat};

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

/// One input file.
#[derive(Clone, Debug, Serialize)]
pub struct Source {
    /// The file, as given.
    pub path: String,
    /// Object or array layout.
    pub format: &'static str,
    /// Who wrote it.
    pub producer: Producer,
    /// Number of events.
    pub events: usize,
    /// Whether it was cut short (a crash mid-window).
    pub truncated: bool,
    /// Spans whose end was missing.
    pub unclosed_spans: usize,
    /// The schedule cycle (steptrace files).
    pub cycle: Option<u64>,
    /// Whether steptrace marked the cycle as partial, and why.
    pub partial_reason: Option<String>,
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
    /// The sync policy and its meaning for the numbers.
    pub sync_policy: Option<String>,
    /// What the sync policy means for the numbers.
    pub sync_meaning: Option<String>,
    /// Samples per step, and where that figure came from.
    pub batch_size: Option<u64>,
    /// `manifest`, `option` or `unknown`.
    pub batch_size_from: &'static str,
    /// Model name.
    pub model: Option<String>,
    /// Dataset name.
    pub dataset: Option<String>,
    /// Steps declared as startup by the run (`0..startup_steps`).
    pub startup_steps: Option<u64>,
    /// Startup figures the run measured before any window (steptrace
    /// manifest `startup`): setup and first-step times, cache state.
    pub startup: Option<Value>,
    /// The command that reproduces the run, when the manifest allows.
    pub command: Option<String>,
}

/// Step timing: the headline figures.
#[derive(Clone, Debug, Serialize)]
pub struct StepTiming {
    /// The unit of the headline figure.
    pub unit: &'static str,
    /// Every recorded step, in order.
    pub steps: Vec<StepRow>,
    /// Statistics over steady steps, ms/step.
    pub steady_ms: Option<Stats>,
    /// Statistics over steady steps, samples/s (needs the batch size).
    pub steady_samples_per_s: Option<Stats>,
    /// Statistics over startup steps, ms/step (never merged with steady).
    pub startup_ms: Option<Stats>,
    /// The wall-clock rate over steady windows: elapsed time from the first
    /// steady step's start to the last one's end, per file, divided by the
    /// number of steps.
    pub window: Option<WindowRate>,
}

/// A wall-clock rate over windows.
#[derive(Clone, Debug, Serialize)]
pub struct WindowRate {
    /// Elapsed wall time, ms.
    pub wall_ms: f64,
    /// Steps in it.
    pub steps: usize,
    /// ms/step.
    pub ms_per_step: f64,
    /// samples/s, when the batch size is known.
    pub samples_per_s: Option<f64>,
}

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

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The files read.
    pub sources: Vec<Source>,
    /// What the run was.
    pub run: RunInfo,
    /// Step timing: the headline.
    pub timing: StepTiming,
    /// Per span name.
    pub spans: SpanTable,
    /// Host launch, device work and waiting.
    pub device: DeviceView,
    /// Possibilities, each with evidence and a next experiment.
    pub hypotheses: Vec<Hypothesis>,
    /// Checks that could not run on these traces, and why.
    pub not_examined: Vec<NotExamined>,
    /// Instants the run wrote (new shapes, slow steps): `(step, what)`.
    pub anomalies: Vec<(Option<u64>, String)>,
    /// Other remarks.
    pub notes: Vec<String>,
}

/// Options of [`Report::build`].
#[derive(Clone, Debug, Default)]
pub struct ReportOptions {
    /// Samples per step, for traces whose manifest does not say.
    pub batch_size: Option<u64>,
}

/// A file that was read, with the spans rebuilt from it.
pub(crate) struct Loaded {
    pub(crate) spans: Spans,
    pub(crate) steps: Vec<StepRow>,
    pub(crate) producer: Producer,
}

impl Report {
    /// Builds the report of one run's trace files (for example the cycles
    /// of one `steptrace train`).
    ///
    /// # Errors
    ///
    /// A message when the files come from different runs (their manifests
    /// differ beyond the cycle), or when no file is given.
    pub fn build(files: &[(String, Trace)], options: &ReportOptions) -> Result<Report, String> {
        if files.is_empty() {
            return Err("no trace to report on".into());
        }
        let manifest = same_run(files)?;
        let loaded: Vec<Loaded> = files
            .iter()
            .enumerate()
            .map(|(i, (_, trace))| {
                let spans = Spans::from_trace(trace);
                let steps = steps_of(&spans, i);
                Loaded { producer: producer(trace), spans, steps }
            })
            .collect();
        let sources = files.iter().zip(&loaded).map(|((path, trace), l)| source(path, trace, l)).collect();
        let mut run = run_info(manifest.as_ref(), options);
        let mut notes = Vec::new();
        let mut loaded = loaded;
        mark_startup(&mut loaded, &mut run, &mut notes);
        let timing = step_timing(&loaded, run.batch_size);
        let spans = span_table(&loaded, &run);
        let device = device_view(&loaded, &run);
        let anomalies = anomalies(&loaded);
        let (hypotheses, not_examined) = hypotheses(&loaded, &run, &timing, &spans, &device, &anomalies);
        if loaded.iter().all(|l| l.steps.is_empty()) {
            notes.push(
                "no ProfilerStep#N spans: there are no step boundaries, so no per-step figures; shares refer to the \
                 extent of the trace"
                    .into(),
            );
        }
        if run.batch_size.is_none() {
            notes.push("batch size unknown (not in the trace): samples/s needs --batch N".into());
        }
        Ok(Report { sources, run, timing, spans, device, hypotheses, not_examined, anomalies, notes })
    }
}

/// The manifest shared by all files, refusing files of different runs.
fn same_run(files: &[(String, Trace)]) -> Result<Option<serde_json::Map<String, Value>>, String> {
    let manifest = |t: &Trace| t.metadata.get("metadata").and_then(|m| m.get("manifest")).cloned();
    let identity = |t: &Trace| {
        let epoch = t.metadata.get("metadata").and_then(|m| m.get("clock")).and_then(|c| c.get("epoch_unix_ms")).cloned();
        let manifest = manifest(t).map(|m| {
            let mut m = m;
            if let Value::Object(map) = &mut m {
                // Filled in as the run goes: not part of its identity.
                for key in ["startup", "input_shape"] {
                    map.remove(key);
                }
            }
            m
        });
        (manifest, epoch)
    };
    let first = identity(&files[0].1);
    for (path, trace) in &files[1..] {
        if identity(trace) != first {
            return Err(format!(
                "{path} does not come from the same run as {} (their manifests or start times differ); report each run separately",
                files[0].0
            ));
        }
    }
    // The most complete manifest: later cycles know more (startup figures).
    let mut best = None;
    for (_, trace) in files {
        if let Some(Value::Object(map)) = manifest(trace) {
            if best.as_ref().map_or(true, |b: &serde_json::Map<String, Value>| map.len() >= b.len()) {
                best = Some(map);
            }
        }
    }
    Ok(best)
}

fn producer(trace: &Trace) -> Producer {
    let meta = trace.metadata.get("metadata");
    if meta.and_then(|m| m.get("format")).and_then(Value::as_str).is_some_and(|f| f.starts_with("steptrace")) {
        return Producer::Steptrace;
    }
    let kineto_keys = ["schemaVersion", "deviceProperties", "distributedInfo", "traceName"];
    let kineto_cats = ["cpu_op", "kernel", "cuda_runtime", "python_function", "user_annotation"];
    if kineto_keys.iter().any(|k| trace.metadata.contains_key(*k))
        || trace.events.iter().take(10_000).any(|e| e.cat.as_deref().is_some_and(|c| kineto_cats.contains(&c)))
    {
        return Producer::TorchProfiler;
    }
    Producer::Other
}

fn source(path: &str, trace: &Trace, loaded: &Loaded) -> Source {
    let meta = trace.metadata.get("metadata");
    Source {
        path: path.to_owned(),
        format: match trace.format {
            TraceFormat::Object => "object",
            TraceFormat::Array => "array",
        },
        producer: loaded.producer,
        events: trace.events.len(),
        truncated: trace.truncated,
        unclosed_spans: loaded.spans.spans.iter().filter(|s| s.unclosed).count(),
        cycle: meta.and_then(|m| m.get("cycle")).and_then(Value::as_u64),
        partial_reason: meta.and_then(|m| m.get("partial_reason")).and_then(Value::as_str).map(str::to_owned),
    }
}

fn run_info(manifest: Option<&serde_json::Map<String, Value>>, options: &ReportOptions) -> RunInfo {
    let text = |key: &str| manifest.and_then(|m| m.get(key)).and_then(Value::as_str).map(str::to_owned);
    let number = |key: &str| manifest.and_then(|m| m.get(key)).and_then(Value::as_u64);
    let (batch_size, batch_size_from) = match (options.batch_size, number("batch_size")) {
        (Some(b), _) => (Some(b), "option"),
        (None, Some(b)) => (Some(b), "manifest"),
        (None, None) => (None, "unknown"),
    };
    RunInfo {
        backend: text("backend"),
        backend_kind: text("backend_kind"),
        device: text("device"),
        fallback_reason: text("fallback_reason"),
        sync_policy: text("sync_policy"),
        sync_meaning: text("sync_meaning"),
        batch_size,
        batch_size_from,
        model: text("model"),
        dataset: text("dataset"),
        startup_steps: number("startup_steps"),
        startup: manifest.and_then(|m| m.get("startup")).cloned(),
        command: manifest.and_then(|m| m.get("command")).and_then(Value::as_str).map(str::to_owned),
    }
}

/// Marks startup steps: those the run declared as startup, else step 0.
fn mark_startup(loaded: &mut [Loaded], run: &mut RunInfo, notes: &mut Vec<String>) {
    let declared = run.startup_steps;
    if declared.is_none() {
        notes.push(
            "the trace does not declare its startup steps: only ProfilerStep#0, if recorded, is counted as startup"
                .into(),
        );
    }
    let limit = declared.unwrap_or(1);
    for l in loaded.iter_mut() {
        for row in &mut l.steps {
            row.startup = row.step < limit;
        }
    }
}

fn step_timing(loaded: &[Loaded], batch: Option<u64>) -> StepTiming {
    let steps: Vec<StepRow> = loaded.iter().flat_map(|l| l.steps.iter().cloned()).collect();
    let steady: Vec<f64> = steps.iter().filter(|s| !s.startup).map(|s| s.ms).collect();
    let startup: Vec<f64> = steps.iter().filter(|s| s.startup).map(|s| s.ms).collect();
    let rate = |ms: &f64| batch.map(|b| b as f64 * 1000.0 / ms);
    let per_s: Option<Vec<f64>> = steady.iter().map(rate).collect();
    let mut wall_us = 0.0;
    let mut count = 0;
    for l in loaded {
        let kept: Vec<&StepRow> = l.steps.iter().filter(|s| !s.startup).collect();
        if let (Some(first), Some(last)) = (kept.first(), kept.last()) {
            wall_us += last.end - first.start;
            count += kept.len();
        }
    }
    let window = (count > 0).then(|| {
        let ms_per_step = wall_us / 1000.0 / count as f64;
        WindowRate { wall_ms: wall_us / 1000.0, steps: count, ms_per_step, samples_per_s: rate(&ms_per_step) }
    });
    StepTiming {
        unit: "ms/step",
        steady_ms: Stats::of(&steady),
        steady_samples_per_s: per_s.and_then(|v| Stats::of(&v)),
        startup_ms: Stats::of(&startup),
        window,
        steps,
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

/// Names of spans that wait for the device.
pub(crate) fn is_wait(name: &str) -> bool {
    // `loss.read` copies the loss back to the host, which waits for the
    // device.
    name == "sync" || name == "loss.read" || name.ends_with("Synchronize")
}

/// Kineto categories of device-side events.
pub(crate) fn is_device_cat(cat: Option<&str>) -> bool {
    matches!(cat, Some("kernel" | "gpu_memcpy" | "gpu_memset" | "gpu_user_annotation"))
}

fn span_table(loaded: &[Loaded], run: &RunInfo) -> SpanTable {
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
        for (i, s) in l.spans.spans.iter().enumerate() {
            if s.end < w0 || s.start > w1 {
                continue;
            }
            let name = if step_number(&s.name).is_some() { "ProfilerStep#*" } else { s.name.as_str() };
            let a = acc.entry(name.to_owned()).or_default();
            a.calls += 1;
            a.threads.insert(format!("{:?}", s.thread));
            a.total += s.dur();
            a.self_us += s.self_us;
            if is_device_cat(s.cat.as_deref()) {
                a.device += 1;
            } else if l.spans.contains_named(i, "sync") {
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

fn anomalies(loaded: &[Loaded]) -> Vec<(Option<u64>, String)> {
    let mut out = Vec::new();
    for l in loaded {
        for (name, ts, _) in &l.spans.instants {
            let lower = name.to_ascii_lowercase();
            if lower.contains("new input shape") || lower.contains("slow step") || lower.contains("compil") {
                let step = l.steps.iter().find(|s| s.start <= *ts && *ts <= s.end).map(|s| s.step);
                out.push((step, name.clone()));
            }
        }
    }
    out
}
