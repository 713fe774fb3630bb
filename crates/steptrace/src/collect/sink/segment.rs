//! The writer that tracing-chrome streams one cycle into.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::finalise::finalise;
use super::names::{partial_path, FileNames};
use super::SavedTrace;
use crate::collect::schedule::Schedule;
use crate::error::Error;
use crate::format::names::meta;
use crate::format::{FormatVersion, Manifest, SegmentHeader};

/// The manifest key of an on-demand capture's record.
pub(crate) const CAPTURE_KEY: &str = "capture";

/// What the sink knows about the whole run, shared with every segment.
#[derive(Debug)]
pub(crate) struct SinkContext {
    pub(crate) worker: String,
    /// The rank whose files these are, in a run of several.
    pub(crate) rank: Option<RankContext>,
    pub(crate) schedule: Schedule,
    pub(crate) targets: String,
    /// Unix time (ms) of trace time 0.
    pub(crate) epoch_unix_ms: u128,
    pub(crate) manifest: Mutex<Manifest>,
    /// Why no device activity is collected, when the caller said.
    pub(crate) device_reason: Option<String>,
    /// Each cycle's outcome, with its cycle number (cycles end on the writer
    /// thread, so they may arrive out of order).
    pub(crate) results: Mutex<Vec<(u64, Result<SavedTrace, Error>)>>,
    pub(crate) shared: Arc<crate::collect::gate::Shared>,
    /// Keeps the writer thread off its channel while a window records.
    pub(crate) linger: super::Linger,
}

impl SinkContext {
    /// Keeps a cycle's outcome for the profiler's caller (nothing is
    /// printed: label warnings travel in the [`SavedTrace`], errors in
    /// [`Profiler::errors`](crate::Profiler::errors)).
    pub(crate) fn push_result(&self, cycle: u64, result: Result<SavedTrace, Error>) {
        if let Ok(mut results) = self.results.lock() {
            results.push((cycle, result));
        }
    }

