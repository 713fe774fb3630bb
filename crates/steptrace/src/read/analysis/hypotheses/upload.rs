//! The same data uploaded again every step.

use std::collections::BTreeMap;

use super::{Change, Context, Experiment, Hypothesis, NotExamined, CONFIRM};
use crate::display::{label, LABEL_CHARS};
use crate::format::device::is_device_cat;
use crate::format::names::TRANSFER_H2D;
use crate::read::analysis::device::per_step;
use crate::read::analysis::device::{CopyView, SMALL_COPY_BYTES};
use crate::read::analysis::stats::Stats;

pub(super) fn check(cx: &Context<'_>, found: &mut Vec<Hypothesis>, skipped: &mut Vec<NotExamined>) {
    if let Some(copies) = &cx.device.copies {
        from_copies(copies, found);
        return;
    }
    let vocab = cx.vocab;
    let any = cx.loaded.iter().any(|l| l.spans.spans.iter().any(|s| vocab.is_upload(s)));
    if !any {
        skipped.push(NotExamined {
            check: "the same constant uploaded again each step",
            why: "the trace has no upload events: record the backend's internal spans (steptrace) or CUDA activity \
                  (torch.profiler)"
                .into(),
            enable: Some(Change::RecordInternals),
        });
        return;
    }
    // Uploads the step's own thread asks for (device-side copies of
    // torch.profiler sit on stream tracks), outermost only, outside the
    // batch transfer; named by the span that asked for them.
    let mut callers: BTreeMap<String, usize> = BTreeMap::new();
    // Per file: whether each span is nested in an upload or the batch
    // transfer (one pass, however deeply spans nest).
    let nested: Vec<Vec<bool>> =
        cx.loaded.iter().map(|l| l.spans.with_ancestor(|p| vocab.is_upload(p) || p.name == TRANSFER_H2D)).collect();
    let per = per_step(cx.loaded, |l, a, b, step| {
        let mut n = 0;
        let nested = cx.loaded.iter().position(|x| std::ptr::eq(x, l)).and_then(|i| nested.get(i));
        for (i, s) in l.spans.starting_in(a, b) {
            let on_thread = s.thread == step.thread || is_device_cat(s.cat.as_deref());
            if !on_thread || !vocab.is_upload(s) {
                continue;
            }
            if nested.and_then(|n| n.get(i)).copied().unwrap_or(false) {
                continue;
            }
            n += 1;
            let parent = s.parent.map_or("", |p| l.spans.spans[p].name.as_str());
            let (name, parent) = (label(&s.name, LABEL_CHARS), label(parent, LABEL_CHARS));
            *callers.entry(format!("`{name}` in `{parent}`")).or_default() += 1;
        }
        Some(n as f64)
    });
    let counts: Vec<f64> = per.iter().map(|x| x.0).collect();
    let Some(stats) = Stats::of(&counts) else { return };
    // torch.profiler's copies are not nested in a batch span: allow the
    // input and target copies.
    let batch_span = cx.loaded.iter().any(|l| l.spans.spans.iter().any(|s| s.name == TRANSFER_H2D));
    let allowance = if batch_span { 0.0 } else { 2.0 };
    if stats.min <= allowance || stats.max != stats.min {
        return;
    }
    let mut by_caller: Vec<(String, usize)> = callers.into_iter().collect();
    by_caller.sort_by_key(|c| std::cmp::Reverse(c.1));
    let named: Vec<String> =
        by_caller.iter().take(3).map(|(what, n)| format!("{what} ×{}", *n as f64 / stats.n as f64)).collect();
    found.push(Hypothesis {
        id: "repeated-upload",
        evidence: format!(
            "{} uploads start in every one of {} steps outside the batch transfer{} (per step: {})",
            stats.min,
            stats.n,
            if allowance > 0.0 { " (two are allowed for the input and target copies)" } else { "" },
            named.join(", ")
        ),
        hypothesis: "a tensor that does not change (a constant, a mask, optimizer state) is moved to the device \
                     again each step: wrong placement or lifetime"
            .into(),
        next: format!(
            "check whether these calls copy data or are no-ops on a tensor already there (time them alone); if they \
             copy, create that tensor once on the device, and check that the outputs (loss, held-out metric) are \
             unchanged; {CONFIRM}"
        ),
        experiment: Some(Experiment::of([Change::RecordInternals])),
        command: None,
    });
}

/// From the device's copies: a host-to-device copy of tensor size (at
/// least [`SMALL_COPY_BYTES`]) that is not the batch and comes back, the
/// same number of times, in every counted step.
fn from_copies(copies: &CopyView, found: &mut Vec<Hypothesis>) {
    let steps = copies.per_step.n;
    if steps < 2 {
        return;
    }
    let repeated: Vec<_> = copies
        .sizes
        .iter()
        .filter(|s| s.direction == "HtoD" && s.every_step && !s.batch)
        .filter(|s| s.bytes.is_some_and(|b| b >= SMALL_COPY_BYTES))
        .collect();
    if repeated.is_empty() {
        return;
    }
    let what: Vec<String> = repeated
        .iter()
        .take(4)
        .map(|s| {
            let made = match s.spans.as_slice() {
                [] => String::new(),
                spans => format!(
                    " (made in {})",
                    spans.iter().take(2).map(|p| format!("`{}`", label(p, LABEL_CHARS))).collect::<Vec<_>>().join(", ")
                ),
            };
            format!("{} B ×{}{made}", s.bytes.unwrap_or(0), s.per_step)
        })
        .collect();
    let named = repeated.iter().find_map(|s| s.spans.first());
    let bytes: f64 = repeated.iter().map(|s| s.bytes.unwrap_or(0) as f64 * s.per_step).sum();
    let batch = if copies.batch.bytes.is_empty() {
        "the batch's own copies could not be told apart (no sizes recorded)".to_owned()
    } else {
        format!(
            "the batch's copies ({} B, from {}) are left out",
            copies.batch.bytes.iter().map(u64::to_string).collect::<Vec<_>>().join(" B, "),
            copies.batch.from
        )
    };
    found.push(Hypothesis {
        id: "repeated-upload",
        evidence: format!(
            "host-to-device copies of the same size run in every one of {steps} steps: {} per step, {:.0} bytes per \
             step in all; {batch}",
            what.join(", "),
            bytes
        ),
        hypothesis: "a tensor that does not change (a constant, a mask, a table) is built on the host and uploaded \
                     again each step: wrong placement or lifetime"
            .into(),
        next: match named {
            Some(span) => format!(
                "find the tensor of that size made from host data in `{}` (`Tensor::from_data` or a constant built \
                 each call), create it once on the device outside the loop, and check that the copy disappears \
                 from the trace and the outputs (loss, held-out metric) are unchanged; {CONFIRM}",
                label(span, LABEL_CHARS)
            ),
            None => format!(
                "rerun with `--detail ops` to see which span makes the uploaded tensor (or with the backend's \
                 internal spans, in which the upload spans nest); find the tensor of that size created inside the \
                 step (`Tensor::from_data` in the forward or the loss), create it once on the device outside the \
                 loop, and check that the copy disappears from the trace and the outputs (loss, held-out metric) \
                 are unchanged; {CONFIRM}"
            ),
        },
        experiment: if named.is_some() { None } else { Some(Experiment::of([Change::RecordInternals])) },
        command: None,
    });
}
