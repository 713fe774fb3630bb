//! A step that failed: the reason its cycle is cut short with, the out-of-memory report
//! ([`oom`]), a failed host allocation on the CPU backend ([`host_oom`]), and the console
//! lines of what was saved ([`StepFailure::print`]).

pub mod host_oom;
pub mod oom;

use std::path::PathBuf;

use steptrace::terminal::{self as console, say};

use oom::{Bounded, Estimate, OutOfMemory};

/// Why a step failed: the cause a [`StepFailure`] carries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StepError {
    /// Waiting for the device failed.
    #[error("device sync failed: {reason}")]
    Sync {
        /// The backend's explanation.
        reason: String,
    },
    /// Reading a value back from the device failed (the device reported an earlier error).
    #[error("reading the loss back from the device failed: {reason}")]
    Read {
        /// The backend's explanation.
        reason: String,
    },
    /// The step's batch could not be read ([`Session::next_batch`](crate::Session::next_batch)).
    #[error("reading the step's batch failed: {reason}")]
    Data {
        /// The loader's explanation.
        reason: String,
    },
    /// The step panicked (burn and cubecl panic on some device errors): the panic's message.
    #[error("the step panicked: {message}")]
    Panicked {
        /// The panic's message.
        message: String,
    },
    /// A host allocation failed on the CPU backend, whose tensors live in the process's memory
    /// ([`host_oom`](crate::failure::host_oom)).
    #[error(
        "out of host memory allocating {bytes} bytes (the CPU backend's tensors live in the process's memory; the \
         system allocator returned none)"
    )]
    HostAllocation {
        /// The request that failed.
        bytes: u64,
    },
    /// burn-train's training loop ended with an error ([`learner`](crate::learner)).
    #[error("{message}")]
    TrainingLoop {
        /// burn-train's error, as it words it.
        message: String,
    },
    /// The program said the step failed ([`Session::fail_step`](crate::Session::fail_step)).
    #[error("{message}")]
    Program {
        /// The program's message.
        message: String,
    },
}

impl StepError {
    /// Whether the step ran out of memory, and how: from the cause's kind where it says so
    /// (a failed host allocation), else from the backend's words ([`oom::classify`](oom::classify),
    /// the one place they are matched).
    pub fn out_of_memory(&self) -> Option<(oom::Shortage, Option<u64>)> {
        match self {
            StepError::HostAllocation { bytes } => Some((oom::Shortage::DeviceFull, Some(*bytes))),
            StepError::Sync { reason } | StepError::Read { reason } => oom::classify(reason),
            StepError::Data { .. } => None,
            StepError::Panicked { message } | StepError::TrainingLoop { message } | StepError::Program { message } => {
                oom::classify(message)
            }
        }
    }
}

/// A step that failed inside the loop, and what was saved ([`Error::StepFailed`]).
#[derive(Debug, thiserror::Error)]
#[error("step {step} failed: {cause}")]
pub struct StepFailure {
    /// The step that failed.
    pub step: u64,
    /// What went wrong.
    pub cause: StepError,
    /// The traces the profiler saved when the run stopped (the cycle in progress is cut
    /// short, with this failure as its reason).
    pub traces: Vec<steptrace::SavedTrace>,
    /// Cycles kept as the `NAME.partial` files the profiler streamed them to, where the
    /// process ends before it can finalise them (a failed host allocation:
    /// [`host_oom`](crate::failure::host_oom)); `report` and `inspect` read them.
    pub kept: Vec<PathBuf>,
    /// Traces the profiler could not save, and why.
    pub trace_errors: Vec<steptrace::Error>,
    /// Where the step ran out of device memory: the explanation.
    pub out_of_memory: Option<oom::OutOfMemory>,
}

/// Bytes as decimal megabytes or gigabytes, with the exact count.
pub(crate) fn size(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.2} GB ({bytes} B)", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.2} MB ({bytes} B)", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} KB ({bytes} B)", b / 1e3)
    } else {
        format!("{bytes} B")
    }
}

fn bounded(b: &Bounded, unit: impl Fn(u64) -> String) -> String {
    format!("{} {} ({})", b.bound, unit(b.value), b.method_note)
}

/// The reason a failed step gives the cycle it cuts short, and the console.
pub(crate) fn reason(step: u64, cause: &StepError, out_of_memory: Option<&OutOfMemory>) -> String {
    match out_of_memory {
        Some(o) => format!(
            "step {step} failed: out of device memory ({}{})",
            o.shortage.meaning(),
            o.requested_bytes.map(|b| format!(": a request for {b} B")).unwrap_or_default()
        ),
        None => format!("step {step} failed: {}", oom::brief(&cause.to_string())),
    }
}

/// Notes a failed step in the manifest of the cycle in progress (and its out-of-memory
/// report), and cuts that cycle short with `reason`.
pub(crate) fn mark(profiler: &mut steptrace::Profiler, reason: &str, out_of_memory: Option<&OutOfMemory>) {
    profiler.update_manifest(|m| {
        m.notes.push(reason.to_owned());
        if let Some(o) = out_of_memory.and_then(|o| serde_json::to_value(o).ok()) {
            m.extra.insert("out_of_memory".into(), o);
        }
    });
    profiler.cut_short(reason.to_owned());
}

impl StepFailure {
    /// Prints what the failed step left on stdout, as `steptrace train` does: the saved
    /// traces, and the out-of-memory report.
    pub fn print(&self) {
        print(self);
    }
}

