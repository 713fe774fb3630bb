//! Observations turned into hypotheses, each with a next experiment.
//!
//! Nothing here is a verdict: every item says what was measured, what it
//! might mean, and the controlled experiment that would tell.

use serde::Serialize;

use super::device::{is_launch, per_step, DeviceView};
use super::report::{is_wait, Loaded, Producer, RunInfo, SpanTable, StepTiming, Timing};
use super::spans::{Span, Spans};
use super::stats::{median, Stats};

/// One possibility.
#[derive(Clone, Debug, Serialize)]
pub struct Hypothesis {
    /// A stable identifier: `input-pipeline`, `repeated-upload`,
    /// `many-launches`, `dominant-operation`, `not-steady`.
    pub id: &'static str,
    /// What was measured, with numbers.
    pub evidence: String,
    /// What it might mean.
    pub hypothesis: String,
    /// The next controlled experiment.
    pub next: String,
    /// The exact command for it, when the trace says how the run was made.
    pub command: Option<String>,
}

/// A check that could not run on these traces.
#[derive(Clone, Debug, Serialize)]
pub struct NotExamined {
    /// The check.
    pub check: &'static str,
    /// Why, and how to make it possible.
    pub why: String,
}

/// Fraction of a step spent reading input above which the input pipeline
/// is a suspect.
const INPUT_SHARE: f64 = 0.15;
/// Launches per step from which work counts as fragmented.
const MANY_LAUNCHES: f64 = 30.0;
/// Share of the recorded wall time one operation must take (self time).
const DOMINANT_SHARE: f64 = 0.4;
/// A steady step this many times the steady median is suspicious.
const SLOW_FACTOR: f64 = 3.0;

const CONFIRM: &str = "confirm any gain outside the profiler: `steptrace bench` both variants from the same seed, \
                       then `steptrace compare A.json B.json --vary <what changed>`";

pub(crate) fn hypotheses(
    loaded: &[Loaded],
    run: &RunInfo,
    timing: &StepTiming,
    table: &SpanTable,
    device: &DeviceView,
    anomalies: &[(Option<u64>, String)],
) -> (Vec<Hypothesis>, Vec<NotExamined>) {
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    if timing.steps.is_empty() {
        skipped.push(NotExamined {
            check: "per-step checks (input, uploads, launches)",
            why: "no ProfilerStep#N spans: the trace has no step boundaries".into(),
        });
    } else {
        input_pipeline(loaded, run, device, &mut found);
        repeated_upload(loaded, run, &mut found, &mut skipped);
        many_launches(loaded, run, device, &mut found, &mut skipped);
    }
    dominant(run, table, &mut found);
    not_steady(run, timing, anomalies, &mut found);
    (found, skipped)
}

fn is_input(name: &str) -> bool {
    name == "data.load" || name == "data.wait" || name.starts_with("enumerate(DataLoader)")
}

/// `cmd` with `flag` set to `value` (replaced if present).
fn with_flag(cmd: &str, flag: &str, value: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut words = cmd.split(' ').peekable();
    while let Some(word) = words.next() {
        if word == flag {
            words.next();
            continue;
        }
        parts.push(word.to_owned());
    }
    parts.push(flag.to_owned());
    parts.push(value.to_owned());
    parts.join(" ")
}

fn flag_value(cmd: &str, flag: &str) -> Option<String> {
    let mut words = cmd.split(' ');
    while let Some(word) = words.next() {
        if word == flag {
            return words.next().map(str::to_owned);
        }
    }
    None
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 1.0 {
        format!("{v:.2} ms")
    } else {
        format!("{:.1} µs", v * 1000.0)
    }
}

