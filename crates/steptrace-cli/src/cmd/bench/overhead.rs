//! `steptrace bench --profile interleaved`: the profiler's cost measured
//! inside each process.
//!
//! Every process runs the user's workload under one schedule of short
//! cycles (by default `wait=7,warmup=1,active=2`, after `--warmup` skipped
//! steps), so that its wait steps are the control of its active steps. The
//! processes run in rounds, one per condition (device activity `auto`,
//! then `off` when the first `auto` process recorded device activity, then
//! no profiler with `--baseline`), every other round in reverse order, so
//! that a drift of the machine weighs on every condition alike. The
//! figures and the verdict are [`steptrace::bench::overhead`]'s.

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context};
use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
use serde_json::json;
use steptrace::bench::overhead::{CROSS_PROCESS_WARNING, MIN_PROCESSES_FOR_INTERVAL};
use steptrace::bench::{
    label_steps, Condition, ConditionSummary, CrossProcess, OverheadResult, OverheadSetup, PairedRatio, PhaseCounts,
    ProcessRecord, ProcessRun, StatsRecord, Verdict,
};
use steptrace::display::{block, label};
use steptrace::format::device::ActivityStatus;
use steptrace::Schedule;
use steptrace_workload::Trained;

use crate::args::{value_name, BenchArgs, Detail, DeviceActivityArg, WorkloadArgs};
use crate::convert::config;

/// The cycle when `--schedule` is not given.
const DEFAULT_CYCLE: &str = "wait=7,warmup=1,active=2";
/// Steps skipped before measuring when `--warmup` is not given.
const DEFAULT_WARMUP: u64 = 20;
/// Measured steps per process when `--steps` is not given.
const DEFAULT_STEPS: u64 = 300;
/// The default `--threshold`: `compare`'s.
const DEFAULT_THRESHOLD: f64 = 0.01;
/// Console width.
const WIDTH: usize = 100;

pub(super) fn run(a: BenchArgs) -> anyhow::Result<ExitCode> {
    let warmup = a.warmup.unwrap_or(DEFAULT_WARMUP);
    let steps = a.steps.unwrap_or(DEFAULT_STEPS);
    let threshold = a.threshold.unwrap_or(DEFAULT_THRESHOLD);
    if !(threshold.is_finite() && (0.0..1.0).contains(&threshold)) {
        bail!("--threshold must be a fraction in [0, 1) (got {threshold})");
    }
    if a.runs == 0 || steps == 0 {
        bail!("--runs and --steps must be at least 1 (got --runs {} --steps {steps})", a.runs);
    }
    let text = a.schedule.as_deref().unwrap_or(DEFAULT_CYCLE);
    let schedule = interleaved(text, warmup, steps)?;
    // Said now, before the processes run, and again with the result.
    if let Some(w) = PhaseCounts::warning(&schedule, warmup..warmup + steps) {
        eprint!("{}", wrap(&format!("warning: {w}"), "  "));
    }
    // One extra step reads the final loss back; it is not measured.
    let total = warmup.checked_add(steps).and_then(|n| n.checked_add(1)).context("--warmup + --steps overflows")?;
    // Check the workload before starting any process.
    config(&a.workload, total)?;
    let device = a.device_activity.unwrap_or(DeviceActivityArg::Auto);
    let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
    let mut conditions = vec![if device == DeviceActivityArg::Auto { Condition::Auto } else { Condition::Off }];
    if a.baseline {
        conditions.push(Condition::NoProfile);
    }
    let mut records: Vec<ProcessRecord> = Vec::new();
    let mut last: Option<Trained> = None;
    // `--save-init`: the first process saves the starting state, the later ones start from it.
    let mut each = a.workload.clone();
    for round in 0..a.runs {
        let mut k = 0;
        while k < conditions.len() {
            let c = if round % 2 == 0 { conditions[k] } else { conditions[conditions.len() - 1 - k] };
            k += 1;
            let index = records.len();
            let (summary, (status, cupti_kept)) =
                process(&each, &schedule, total, c, (a.detail, (a.memory, a.memory_phases)), scratch.path(), index)?;
            if let Some(saved) = each.save_init.take() {
                each.init = Some(saved);
            }
            let pairs: Vec<(u64, f64)> = summary.steps.iter().map(|s| (s.step, s.ms)).collect();
            let record = ProcessRecord::new(
                index,
                ProcessRun {
                    condition: c,
                    device_activity: status,
                    cupti_kept,
                    first_step_ms: summary.first_step_ms,
                    cache: super::cache_word(&summary.cache).into(),
                    first_loss: summary.first_loss,
                    final_loss: summary.last_loss,
                    steps: label_steps(&schedule, &pairs, warmup..warmup + steps),
                },
            );
            eprintln!("{}", progress(&record, round, a.runs));
            // Device activity recorded: host spans only, as a condition of its own.
            if index == 0 && record.observed() && !conditions.contains(&Condition::Off) {
                conditions.insert(1, Condition::Off);
            }
            records.push(record);
            last = Some(summary);
        }
    }
    let summary = last.context("no process ran")?;
    let mut fingerprint = super::fingerprint(&a.workload, &summary, "interleaved", warmup, steps);
    fingerprint.insert("schedule".into(), json!(schedule.to_string()));
    fingerprint.insert("device_activity".into(), json!(value_name(&device)));
    let setup = OverheadSetup {
        fingerprint,
        backend_label: summary.backend.clone(),
        schedule,
        warmup,
        steps,
        batch_size: a.workload.batch as u64,
        threshold,
    };
    let result = OverheadResult::new(setup, records)?;
    crate::console::out(&block(&render(&result)).trim_end());
    if let Some(path) = &a.json {
        super::write_new(path, &result)?;
        crate::console::out(&wrap(&format!("result written to {}", path.display()), "  "));
    }
    Ok(ExitCode::SUCCESS)
}

