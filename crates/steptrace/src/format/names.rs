//! Every name steptrace writes into a trace, with what it means.
//!
//! Writers use these constants (the burn crate's spans, the sink's
//! metadata events); readers match on them (the report's rules). The book's
//! reference chapter is checked against [`SPANS`].

/// The `tracing` target of steptrace's own spans and events. Spans of
/// other targets are written only when opted in.
pub const TARGET: &str = "steptrace";

/// Events of this target become Chrome counter (`"C"`) events: the
/// message names the counter track, numeric fields are its series.
pub const COUNTER_TARGET: &str = "steptrace::counter";

/// The span that wraps each step, written as `ProfilerStep#N`.
pub const STEP_SPAN: &str = "ProfilerStep";

/// The CPU reading and collating one batch on the training thread.
pub const DATA_LOAD: &str = "data.load";
/// The training thread waiting for a batch from the prefetch threads.
pub const DATA_WAIT: &str = "data.wait";
/// Copying a batch from host memory to the device.
pub const TRANSFER_H2D: &str = "transfer.h2d";
/// One autodiff training step: forward, loss, backward and optimizer.
pub const TRAIN_STEP: &str = "train.step";
/// The model's forward pass.
pub const FORWARD: &str = "forward";
/// A span around one part of the user's model (a layer, a block), written under the name
/// its `name` field gives ([`layer`](crate::layer)): `conv1`, `encoder.layer2`. A
/// [`LAYER_SPAN`] without a name is written as `layer`.
pub const LAYER_SPAN: &str = "layer";
/// The most characters of a layer's name written; longer names are cut.
pub const LAYER_NAME_CHARS: usize = 64;
/// The loss computation.
pub const LOSS: &str = "loss";
/// The backward pass (gradients).
pub const BACKWARD: &str = "backward";
/// The optimizer update.
pub const OPTIMIZER: &str = "optimizer";
/// The host waiting until the device has finished the work queued so far.
pub const SYNC: &str = "sync";
/// Reading the loss back to the host, which waits for the device.
pub const LOSS_READ: &str = "loss.read";
/// A rank inside a collective (the all-reduce of gradients): waiting for
/// the other ranks, then exchanging. The report reads every name
/// [`is_collective`] accepts the same way.
pub const ALL_REDUCE: &str = "collective.all_reduce";
/// Inference mode: loading the model and moving it to eval mode.
pub const MODEL_LOAD: &str = "model.load";
/// Inference mode: one request (a forward pass on one batch).
pub const INFER_REQUEST: &str = "infer.request";

/// The report's row that groups every `ProfilerStep#N` span.
pub const STEP_ROW: &str = "ProfilerStep#*";

/// One named span and its meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NameInfo {
    /// The name as written.
    pub name: &'static str,
    /// One line of meaning.
    pub meaning: &'static str,
}

/// Every span name steptrace writes, in the order a step runs them.
pub const SPANS: &[NameInfo] = &[
    NameInfo { name: "ProfilerStep#N", meaning: "one step, from one `step()` call to the next: the wall-clock step boundary" },
    NameInfo { name: DATA_LOAD, meaning: "the CPU reading and collating one batch" },
    NameInfo { name: DATA_WAIT, meaning: "the training thread waiting for a batch prepared by prefetch threads" },
    NameInfo { name: TRANSFER_H2D, meaning: "copying the batch from host memory to the device" },
    NameInfo { name: TRAIN_STEP, meaning: "one autodiff step: forward, loss, backward, optimizer" },
    NameInfo { name: FORWARD, meaning: "the model's forward pass" },
    NameInfo { name: "(a layer's name)", meaning: "one part of the model, inside `forward`: a span made by `steptrace::layer` (the bundled ConvNet and Transformer name every layer)" },
    NameInfo { name: LOSS, meaning: "the loss computation" },
    NameInfo { name: BACKWARD, meaning: "the backward pass" },
    NameInfo { name: OPTIMIZER, meaning: "the optimizer update" },
    NameInfo { name: SYNC, meaning: "the host waiting for the device to finish the work queued so far" },
    NameInfo { name: LOSS_READ, meaning: "reading the loss back to the host (waits for the device)" },
    NameInfo { name: ALL_REDUCE, meaning: "a rank in the gradients' all-reduce: waiting for the other ranks, then exchanging" },
    NameInfo { name: MODEL_LOAD, meaning: "inference: loading the model (before step 0)" },
    NameInfo { name: INFER_REQUEST, meaning: "inference: one request" },
];