    pub(crate) fn manifest(&self) -> Manifest {
        self.manifest.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// The manifest of one cycle's file: the run's, with `capture` when the
    /// cycle was captured on demand.
    pub(crate) fn manifest_of(&self, capture: Option<Value>) -> Manifest {
        let mut manifest = self.manifest();
        if let Some(capture) = capture {
            manifest.extra.insert(CAPTURE_KEY.to_owned(), capture);
        }
        manifest
    }
}

/// Where a rank's files sit in its run.
#[derive(Debug)]
pub(crate) struct RankContext {
    /// Written as `distributedInfo` and in the metadata.
    pub(crate) info: crate::format::DistributedInfo,
    /// µs from the run's time 0 to this rank's trace time 0.
    pub(crate) offset_us: f64,
}

impl SinkContext {
    /// The name of the host process track: `steptrace: WORKER`, with the
    /// rank in a run of several.
    pub(crate) fn process_name(&self) -> String {
        match &self.rank {
            Some(rank) => format!("steptrace: {} ({})", self.worker, rank.info.describe()),
            None => format!("steptrace: {}", self.worker),
        }
    }
}

/// One cycle's bookkeeping, written by the profiler, read when finalising.
#[derive(Debug)]
pub(crate) struct SegmentInfo {
    pub(crate) cycle: u64,
    pub(crate) final_path: PathBuf,
    /// The active steps the cycle should hold (the schedule's, or a
    /// capture's).
    pub(crate) active: u64,
    /// What an on-demand capture's manifest says of it (`capture`).
    pub(crate) capture: Option<Value>,
    /// Steps whose `ProfilerStep` span was opened while recording.
    pub(crate) steps: Vec<u64>,
    /// Whether the profiler finished (or was dropped) inside this cycle.
    pub(crate) ended_by_finish: bool,
    /// Why the run ended inside this cycle, when the caller said
    /// ([`Profiler::cut_short`](crate::Profiler::cut_short)).
    pub(crate) cut_reason: Option<String>,
    /// What the device collector recorded.
    pub(crate) device: DeviceOutcome,
}

/// What a cycle's device collector gave.
#[derive(Debug)]
pub(crate) enum DeviceOutcome {
    /// No collector: the sink's `device_reason`, if any, says why.
    NotCollected,
    /// The window's records.
    Window(Box<crate::collect::device::DeviceWindow>),
    /// The collector failed; why.
    Failed(String),
}

/// Receives tracing-chrome's array-format stream for one cycle and
/// finalises the file when tracing-chrome lets go of it.
///
/// Write errors never reach tracing-chrome (whose writer thread would panic
/// on them): the first one is kept and reported when the segment ends.
pub(crate) struct SegmentWriter {
    file: Option<File>,
    /// The partial file is created on the writer thread, at the first write (see [`create`]).
    ///
    /// [`create`]: SegmentWriter::create
    opening: Opening,
    partial: PathBuf,
    /// The cycle and its capture record, for the header written after the opening `[`.
    header: Option<(u64, Option<Value>)>,
    error: Option<io::Error>,
    info: Arc<Mutex<SegmentInfo>>,
    context: Arc<SinkContext>,
    limit: Option<u64>,
    written: u64,
    /// The writer waits counted before this segment.
    waits_at_start: crate::format::WriterWaits,
    /// Writes the stepping thread's batches where they were announced, or at a flush.
    expander: super::expand::Expander,
    /// The last byte written to the file (0: none yet).
    last: u8,
    /// Other names for the file, should its own be taken when it is created.
    variants: Option<(FileNames, PathBuf, u32)>,
}

/// Other names tried for a cycle whose first name is taken (`NAME-1.trace.json` and on).
pub(crate) const NAME_VARIANTS: u32 = 16;

impl SegmentWriter {
    /// A writer for `NAME.partial`. A name already taken (the final file or the partial one) is
    /// an error here, so that the caller can choose another; the file itself is created
    /// exclusively on tracing-chrome's writer thread, at the first write: creating a file costs
    /// ext4 100 µs or more, which the step that opens a window would otherwise pay. Should the
    /// name be taken in between (another process), nothing is overwritten: the cycle's error
    /// says so.
    pub(crate) fn create(
        info: Arc<Mutex<SegmentInfo>>,
        context: Arc<SinkContext>,
        limit: Option<u64>,
        segment: u64,
    ) -> Result<SegmentWriter, Error> {
        let (final_path, cycle, capture) = {
            let info = info.lock().map_err(|_| poisoned())?;
            (info.final_path.clone(), info.cycle, info.capture.clone())
        };
        if final_path.exists() {
            return Err(Error::Exists { path: final_path });
        }
        let partial = partial_path(&final_path);
        if partial.exists() {
            return Err(Error::Exists { path: partial });
        }
        let waits_at_start = context.shared.backlog.waits();
        Ok(SegmentWriter {
            file: None,
            opening: Opening::Pending,
            partial,
            header: Some((cycle, capture)),
            error: None,
            info,
            context,
            limit,
            written: 0,
            waits_at_start,
            expander: super::expand::Expander::new(segment),
            last: 0,
            variants: None,
        })
    }

    /// The names to try, in order, should the name be taken by the time the file is created:
    /// `names`' variants of `first` from the `next`th on.
    pub(crate) fn with_variants(mut self, names: FileNames, first: PathBuf, next: u32) -> SegmentWriter {
        self.variants = Some((names, first, next));
        self
    }

    /// The partial file, created now if this is the first write. A name taken meanwhile (by
    /// another run of the same worker) is left alone, and the next variant is tried.
    fn open(&mut self) -> io::Result<&mut File> {
        if self.opening == Opening::Pending {
            self.opening = Opening::Failed;
            let file = loop {
                match OpenOptions::new().write(true).create_new(true).open(&self.partial) {
                    Ok(file) => break file,
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match self.next_variant() {
                        Some(()) => continue,
                        None => {
                            return Err(io::Error::new(
                                e.kind(),
                                format!("{} was created by someone else meanwhile, and so were its variants: nothing was overwritten", self.partial.display()),
                            ))
                        }
                    },
                    Err(e) => return Err(e),
                }
            };
            self.file = Some(file);
            self.opening = Opening::Open;
        }
        self.file.as_mut().ok_or_else(|| io::Error::other("trace file already closed"))
    }

