//! `steptrace train`: a profiled run, then its summary.

use std::fs::OpenOptions;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{bail, Context};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use indicatif::{ProgressBar, ProgressStyle};
use steptrace::{Profiler, Schedule};
use steptrace_burn::backend::{self, BackendChoice, CacheConfig};
use steptrace_burn::{Mode, RunConfig, RunSummary, SyncPolicy};

use crate::args::{Detail, TrainArgs, WorkloadArgs};

/// Targets of burn's and cubecl's internal spans.
const INTERNAL_TARGETS: &[&str] = &["cubecl=trace", "burn=trace"];

/// The run configuration of a workload.
pub fn config(w: &WorkloadArgs, steps: u64) -> anyhow::Result<RunConfig> {
    let mut cfg = RunConfig::new();
    cfg.model = w.model.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
    cfg.dataset = w.dataset.clone();
    cfg.data_dir = w.data_dir.clone();
    cfg.backend = w.backend.parse::<BackendChoice>().map_err(|e| anyhow::anyhow!("{e}"))?;
    cfg.steps = steps;
    cfg.batch_size = w.batch;
    cfg.seq_len = w.seq_len;
    cfg.learning_rate = w.lr;
    cfg.seed = w.seed;
    cfg.sync = w.sync.parse::<SyncPolicy>().map_err(anyhow::Error::msg)?;
    cfg.mode = w.mode.parse::<Mode>().map_err(anyhow::Error::msg)?;
    cfg.prefetch = w.prefetch;
    cfg.loader_delay_ms = w.loader_delay_ms;
    cfg.synthetic_samples = w.synthetic_samples;
    cfg.synthetic_shape = parse_shape(&w.synthetic_shape)?;
    let mut cache = CacheConfig::default();
    if let Some(dir) = &w.cache_dir {
        cache.dir = dir.clone();
    }
    cache.enabled = !w.no_cache;
    cfg.cache = cache;
    cfg.validate().map_err(anyhow::Error::msg)?;
    Ok(cfg)
}

/// The workload as command-line flags. Paths are included only when
/// `with_paths` (they are private: kept out of manifests).
pub fn workload_flags(w: &WorkloadArgs, with_paths: bool) -> Vec<String> {
    let mut flags = Vec::new();
    let mut push = |k: &str, v: String| {
        flags.push(k.to_owned());
        flags.push(v);
    };
    push("--model", w.model.clone());
    push("--dataset", w.dataset.clone());
    push("--backend", w.backend.clone());
    push("--batch", w.batch.to_string());
    push("--lr", w.lr.to_string());
    push("--seed", w.seed.to_string());
    push("--sync", w.sync.clone());
    push("--mode", w.mode.clone());
    push("--prefetch", w.prefetch.to_string());
    if w.model == "transformer" {
        push("--seq-len", w.seq_len.to_string());
    }
    if w.loader_delay_ms > 0 {
        push("--loader-delay-ms", w.loader_delay_ms.to_string());
    }
    if w.dataset == "synthetic" {
        push("--synthetic-samples", w.synthetic_samples.to_string());
        push("--synthetic-shape", w.synthetic_shape.clone());
    }
    if with_paths {
        if let Some(dir) = &w.data_dir {
            push("--data-dir", dir.display().to_string());
        }
        if let Some(dir) = &w.cache_dir {
            push("--cache-dir", dir.display().to_string());
        }
    }
    if w.no_cache {
        flags.push("--no-cache".into());
    }
    flags
}

/// The `steptrace train` command that repeats this run's workload (paths
/// left out: they are private and not part of the workload).
fn command_line(a: &TrainArgs) -> String {
    let mut cmd = format!(
        "steptrace train {} --steps {} --schedule {}",
        workload_flags(&a.workload, false).join(" "),
        a.steps,
        a.schedule
    );
    if matches!(a.detail, Detail::Internals) {
        cmd.push_str(" --detail internals");
    }
    cmd
}

fn parse_shape(text: &str) -> anyhow::Result<[usize; 3]> {
    let parts: Vec<usize> = text
        .split(',')
        .map(|p| p.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("--synthetic-shape must be C,H,W (got `{text}`)"))?;
    match parts.as_slice() {
        [c, h, w] if *c > 0 && *h > 0 && *w > 0 => Ok([*c, *h, *w]),
        _ => bail!("--synthetic-shape must be three positive numbers C,H,W (got `{text}`)"),
    }
}

