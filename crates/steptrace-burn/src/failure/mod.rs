//! The console lines of a step that failed: what was saved, and, when the device ran out of
//! memory, what it held and asked for and the batch that would have fit.

use crate::console::{self, say};
use crate::error::StepFailure;
use crate::oom::{Bounded, Estimate, OutOfMemory};

/// Bytes as decimal megabytes or gigabytes, with the exact count.
pub fn size(bytes: u64) -> String {
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
pub(crate) fn reason(step: u64, error: &str, out_of_memory: Option<&OutOfMemory>) -> String {
    match out_of_memory {
        Some(o) => format!(
            "step {step} failed: out of device memory ({}{})",
            o.shortage.meaning(),
            o.requested_bytes.map(|b| format!(": a request for {b} B")).unwrap_or_default()
        ),
        None => format!("step {step} failed: {}", crate::oom::brief(error)),
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

/// Prints what a failed step left: the saved traces, and the out-of-memory report (stdout).
pub fn print(f: &StepFailure) {
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
            t.add_row(["device capacity".to_owned(), l.capacity.map_or_else(|| "not stated by its runtime".to_owned(), size)]);
            t.add_row(["largest allocation".to_owned(), size(l.max_allocation)]);
        }
        None => {
            t.add_row(["device limits", "not observed (not a cubecl device)"]);
        }
    }
    match o.at_failure {
        Some(m) => {
            t.add_row(["held after the failure".to_owned(), format!("in use {}, reserved {}", size(m.bytes_in_use), size(m.bytes_reserved))]);
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
            format!("per sample {}; batch that fits {}", said(&b.per_sample, &size), said(&b.fitting_batch, &|v| format!("{v} samples"))),
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
    use super::size;

    #[test]
    fn sizes_are_decimal_with_the_exact_count() {
        assert_eq!(size(68_719_476_736), "68.72 GB (68719476736 B)");
        assert_eq!(size(2_500), "2.5 KB (2500 B)");
        assert_eq!(size(12), "12 B");
    }
}