fn print(f: &StepFailure) {
    if let Some(o) = &f.out_of_memory {
        print_out_of_memory(o);
    }
    if f.traces.is_empty() && f.kept.is_empty() && f.trace_errors.is_empty() {
        say(&format!(
            "no trace saved: no cycle of the schedule was recording at step {} (a later step would have started one)",
            f.step
        ));
    }
    for t in &f.traces {
        let partial = if t.partial { " (cut short by the failure: partial)" } else { "" };
        say(&format!("trace saved: {} (cycle {}, steps {:?}){partial}", t.path.display(), t.cycle, t.steps));
    }
    for path in &f.kept {
        say(&format!(
            "trace kept as it was streamed: {} (cut short by the failure: every step up to the last that ended; the \
             process ends before it can finalise the cycle, and report and inspect read the file as it is)",
            path.display()
        ));
    }
    for e in &f.trace_errors {
        say(&format!("trace NOT saved: {e}"));
    }
}

fn print_out_of_memory(o: &OutOfMemory) {
    say(&format!("OUT OF DEVICE MEMORY at step {}: {}", o.step, o.shortage.meaning()));
    let mut t = console::table();
    t.set_header(["", "out of memory"]);
    let request = o.requested_bytes.map_or_else(|| "not said by the error".to_owned(), size);
    t.add_row(["requested".to_owned(), request]);
    t.add_row(["reported at".to_owned(), o.surfaced_at.to_owned()]);
    let reached = match o.reached_phase {
        Some(p) => format!("through {p}"),
        None if o.phases_observed => "none (forward had not returned)".to_owned(),
        None => "not observed (the TrainStep marks no learner::forward, loss or backward)".to_owned(),
    };
    t.add_row(["phases registered".to_owned(), reached]);
    match o.limits {
        Some(l) => {
            t.add_row([
                "device capacity".to_owned(),
                l.capacity.map_or_else(|| "not stated by its runtime".to_owned(), size),
            ]);
            t.add_row(["largest allocation".to_owned(), size(l.max_allocation)]);
        }
        None => {
            t.add_row(["device limits", "not observed (not a cubecl device)"]);
        }
    }
    match o.at_failure {
        Some(m) => {
            t.add_row([
                "held after the failure".to_owned(),
                format!("in use {}, reserved {}", size(m.bytes_in_use), size(m.bytes_reserved)),
            ]);
            for c in &o.categories {
                t.add_row([format!("  {}", c.name.replace('_', " ")), signed(c.bytes)]);
            }
        }
        None => {
            t.add_row(["held after the failure", "not observed (the backend does not report memory in use)"]);
        }
    }
    t.add_row(["batch".to_owned(), format!("{} samples", o.batch_size)]);
    let per_sample = match &o.per_sample {
        Estimate::Known(p) => bounded(p, size),
        Estimate::NotKnown { not_known } => format!("not known: {not_known}"),
    };
    t.add_row(["per sample".to_owned(), per_sample]);
    let fits = match &o.fitting_batch {
        Estimate::Known(b) => bounded(b, |v| format!("{v} samples")),
        Estimate::NotKnown { not_known } => format!("not known: {not_known}"),
    };
    t.add_row(["largest batch that fits".to_owned(), fits]);
    if let Some(b) = &o.failure_bounds {
        let said = |e: &Estimate, unit: &dyn Fn(u64) -> String| match e {
            Estimate::Known(b) => format!("{} {}", b.bound, unit(b.value)),
            Estimate::NotKnown { not_known } => format!("not known ({not_known})"),
        };
        t.add_row([
            "the failure alone said".to_owned(),
            format!(
                "per sample {}; batch that fits {}",
                said(&b.per_sample, &size),
                said(&b.fitting_batch, &|v| format!("{v} samples"))
            ),
        ]);
    }
    if let Some(p) = &o.probe {
        for f in &p.problems {
            t.add_row(["not measured".to_owned(), f.clone()]);
        }
    }
    for n in &o.not_observed {
        t.add_row(["not observed".to_owned(), n.clone()]);
    }
    console::out(&t);
    let mut t = console::table();
    t.set_header(["bytes", "largest allocations steptrace can see (the allocator lists no live ones one by one)"]);
    for a in &o.largest {
        t.add_row([size(a.bytes), a.description.clone()]);
    }
    console::out(&t);
}

fn signed(bytes: i64) -> String {
    if bytes < 0 {
        format!("-{}", size(bytes.unsigned_abs()))
    } else {
        size(bytes as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::oom::Shortage;
    use super::{size, StepError};

    #[test]
    fn sizes_are_decimal_with_the_exact_count() {
        assert_eq!(size(68_719_476_736), "68.72 GB (68719476736 B)");
        assert_eq!(size(2_500), "2.5 KB (2500 B)");
        assert_eq!(size(12), "12 B");
    }

    /// The cause's kind decides first; the backend's words only where the kind cannot say.
    #[test]
    fn a_cause_says_whether_it_ran_out_of_memory() {
        assert_eq!(StepError::HostAllocation { bytes: 4096 }.out_of_memory(), Some((Shortage::DeviceFull, Some(4096))));
        let cuda = StepError::Read { reason: "out of device memory allocating 1073741824 bytes".into() };
        assert_eq!(cuda.out_of_memory(), Some((Shortage::DeviceFull, Some(1 << 30))));
        let wgpu = StepError::Panicked { message: "can't allocate buffer of size: 68719476736".into() };
        assert_eq!(wgpu.out_of_memory(), Some((Shortage::TooLargeForOneAllocation, Some(1 << 36))));
        assert_eq!(StepError::Sync { reason: "an illegal memory access was encountered".into() }.out_of_memory(), None);
        assert_eq!(StepError::Program { message: "loss is NaN".into() }.out_of_memory(), None);
    }
}
