//! `steptrace train`: a profiled run, then its summary.

use std::fs::OpenOptions;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{bail, Context};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use indicatif::{ProgressBar, ProgressStyle};
use steptrace::{Profiler, Schedule};
use steptrace_burn::backend;
use steptrace_burn::RunSummary;

use crate::args::{Detail, TrainArgs};
use crate::convert::{command_line, config, device_activity, INTERNAL_TARGETS};
use steptrace_burn::device::DeviceSetup;

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

    let selection = cfg.select()?.clone();
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
        let mode = device_activity(a.device_activity);
        let device = steptrace_burn::device::setup(mode, &selection);
        let described = device.describe(mode);
        println!("device activity: {described}");
        let mut builder = Profiler::builder(schedule).out_dir(&a.out).worker(worker);
        builder = match device {
            DeviceSetup::Collector(collector, _) => builder.device_collector(collector),
            DeviceSetup::NotObserved(reason) => builder.device_not_observed(reason),
        };
        if cfg.internals {
            builder = builder.targets(INTERNAL_TARGETS.iter().copied());
        }
        let profiler = builder.try_install()?;
        for warning in profiler.warnings() {
            eprintln!("steptrace: warning: {warning}");
        }
        // What a report needs to propose the exact next experiment.
        let command = command_line(&a);
        profiler.update_manifest(|m| {
            m.command = Some(command);
            m.device_activity = Some(mode.to_string());
        });
        Some(profiler)
    };

    let bar = if a.quiet { ProgressBar::hidden() } else { ProgressBar::new(cfg.steps) };
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} steps  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let batch = cfg.batch_size as f64;
    let summary = steptrace_burn::run(&cfg, &cache, profiler, &mut |record| {
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
    for trace in &s.traces {
        for warning in &trace.label_warnings {
            eprintln!("steptrace: warning: {}: {warning}", trace.path.display());
        }
    }
    for err in &s.trace_errors {
        println!("trace error: {err}");
    }
}
