//! `steptrace bench`: the workload measured outside the profiler (or with
//! it, to measure its overhead), run after run, each run a fresh `steptrace
//! train` process from the same starting state. With `--profile active`
//! each run's traces are read back for its kernels; `--profile
//! interleaved` measures the profiler's cost inside each process
//! ([`overhead`]).

mod device;
mod overhead;

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context};
use serde_json::{json, Value};
use steptrace::analysis::{Report, ReportOptions};
use steptrace::bench::{BenchResult, Fingerprint, KernelRecord, RunRecord};
use steptrace_workload::Trained;

use crate::args::{value_name, BenchArgs, ModelArg, ProfileMode, WorkloadArgs};
use crate::convert::{config, init_label, workload_flags};

pub fn run(a: BenchArgs) -> anyhow::Result<ExitCode> {
    // Checked before any run: a result that cannot be written is known now.
    if let Some(path) = &a.json {
        check_new_result(path)?;
    }
    if a.profile == ProfileMode::Interleaved {
        return overhead::run(a);
    }
    let only = [
        ("--schedule", a.schedule.is_some()),
        ("--device-activity", a.device_activity.is_some()),
        ("--baseline", a.baseline),
        ("--threshold", a.threshold.is_some()),
    ];
    if let Some((flag, _)) = only.iter().find(|(_, given)| *given) {
        bail!("{flag} applies to --profile interleaved only (the profiler's cost measured inside each run)");
    }
    let (warmup, steps) = (a.warmup.unwrap_or(10), a.steps.unwrap_or(50));
    let protocol = Protocol { warmup, steps, runs: a.runs, profile: a.profile, trace_dir: a.trace_dir };
    let result = bench(&a.workload, &protocol, true)?;
    crate::console::out(&render(&result).trim_end());
    if let Some(path) = &a.json {
        write_new(path, &result)?;
        crate::console::out(&format!("result written to {}", path.display()));
    }
    Ok(ExitCode::SUCCESS)
}

/// How a workload is measured.
pub struct Protocol {
    pub warmup: u64,
    pub steps: u64,
    pub runs: u64,
    pub profile: ProfileMode,
    pub trace_dir: PathBuf,
}

/// Runs the workload `protocol.runs` times and gathers the result.
pub fn bench(w: &WorkloadArgs, protocol: &Protocol, progress: bool) -> anyhow::Result<BenchResult> {
    if protocol.runs == 0 || protocol.steps == 0 {
        bail!("--runs and --steps must be at least 1");
    }
    // Check the workload before starting any process.
    config(w, protocol.warmup + protocol.steps + 1)?;
    let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
    let mut runs = Vec::new();
    let mut kernels = Vec::new();
    let mut last = None;
    // `--save-init`: the first run saves the starting state, the later runs start from it.
    let mut each = w.clone();
    for i in 0..protocol.runs {
        let summary = run_once(&each, protocol, scratch.path(), i)?;
        if let Some(saved) = each.save_init.take() {
            each.init = Some(saved);
        }
        let record = record(&summary, protocol)?;
        if progress {
            eprintln!("run {}/{}: median {:.3} ms/step", i + 1, protocol.runs, record.median_ms);
        }
        if protocol.profile == ProfileMode::Active {
            kernels.push(run_kernels(&summary, w.batch as u64));
        }
        runs.push(record);
        last = Some(summary);
    }
    let summary = last.context("no run")?;
    let fp =
        fingerprint(w, &summary, &format!("{:?}", protocol.profile).to_lowercase(), protocol.warmup, protocol.steps);
    let result = BenchResult::new(fp, summary.backend.clone(), protocol.warmup, protocol.steps, w.batch as u64, runs)?;
    Ok(result.with_kernels(kernels))
}