/// The schedule of `--schedule TEXT`, with `warmup` steps skipped first;
/// refused unless the measured steps hold both wait and active steps. Each
/// refusal suggests what would pass (checked here, not guessed).
fn interleaved(text: &str, warmup: u64, steps: u64) -> anyhow::Result<Schedule> {
    let parsed: Schedule = text.parse().with_context(|| format!("--schedule {text}"))?;
    if parsed.is_on_demand() {
        bail!("--schedule {text}: --profile interleaved needs a fixed cycle of wait and active steps, not captures on demand (e.g. --schedule wait=7,warmup=1,active=2)");
    }
    let end = warmup.checked_add(steps).context("--warmup + --steps overflows")?;
    let fits = |s: &Schedule| {
        let c = PhaseCounts::of(&s.with_skip_first(warmup), warmup..end);
        c.wait > 0 && c.active > 0
    };
    if parsed.skip_first() != 0 {
        let without = parsed.with_skip_first(0);
        let hint = if fits(&without) {
            format!("--schedule {}", cycle_text(&without))
        } else {
            example(&parsed, warmup, steps)
        };
        bail!(
            "--schedule {text} sets skip_first: with --profile interleaved the steps skipped before measuring are \
             --warmup (default {DEFAULT_WARMUP}); drop skip_first from --schedule ({hint})"
        );
    }
    if parsed.wait() == 0 {
        bail!(
            "--schedule {text} has no wait steps: --profile interleaved compares each process's active steps \
             (recording) with its wait steps (the profiler installed, not recording), so every cycle needs both ({})",
            example(&parsed, warmup, steps)
        );
    }
    let schedule = parsed.with_skip_first(warmup);
    let c = PhaseCounts::of(&schedule, warmup..end);
    if c.wait == 0 || c.active == 0 {
        let fix = match (fewest_steps(&schedule, warmup).filter(|&n| n > steps), shorter(&parsed, warmup, steps)) {
            (Some(n), Some(cycle)) => {
                format!(
                    "raise --steps to {n} or more for this schedule, or use a shorter cycle, e.g. --schedule {cycle}"
                )
            }
            (Some(n), None) => format!("raise --steps to {n} or more for this schedule"),
            (None, Some(cycle)) => format!("no step count gives this schedule both; e.g. --schedule {cycle}"),
            (None, None) => example(&parsed, warmup, steps),
        };
        bail!(
            "--schedule {text} gives {} wait and {} active steps among the {steps} measured steps ({warmup}..{}): \
             --profile interleaved needs both; {fix}",
            c.wait,
            c.active,
            end - 1
        );
    }
    Ok(schedule)
}

