//! The steady state was not reached inside the window.

use super::{ms, Change, Context, Experiment, Hypothesis};

/// A steady step this many times the steady median is suspicious.
const SLOW_FACTOR: f64 = 3.0;

pub(super) fn check(cx: &Context<'_>, found: &mut Vec<Hypothesis>) {
    let steady: Vec<_> = cx.timing.steps.iter().filter(|s| !s.startup).collect();
    let mut evidence: Vec<String> = cx
        .anomalies
        .iter()
        .filter(|(step, _)| step.is_none_or(|n| steady.iter().any(|s| s.step == n)))
        .map(|(step, what)| match step {
            Some(n) => format!("step {n}: {what}"),
            None => what.clone(),
        })
        .collect();
    if let Some(m) = cx.timing.steady_ms.as_ref().filter(|s| s.n >= 3).map(|s| s.median) {
        // An epoch boundary's step is slow by design (validation,
        // checkpointing): the report notes it apart.
        for s in steady.iter().filter(|s| s.ms > SLOW_FACTOR * m && !cx.boundaries.contains(&s.step)) {
            evidence.push(format!("step {} took {} against a steady median of {}", s.step, ms(s.ms), ms(m)));
        }
    }
    if evidence.is_empty() {
        return;
    }
    let last = steady.iter().map(|s| s.step).max().unwrap_or(0);
    let steps = cx.run.steps.unwrap_or(0);
    found.push(Hypothesis {
        id: "not-steady",
        evidence: evidence.join("; "),
        hypothesis: "a new shape or compile path (compilation, autotune) appeared after warm-up: the steady state \
                     was not reached in the window"
            .into(),
        next: "record a later window (skip the steps above), keep shapes fixed (a constant batch size, no ragged \
               last batch), and check that the slow steps disappear"
            .into(),
        // Step numbers and the step count come from the trace: too large ones give no experiment.
        experiment: last
            .checked_add(1)
            .and_then(|skip| Some((skip, steps.checked_add(skip)?)))
            .map(|(skip, total)| Experiment::of([Change::SkipFirst(skip), Change::Steps(total)])),
        command: None,
    });
}