    /// Moves to the next free variant of the cycle's name (final and partial names both free).
    fn next_variant(&mut self) -> Option<()> {
        let (names, first, next) = self.variants.as_mut()?;
        while *next <= NAME_VARIANTS {
            let candidate = names.variant(first, *next)?;
            *next += 1;
            let partial = partial_path(&candidate);
            if !candidate.exists() && !partial.exists() {
                self.info.lock().ok()?.final_path = candidate;
                self.partial = partial;
                return Some(());
            }
        }
        None
    }

    fn write_file(&mut self, buf: &[u8]) -> io::Result<()> {
        if self.error.is_some() {
            return Ok(());
        }
        if let Some(limit) = self.limit {
            if self.written + buf.len() as u64 > limit {
                return Err(io::Error::new(
                    io::ErrorKind::StorageFull,
                    format!("trace size limit of {limit} bytes reached"),
                ));
            }
        }
        self.open()?.write_all(buf)?;
        self.written += buf.len() as u64;
        if let Some(&last) = buf.last() {
            self.last = last;
        }
        Ok(())
    }
}

impl SegmentWriter {
    /// Writes tracing-chrome's lines through the expander (see [`expand`](super::expand));
    /// `complete`: the line kept waiting is whole now.
    fn write_lines(&mut self, buf: &[u8], complete: bool) -> io::Result<()> {
        let context = self.context.clone();
        let batches = &context.shared.batches;
        let mut expander = std::mem::take(&mut self.expander);
        let mut out = |bytes: &[u8]| self.write_file(bytes);
        let mut result = expander.write(buf, batches, &mut out);
        if complete && result.is_ok() {
            result = expander.finish(batches, &mut out);
        }
        self.expander = expander;
        result
    }

    /// Writes the batches handed over without an announcement (see [`drain`]): only between two
    /// of tracing-chrome's events, never before its opening `[` and the header or after its
    /// closing `]`. After an error, they leave the queue unwritten.
    ///
    /// [`drain`]: super::expand::Expander::drain
    fn drain(&mut self) {
        let context = self.context.clone();
        let batches = &context.shared.batches;
        if self.error.is_some() || self.last == b']' {
            self.expander.discard(batches);
            return;
        }
        if self.header.is_some() || self.last == 0 {
            return;
        }
        let after_entry = self.last == b'}';
        let mut expander = std::mem::take(&mut self.expander);
        let result = expander.drain(batches, after_entry, &mut |bytes: &[u8]| self.write_file(bytes));
        self.expander = expander;
        if let Err(err) = result {
            self.error = Some(err);
        }
    }
}

/// Where a segment's partial file stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Opening {
    /// Not created yet: at the first write.
    Pending,
    Open,
    /// Could not be created.
    Failed,
}

/// Two metadata events written right after the opening `[`: the process name,
/// and the run's description, so that a file cut short by a crash still says
/// what it is.
fn header_lines(context: &SinkContext, cycle: u64, capture: Option<Value>) -> Vec<u8> {
    let process = json!({
        "ph": "M", "pid": 1, "tid": 0, "name": meta::PROCESS_NAME,
        "args": { "name": context.process_name() },
    });
    let header = SegmentHeader {
        format: Some(FormatVersion::CURRENT.to_string()),
        worker: context.worker.clone(),
        cycle,
        schedule: context.schedule.to_string(),
        epoch_unix_ms: context.epoch_unix_ms as u64,
        distributed: context.rank.as_ref().map(|r| r.info.clone()),
        steptrace_version: env!("CARGO_PKG_VERSION").to_owned(),
        manifest: context.manifest_of(capture),
    };
    let segment = json!({
        "ph": "M", "pid": 1, "tid": 0, "name": meta::SEGMENT,
        "args": serde_json::to_value(&header).unwrap_or(Value::Null),
    });
    format!("{process},\n{segment},\n").into_bytes()
}

