//! `compare` on two traces: one run each, read as `report` reads it, with
//! steady ms/step, device busy and kernels side by side. No verdict: a
//! trace is one run, not a benchmark.

use std::path::Path;

use anyhow::{bail, Context};
use comfy_table::CellAlignment;
use serde::Serialize;
use steptrace::analysis::{check_ranks, rank_of, Producer, RankReport, Report, ReportOptions, Source, Stats};
use steptrace::bench::{compare_kernels, KernelOutcome, KernelRecord};
use steptrace::display::{block, escape, label, LABEL_CHARS};

use super::input::shown;
use crate::cmd::report::{load, source_flags};

/// What a trace comparison can and cannot say.
const ONE_RUN: &str = "a trace comparison is one run each, not a benchmark: the differences above are not a verdict \
                       (no spread, no interval). For one, run `steptrace bench --profile active --json A.json` for each \
                       configuration and `steptrace compare A.json B.json --vary KEY`";

/// The comparison, as `--json` prints it.
#[derive(Serialize)]
struct TraceComparison<'a> {
    /// Always `traces`.
    kind: &'static str,
    a: TraceSide<'a>,
    b: TraceSide<'a>,
    /// B's steady median ms/step minus A's.
    steady_median_change_ms: Option<f64>,
    kernels: KernelOutcome,
    /// Kernel time by op kind and span path on both sides (`--detail ops` traces).
    ops: super::ops::OpsDiff,
    notes: Vec<&'static str>,
}

/// One side.
#[derive(Serialize)]
struct TraceSide<'a> {
    path: String,
    files: usize,
    producer: Option<Producer>,
    backend: Option<&'a str>,
    steady_ms: Option<&'a Stats>,
    device_busy_ms_per_step: Option<&'a Stats>,
    device_not_observed_reason: Option<&'a str>,
    /// Each file read, as `report --json` lists them (cut short, unfinished...).
    sources: &'a [Source],
    /// What is wrong with each file as a whole, as `report` says it.
    file_notes: Vec<String>,
    warnings: &'a [String],
}

pub(super) fn run(pa: &Path, pb: &Path, json: bool, rank: Option<u32>) -> anyhow::Result<()> {
    let (ra, rb) = (build(pa, rank)?, build(pb, rank)?);
    let median = |r: &Report| r.timing.steady_ms.as_ref().map(|s| s.median);
    let c = TraceComparison {
        kind: "traces",
        a: side(pa, &ra),
        b: side(pb, &rb),
        steady_median_change_ms: median(&ra).zip(median(&rb)).map(|(a, b)| b - a),
        kernels: compare_kernels(KernelRecord::from_report(&ra), KernelRecord::from_report(&rb)),
        ops: super::ops::diff(ra.device.attribution.as_ref(), rb.device.attribution.as_ref()),
        notes: vec![ONE_RUN],
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&c)?);
    } else {
        let text = format!("{}{}{}", render(&c), super::kernels::render(&c.kernels), super::ops::render(&c.ops));
        print!("{}", crate::console::fit(&block(&text)));
    }
    Ok(())
}

fn side<'a>(path: &Path, r: &'a Report) -> TraceSide<'a> {
    TraceSide {
        path: shown(path),
        files: r.sources.len(),
        producer: r.sources.first().map(|s| s.producer),
        backend: r.run.backend.as_deref(),
        steady_ms: r.timing.steady_ms.as_ref(),
        device_busy_ms_per_step: r.device.device_busy_ms_per_step.as_ref(),
        device_not_observed_reason: r.device.not_observed_reason.as_deref(),
        sources: &r.sources,
        file_notes: r
            .sources
            .iter()
            .filter_map(|s| {
                let flags = source_flags(s);
                (!flags.is_empty()).then(|| format!("{}: {}", s.path, flags.join("; ")))
            })
            .collect(),
        warnings: &r.warnings,
    }
}

