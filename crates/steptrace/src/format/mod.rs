//! The steptrace trace file, as types: what every writer puts in a file and
//! every reader takes out of it.
//!
//! A steptrace trace is a Chrome Trace Event Format file in the JSON
//! *object* layout:
//!
//! ```text
//! {"traceEvents":[ ...events... ],
//!  "displayTimeUnit":"ms",
//!  "metadata":{ ...TraceMetadata... }}
//! ```
//!
//! - The names steptrace gives to spans, counters, categories and instants
//!   are constants in [`names`], each with one line of meaning; nothing
//!   else in the workspace spells them out.
//! - [`TraceMetadata`] is the `metadata` object: the schedule, the steps
//!   covered, the window, the clock, counts of what was clipped or lost,
//!   label warnings and the run [`Manifest`]. Unknown keys are kept in
//!   `extra` maps, so that a user's own fields survive a round trip.
//! - [`FormatVersion`] is the `format` tag, `steptrace-chrome-trace/1`.
//!   Every reader checks it ([`check_version`]): a file of a newer major
//!   version is refused with an error naming both versions, while foreign
//!   traces (torch.profiler, plain tracing-chrome) have no tag and are read
//!   as they are.
//! - [`tag`] is the thread-tag codec the sink uses to carry steptrace's
//!   thread ids through tracing-chrome.
//! - [`StartupInfo`] holds the startup figures, with the cold start itemised
//!   ([`ColdStart`]; an absent figure is a [`Figure`] with its reason).
//! - [`DistributedInfo`] places a file in a run of several ranks; it heads
//!   the file as torch.profiler's `distributedInfo`.
//! - [`peaks`] holds a device's measured limits, which the report prices
//!   each kernel's minimum work against.
//! - [`device`] holds the device-side vocabulary (kernels, copies, launches,
//!   streams, flows), shared with torch.profiler's Kineto traces.
//!
//! While a cycle is being written, the sink streams the *array* layout into
//! `NAME.partial`, headed by a [`SegmentHeader`] metadata event, so that a
//! file left by a crash still says what it is.

mod cold_start;
pub mod device;
mod distributed;
mod manifest;
mod metadata;
pub mod names;
pub mod peaks;
pub mod tag;
mod version;

pub use cold_start::{AutotuneItems, CacheUse, ColdStart, CompileItems, Figure, StartupPhase};
pub use distributed::{DistributedInfo, DISTRIBUTED_INFO};
pub use manifest::{Manifest, ManifestError, StartupInfo};
pub use metadata::{
    ClockInfo, MetadataError, ScheduleInfo, SegmentHeader, StepRange, Steptrace, TraceMetadata, WindowUs, WriterWaits,
};
pub use version::{check_version, FormatVersion, VersionError, FORMAT_MAJOR, FORMAT_NAME};