/// The cycles tried, longest first, when suggesting a schedule.
const CYCLES: [(u64, u64, u64); 5] = [(7, 1, 2), (3, 1, 2), (2, 1, 1), (1, 1, 1), (1, 0, 1)];

/// A cycle other than `failed`'s that gives both wait and active steps
/// among `steps` measured steps after `warmup` (checked), as `--schedule`
/// takes it; `None` when no cycle can (fewer than 2 steps).
fn shorter(failed: &Schedule, warmup: u64, steps: u64) -> Option<String> {
    let end = warmup.saturating_add(steps);
    let fitting = CYCLES.iter().filter_map(|&(w, u, a)| Schedule::new(w, u, a).ok()).find(|s| {
        let c = PhaseCounts::of(&s.with_skip_first(warmup), warmup..end);
        *s != failed.with_skip_first(0) && c.wait > 0 && c.active > 0
    });
    fitting.map(|s| cycle_text(&s))
}

/// `e.g. --schedule ...` with a cycle that passes (see [`shorter`]), or,
/// when none can, what to raise.
fn example(failed: &Schedule, warmup: u64, steps: u64) -> String {
    match shorter(failed, warmup, steps) {
        Some(cycle) => format!("e.g. --schedule {cycle}"),
        None => "a wait and an active step need at least 2 measured steps: raise --steps".to_owned(),
    }
}

/// The fewest measured steps that give `schedule` (which skips `warmup`
/// steps first) both a wait and an active step; `None` when no count does.
fn fewest_steps(schedule: &Schedule, warmup: u64) -> Option<u64> {
    let (wait, warmup_steps, len) = (schedule.wait(), schedule.warmup(), schedule.cycle_len());
    // Where the first wait step and the first active step fall, from the first measured step.
    let (first_wait, first_active) = if schedule.skip_first_wait() {
        (Some(len - wait).filter(|_| schedule.repeat() != 1 && wait > 0), warmup_steps)
    } else {
        (Some(0).filter(|_| wait > 0), wait.checked_add(warmup_steps)?)
    };
    let n = first_wait?.max(first_active).checked_add(1)?;
    let c = PhaseCounts::of(schedule, warmup..warmup.checked_add(n)?);
    (c.wait > 0 && c.active > 0).then_some(n)
}

/// `wait=W,warmup=U,active=A` (and `repeat`, `skip_first_wait` when set):
/// a `--schedule` without the skip_first that `--warmup` sets.
fn cycle_text(s: &Schedule) -> String {
    let mut text = format!("wait={},warmup={},active={}", s.wait(), s.warmup(), s.active());
    if s.repeat() > 0 {
        text.push_str(&format!(",repeat={}", s.repeat()));
    }
    if s.skip_first_wait() {
        text.push_str(",skip_first_wait=1");
    }
    text
}

/// One process of condition `c`; its summary and whether it recorded
/// device activity (read from its first trace), or why not.
fn process(
    w: &WorkloadArgs,
    schedule: &Schedule,
    total: u64,
    c: Condition,
    (detail, (memory, memory_phases)): (Option<Detail>, (bool, bool)),
    scratch: &Path,
    index: usize,
) -> anyhow::Result<(Trained, (ActivityStatus, bool))> {
    let json_path = scratch.join(format!("process{index}.json"));
    let traces = scratch.join(format!("traces{index}"));
    let mut args: Vec<OsString> = Vec::new();
    match c {
        Condition::NoProfile => args.push("--no-profile".into()),
        Condition::Auto | Condition::Off => {
            let device = if c == Condition::Auto { DeviceActivityArg::Auto } else { DeviceActivityArg::Off };
            for arg in ["--schedule".to_owned(), schedule.to_string(), "--device-activity".into(), value_name(&device)]
            {
                args.push(arg.into());
            }
            if let Some(detail) = detail {
                args.extend(["--detail".into(), value_name(&detail).into()]);
            }
            if memory {
                args.push("--memory".into());
            }
            if memory_phases {
                args.push("--memory-phases".into());
            }
            args.extend(["--out".into(), traces.clone().into_os_string()]);
            args.extend(["--worker".into(), format!("overhead-p{index}").into()]);
        }
    }
    let summary = super::train_process(w, total, &args, &json_path, index as u64)?;
    let status = match c {
        Condition::NoProfile => (ActivityStatus::NotObserved { reason: "no profiler".into() }, false),
        Condition::Off => (ActivityStatus::NotObserved { reason: "--device-activity off".into() }, false),
        Condition::Auto => super::device::status(&summary),
    };
    // The traces were only needed for that.
    let _ = std::fs::remove_dir_all(&traces);
    Ok((summary, status))
}