/// The report of one side's traces (a directory: its most recent run).
fn build(path: &Path, rank: Option<u32>) -> anyhow::Result<Report> {
    let mut loaded = load::load(&[path.to_path_buf()])?;
    // What the files say of their ranks must hold, as for `report`; the ranks of a
    // multi-device run are never merged into one "run".
    let check = check_ranks(&loaded.files).with_context(|| format!("cannot compare {}", shown(path)))?;
    if let Some(rank) = rank {
        loaded.files.retain(|(p, trace)| rank_of(p, trace).is_some_and(|info| info.rank == rank));
        if loaded.files.is_empty() {
            bail!("{} holds no trace of rank {rank} (ranks come from each file's distributedInfo)", shown(path));
        }
    } else if RankReport::applies(&loaded.files) {
        bail!(
            "{} holds the traces of {} ranks: compare one rank's files with --rank N (or `steptrace report` to \
             compare the ranks with each other)",
            shown(path),
            check.ranks.len()
        );
    }
    loaded.warnings.extend(check.warnings.iter().cloned());
    let mut report = Report::build_loaded(
        loaded.files,
        &ReportOptions { batch_size: None, ops: steptrace_burn::ops::report_ops(), peaks: None },
    )
    .with_context(|| format!("cannot compare {}", shown(path)))?;
    report.warnings.splice(0..0, loaded.warnings);
    for w in &report.warnings {
        eprintln!("warning: {}: {w}", shown(path));
    }
    Ok(report)
}

fn render(c: &TraceComparison<'_>) -> String {
    let mut t = crate::console::table();
    t.set_header(["", "A", "B", "B − A"]);
    let (a, b) = (&c.a, &c.b);
    let cell = |s: &str| label(s, LABEL_CHARS).into_owned();
    t.add_row(["trace".to_owned(), cell(&a.path), cell(&b.path), String::new()]);
    t.add_row(["files".to_owned(), a.files.to_string(), b.files.to_string(), String::new()]);
    let producer = |s: &TraceSide<'_>| match s.producer {
        Some(Producer::Steptrace) => "steptrace",
        Some(Producer::TorchProfiler) => "torch.profiler",
        _ => "other",
    };
    t.add_row(["written by".to_owned(), producer(a).to_owned(), producer(b).to_owned(), String::new()]);
    let backend = |s: &TraceSide<'_>| s.backend.map_or_else(|| "not in the trace".to_owned(), cell);
    t.add_row(["backend".to_owned(), backend(a), backend(b), String::new()]);
    let n = |s: &TraceSide<'_>| s.steady_ms.map_or_else(|| "-".to_owned(), |s| s.n.to_string());
    t.add_row(["steps counted".to_owned(), n(a), n(b), String::new()]);
    let median =
        |s: &TraceSide<'_>| s.steady_ms.map_or_else(|| "no step boundaries".to_owned(), |s| format!("{:.3}", s.median));
    let delta =
        c.steady_median_change_ms
            .map_or_else(String::new, |d| if d == 0.0 { "0".to_owned() } else { format!("{d:+.3}") });
    t.add_row(["steady ms/step (median)".to_owned(), median(a), median(b), delta]);
    let busy = |s: &TraceSide<'_>| s.device_busy_ms_per_step.map(|s| s.mean);
    let shown_busy = |s: &TraceSide<'_>| busy(s).map_or_else(|| "not observed".to_owned(), |v| format!("{v:.4}"));
    let busy_delta =
        busy(a)
            .zip(busy(b))
            .map_or_else(String::new, |(x, y)| if x == y { "0".to_owned() } else { format!("{:+.4}", y - x) });
    t.add_row(["device busy ms/step (mean)".to_owned(), shown_busy(a), shown_busy(b), busy_delta]);
    for i in 1..4 {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut out = format!("{t}\n");
    for (side, s) in [("A", a), ("B", b)] {
        for note in &s.file_notes {
            out.push_str(&format!("{side}: {}\n", escape(note)));
        }
    }
    for (side, s) in [("A", a), ("B", b)] {
        if let (None, Some(why)) = (busy(s), s.device_not_observed_reason) {
            out.push_str(&format!("device {side}: not observed: {why}\n"));
        }
    }
    for note in &c.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    out
}