fn input_pipeline(loaded: &[Loaded], run: &RunInfo, device: &DeviceView, found: &mut Vec<Hypothesis>) {
    let per = per_step(loaded, |l, a, b, step| {
        let input: f64 = l
            .spans
            .starting_in(a, b)
            .map(|(_, s)| s)
            .filter(|s| s.thread == step.thread && is_input(&s.name))
            .filter(|s| s.parent.is_none_or(|p| !is_input(&l.spans.spans[p].name)))
            .map(Span::dur)
            .sum();
        Some(input / 1000.0)
    });
    if per.iter().all(|(v, _)| *v == 0.0) {
        return;
    }
    let inputs: Vec<f64> = per.iter().map(|x| x.0).collect();
    let shares: Vec<f64> = per.iter().map(|(v, ms)| v / ms).collect();
    let (Some(input), Some(share), Some(step)) =
        (median(&inputs), median(&shares), median(&per.iter().map(|x| x.1).collect::<Vec<_>>()))
    else {
        return;
    };
    if share < INPUT_SHARE {
        return;
    }
    let idle = match (run.sync_policy.as_deref(), device.observed) {
        (_, true) => {
            let busy = device.device_busy_share.as_ref().map_or(0.0, |s| s.median);
            format!("the device was busy for {:.0}% of the median step", busy * 100.0)
        }
        (Some("step" | "phase"), false) => {
            "every step ends with a sync, so the device had nothing queued while the batch was read".to_owned()
        }
        _ => "whether the device had work queued meanwhile is not observed (no sync, no device events)".to_owned(),
    };
    let command = run.command.as_deref().map(|cmd| {
        let prefetch = flag_value(cmd, "--prefetch").and_then(|p| p.parse::<usize>().ok()).unwrap_or(0);
        with_flag(cmd, "--prefetch", &(prefetch.max(1) * 2).to_string())
    });
    found.push(Hypothesis {
        id: "input-pipeline",
        evidence: format!(
            "reading input takes {} per step (median over {} steps), {:.0}% of the median step ({}); {idle}",
            ms(input),
            per.len(),
            share * 100.0,
            ms(step)
        ),
        hypothesis: "the input pipeline cannot keep up: the device waits for batches".into(),
        next: format!(
            "rerun with batches prepared ahead (prefetch threads) and check that the input share falls and the step \
             time with it; {CONFIRM}"
        ),
        command,
    });
}

/// Host-side uploads (burn, cubecl) and device-side copies (Kineto).
fn is_upload(span: &Span) -> bool {
    matches!(
        span.name.as_str(),
        "write_to_gpu" | "float_from_data" | "int_from_data" | "bool_from_data" | "float_to_device" | "int_to_device"
    ) || span.name.contains("Memcpy HtoD")
}

fn under(spans: &Spans, mut i: usize, pred: impl Fn(&Span) -> bool) -> bool {
    while let Some(p) = spans.spans[i].parent {
        if pred(&spans.spans[p]) {
            return true;
        }
        i = p;
    }
    false
}

fn repeated_upload(loaded: &[Loaded], run: &RunInfo, found: &mut Vec<Hypothesis>, skipped: &mut Vec<NotExamined>) {
    let any = loaded.iter().any(|l| l.spans.spans.iter().any(is_upload));
    if !any {
        skipped.push(NotExamined {
            check: "the same constant uploaded again each step",
            why: "the trace has no upload events: rerun with `--detail internals` (steptrace) or with CUDA activity \
                  (torch.profiler)"
                .into(),
        });
        return;
    }
    // Uploads the step's own thread asks for (device-side copies of
    // torch.profiler sit on stream tracks), outermost only, outside the
    // batch transfer; named by the span that asked for them.
    let mut callers: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    let per = per_step(loaded, |l, a, b, step| {
        let mut n = 0;
        for (i, s) in l.spans.starting_in(a, b) {
            let on_thread = s.thread == step.thread || super::report::is_device_cat(s.cat.as_deref());
            if !on_thread || !is_upload(s) {
                continue;
            }
            if under(&l.spans, i, |p| is_upload(p) || p.name == "transfer.h2d") {
                continue;
            }
            n += 1;
            let parent = s.parent.map_or("", |p| l.spans.spans[p].name.as_str());
            *callers.entry(format!("`{}` in `{parent}`", s.name)).or_default() += 1;
        }
        Some(n as f64)
    });
    let counts: Vec<f64> = per.iter().map(|x| x.0).collect();
    let Some(stats) = Stats::of(&counts) else { return };
    // torch.profiler's copies are not nested in a batch span: allow the
    // input and target copies.
    let allowance = if loaded.iter().any(|l| l.spans.spans.iter().any(|s| s.name == "transfer.h2d")) { 0.0 } else { 2.0 };
    if stats.min <= allowance || stats.max != stats.min {
        return;
    }
    let mut by_caller: Vec<(String, usize)> = callers.into_iter().collect();
    by_caller.sort_by(|a, b| b.1.cmp(&a.1));
    let named: Vec<String> = by_caller
        .iter()
        .take(3)
        .map(|(what, n)| format!("{what} ×{}", *n as f64 / stats.n as f64))
        .collect();
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
        command: run.command.as_deref().map(|cmd| with_flag(cmd, "--detail", "internals")),
    });
}

