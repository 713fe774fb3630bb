//! Reading traces back: step timing, span summary, device view and
//! hypotheses ([`Report`]), and what a trace would reveal if shared
//! ([`Inventory`]).
//!
//! The figures follow the method steptrace teaches: step time comes from
//! wall-clock step boundaries (`ProfilerStep#N`), never from sums of
//! events; startup steps are kept apart from the steady state; device time
//! that the trace does not hold is reported as not observed, never as zero.

mod device;
mod hypotheses;
mod inventory;
mod report;
mod spans;
mod stats;
mod steps;

pub use device::DeviceView;
pub use hypotheses::{Hypothesis, NotExamined};
pub use inventory::{redact_file, Finding, Inventory, RedactOutcome};
pub use report::{Producer, Report, ReportOptions, RunInfo, Source, SpanRow, SpanTable, StepTiming, Timing, WindowRate};
pub use spans::{union_length, Span, Spans, ThreadKey};
pub use stats::{median, Stats};
pub use steps::{step_number, StepRow};