fn progress(p: &ProcessRecord, round: u64, rounds: u64) -> String {
    let wait = p.phases.wait.as_ref().map_or_else(|| "-".to_owned(), |w| ms(w.median));
    let ratio = p.active_over_wait.map_or_else(|| "-".to_owned(), |r| format!("{:.3}", r.ratio));
    format!(
        "process {} ({}, round {}/{rounds}): wait median {wait} ms/step, active/wait {ratio}",
        p.index + 1,
        condition_cell(p),
        round + 1
    )
}

// === rendering ===

/// A time in ms with four significant figures at most (`1.234`, `12.34`).
fn ms(v: f64) -> String {
    match v.abs() {
        x if x < 10.0 => format!("{v:.3}"),
        x if x < 100.0 => format!("{v:.2}"),
        x if x < 1000.0 => format!("{v:.1}"),
        _ => format!("{v:.0}"),
    }
}

fn condition_cell(p: &ProcessRecord) -> &'static str {
    match p.condition {
        Condition::Auto if p.observed() => "auto+dev",
        c => c.name(),
    }
}

/// What a condition measures, in words.
fn describe(result: &OverheadResult, c: &ConditionSummary) -> String {
    let n = c.processes.len();
    match c.condition {
        Condition::Auto if c.device_activity_observed > 0 => {
            let kept = c.processes.iter().filter(|&&i| result.processes.get(i).is_some_and(|p| p.cupti_kept)).count();
            let mut text = format!(
                "auto: host spans and device activity (recorded in {} of {n} processes)",
                c.device_activity_observed
            );
            if kept > 0 {
                text.push_str(&format!(
                    "; CUPTI stayed enabled between windows in {kept} of them, so their wait steps ran with it \
                     on too and active/wait leaves out what that costs every step \
                     (STEPTRACE_CUPTI=per-cycle measures CUPTI whole)"
                ));
            }
            text
        }
        Condition::Auto => {
            let why = c
                .processes
                .iter()
                .filter_map(|&i| result.processes.get(i))
                .find_map(|p| match &p.device_activity {
                    ActivityStatus::NotObserved { reason } => Some(label(reason, 160).into_owned()),
                    _ => None,
                })
                .unwrap_or_else(|| "no reason given".into());
            format!("auto: host spans only (device activity not observed: {why})")
        }
        Condition::Off => "off: host spans only (--device-activity off)".into(),
        Condition::NoProfile => "no-profile: the null check (no profiler: the phases are labels only)".into(),
    }
}

fn verdict(v: &Verdict, what: &str, against: &str) -> String {
    match v {
        Verdict::NoMeasurableDifference { reason } => format!("no measurable difference ({reason})"),
        Verdict::BSlower { slowdown } => {
            format!("measurable: {what} take {:.2}% longer than {against} ({slowdown:.4}x)", (slowdown - 1.0) * 100.0)
        }
        Verdict::BFaster { speedup } => {
            format!("measurable: {what} take {:.2}% less time than {against}", (1.0 - 1.0 / speedup) * 100.0)
        }
    }
}

/// `95% bootstrap interval over processes a–b`, or, with too few
/// processes for one, `range over the N processes a–b (...)`.
fn interval_text(interval: (f64, f64), is_range: bool, over: &str, n: usize) -> String {
    if is_range {
        let one = over.strip_suffix("es").filter(|_| n == 1).unwrap_or(over);
        format!(
            "range over the {n} {one} {:.4}–{:.4} (too few {over} for a 95% interval: {MIN_PROCESSES_FOR_INTERVAL} or \
             more give one)",
            interval.0, interval.1
        )
    } else {
        format!("95% bootstrap interval over {over} {:.4}–{:.4}", interval.0, interval.1)
    }
}