fn many_launches(
    loaded: &[Loaded],
    run: &RunInfo,
    device: &DeviceView,
    found: &mut Vec<Hypothesis>,
    skipped: &mut Vec<NotExamined>,
) {
    let Some(launches) = &device.launches_per_step else {
        if !loaded.iter().any(|l| l.spans.spans.iter().any(|s| is_launch(&s.name))) {
            skipped.push(NotExamined {
                check: "many small launches per step",
                why: "the trace has no kernel launch events: rerun with `--detail internals`".into(),
            });
        }
        return;
    };
    if launches.median < MANY_LAUNCHES {
        return;
    }
    let step = median(&per_step(loaded, |_, _, _, _| Some(0.0)).iter().map(|x| x.1).collect::<Vec<_>>()).unwrap_or(0.0);
    let host_cost: Vec<f64> = loaded
        .iter()
        .flat_map(|l| l.spans.spans.iter().filter(|s| is_launch(&s.name)).map(Span::dur))
        .collect();
    let mean_launch = host_cost.iter().sum::<f64>() / host_cost.len().max(1) as f64;
    let kernel = device
        .device_busy_ms_per_step
        .as_ref()
        .zip(device.device_events_per_step.as_ref())
        .map(|(busy, n)| format!("; device busy {} per step over {:.0} device events", ms(busy.median), n.median))
        .unwrap_or_default();
    let fusion = if loaded.iter().any(|l| l.producer == Producer::TorchProfiler) {
        "torch.compile, CUDA graphs"
    } else {
        "which operations break burn's fusion"
    };
    let command = run.command.as_deref().map(|cmd| {
        let batch = run.batch_size.unwrap_or(64);
        with_flag(cmd, "--batch", &(batch * 4).to_string())
    });
    found.push(Hypothesis {
        id: "many-launches",
        evidence: format!(
            "{:.0} kernel launches per step (median; min {:.0}, max {:.0}) in a {} step: {} of step per launch; a \
             launch costs the host {} on average{kernel}",
            launches.median,
            launches.min,
            launches.max,
            ms(step),
            ms(step / launches.median),
            ms(mean_launch / 1000.0)
        ),
        hypothesis: "the work is fragmented into many small launches, whose fixed cost and gaps dominate".into(),
        next: format!(
            "raise the work per launch without changing the launch count: run with a 4× batch and compare time per \
             sample; if it falls, launches are the limit, so examine grouping or fusion ({fusion}) and its overall \
             cost; {CONFIRM}"
        ),
        command,
    });
}