fn poisoned() -> Error {
    Error::Install("profiler state lock poisoned".to_owned())
}

impl Write for SegmentWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.context.shared.backlog.received(buf);
        if self.error.is_some() {
            // Nothing more is written, but announced batches still leave the queue.
            let _ = self.write_lines(buf, false);
            return Ok(buf.len());
        }
        let result = match self.header.take() {
            Some((cycle, capture)) if buf.starts_with(b"[\n") => self
                .write_file(b"[\n")
                .and_then(|()| self.write_file(&header_lines(&self.context, cycle, capture)))
                .and_then(|()| self.write_lines(&buf[2..], false)),
            _ => self.write_lines(buf, false),
        };
        if let Err(err) = result {
            self.error = Some(err);
        }
        Ok(buf.len())
    }

    /// Runs on tracing-chrome's writer thread once per recorded step, then
    /// lingers there until the next step (see [`Linger`](super::Linger)).
    fn flush(&mut self) -> io::Result<()> {
        // (After an error too: nothing is written, but announced batches leave the queue.)
        if let Err(err) = self.write_lines(&[], true) {
            self.error.get_or_insert(err);
        }
        self.drain();
        if self.error.is_none() {
            if let Some(Err(err)) = self.file.as_mut().map(File::flush) {
                self.error = Some(err);
            }
        }
        // Lingering lets events queue: stop when half a bound is queued.
        let (backlog, batches) = (&self.context.shared.backlog, &self.context.shared.batches);
        self.context.linger.serve(|| backlog.pending() > crate::collect::backlog::CAP / 2 || batches.over(2));
        Ok(())
    }
}

impl Drop for SegmentWriter {
    fn drop(&mut self) {
        // Close the partial file before reading it back. It is not synced: the finaliser reads
        // it back through the page cache and removes it once the final file is written and
        // synced, so syncing it would only wait for the disk (385 ms for a 65 MB window on the
        // 2-core VM, docs/benchmarks/archive-2026-12-03.md). A write that failed was seen by `write_file`.
        // (After an error too: nothing is written, but announced batches leave the queue.)
        if let Err(err) = self.write_lines(&[], true) {
            self.error.get_or_insert(err);
        }
        // Batches still queued for this file can no longer be written in it (tracing-chrome
        // closed it): they leave the queue.
        self.expander.discard(&self.context.clone().shared.batches);
        // A segment that never saw a write (tracing-chrome writes the opening `[` at once) still
        // leaves its file.
        if self.error.is_none() && self.opening == Opening::Pending {
            if let Err(err) = self.open() {
                self.error = Some(err);
            }
        }
        drop(self.file.take());
        let Ok(info) = self.info.lock() else { return };
        let result = match self.error.take() {
            Some(source) => Err(Error::Write {
                path: info.final_path.clone(),
                // A partial file this writer did not create is not its to report, or remove.
                kept: if self.opening == Opening::Open { crate::error::Kept::of(&self.partial) } else { None },
                source,
            }),
            None => {
                let waits = self.context.shared.backlog.waits().since(self.waits_at_start);
                let variants = &mut self.variants;
                finalise(&info, &self.partial, &self.context, waits, || next_final_name(variants))
            }
        };
        match result {
            Ok(Some(saved)) => self.context.push_result(info.cycle, Ok(saved)),
            Ok(None) => {}
            Err(err) => self.context.push_result(info.cycle, Err(err)),
        }
    }
}

/// The next variant of a cycle's name not taken as a final name, for a finished file whose
/// name was taken while it was written.
fn next_final_name(variants: &mut Option<(FileNames, PathBuf, u32)>) -> Option<PathBuf> {
    let (names, first, next) = variants.as_mut()?;
    while *next <= NAME_VARIANTS {
        let candidate = names.variant(first, *next)?;
        *next += 1;
        if !candidate.exists() {
            return Some(candidate);
        }
    }
    None
}
