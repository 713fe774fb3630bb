//! Collection: which steps are recorded ([`schedule`]), the handle that
//! advances them ([`Profiler`]), and the [`gate`] that decides, once, which
//! spans are kept. The [sink] writes what the gate keeps.

mod args;
pub(crate) mod backlog;
pub(crate) mod batch;
mod builder;
pub mod capture;
pub mod device;
pub mod direct;
pub mod gate;
mod profiler;
pub mod ranks;
pub mod schedule;
mod shared;
pub mod sink;
mod spans;
mod threads;

pub use builder::{ProfilerBuilder, ProfilerLayer};
pub use profiler::Profiler;
pub use ranks::{RankLayer, RankProfilers};
pub use schedule::{Action, Schedule, ScheduleError};
pub use spans::{layer, layer_span};