/// Everything that defines the workload `w` as `summary` ran it, with the
/// bench's profile and step counts.
fn fingerprint(w: &WorkloadArgs, summary: &Trained, profile: &str, warmup: u64, steps: u64) -> Fingerprint {
    let mut fp = Fingerprint::new();
    for (key, value) in [
        ("model", json!(value_name(&w.model))),
        ("dataset", json!(value_name(&w.dataset))),
        ("input_shape", json!(summary.input_shape)),
        ("parameters", json!(summary.parameters)),
        ("batch", json!(w.batch)),
        ("precision", json!("f32")),
        ("seed", json!(w.seed)),
        ("lr", json!(w.lr)),
        ("mode", json!(value_name(&w.mode))),
        ("sync", json!(value_name(&w.sync))),
        ("prefetch", json!(w.prefetch)),
        ("loader_delay_ms", json!(w.loader_delay_ms)),
        ("plant_upload", json!(w.plant_upload)),
        ("mlp_hidden", json!(w.hidden)),
        ("backend", json!(summary.backend_kind)),
        ("device", json!(summary.device)),
        ("requested_backend", json!(value_name(&w.backend))),
        ("fallback", json!(summary.fallback)),
        ("fusion", cubecl_setting(summary.backend_kind.as_str())),
        ("autotune", cubecl_setting(summary.backend_kind.as_str())),
        ("autotune_level", autotune_level_setting(w, summary.backend_kind.as_str())),
        ("profile", json!(profile)),
        ("warmup", json!(warmup)),
        ("steps", json!(steps)),
        ("steptrace_version", json!(env!("CARGO_PKG_VERSION"))),
        ("burn_version", json!(steptrace_burn::BURN_VERSION)),
    ] {
        fp.insert(key.to_owned(), value);
    }
    if w.model == ModelArg::Transformer {
        fp.insert("seq_len".into(), json!(w.seq_len));
    }
    if let Some(init) = init_label(w) {
        fp.insert("init".into(), json!(init));
    }
    // Which weights the run started from (the record's weights, whatever file held them):
    // `compare --backends` checks that every backend had the same.
    if let Some(hashes) = &summary.init_hashes {
        fp.insert("init_weights_sha256".into(), json!(hashes.weights));
    }
    fp
}

/// The kernels in one run's traces (as `report` reads them), or why
/// there are none.
fn run_kernels(summary: &Trained, batch: u64) -> KernelRecord {
    if summary.traces.is_empty() {
        let why = match summary.trace_errors.as_slice() {
            [] => "the run wrote no trace".to_owned(),
            errors => format!("the run wrote no trace: {}", errors.join("; ")),
        };
        return KernelRecord::NotObserved { reason: why };
    }
    let paths: Vec<PathBuf> = summary.traces.iter().map(|t| t.path.clone()).collect();
    let options = ReportOptions { batch_size: Some(batch), ops: steptrace_burn::ops::report_ops(), peaks: None };
    let report = super::report::load::load(&paths)
        .and_then(|loaded| Report::build_loaded(loaded.files, &options).map_err(anyhow::Error::from));
    match report {
        Ok(report) => KernelRecord::from_report(&report),
        Err(err) => KernelRecord::NotObserved { reason: format!("the run's traces could not be read: {err:#}") },
    }
}

/// One `steptrace train` process; returns its summary.
fn run_once(w: &WorkloadArgs, protocol: &Protocol, scratch: &Path, index: u64) -> anyhow::Result<Trained> {
    let json_path = scratch.join(format!("run{index}.json"));
    // One extra step reads the final loss back; it is not measured.
    let total = protocol.warmup + protocol.steps + 1;
    let mut args: Vec<OsString> = Vec::new();
    match protocol.profile {
        ProfileMode::Off => args.push("--no-profile".into()),
        ProfileMode::Wait => {
            // Installed and gated: no step ever reaches the active phase.
            args.extend(["--schedule".into(), format!("wait={},active=1,repeat=1", total + 1).into()]);
            args.extend(["--out".into(), scratch.join("traces").into()]);
        }
        ProfileMode::Active => {
            args.extend(["--schedule".into(), format!("wait=0,warmup=1,active={},repeat=1", total - 1).into()]);
            args.extend(["--out".into(), protocol.trace_dir.clone().into()]);
            args.extend(["--worker".into(), format!("bench-run{index}").into()]);
        }
        ProfileMode::Interleaved => bail!("--profile interleaved runs its processes itself (bench::overhead)"),
    }
    train_process(w, total, &args, &json_path, index)
}

