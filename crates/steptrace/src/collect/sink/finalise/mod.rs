//! Turns a cycle's partial array-format file into its final object-format
//! file: parse the lines ([`lines`]), cut them to the window ([`window`]),
//! describe the file ([`TraceMetadata`]) and write it without replacing
//! anything ([`write`]).
//!
//! See the [sink docs](crate::collect::sink) for what is kept, clipped and dropped.

mod device;
mod edit;
mod labels;
mod lines;
mod window;
mod write;

#[cfg(not(unix))]
pub(crate) use write::link_no_clobber;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::json;

use self::lines::{Index, Pairs};
use self::window::{cut, Window};
use super::segment::{SegmentInfo, SinkContext};
use super::SavedTrace;
use crate::error::Error;
use crate::format::names::meta;
use crate::format::{ClockInfo, FormatVersion, ScheduleInfo, StepRange, TraceMetadata, WindowUs};
use crate::labels::LabelScanner;

/// Most distinct strings checked for label hygiene per file.
const HYGIENE_CAP: usize = 4096;

/// Writes `partial`'s window as the trace `info.final_path`; should that name be taken by the
/// time the file is linked there (another run of the same worker, in the same millisecond),
/// under the next name `other_name` gives, if any.
pub(crate) fn finalise(
    info: &SegmentInfo,
    partial: &Path,
    context: &SinkContext,
    waits: crate::format::WriterWaits,
    mut other_name: impl FnMut() -> Option<PathBuf>,
) -> Result<Option<SavedTrace>, Error> {
    let write_err = |source: io::Error| Error::Write {
        path: info.final_path.clone(),
        kept: crate::error::Kept::of(partial),
        source,
    };
    let index = Index::read(partial).map_err(write_err)?;
    let pairs = Pairs::of(&index.events);
    let Some(window) = Window::find(info, &index, &pairs) else {
        // Steps were recorded, yet none of their spans reached the file: they were lost on the
        // way (a thread bound to another profiler, a writer that failed to read them), and the
        // partial file stays for a look. (The `unwritten` experiment drops them on purpose.)
        let lost = Window::lost_steps(info, &index);
        if !lost.is_empty() && !context.shared.batches.unwritten {
            let why = format!("none of the window's steps {lost:?} reached the file: their ProfilerStep spans were lost before the writer");
            return Err(write_err(io::Error::other(why)));
        }
        // Nothing was recorded (the run ended during warmup, or in a step that never ran): no file.
        let _ = fs::remove_file(partial);
        return Ok(None);
    };
    let labels = LabelScanner::with_limit(HYGIENE_CAP);
    // Only a name this process created is ever removed.
    let (tmp, file) = write::create_exclusive(&info.final_path).map_err(write_err)?;
    let written = write_events(file, partial, info, context, &index, &pairs, &window, labels, waits);
    let (written, events, metadata) = written.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        write_err(e)
    })?;
    let mut path = info.final_path.clone();
    loop {
        match write::link_no_clobber(&tmp, &path) {
            Ok(()) => break,
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                if let Some(other) = other_name() {
                    path = other;
                    continue;
                }
                let _ = fs::remove_file(&tmp);
                return Err(Error::Exists { path });
            }
            Err(err) => {
                let _ = fs::remove_file(&tmp);
                return Err(write_err(err));
            }
        }
    }
    let _ = fs::remove_file(&tmp);
    let _ = fs::remove_file(partial);
    Ok(Some(SavedTrace {
        path,
        cycle: info.cycle,
        partial: metadata.partial,
        steps: metadata.steps,
        events,
        bytes: written,
        label_warnings: metadata.label_warnings,
    }))
}

