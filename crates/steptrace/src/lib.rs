//! Step-scoped profiling for `tracing`-instrumented training loops.
//!
//! # Brief overview
//!
//! The crate reads as collect → format → read, in three layers whose
//! dependencies point one way: what reads traces uses the format, and so
//! does what writes them; the writer never uses the reader.
//!
//! - collection: the [schedule], the profiler, the [gate] that decides
//!   which spans are kept, the [sink] that writes them, [`device`] work,
//!   [`direct`] records of steptrace's own spans, [`ranks`] and
//!   [`capture`] on request;
//! - [`format`](mod@format): the trace file as types, shared by every
//!   writer and reader, and beside it the label checks both use
//!   (published through [hygiene]) and [`display`], which makes what a
//!   trace holds safe to print;
//! - reading: the [reader], the [`analysis`] behind the report, label
//!   [hygiene] and [`bench`](mod@bench) results;
//! - [`settings`]: every environment variable steptrace reads.
//!
//! Each module has one path: `steptrace::reader`, `steptrace::device`, ...
//!
//! - [`Schedule`] decides, step by step, whether spans are skipped, warmed
//!   up or recorded, with torch.profiler's semantics.
//! - [`Profiler`] is advanced once per step with [`Profiler::step`]; each
//!   step is wrapped in a `ProfilerStep#N` span.
//! - The [gate] is a `tracing-subscriber` layer and filter that
//!   keeps spans only while the schedule records.
//! - The [sink] writes one Chrome trace file per cycle through
//!   tracing-chrome, never overwriting a file, in the JSON object format with
//!   a metadata block. The files open in Perfetto UI and speedscope.
//! - The [reader] loads Chrome traces (ours and others') and
//!   validates them; [hygiene] flags labels that look like
//!   secrets, private paths or input content.
//!
//! This crate has no burn dependency: it serves any `tracing`-instrumented
//! program.
//!
//! # Examples
//!
//! ```
//! use steptrace::{Profiler, Schedule};
//! use tracing_subscriber::prelude::*;
//!
//! # fn docs() -> Result<(), steptrace::Error> {
//! let (layer, mut profiler) = Profiler::builder("wait=1,warmup=1,active=2".parse()?)
//!     .out_dir("traces")
//!     .manifest("model", "mlp")
//!     .build()?;
//! tracing_subscriber::registry().with(layer).init();
//! profiler.start();
//! for _batch in 0..8 {
//!     let _step = tracing::info_span!(target: "steptrace", "train.step").entered();
//!     // ... work ...
//!     drop(_step);
//!     profiler.step();
//! }
//! for trace in profiler.finish()? {
//!     println!("{} holds steps {:?}", trace.path.display(), trace.steps);
//! }
//! # Ok(()) }
//! ```
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod collect;
pub mod display;
mod error;
pub mod format;
mod labels;
mod read;
pub mod settings;
pub mod terminal;

pub use collect::{capture, device, direct, gate, ranks, schedule, sink};
pub use collect::{
    layer, layer_span, Action, Profiler, ProfilerBuilder, ProfilerLayer, RankLayer, RankProfilers, Schedule,
    ScheduleError,
};
pub use error::{Error, Kept, Result};
pub use read::{analysis, bench, hygiene, reader};
pub use sink::SavedTrace;