/// Instant-event messages the run loop writes.
pub mod instants {
    /// A batch shape first seen after the startup steps (a new compile path).
    pub const NEW_SHAPE: &str = "new input shape after startup";
    /// A steady step far slower than the steady median.
    pub const SLOW_STEP: &str = "slow step after startup: a new compile path?";
    /// The step holds an epoch's end: validation and checkpointing (written
    /// by `steptrace_burn::learner`), so its time is not training alone.
    pub const EPOCH_BOUNDARY: &str = "epoch boundary: validation, checkpointing";
}

/// Arguments steptrace's own spans carry.
pub mod args {
    /// On `transfer.h2d`: the bytes of the batch's input tensor. The report
    /// tells the batch's device copies from other uploads by their size.
    pub const INPUT_BYTES: &str = "input_bytes";
    /// On `transfer.h2d`: the bytes of the batch's target tensor.
    pub const TARGET_BYTES: &str = "target_bytes";
}

/// Counter tracks the run loop writes.
pub mod counters {
    /// Device memory, series `in_use` (bytes in live allocations) and `reserved` (bytes the
    /// allocator holds from the device), at the start of recorded steps and, with
    /// `--memory-phases`, after each phase (`--memory`). Earlier 0.2 traces sampled the step's
    /// end instead of its start; traces before 0.2 wrote one series, `bytes` (in use), at the
    /// step's end.
    pub const DEVICE_MEMORY: &str = "device memory in use";
    /// What holds device memory, at the same moments as [`DEVICE_MEMORY`]: series
    /// `parameters`, `optimizer_state`, `gradients`, `input_batch` and `other` (activations
    /// and temporaries: in use less the rest), or `unattributed` (negative: the categories
    /// come to more than in use). A series that is absent was not observed.
    pub const MEMORY_CATEGORIES: &str = "device memory by category";
    /// The point of the step a memory sample taken before any of the step's phases ended is
    /// read at: the step's start, where the device holds what the step before left (the
    /// others are read at the phase that ended last: `forward`, `loss`, `backward`,
    /// `optimizer`, or [`STEP_END`]).
    pub const STEP_START: &str = "step start";
    /// The point of the step a memory sample taken after the step's `train.step` (or
    /// `infer.request`) ended is read at: how earlier traces sampled the step boundary.
    pub const STEP_END: &str = "step end";
}

/// Chrome metadata (`"ph":"M"`) event names and argument keys.
pub mod meta {
    /// The metadata key that says how the writer thread waited between a window's steps.
    pub const WRITER_LINGER: &str = "writer_linger";
    /// The metadata key that says how steptrace's own spans of the stepping thread were kept:
    /// `direct` (as records, around tracing's registry: `collect::direct`), `tracing`, or
    /// `tracing (STEPTRACE_OWN_SPANS)` (through tracing because that experiment's knob said so).
    pub const OWN_SPANS: &str = "own_spans";
    /// The metadata key present only when an experiment kept some spans out of the trace
    /// (`STEPTRACE_SPANS=steps` or `unwritten`).
    pub const SPAN_FILTER: &str = "span_filter";
    /// Names a process track.
    pub const PROCESS_NAME: &str = "process_name";
    /// Labels a process track (shown under its name in Perfetto).
    pub const PROCESS_LABELS: &str = "process_labels";
    /// Orders process tracks.
    pub const PROCESS_SORT_INDEX: &str = "process_sort_index";
    /// Names a thread track.
    pub const THREAD_NAME: &str = "thread_name";
    /// Orders thread tracks.
    pub const THREAD_SORT_INDEX: &str = "thread_sort_index";
    /// The header event of a partial (streaming) file: see
    /// [`SegmentHeader`](crate::format::SegmentHeader).
    pub const SEGMENT: &str = "steptrace_segment";
    /// The argument marking a span cut at a window edge (`begin` or `end`).
    pub const CLIPPED_ARG: &str = "steptrace.clipped";
}