/// Writes the file's events as they are cut to the window (no copy of the
/// window is held), then steptrace's thread names, the device's lines and
/// the metadata: the file's size, its events and its metadata.
#[allow(clippy::too_many_arguments)]
fn write_events(
    file: fs::File,
    partial: &Path,
    info: &SegmentInfo,
    context: &SinkContext,
    index: &Index,
    pairs: &Pairs,
    window: &Window,
    mut labels: LabelScanner,
    waits: crate::format::WriterWaits,
) -> io::Result<(u64, usize, TraceMetadata)> {
    let head = context.rank.as_ref().map(|r| r.info.file_head());
    let mut out = write::EventWriter::new(file, head.as_deref())?;
    let cut = cut(partial, index, pairs, window, &mut labels, &mut |line| out.event(line))?;
    for &thread in &cut.threads {
        let name = crate::collect::gate::thread_name(thread).unwrap_or_else(|| format!("thread {thread}"));
        labels.label("thread name", &name);
        let m = json!({ "ph": "M", "pid": 1, "tid": thread, "name": meta::THREAD_NAME, "args": { "name": name } });
        out.event(m.to_string().as_bytes())?;
    }
    let device = device::device_lines(&info.device, context.device_reason.as_deref(), window, &mut labels);
    for line in &device.lines {
        out.event(line)?;
    }
    let mut metadata = metadata(info, context, window, cut.clipped, index.dropped, labels);
    metadata.writer_waits = Some(waits);
    if let Some(backend) = &metadata.manifest.backend {
        // Viewers drop the metadata object: the backend label, with any
        // FALLBACK and its reason, goes on the host process track too.
        let m = json!({ "ph": "M", "pid": 1, "tid": 0, "name": meta::PROCESS_LABELS, "args": { "labels": backend } });
        out.event(m.to_string().as_bytes())?;
    }
    metadata.device_activity = device.activity;
    let events = out.events();
    let written = out.finish(&metadata, &device.properties)?;
    Ok((written, events, metadata))
}

/// What the file holds and how it was made.
fn metadata(
    info: &SegmentInfo,
    context: &SinkContext,
    window: &Window,
    clipped: usize,
    dropped_lines: usize,
    mut labels: LabelScanner,
) -> TraceMetadata {
    let manifest = context.manifest_of(info.capture.clone());
    labels.tool_value("manifest", &serde_json::to_value(&manifest).unwrap_or_default());
    let s = &context.schedule;
    let active = info.active;
    let steps = window.steps.clone();
    let partial = (steps.len() as u64) < active;
    let schedule = ScheduleInfo {
        text: s.to_string(),
        skip_first: s.skip_first(),
        wait: s.wait(),
        warmup: s.warmup(),
        active,
        repeat: s.repeat(),
        skip_first_wait: s.skip_first_wait(),
    };
    TraceMetadata {
        steptrace_version: env!("CARGO_PKG_VERSION").to_owned(),
        format: FormatVersion::CURRENT.to_string(),
        host_os: Some(std::env::consts::OS.to_owned()),
        host_arch: Some(std::env::consts::ARCH.to_owned()),
        worker: Some(context.worker.clone()),
        distributed: context.rank.as_ref().map(|r| r.info.clone()),
        cycle: Some(info.cycle),
        schedule: Some(schedule),
        expected_steps: info.steps.first().map(|&first| StepRange::new(first, active)).unwrap_or_default(),
        partial_reason: partial.then(|| {
            let why = info.cut_reason.as_deref().unwrap_or("the profiler finished inside the cycle");
            format!("{why}: {} of {} active steps recorded", steps.len(), active)
        }),
        steps,
        partial,
        window_us: Some(WindowUs::new(window.start, window.end)),
        clock: Some(ClockInfo {
            offset_us: context.rank.as_ref().map(|r| r.offset_us),
            ..ClockInfo::us_since(context.epoch_unix_ms as u64)
        }),
        targets: Some(context.targets.clone()),
        clipped_spans: clipped as u64,
        dropped_lines: dropped_lines as u64,
        lost_events_other_sink: context.shared.lost_events(),
        writer_waits: None,
        label_warnings: labels.into_warnings(),
        manifest,
        device_activity: None,
        extra: serde_json::Map::from_iter(
            [
                (meta::WRITER_LINGER.to_owned(), json!(context.linger.describe())),
                (meta::OWN_SPANS.to_owned(), json!(context.shared.own_spans())),
            ]
            .into_iter()
            .chain(context.shared.span_filter().map(|f| (meta::SPAN_FILTER.to_owned(), json!(f)))),
        ),
    }
}