fn dominant(run: &RunInfo, table: &SpanTable, found: &mut Vec<Hypothesis>) {
    let device_rows = table.rows.iter().any(|r| r.timing == Timing::Device);
    let candidates: Vec<_> = table
        .rows
        .iter()
        .filter(|r| r.name != "ProfilerStep#*" && !is_wait(&r.name) && !is_input(&r.name))
        .filter(|r| !device_rows || r.timing == Timing::Device)
        .collect();
    let (Some(first), second) = (candidates.first(), candidates.get(1)) else { return };
    let base = if device_rows {
        candidates.iter().map(|r| r.self_ms).sum::<f64>()
    } else {
        table.wall_ms
    };
    if base <= 0.0 {
        return;
    }
    let share = first.self_ms / base;
    if share < DOMINANT_SHARE || second.is_some_and(|s| s.self_ms * 2.0 > first.self_ms) {
        return;
    }
    let what = if device_rows { "of device time" } else { "of the recorded wall time (self time)" };
    let (next, command) = if first.timing == Timing::HostLaunch || first.timing == Timing::Mixed {
        (
            "its time here is host launch only: rerun with `--sync phase` to see whether its device time is as \
             large, then time that operation alone with the same input shapes and compare algorithms or shapes"
                .to_owned(),
            run.command.as_deref().map(|cmd| with_flag(cmd, "--sync", "phase")),
        )
    } else {
        (
            "time that operation alone with the same input shapes (a micro-benchmark), then compare shapes, \
             layouts or algorithms; "
                .to_owned()
                + CONFIRM,
            None,
        )
    };
    found.push(Hypothesis {
        id: "dominant-operation",
        evidence: format!(
            "`{}` takes {} ({:.0}% {what}) over {} calls, {:.1}× the next one",
            first.name,
            ms(first.self_ms),
            share * 100.0,
            first.calls,
            second.map_or(f64::INFINITY, |s| first.self_ms / s.self_ms.max(f64::MIN_POSITIVE))
        ),
        hypothesis: "one operation dominates: its shape or algorithm sets the step time".into(),
        next,
        command,
    });
}

fn not_steady(run: &RunInfo, timing: &StepTiming, anomalies: &[(Option<u64>, String)], found: &mut Vec<Hypothesis>) {
    let steady: Vec<_> = timing.steps.iter().filter(|s| !s.startup).collect();
    let mut evidence: Vec<String> = anomalies
        .iter()
        .filter(|(step, _)| step.is_none_or(|n| steady.iter().any(|s| s.step == n)))
        .map(|(step, what)| match step {
            Some(n) => format!("step {n}: {what}"),
            None => what.clone(),
        })
        .collect();
    if let Some(m) = timing.steady_ms.as_ref().filter(|s| s.n >= 3).map(|s| s.median) {
        for s in steady.iter().filter(|s| s.ms > SLOW_FACTOR * m) {
            evidence.push(format!("step {} took {} against a steady median of {}", s.step, ms(s.ms), ms(m)));
        }
    }
    if evidence.is_empty() {
        return;
    }
    let last = steady.iter().map(|s| s.step).max().unwrap_or(0);
    let command = run.command.as_deref().map(|cmd| {
        let schedule = flag_value(cmd, "--schedule").unwrap_or_default();
        let rest: Vec<&str> =
            schedule.split(',').filter(|p| !p.starts_with("skip_first=") && !p.is_empty()).collect();
        let steps = flag_value(cmd, "--steps").and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
        let cmd = with_flag(cmd, "--schedule", &format!("skip_first={},{}", last + 1, rest.join(",")));
        with_flag(&cmd, "--steps", &(steps + last + 1).to_string())
    });
    found.push(Hypothesis {
        id: "not-steady",
        evidence: evidence.join("; "),
        hypothesis: "a new shape or compile path (compilation, autotune) appeared after warm-up: the steady state \
                     was not reached in the window"
            .into(),
        next: "record a later window (skip the steps above), keep shapes fixed (a constant batch size, no ragged \
               last batch), and check that the slow steps disappear"
            .into(),
        command,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_replaced_or_appended() {
        let cmd = "steptrace train --model mlp --prefetch 0 --batch 64";
        assert_eq!(with_flag(cmd, "--prefetch", "2"), "steptrace train --model mlp --batch 64 --prefetch 2");
        assert_eq!(with_flag(cmd, "--sync", "phase"), format!("{cmd} --sync phase"));
        assert_eq!(flag_value(cmd, "--batch").as_deref(), Some("64"));
        assert_eq!(flag_value(cmd, "--seed"), None);
    }
}
