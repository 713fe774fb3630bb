//! The Chrome-trace sink: one file per cycle, written through tracing-chrome.
//!
//! # Files
//!
//! While a cycle is collected (warmup and active steps), tracing-chrome's
//! writer thread streams events in the JSON *array* format into
//! `NAME.partial` next to the final name. When the cycle ends, the partial
//! file is finalised on that writer thread, off the training thread:
//!
//! 1. events before the first recorded step (warmup) and after the last one
//!    are dropped;
//! 2. spans that straddle a window edge are clipped to it: a begin before the
//!    window is moved to its start, and a span still open at its end gets a
//!    synthetic end there (both marked `steptrace.clipped` in their args), so
//!    each thread's begins and ends stay balanced;
//! 3. the result is written in the JSON *object* format,
//!    `{"traceEvents":[...],"displayTimeUnit":"ms","metadata":{...}}`, to a
//!    temporary file, synced, then linked to its final name only if no file
//!    has that name, and the partial file is removed.
//!
//! The thread that runs the steps sends tracing-chrome one event per step instead of one
//! message per span begin, end and event: it keeps them as fixed records, and the segment
//! writer writes them, as tracing-chrome would have, where that event's line falls
//! (`collect/batch.rs`). Other threads' events go through tracing-chrome as
//! they come.
//!
//! The partial file is read twice and never held whole: a first pass keeps
//! 16 bytes per event (phase, time, thread) to find the window and pair
//! begins with ends; a second reads the lines again and writes those it
//! keeps as it goes. Finalising a 100,000-step window (a 65 MB trace) peaked
//! at 62 to 74 MB of the process's memory, on the H200's CPU and on a 2-core
//! VM (`docs/benchmarks.md`, "The sink's rate and the finaliser's memory").
//!
//! Names come from a template (default
//! [`DEFAULT_FILE_NAME`]); an existing file is never overwritten: the
//! partial file is created exclusively and the final link fails rather than
//! replace anything.
//!
//! # Counters
//!
//! Events with the target [`COUNTER_TARGET`] become Chrome counter (`"C"`)
//! events: `tracing::info!(target: "steptrace::counter", bytes = 123, "device memory")`
//! draws a `device memory` track with a `bytes` series.
//!
//! # After a crash
//!
//! A process killed mid-window leaves `NAME.partial`: an array-format trace
//! without its closing `]`, holding every event flushed up to the last
//! completed step (the profiler flushes at each step while collecting), and
//! possibly a cut-off last event. It has no window clipping and includes the
//! warmup steps. The stepping thread's spans and events reach it when their step ends, so
//! of the step in progress it holds the step's begin only. The reader's `read_trace_file` loads
//! it and reports it as truncated; viewers of the array format accept the
//! missing bracket.
//!
//! # Metadata
//!
//! The `metadata` object records the schedule, the steps covered, whether
//! the cycle is partial and why, the crate version, host OS, the window in
//! trace time, counts of clipped spans and dropped events, label warnings,
//! and the run manifest given with
//! [`ProfilerBuilder::manifest`](crate::ProfilerBuilder::manifest).

mod chrome;
mod expand;
mod finalise;
mod linger;
mod names;
mod segment;

pub use crate::format::names::COUNTER_TARGET;
pub(crate) use chrome::{chrome_layer, event_name};
#[cfg(not(unix))]
pub(crate) use finalise::link_no_clobber;
pub(crate) use linger::{Linger, LINGER};
pub(crate) use names::FileNames;
pub(crate) use names::{sanitize as sanitize_worker, utc_stamp};
pub use names::{DEFAULT_FILE_NAME, RANK_FILE_NAME};
pub(crate) use segment::{DeviceOutcome, RankContext, SegmentInfo, SegmentWriter, SinkContext, NAME_VARIANTS};

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// A trace file written by the sink.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SavedTrace {
    /// The finished file.
    pub path: PathBuf,
    /// The schedule cycle it covers (from 0).
    pub cycle: u64,
    /// The recorded steps it holds, as in `ProfilerStep#N`.
    pub steps: Vec<u64>,
    /// Whether the cycle was cut short (fewer steps than `active`).
    pub partial: bool,
    /// Number of events in the file.
    pub events: usize,
    /// Size of the file in bytes.
    pub bytes: u64,
    /// Labels that look like secrets, private paths or input content.
    pub label_warnings: Vec<String>,
}