pub fn run(a: TrainArgs) -> anyhow::Result<ExitCode> {
    let mut cfg = config(&a.workload, a.steps)?;
    cfg.internals = matches!(a.detail, Detail::Internals);
    cfg.memory = a.memory;
    cfg.notes = a.notes.clone();
    cfg.loss_every = a.loss_every;
    let schedule: Schedule = a.schedule.parse()?;
    if let Some(path) = a.json.as_ref().filter(|p| p.exists()) {
        bail!("{} already exists; steptrace never overwrites a result: choose another --json path", path.display());
    }

    let selection = backend::select(cfg.backend)?;
    println!("backend: {}", selection.label());
    if selection.is_fallback() {
        println!("NOTE: this run is NOT on CUDA: its timings describe {} and must not be read as a GPU analysis.", selection.kind);
    }
    let cache = backend::configure_cubecl_cache(&cfg.cache);
    println!(
        "cubecl cache: {} ({})",
        steptrace_burn::home_relative(&cache.dir),
        if cache.warm { "warm" } else { "cold: the first steps include compilation and autotune" }
    );
    println!("sync: {} ({})", cfg.sync, cfg.sync.meaning());

    let profiler = if a.no_profile {
        None
    } else {
        let worker = a.worker.clone().unwrap_or_else(|| format!("{}-{}", cfg.model, selection.kind));
        let mut builder = Profiler::builder(schedule).out_dir(&a.out).worker(worker);
        if cfg.internals {
            builder = builder.targets(INTERNAL_TARGETS.iter().copied());
        }
        let profiler = builder.try_install()?;
        // What a report needs to propose the exact next experiment.
        profiler.set_manifest("command", command_line(&a));
        Some(profiler)
    };

    let bar = if a.quiet { ProgressBar::hidden() } else { ProgressBar::new(cfg.steps) };
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} steps  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let batch = cfg.batch_size as f64;
    let summary = steptrace_burn::run(&cfg, &selection, &cache, profiler, &mut |record| {
        bar.set_message(format!(
            "step {} {:.1} ms ({:.0} samples/s){}",
            record.step,
            record.ms,
            batch / (record.ms / 1000.0),
            record.loss.map(|l| format!("  loss {l:.4}")).unwrap_or_default()
        ));
        bar.inc(1);
    });
    bar.finish_and_clear();
    let summary = summary?;
    print_summary(&summary);
    if let Some(path) = &a.json {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        serde_json::to_writer_pretty(&mut file, &summary)?;
        writeln!(file)?;
        println!("summary written to {}", path.display());
    }
    Ok(if summary.trace_errors.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn print_summary(s: &RunSummary) {
    let mut table = Table::new();
    table.load_style(UTF8_FULL_CONDENSED).set_header(["", "value"]);
    table.add_row(["backend", s.backend.as_str()]);
    table.add_row(["mode", s.mode.as_str()]);
    table.add_row(["sync", s.sync.split(':').next().unwrap_or_default()]);
    table.add_row(["setup (data, loader, model)", &format!("{:.1} ms", s.setup_ms)]);
    if let Some(load) = s.model_load_ms {
        table.add_row(["model.load (before the first request)".to_owned(), format!("{load:.1} ms")]);
    }
    table.add_row(["first step (startup)", &format!("{:.1} ms", s.first_step_ms)]);
    match &s.steady_ms {
        Some(st) => {
            table.add_row([
                format!("steady ms/step (steps {}.., n={})", s.startup_steps, st.n),
                format!("median {:.2}  p90 {:.2}  min {:.2}  max {:.2}", st.median, st.p90, st.min, st.max),
            ]);
            if let Some(rate) = s.steady_samples_per_s {
                table.add_row(["steady samples/s (batch / median step)".to_owned(), format!("{rate:.0}")]);
            }
        }
        None => {
            table.add_row(["steady ms/step", "not observed: the run has only startup steps"]);
        }
    }
    if let (Some(a), Some(b)) = (s.first_loss, s.last_loss) {
        table.add_row(["loss (first read -> last read)".to_owned(), format!("{a:.4} -> {b:.4}")]);
    }
    if let Some((name, value)) = &s.held_out {
        table.add_row([format!("held-out {name}"), format!("{value:.4}")]);
    }
    table.add_row(["cubecl cache", s.cache.as_str()]);
    if let Some(memory) = &s.memory {
        table.add_row(["device memory", memory.as_str()]);
    }
    if let Some(per_step) = s.trace_bytes_per_step() {
        table.add_row(["trace bytes per recorded step".to_owned(), format!("{per_step:.0}")]);
    }
    println!("{table}");
    println!("sync {}", s.sync);
    println!("unit: ms/step are wall-clock step windows (ProfilerStep boundaries); samples/s = batch / median step; startup is kept apart from the steady figures.");
    for anomaly in &s.anomalies {
        println!("after startup, step {}: {}", anomaly.step, anomaly.what);
    }
    for trace in &s.traces {
        println!(
            "wrote {} (cycle {}, steps {:?}{})",
            trace.path.display(),
            trace.cycle,
            trace.steps,
            if trace.partial { ", PARTIAL" } else { "" }
        );
    }
    for err in &s.trace_errors {
        println!("trace error: {err}");
    }
}
