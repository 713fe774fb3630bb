//! `steptrace compare`: two bench results that differ in one declared
//! variable (timing, then kernels), two traces (one run each: kernels,
//! steady ms/step and device busy, no verdict), or one workload on several
//! backends side by side.

mod input;
mod kernels;
mod ops;
mod start;
mod traces;

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context};
use serde::Serialize;
use steptrace::bench::{compare, compare_kernels, BenchResult, Comparison, KernelOutcome, KernelRecord, Verdict};
use steptrace::display::{block, escape, label, LABEL_CHARS};

use super::bench::{bench, Protocol};
use crate::args::{value_name, CompareArgs, ProfileMode};

/// The most characters of a reason a backend is not available shown.
const PROSE_CHARS: usize = 400;

pub fn run(a: CompareArgs) -> anyhow::Result<ExitCode> {
    if !a.backends.is_empty() {
        if a.rank.is_some() {
            bail!("--rank chooses one rank's traces; --backends runs the workload instead of reading traces");
        }
        return backends(&a);
    }
    let [pa, pb] = a.results.as_slice() else {
        bail!(
            "compare needs two bench results (A.json B.json), two traces (files or directories), or --backends \
             cuda,wgpu[,cpu]"
        );
    };
    match input::kinds(pa, pb)? {
        input::Kind::Trace => traces::run(pa, pb, a.json, a.rank)?,
        input::Kind::Bench => {
            if a.rank.is_some() {
                bail!("--rank chooses one rank's traces; bench results have no ranks");
            }
            benches(&a, pa, pb)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--json` of two bench results: the timing comparison, with the kernels.
#[derive(Serialize)]
struct BenchComparison<'a> {
    #[serde(flatten)]
    timing: &'a Comparison,
    kernels: KernelOutcome,
}

/// Two bench results: the timing verdict, then their kernels.
fn benches(a: &CompareArgs, pa: &Path, pb: &Path) -> anyhow::Result<()> {
    let (ra, rb) = (load(pa)?, load(pb)?);
    let vary = expand(&a.vary);
    let c = compare(&ra, &rb, &vary, a.threshold)?;
    let ((ka, na), (kb, nb)) = (KernelRecord::of_bench(&ra), KernelRecord::of_bench(&rb));
    let mut k = compare_kernels(ka, kb);
    k.notes.extend(na.into_iter().map(|n| format!("A: {n}")).chain(nb.into_iter().map(|n| format!("B: {n}"))));
    if a.json {
        println!("{}", serde_json::to_string_pretty(&BenchComparison { timing: &c, kernels: k })?);
    } else {
        print!("{}", crate::console::fit(&block(&format!("{}{}", render(&c, &ra, &rb), kernels::render(&k)))));
    }
    Ok(())
}

/// Reads a bench result, refusing a newer format and impossible times.
fn load(path: &Path) -> anyhow::Result<BenchResult> {
    let shown = escape(&path.display().to_string()).into_owned();
    let bytes = input::read_bench(path)?;
    BenchResult::from_json(&bytes).with_context(|| format!("cannot compare {shown}"))
}

/// Declared variables and the fingerprint keys that follow from them.
fn expand(vary: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for v in vary {
        out.push(v.clone());
        let implied: &[&str] = match v.as_str() {
            // Fusion and autotune exist only on cubecl backends: a backend brings its own.
            "backend" => &["device", "requested_backend", "fallback", "fusion", "autotune", "autotune_level"],
            "batch" => &["input_shape"],
            "model" => &["parameters", "input_shape"],
            "dataset" => &["input_shape"],
            _ => &[],
        };
        out.extend(implied.iter().map(|s| (*s).to_owned()));
    }
    out
}

fn verdict(c: &Comparison) -> String {
    match &c.verdict {
        Verdict::NoMeasurableDifference { reason } => format!("no measurable difference ({reason})"),
        Verdict::BFaster { speedup } => format!(
            "B is faster: {speedup:.2}x less time per sample (95% interval of B/A: {:.3}–{:.3})",
            c.interval.0, c.interval.1
        ),
        Verdict::BSlower { slowdown } => format!(
            "B is slower: {slowdown:.2}x more time per sample (95% interval of B/A: {:.3}–{:.3})",
            c.interval.0, c.interval.1
        ),
    }
}

/// A value of a bench file, as a table cell: escaped and cut.
fn cell(text: &str) -> String {
    label(text, LABEL_CHARS).into_owned()
}

fn render(c: &Comparison, a: &BenchResult, b: &BenchResult) -> String {
    let mut table = crate::console::table();
    table.set_header(["", "A", "B"]);
    for (key, (va, vb)) in &c.differences {
        table.add_row([cell(key), cell(&va.to_string()), cell(&vb.to_string())]);
    }
    table.add_row(["backend".to_owned(), cell(&a.backend_label), cell(&b.backend_label)]);
    table.add_row([
        "ms/step (median of run medians)".to_owned(),
        format!("{:.3}", a.summary.run_medians_ms.median),
        format!("{:.3}", b.summary.run_medians_ms.median),
    ]);
    table.add_row(["µs/sample".to_owned(), format!("{:.3}", c.a_us_per_sample), format!("{:.3}", c.b_us_per_sample)]);
    table.add_row(["runs".to_owned(), a.runs.len().to_string(), b.runs.len().to_string()]);
    let loss = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |l| format!("{l:.4}"));
    table.add_row(["final loss".to_owned(), loss(c.final_loss.0), loss(c.final_loss.1)]);
    if let Some((name, va, vb)) = &c.held_out {
        table.add_row([format!("held-out {}", cell(name)), format!("{va:.4}"), format!("{vb:.4}")]);
    }
    let mut out = format!("{table}\n");
    out.push_str(&format!(
        "time per sample B/A: {:.3} (95% bootstrap interval {:.3}–{:.3}; run spread {:.3} µs/sample)\n",
        c.ratio, c.interval.0, c.interval.1, c.spread_us_per_sample
    ));
    out.push_str(&format!("verdict: {}\n", verdict(c)));
    if let Some((name, va, vb)) = &c.held_out {
        out.push_str(&format!("quality: held-out {} {:+.4} (B − A); keep it in the decision\n", cell(name), vb - va));
    }
    for w in &c.warnings {
        out.push_str(&format!("warning: {}\n", escape(w)));
    }
    block(&out).into_owned()
}

/// The same workload on each backend, back to back.
fn backends(a: &CompareArgs) -> anyhow::Result<ExitCode> {
    if a.runs == 0 || a.steps == 0 {
        bail!("--runs and --steps must be at least 1 (got --runs {} --steps {})", a.runs, a.steps);
    }
    if !a.results.is_empty() {
        bail!("compare takes either two bench results or --backends, not both");
    }
    let protocol = Protocol {
        warmup: a.warmup,
        steps: a.steps,
        runs: a.runs,
        profile: ProfileMode::Off,
        trace_dir: "bench-traces".into(),
    };
    // burn's random init differs per backend: every backend starts from one saved state.
    let mut shared = start::SharedStart::new(&a.workload)?;
    let mut results: Vec<(String, Result<BenchResult, String>)> = Vec::new();
    for backend in &a.backends {
        let mut w = shared.workload(&a.workload);
        w.backend = *backend;
        let name = value_name(backend);
        eprintln!("== {name}");
        let result = bench(&w, &protocol, true).map_err(|e| format!("{e:#}"));
        shared.ran(&name);
        results.push((name, result));
    }
    // Each backend's whole label first (it can be long: a fallback says why), then the
    // table, whose cells stay short enough to fit the console.
    println!("ran on:");
    for (backend, result) in &results {
        let what = match result {
            Ok(r) => cell(&r.backend_label),
            Err(reason) => format!("not available: {}", label(reason, PROSE_CHARS)),
        };
        print!("{}", crate::console::hang(&format!("  {backend:<5} "), &block(&what)));
    }
    let mut table = crate::console::table();
    table.set_header([
        "requested",
        "ran on",
        "ms/step median",
        "run spread (min–max)",
        "samples/s",
        "first step ms",
        "final loss",
        "held-out",
    ]);
    for (backend, result) in &results {
        match result {
            Ok(r) => {
                let s = &r.summary;
                let held = r.runs.iter().find_map(|run| run.held_out.clone());
                table.add_row([
                    backend.clone(),
                    ran_on(r),
                    format!("{:.3}", s.run_medians_ms.median),
                    format!("{:.3}–{:.3}", s.run_medians_ms.min, s.run_medians_ms.max),
                    format!("{:.0}", s.samples_per_s),
                    format!("{:.1}", r.runs[0].first_step_ms),
                    r.runs.last().and_then(|x| x.final_loss).map_or("-".into(), |l| format!("{l:.4}")),
                    held.map_or("-".into(), |(n, v)| format!("{n} {v:.4}")),
                ]);
            }
            Err(_) => {
                let mut row = vec![backend.clone(), "none".to_owned()];
                row.extend(std::iter::repeat_n("-".to_owned(), 6));
                table.add_row(row);
            }
        }
    }
    println!("{}", block(&table.to_string()));
    let weights = start::same_weights(results.iter().filter_map(|(name, r)| Some((name.as_str(), r.as_ref().ok()?))))?;
    if let Some(line) = shared.describe() {
        print!("{}", crate::console::fit(&format!("{}\n", block(&line))));
    }
    if let Some(weights) = weights {
        crate::console::say(&format!("starting weights: the same on every backend ({weights})"));
    }
    let ok: Vec<&BenchResult> = results.iter().filter_map(|(_, r)| r.as_ref().ok()).collect();
    if ok.is_empty() {
        bail!("none of the backends asked for ({}) is available here: nothing was measured", names(&results));
    }
    if let Some((first, rest)) = ok.split_first() {
        for other in rest {
            let c = compare(first, other, &expand(&["backend".to_owned()]), a.threshold)?;
            crate::console::say(&format!(
                "{} vs {}: {}",
                cell(&other.backend_label),
                cell(&first.backend_label),
                verdict(&c)
            ));
        }
    }
    if results.iter().any(|(_, r)| r.is_err()) {
        println!("a backend that is not available is reported, not replaced by another");
    }
    Ok(ExitCode::SUCCESS)
}

/// The backend a result ran on, short: its kind, and `FALLBACK` when it is not the one
/// asked for (the whole label is printed above the table).
fn ran_on(r: &BenchResult) -> String {
    let kind = r.fingerprint.get("backend").and_then(|v| v.as_str()).unwrap_or("?");
    let fallback = r.fingerprint.get("fallback").and_then(serde_json::Value::as_bool).unwrap_or(false);
    if fallback {
        format!("{kind} (FALLBACK)")
    } else {
        kind.to_owned()
    }
}

/// The backends asked for, as `cuda, wgpu`.
fn names(results: &[(String, Result<BenchResult, String>)]) -> String {
    results.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>().join(", ")
}