/// One `steptrace train` process of the workload `w` for `total` steps,
/// with `args` (the profiler's flags) and its summary written to
/// `json_path`; returns the summary. `index`, from 0, names it in errors.
fn train_process(
    w: &WorkloadArgs,
    total: u64,
    args: &[OsString],
    json_path: &Path,
    index: u64,
) -> anyhow::Result<Trained> {
    let exe = std::env::current_exe().context("cannot find the steptrace executable")?;
    let mut cmd = Command::new(exe);
    cmd.arg("train").args(workload_flags(w, true)).args(["--steps", &total.to_string()]);
    cmd.args(["--loss-every", "0", "--quiet", "--json"]).arg(json_path).args(args);
    let out = cmd.stdin(Stdio::null()).output().context("cannot start a run")?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let reason = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message");
        bail!("run {} failed: {}", index + 1, reason.trim_start_matches("steptrace: error: "));
    }
    let text = std::fs::read(json_path).with_context(|| format!("run {} wrote no summary", index + 1))?;
    serde_json::from_slice(&text).context("unreadable run summary")
}

fn record(summary: &Trained, protocol: &Protocol) -> anyhow::Result<RunRecord> {
    let measured: Vec<f64> =
        summary.steps.iter().skip(protocol.warmup as usize).take(protocol.steps as usize).map(|s| s.ms).collect();
    Ok(RunRecord {
        time_to_first_step_ms: summary.setup_ms + summary.first_step_ms,
        first_step_ms: summary.first_step_ms,
        cache: cache_word(&summary.cache).into(),
        median_ms: steptrace::analysis::median(&measured).context("no measured step")?,
        step_ms: measured,
        first_loss: summary.first_loss,
        final_loss: summary.last_loss,
        held_out: summary.held_out.clone(),
    })
}

/// Refuses a `--json` path that exists (a dangling link included: a result
/// is never written over anything) or whose folder does not exist.
pub fn check_new_result(path: &Path) -> anyhow::Result<()> {
    let text = path.as_os_str().to_string_lossy();
    if path.file_name().is_none() || text.ends_with('/') || text.ends_with(std::path::MAIN_SEPARATOR) {
        bail!("--json {} names no file: give the path of a new file (checked before any run)", path.display());
    }
    if path.symlink_metadata().is_ok() {
        bail!("{} already exists; steptrace never overwrites a result: choose another --json path", path.display());
    }
    let folder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !folder.is_dir() {
        let why = if folder.exists() { "is not a folder" } else { "does not exist" };
        bail!(
            "cannot write the result to {}: the folder {} {why} (checked before any run; create it or choose another \
             --json path)",
            path.display(),
            folder.display()
        );
    }
    Ok(())
}

pub fn write_new(path: &Path, value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| format!("cannot create {} (an existing file is never overwritten)", path.display()))?;
    serde_json::to_writer_pretty(&mut file, value)?;
    writeln!(file)?;
    Ok(())
}