/// What the null check says of a measurable `verdict`: ` (suspect: ...)`
/// when it claims no more than the null check moved.
fn suspect(r: &OverheadResult, v: &Verdict) -> String {
    match r.null_check {
        Some(null) if null.covers(v) => format!(
            " (SUSPECT: the null check, with no profiler, moved by {:.2}%, as much as this)",
            null.moved * 100.0
        ),
        _ => String::new(),
    }
}

fn paired(out: &mut String, r: &OverheadResult, c: Condition, name: &str, what: &str, p: &PairedRatio) {
    let s = &p.spread;
    out.push_str(&wrap(
        &format!(
            "  {name}: per process min {:.4}, median {:.4}, max {:.4}; median {:.4}, {}",
            s.min,
            s.median,
            s.max,
            p.ratio,
            interval_text(p.interval, p.interval_is_range, "processes", p.per_process.len())
        ),
        "    ",
    ));
    let line = match (&p.verdict, c) {
        (Verdict::NoMeasurableDifference { .. }, _) => verdict(&p.verdict, what, "wait steps"),
        // With no profiler the phases are labels only: a difference there is the method's own noise.
        (_, Condition::NoProfile) => format!(
            "null check FAILED: with no profiler, {}; this bench cannot resolve a difference of that size",
            verdict(&p.verdict, &what.replace(" steps", "-labelled steps"), "wait-labelled steps")
        ),
        _ => format!("{}{}", verdict(&p.verdict, what, "wait steps"), suspect(r, &p.verdict)),
    };
    out.push_str(&wrap(&format!("    verdict: {line}"), "      "));
}

fn cross(out: &mut String, r: &OverheadResult, title: &str, c: &CrossProcess) {
    let n = c.a_values.len().min(c.b_values.len());
    let interval = interval_text(c.interval, c.interval_is_range, "processes", n).replace(" over processes", "");
    out.push_str(&wrap(&format!("{title}: B = {}, A = {}: B/A {:.4}, {interval}", c.b, c.a, c.ratio), "  "));
    let v = match &c.verdict {
        Verdict::NoMeasurableDifference { reason } => format!("no measurable difference ({reason})"),
        Verdict::BSlower { slowdown } => format!("measurable: B is {:.2}% above A", (slowdown - 1.0) * 100.0),
        Verdict::BFaster { speedup } => format!("measurable: B is {:.2}% below A", (1.0 - 1.0 / speedup) * 100.0),
    };
    out.push_str(&wrap(&format!("  verdict: {v}{}", suspect(r, &c.verdict)), "    "));
    out.push_str(&wrap(&format!("  warning: {}", c.warning), "    "));
}

