//! The report: step timing first, then the span summary, the device view
//! and hypotheses.

use serde::Serialize;

use super::checks;
use super::device::{device_view, pick_roofs, DeviceView};
use super::hypotheses::{hypotheses, Change, Context, Hypothesis, NotExamined};
use super::input::LoadedTrace;
use super::loaded::{Loaded, Producer, RunInfo, Vocabulary};
use super::ops::BackendOps;
use super::steps::steps_of;
use super::table::{span_table, SpanTable};
use super::timing::{mark_startup, step_timing, StepTiming};
use crate::format::names::instants;
use crate::format::{MetadataError, Steptrace};
use crate::read::reader::{Trace, TraceFormat};

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
    /// Whether it is a file steptrace never finished: a `NAME.partial`
    /// left by a run that crashed or was stopped inside the cycle (its
    /// header says what it is; it has no finished metadata).
    pub unfinished: bool,
    /// The schedule cycle (steptrace files).
    pub cycle: Option<u64>,
    /// Whether steptrace marked the cycle as partial, and why.
    pub partial_reason: Option<String>,
    /// How an on-demand capture came about (`steptrace capture`): who
    /// asked, when, and at which step the request was read.
    pub captured: Option<String>,
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
    /// Device memory per step (`--memory`); `None`: the trace holds no memory samples.
    pub memory: Option<super::memory::MemoryView>,
    /// Possibilities, each with evidence and a next experiment.
    pub hypotheses: Vec<Hypothesis>,
    /// Checks that could not run on these traces, and why.
    pub not_examined: Vec<NotExamined>,
    /// Instants the run wrote (new shapes, slow steps): `(step, what)`.
    pub anomalies: Vec<(Option<u64>, String)>,
    /// Recorded steps that hold an epoch boundary (validation and
    /// checkpointing, flagged by `steptrace_burn::learner`).
    pub epoch_boundary_steps: Vec<u64>,
    /// What is wrong with the input and what the report did about it
    /// (events left out, steps counted once).
    pub warnings: Vec<String>,
    /// Other remarks.
    pub notes: Vec<String>,
}

/// Options of [`Report::build`].
#[derive(Clone, Debug, Default)]
pub struct ReportOptions {
    /// Samples per step, for traces whose manifest does not say.
    pub batch_size: Option<u64>,
    /// The backend's internal operation names (see [`BackendOps`]).
    pub ops: BackendOps,
    /// The device's measured limits to price kernels against, in place of those the trace
    /// holds (`report --peaks FILE`).
    pub peaks: Option<crate::format::peaks::Peaks>,
}

/// Why a report could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// No file was given.
    #[error("no trace to report on")]
    NoTrace,
    /// Two files come from different runs.
    #[error(
        "{path} does not come from the same run as {first} (their manifests or start times differ); report each run \
         separately"
    )]
    MixedRuns {
        /// The file that differs.
        path: String,
        /// The first file.
        first: String,
    },
    /// Among files of several ranks, one says no rank.
    #[error("{path} says no rank (no distributedInfo), unlike the other files: report the ranks of one run together")]
    NoRank {
        /// The file.
        path: String,
    },
    /// A file's rank cannot hold (a rank beyond the world size, two files
    /// of one rank and cycle, ranks of different world sizes...).
    #[error("{path}: {reason}")]
    RankConflict {
        /// The file.
        path: String,
        /// What cannot hold, and why.
        reason: String,
    },
    /// A file's steptrace metadata does not read.
    #[error("{path}: {source}")]
    Metadata {
        /// The file.
        path: String,
        /// What is wrong.
        #[source]
        source: MetadataError,
    },
}

impl Report {
    /// Builds the report of one run's trace files (for example the cycles
    /// of one `steptrace train`).
    ///
    /// # Errors
    ///
    /// When no file is given, when the files come from different runs
    /// (their manifests differ beyond what a run fills in as it goes), or
    /// when a file's steptrace metadata is of a newer format or the wrong
    /// shape.
    pub fn build(files: &[(String, Trace)], options: &ReportOptions) -> Result<Report, ReportError> {
        let loaded = files.iter().map(|(path, trace)| (path.clone(), LoadedTrace::of(trace))).collect();
        Report::build_loaded(loaded, options)
    }

