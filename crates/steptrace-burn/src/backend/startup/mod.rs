//! The cold start itemised from cubecl's own log records: [`StartupCapture`] (its
//! documentation says what is read and how), the `log` logger it reads with
//! (`capture.rs`), the records (`marker.rs`, with their places in cubecl's source), and the
//! arithmetic (`breakdown.rs`).

mod breakdown;
mod capture;
mod facts;
mod marker;
mod subscriber;

pub(crate) use capture::timed_client;
pub use capture::{install_log_capture, startup_progress, LogSlotTaken, StartupCapture, StartupProgress};
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub(crate) use capture::{note_autotune_sink, AutotuneSink};
pub use subscriber::install_profiler;