/// Whether `event` (an event as its whole JSON object) is the header a
/// partial file starts with: steptrace's `steptrace_segment` metadata
/// event, whose `args` describe the run.
#[must_use]
pub fn is_segment_header(event: &serde_json::Map<String, serde_json::Value>) -> bool {
    event.get("ph").and_then(serde_json::Value::as_str) == Some("M")
        && event.get("name").and_then(serde_json::Value::as_str) == Some(meta::SEGMENT)
}

/// Keys of the `metadata` object that hold prose written by steptrace
/// (label hygiene does not read them as input content).
pub mod keys {
    /// Why a cycle was cut short.
    pub const PARTIAL_REASON: &str = "partial_reason";
    /// Labels that looked like leaks.
    pub const LABEL_WARNINGS: &str = "label_warnings";
    /// What went wrong while collecting device activity.
    pub const PROBLEMS: &str = "problems";
    /// What was collected of the device ([`DeviceActivity`](crate::format::device::DeviceActivity)):
    /// written whole by steptrace and its device collector, descriptions included (`kinds`,
    /// `source`), so that nothing in it is input content.
    pub const DEVICE_ACTIVITY: &str = "device_activity";
}

/// The span name of step `n`: `ProfilerStep#n`.
#[must_use]
pub fn step_name(n: u64) -> String {
    format!("{STEP_SPAN}#{n}")
}

/// `N` of a `ProfilerStep#N` span name.
///
/// ```
/// use steptrace::format::names::{step_name, step_number};
/// assert_eq!(step_number(&step_name(12)), Some(12));
/// assert_eq!(step_number("ProfilerStep"), None);
/// ```
#[must_use]
pub fn step_number(name: &str) -> Option<u64> {
    name.strip_prefix(STEP_SPAN)?.strip_prefix('#')?.parse().ok()
}

/// Names the report reads as the host reading input: steptrace's
/// `data.load`/`data.wait` and torch's `enumerate(DataLoader)…`.
#[must_use]
pub fn is_input(name: &str) -> bool {
    name == DATA_LOAD || name == DATA_WAIT || name.starts_with("enumerate(DataLoader)")
}

/// Names the report reads as the host waiting for the device: `sync`,
/// `loss.read` (it copies the loss back) and CUDA's `…Synchronize` calls.
#[must_use]
pub fn is_wait(name: &str) -> bool {
    name == SYNC || name == LOSS_READ || name.ends_with("Synchronize")
}

/// Names the report reads as a rank in a collective: steptrace's
/// `collective.*`, NCCL's calls and kernels (`nccl…`, `ncclDevKernel_…`),
/// torch's `c10d::…` and `record_param_comms`, and any name holding
/// `all_reduce`, `allreduce` or `all-reduce` (any case).
#[must_use]
pub fn is_collective(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.starts_with("collective")
        || lower.starts_with("nccl")
        || lower.starts_with("c10d::")
        || lower == "record_param_comms"
        || ["all_reduce", "allreduce", "all-reduce"].iter().any(|k| lower.contains(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_span_is_distinct_and_described() {
        let mut names: Vec<&str> = SPANS.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SPANS.len());
        assert!(SPANS.iter().all(|s| !s.meaning.is_empty()));
    }

    #[test]
    fn step_names_round_trip_and_reject_lookalikes() {
        assert_eq!(step_name(3), "ProfilerStep#3");
        assert_eq!(step_number("ProfilerStep#3"), Some(3));
        assert_eq!(step_number("ProfilerStep#x"), None);
        assert_eq!(step_number("ProfilerStep3"), None);
        assert!(is_wait("cudaDeviceSynchronize") && is_wait(SYNC) && !is_wait(FORWARD));
        assert!(
            is_collective(ALL_REDUCE)
                && is_collective("nccl:all_reduce")
                && is_collective("ncclDevKernel_AllReduce_Sum_f32_RING_LL")
        );
        assert!(is_collective("c10d::allreduce_") && is_collective("record_param_comms") && !is_collective(BACKWARD));
        assert!(is_input(DATA_WAIT) && is_input("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"));
    }
}
