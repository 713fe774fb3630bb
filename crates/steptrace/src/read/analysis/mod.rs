//! Reading traces back: step timing, span summary, device view and
//! hypotheses ([`Report`]), and what a trace would reveal if shared
//! ([`Inventory`]).
//!
//! The figures follow the method steptrace teaches: step time comes from
//! wall-clock step boundaries (`ProfilerStep#N`), never from sums of
//! events; startup steps are kept apart from the steady state; device time
//! that the trace does not hold is reported as not observed, never as zero.
//!
//! The pieces depend on each other one way: [`Spans`] and the steps are
//! rebuilt from each file (as it is read, with [`LoadedTrace`], which keeps
//! them and not the events); the step timing, the span table and the device
//! view are computed from them; the hypotheses read all three; the
//! [`Report`] puts them together.

mod checks;
mod device;
mod hypotheses;
mod input;
mod inventory;
mod loaded;
mod memory;
mod ops;
mod order;
mod ranks;
mod redact;
mod report;
mod spans;
mod stats;
mod steps;
mod table;
mod timing;

pub use device::{
    rate, short_name, AttributionView, BatchCopies, CopyDirection, CopySize, CopyView, DeviceSpanRow, DeviceStep,
    DeviceSteps, DeviceView, KernelRow, KernelTable, LaunchView, PricedRow, RooflineView, Roofs, SmallUploads,
    StepFloor, TimeRow, MAX_BLOCK_BYTES, MAX_BLOCK_FLOPS, MIN_BLOCK_US, SHORT_KERNEL_US, SMALL_COPY_BYTES,
};
pub use hypotheses::{Change, Experiment, Hypothesis, NotExamined};
pub use input::{LoadedTrace, ReportSource};
pub use inventory::{Finding, Inventory, InventoryBuilder};
pub use loaded::{Producer, RunInfo, MAX_PLAUSIBLE_BATCH, MAX_PLAUSIBLE_WORKERS};
pub use memory::{MemoryCategory, MemoryPoint, MemoryView, ReservedGrowth};
pub use ops::BackendOps;
pub use ranks::{
    check_ranks, rank_of, RankCell, RankCheck, RankReport, RankStep, RankSummary, Straggler, STRAGGLER_MIN_SHARE,
    TIE_MS,
};
pub use redact::{redact_file, redact_file_in_order, top_level_keys, RedactError, RedactOutcome, SanitisedCopy};
pub use report::{Report, ReportError, ReportOptions, Source};
pub use spans::{union_length, Span, Spans, ThreadKey};
pub use stats::{median, Stats};
pub use steps::StepRow;
pub use table::{SpanRow, SpanTable, Timing};
pub use timing::{StepTiming, WindowRate};

pub use crate::format::names::step_number;