pub fn render(r: &BenchResult) -> String {
    let s = &r.summary;
    let mut table = crate::console::table();
    table.set_header(["", "value"]);
    let stats = |x: &steptrace::bench::StatsRecord| {
        format!("median {:.3}  min {:.3}  max {:.3}  std {:.3}  IQR {:.3}", x.median, x.min, x.max, x.std, x.iqr)
    };
    table.add_row(["backend".to_owned(), r.backend_label.clone()]);
    table.add_row([
        "protocol".to_owned(),
        format!("{} warm-up + {} measured steps, {} runs", r.warmup, r.steps, r.runs.len()),
    ]);
    table.add_row(["ms/step, run medians".to_owned(), stats(&s.run_medians_ms)]);
    table.add_row(["ms/step, every step".to_owned(), stats(&s.all_steps_ms)]);
    table.add_row(["samples/s".to_owned(), format!("{:.0} (batch {} at the median)", s.samples_per_s, r.batch_size)]);
    table.add_row(["time to first step, ms".to_owned(), stats(&s.time_to_first_step_ms)]);
    let first: Vec<String> = r.runs.iter().map(|run| format!("{:.1} ({})", run.first_step_ms, run.cache)).collect();
    table.add_row(["first step, ms".to_owned(), first.join(", ")]);
    let medians: Vec<String> = r.runs.iter().map(|run| format!("{:.3}", run.median_ms)).collect();
    table.add_row(["run medians, ms".to_owned(), medians.join(", ")]);
    let loss = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |l| format!("{l:.4}"));
    let finals: Vec<String> = r.runs.iter().map(|run| loss(run.final_loss)).collect();
    table.add_row(["final loss per run".to_owned(), finals.join(", ")]);
    if let Some((name, _)) = r.runs.first().and_then(|run| run.held_out.clone()) {
        let values: Vec<String> =
            r.runs.iter().filter_map(|run| run.held_out.as_ref().map(|h| format!("{:.4}", h.1))).collect();
        table.add_row([format!("held-out {name}"), values.join(", ")]);
    }
    table.add_row([
        "same starting state".to_owned(),
        if s.same_first_loss {
            format!("yes: every run's first loss is {}", loss(r.runs[0].first_loss))
        } else {
            "NO: first losses differ between runs".to_owned()
        },
    ]);
    if !r.kernels.is_empty() {
        let per_run: Vec<String> = r
            .kernels
            .iter()
            .map(|k| match k {
                KernelRecord::Observed(s) => {
                    format!("device busy {:.4} ms/step, {:.1} kernels/step", s.busy_ms_per_step, s.kernels_per_step)
                }
                KernelRecord::NotObserved { reason } => format!("not observed: {reason}"),
            })
            .collect();
        let shown = if per_run.windows(2).all(|w| w[0] == w[1]) && per_run.len() > 1 {
            format!("every run: {}", per_run[0])
        } else {
            per_run.join(", ")
        };
        table.add_row(["kernels per run".to_owned(), shown]);
    }
    let mut out = format!("{table}\n");
    if r.fingerprint.get("fallback").and_then(Value::as_bool) == Some(true) {
        out.push_str("NOTE: a fallback backend: these figures do not describe a GPU.\n");
    }
    out
}

/// `warm`, `partly warm`, `cold` or `not applicable`, from a run's cache line
/// (`DIR (warm)`, `DIR (partly warm: ...)`, `DIR (cold: ...)`, or why it is
/// not known, which counts as cold: nothing says it was warm).
pub(crate) fn cache_word(cache: &str) -> &'static str {
    if cache.contains("(warm)") {
        "warm"
    } else if cache.contains("(partly warm") {
        "partly warm"
    } else if cache.starts_with("not applicable") {
        "not applicable"
    } else {
        "cold"
    }
}

/// The `--autotune-level` asked for, on cubecl backends; without the flag,
/// cubecl's own configuration (or its default) decides.
fn autotune_level_setting(w: &WorkloadArgs, backend_kind: &str) -> serde_json::Value {
    match (&w.autotune_level, backend_kind) {
        (_, "cpu") => json!(steptrace_burn::backend::BackendKind::NOT_CUBECL),
        (Some(level), _) => json!(value_name(level)),
        (None, _) => json!("not set: cubecl's config or default"),
    }
}

/// `true` for fusion and autotune on cubecl backends; "not applicable" on
/// burn-flex, which has neither.
fn cubecl_setting(backend_kind: &str) -> serde_json::Value {
    if backend_kind == "cpu" {
        json!(steptrace_burn::backend::BackendKind::NOT_CUBECL)
    } else {
        json!(true)
    }
}

#[cfg(test)]
mod tests {
    use super::cache_word;

    #[test]
    fn cache_lines_map_to_their_state() {
        assert_eq!(cache_word("/tmp/c (warm)"), "warm");
        assert_eq!(cache_word("/tmp/c (partly warm: 8 of 18 kernels compiled, 3 autotune runs)"), "partly warm");
        assert_eq!(cache_word("/tmp/c (cold: the first steps include compilation and autotune)"), "cold");
        assert_eq!(cache_word(steptrace_burn::backend::BackendKind::NOT_CUBECL), "not applicable");
        // Unknown is not warm.
        assert_eq!(cache_word("not known: the run ended before step 0"), "cold");
    }
}