pub(super) fn render(r: &OverheadResult) -> String {
    let mut out = String::new();
    out.push_str("bench --profile interleaved: the profiler's cost inside each process\n");
    out.push_str(&wrap(&format!("backend: {}", label(&r.backend_label, 400)), "  "));
    let c = r.phase_counts;
    out.push_str(&wrap(
        &format!(
            "schedule: {} over steps {}..{} ({} measured per process: {} wait, {} warmup, {} active); step {} reads \
             the loss back and is not measured",
            r.schedule,
            r.warmup,
            r.warmup + r.steps - 1,
            r.steps,
            c.wait,
            c.warmup,
            c.active,
            r.warmup + r.steps
        ),
        "  ",
    ));
    let names: Vec<String> =
        r.conditions.iter().map(|c| format!("{} {}", c.processes.len(), c.condition.name())).collect();
    out.push_str(&wrap(
        &format!("processes: {} in rounds of one per condition, every other round reversed", names.join(", ")),
        "  ",
    ));
    out.push('\n');
    out.push_str(&wrap(
        "per process, ms/step: median (IQR); ratios of phase medians, with a 95% bootstrap interval over the \
         process's steps (it understates the uncertainty: the verdicts are over processes; \"range\": too few steps \
         in a phase for one)",
        "",
    ));
    let mut table = Table::new();
    table
        .load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(WIDTH as u16)
        .set_header(["#", "condition", "wait", "warmup", "active", "active/wait (95%)", "warmup/\nwait"]);
    let cell = |s: &Option<StatsRecord>| {
        s.as_ref().map_or_else(|| "-".to_owned(), |s| format!("{} ({})", ms(s.median), ms(s.iqr)))
    };
    for p in &r.processes {
        table.add_row([
            p.index.to_string(),
            condition_cell(p).to_owned(),
            cell(&p.phases.wait),
            cell(&p.phases.warmup),
            cell(&p.phases.active),
            p.active_over_wait.map_or_else(
                || "-".into(),
                |x| {
                    let range = if x.interval_is_range { "range " } else { "" };
                    format!("{:.3} ({range}{:.3}–{:.3})", x.ratio, x.interval.0, x.interval.1)
                },
            ),
            p.warmup_over_wait.map_or_else(|| "-".into(), |x| format!("{:.3}", x.ratio)),
        ]);
    }
    out.push_str(&format!("{table}\n\n"));
    for c in &r.conditions {
        let n = c.processes.len();
        out.push_str(&wrap(&format!("{}, {n} process{}:", describe(r, c), if n == 1 { "" } else { "es" }), "  "));
        if let Some(p) = &c.active_over_wait {
            paired(&mut out, r, c.condition, "active/wait", "active steps", p);
        }
        if let Some(p) = &c.warmup_over_wait {
            paired(&mut out, r, c.condition, "warmup/wait", "warmup steps", p);
        }
        let slots: Vec<String> =
            c.slots.iter().map(|s| format!("{}#{} {:.3}", s.phase.name(), s.slot, s.over_wait)).collect();
        if !slots.is_empty() {
            out.push_str(&wrap(
                &format!(
                    "  by position (median over processes of the slot's median / the wait median): {}",
                    slots.join(", ")
                ),
                "    ",
            ));
        }
        if let Some(cycle) = c.cycle_over_wait {
            out.push_str(&wrap(
                &format!(
                    "  a whole cycle: {cycle:.4} times a cycle of wait steps ({:+.2}%; from the slot medians, \
                     wherever the cost lands: rough)",
                    (cycle - 1.0) * 100.0
                ),
                "    ",
            ));
        }
    }
    if let Some(d) = &r.device_activity {
        out.push('\n');
        cross(&mut out, r, "device activity's own cost", d);
    }
    if let Some(b) = &r.baseline {
        out.push('\n');
        cross(&mut out, r, "baseline, the profiler installed against none", b);
    } else if r.conditions.iter().any(|c| c.condition == Condition::NoProfile) {
        out.push_str(&wrap(&format!("baseline: not computed (too few steps); {CROSS_PROCESS_WARNING}"), "  "));
    }
    out.push('\n');
    let finals: Vec<Option<f64>> = r.processes.iter().map(|p| p.final_loss).collect();
    let loss = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |l| format!("{l:.6}"));
    if finals.windows(2).all(|w| w[0] == w[1]) {
        out.push_str(&format!("final loss: {} in every process\n", loss(finals[0])));
    } else {
        let all: Vec<String> = finals.iter().map(|&f| loss(f)).collect();
        out.push_str(&wrap(&format!("final loss per process: {}", all.join(", ")), "  "));
    }
    for w in &r.warnings {
        out.push_str(&wrap(&format!("warning: {w}"), "  "));
    }
    out
}

/// `text` as lines of at most [`WIDTH`] characters, broken at spaces (a
/// word longer than a line is cut); the first line keeps `text`'s leading
/// spaces, continuation lines begin with `indent`. Ends with a newline.
pub(super) fn wrap(text: &str, indent: &str) -> String {
    let mut out = String::new();
    let mut line: String = text.chars().take_while(|&c| c == ' ').collect();
    let mut empty = true;
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let len = line.chars().count();
            if len + word.len() + usize::from(!empty) <= WIDTH {
                if !empty {
                    line.push(' ');
                }
                line.extend(word.iter());
                empty = false;
                break;
            }
            if !empty {
                out.push_str(&line);
                out.push('\n');
                line = indent.to_owned();
                empty = true;
                continue;
            }
            // Longer than a whole line: cut it.
            let cut = WIDTH.saturating_sub(len).clamp(1, word.len());
            line.extend(word.drain(..cut));
            out.push_str(&line);
            out.push('\n');
            line = indent.to_owned();
            if word.is_empty() {
                break;
            }
        }
    }
    if !empty || out.is_empty() {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
#[path = "overhead_tests.rs"]
mod tests;