    /// Builds the report of one run's trace files as [`build`](Self::build)
    /// does, from files read as [`LoadedTrace`]s (what the report reads of
    /// their events, without the events), which it consumes.
    ///
    /// # Errors
    ///
    /// As for [`build`](Self::build).
    pub fn build_loaded(files: Vec<(String, LoadedTrace)>, options: &ReportOptions) -> Result<Report, ReportError> {
        build_parts(files, options).map(|(report, _)| report)
    }

    /// Fills in each hypothesis's [`command`](Hypothesis::command) from the
    /// run's command and the experiment's changes, with `render`, which
    /// knows the program's flags. Hypotheses without an experiment, or runs
    /// whose manifest has no command, keep `None`.
    pub fn render_commands(&mut self, render: impl Fn(&str, &[Change]) -> String) {
        let Some(command) = self.run.command.clone() else { return };
        for h in &mut self.hypotheses {
            if let Some(experiment) = &h.experiment {
                h.command = Some(render(&command, &experiment.changes));
            }
        }
    }
}

/// The report of `files`, and what it read of each file (for a rank's
/// lane of [`RankReport`](super::RankReport)).
pub(crate) fn build_parts(
    files: Vec<(String, LoadedTrace)>,
    options: &ReportOptions,
) -> Result<(Report, Vec<Loaded>), ReportError> {
    let first = files.first().ok_or(ReportError::NoTrace)?;
    let mut parts = Vec::with_capacity(files.len());
    for (path, file) in &files {
        let st = file.head.steptrace().map_err(|source| ReportError::Metadata { path: path.clone(), source })?;
        parts.push(st);
    }
    let identity =
        |st: &Option<Steptrace>| st.as_ref().map(|s| (s.manifest().map(|m| m.identity()), s.epoch_unix_ms()));
    for ((path, _), st) in files.iter().zip(&parts).skip(1) {
        if identity(st) != identity(&parts[0]) {
            return Err(ReportError::MixedRuns { path: path.clone(), first: first.0.clone() });
        }
    }
    // The most complete manifest: later cycles know more (startup figures).
    let manifest = parts.iter().flatten().filter_map(Steptrace::manifest).max_by_key(|m| m.known_fields());
    let schedule = parts.iter().flatten().find_map(|s| s.metadata.as_ref().and_then(|m| m.schedule.clone()));
    let mut warnings = Vec::new();
    let mut paths = Vec::with_capacity(files.len());
    let mut heads = Vec::with_capacity(files.len());
    let mut loaded = Vec::with_capacity(files.len());
    // Each file's spans and device work move into the report's own records: never held twice.
    for (i, ((path, file), st)) in files.into_iter().zip(&parts).enumerate() {
        checks::trace_warnings(&path, &file.problems, file.head.truncated, &mut warnings);
        let (steps, issues) = steps_of(&file.spans, i);
        checks::step_warnings(&path, &issues, &mut warnings);
        if let Some(w) = st.as_ref().and_then(|s| s.metadata.as_ref()?.writer_waits).filter(|w| w.waits > 0) {
            warnings.push(format!(
                "{path}: recording threads waited {:.1} ms in all ({} events) for steptrace's trace writer, which \
                 fell {} events behind: the steps of this window include that wait (record fewer spans: a lower \
                 --detail, or fewer active steps)",
                w.waited_us as f64 / 1000.0,
                w.waits,
                w.cap
            ));
        }
        let activity =
            st.as_ref().and_then(|s| s.metadata.as_ref()?.device_activity.as_ref()).map(|a| a.status.clone());
        checks::device_warnings(&path, &file.device.issues, &mut warnings);
        let producer = file.producer.producer(&file.head.metadata, st.as_ref());
        loaded.push(Loaded { producer, spans: file.spans, steps, activity, device: file.device, memory: file.memory });
        heads.push((file.head, file.events));
        paths.push(path);
    }
    let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
    checks::cross_file_duplicates(&mut loaded, &paths, &mut warnings);
    let sources = (paths.iter().zip(&heads).zip(&loaded).zip(&parts))
        .map(|(((path, (head, events)), l), st)| source(path, head, *events, l, st.as_ref()))
        .collect();
    let mut run = RunInfo::new(manifest, schedule, options.batch_size);
    warnings.extend(run.implausible.iter().cloned());
    let mut notes = Vec::new();
    mark_startup(&mut loaded, &mut run, &mut notes);
    let vocab = Vocabulary { ops: &options.ops };
    let timing = step_timing(&loaded, run.batch_size);
    let spans = span_table(&loaded, &run);
    let roofs = pick_roofs(options.peaks.as_ref(), &run, &mut warnings);
    let device = device_view(&loaded, &run, &vocab, roofs);
    let total_memory = loaded.iter().find_map(|l| l.device.total_memory);
    let memory = super::memory::memory_view(&loaded, &super::device::counted_steps(&loaded), total_memory);
    let anomalies = anomalies(&loaded);
    let boundaries = epoch_boundaries(&loaded);
    if !boundaries.is_empty() {
        notes.push(format!(
            "step(s) {boundaries:?} hold an epoch boundary (validation, checkpointing): their time is not \
             training alone; they are not read as a new compile path"
        ));
    }
    let cx = Context {
        loaded: &loaded,
        run: &run,
        timing: &timing,
        table: &spans,
        device: &device,
        memory: memory.as_ref(),
        anomalies: &anomalies,
        boundaries: &boundaries,
        vocab: &vocab,
    };
    let (hypotheses, not_examined) = hypotheses(&cx);
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
    if timing.window.is_none() && timing.steady_ms.is_some() {
        notes.push("the steady steps span no positive wall time: there is no ms/step figure to quote".into());
    }
    let report = Report {
        sources,
        run,
        timing,
        spans,
        device,
        memory,
        hypotheses,
        not_examined,
        anomalies,
        epoch_boundary_steps: boundaries,
        warnings,
        notes,
    };
    Ok((report, loaded))
}

fn source(path: &str, trace: &Trace, events: usize, loaded: &Loaded, st: Option<&Steptrace>) -> Source {
    let meta = st.and_then(|s| s.metadata.as_ref());
    Source {
        path: path.to_owned(),
        format: match trace.format {
            TraceFormat::Object => "object",
            TraceFormat::Array => "array",
        },
        producer: loaded.producer,
        events,
        truncated: trace.truncated,
        unclosed_spans: loaded.spans.spans.iter().filter(|s| s.unclosed).count(),
        unfinished: st.is_some_and(|s| s.header.is_some() && s.metadata.is_none()),
        cycle: st.and_then(Steptrace::cycle),
        partial_reason: meta.and_then(|m| m.partial_reason.clone()),
        captured: st.and_then(captured),
    }
}

/// `captured on demand: asked by WHO at TIME, read at the end of step N`,
/// from the manifest's `capture` record.
fn captured(st: &Steptrace) -> Option<String> {
    let manifest = st.metadata.as_ref().map(|m| &m.manifest).or(st.header.as_ref().map(|h| &h.manifest))?;
    let capture = manifest.extra.get("capture")?;
    // Words from the trace: one bounded, escaped line each.
    let text = |key: &str| {
        crate::display::line(capture.get(key).and_then(serde_json::Value::as_str).unwrap_or("someone unnamed"))
    };
    let mut line = format!("captured on demand: asked by {} at {}", text("requested_by"), text("requested_at"));
    if let Some(step) = capture.get("read_at_step").and_then(serde_json::Value::as_u64) {
        line.push_str(&format!(", read at the end of step {step}"));
    }
    Some(line)
}

/// The step whose span holds time `ts` in file `l`.
fn step_at(l: &Loaded, ts: f64) -> Option<u64> {
    l.steps.iter().find(|s| s.start <= ts && ts <= s.end).map(|s| s.step)
}

/// Steps holding an [`instants::EPOCH_BOUNDARY`] instant, in order, once each.
fn epoch_boundaries(loaded: &[Loaded]) -> Vec<u64> {
    let mut steps: Vec<u64> = loaded
        .iter()
        .flat_map(|l| {
            l.spans
                .instants
                .iter()
                .filter(|(name, _, _)| name == instants::EPOCH_BOUNDARY)
                .filter_map(|(_, ts, _)| step_at(l, *ts))
        })
        .collect();
    steps.sort_unstable();
    steps.dedup();
    steps
}

/// Instants the run wrote that say the steady state may not hold.
fn anomalies(loaded: &[Loaded]) -> Vec<(Option<u64>, String)> {
    let mut out = Vec::new();
    for l in loaded {
        for (name, ts, _) in &l.spans.instants {
            let lower = name.to_ascii_lowercase();
            // Foreign traces may name compilation in their own words.
            if name == instants::NEW_SHAPE || name == instants::SLOW_STEP || lower.contains("compil") {
                let step = step_at(l, *ts);
                out.push((step, name.clone()));
            }
        }
    }
    out
}
