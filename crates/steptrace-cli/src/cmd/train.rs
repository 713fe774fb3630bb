//! `steptrace train`: a profiled run, then its summary.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
use indicatif::{ProgressBar, ProgressStyle};
use steptrace::format::Figure;
use steptrace::{Profiler, Schedule};
use steptrace_burn::backend;
use steptrace_burn::RunSummary;

use crate::args::{Detail, TrainArgs};
use crate::console::{self, say};
use crate::convert::{command_line, config, device_activity, INTERNAL_TARGETS};
use crate::signals;
use steptrace_burn::device::DeviceSetup;

pub fn run(a: TrainArgs) -> anyhow::Result<ExitCode> {
    let mut cfg = config(&a.workload, a.steps)?;
    cfg.internals = matches!(a.detail, Detail::Internals);
    cfg.memory = a.memory;
    cfg.notes = a.notes.clone();
    cfg.loss_every = a.loss_every;
    let schedule: Schedule = a.schedule.parse()?;
    cfg.validate()?;
    // Created now (exclusively), so that an unusable path fails before
    // training rather than after it; removed again if the run fails.
    let json = match &a.json {
        Some(path) => Some(JsonOut::create(path)?),
        None => None,
    };
    let signals = signals::install().context("cannot install the Ctrl-C handler")?;
    cfg.stop = Some(signals.stop.clone());

    let selection = cfg.select()?.clone();
    say(&format!("backend: {}", selection.label()));
    if selection.is_fallback() {
        say(&format!(
            "NOTE: this run is NOT on CUDA: its timings describe {} and must not be read as a GPU analysis.",
            selection.kind
        ));
    }
    let cache = backend::configure_cubecl_cache(&cfg.cache);
    if selection.kind.uses_cubecl() {
        say(&format!(
            "cubecl cache: {} ({} files before this run; whether it is cold, partly warm or warm for this run is told after step 0, from what cubecl compiles and tunes); autotune level {} ({})",
            steptrace_burn::home_relative(&cache.dir),
            cache.files_before,
            cache.autotune_level,
            cache.autotune_level_source,
        ));
    } else {
        say(&format!("cubecl cache: {}", backend::BackendKind::NOT_CUBECL));
    }
    say(&format!("sync: {} ({})", cfg.sync, cfg.sync.meaning()));

    let profiler = if a.no_profile {
        None
    } else {
        let worker = a.worker.clone().unwrap_or_else(|| format!("{}-{}", cfg.model, selection.kind));
        let mode = device_activity(a.device_activity);
        let device = steptrace_burn::device::setup(mode, &selection);
        let described = device.describe(mode);
        say(&format!("device activity: {described}"));
        let mut builder = Profiler::builder(schedule).out_dir(&a.out).worker(worker);
        builder = match device {
            DeviceSetup::Collector(collector, _) => builder.device_collector(collector),
            DeviceSetup::NotObserved(reason) => builder.device_not_observed(reason),
        };
        if cfg.internals {
            builder = builder.targets(INTERNAL_TARGETS.iter().copied());
        }
        // Not `try_install`: its LogTracer would take the `log` slot that the run needs to
        // read cubecl's compile and autotune records (steptrace's logger forwards them alike).
        let profiler = backend::install_profiler(builder)?;
        for warning in profiler.warnings() {
            console::warn(&format!("steptrace: warning: {warning}"));
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
    signals.announce();
    let summary = summary?;
    print_summary(&summary);
    if let Some(json) = json {
        json.write(&summary)?;
    }
    if let Some(why) = &summary.interrupted {
        say(&format!("run {why}: {} of {} steps ran", summary.steps.len(), cfg.steps));
    }
    let signal = signals.received();
    Ok(if signal != 0 {
        ExitCode::from(signals::exit_code(signal))
    } else if summary.trace_errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The `--json` file: checked before the run (created, then removed again:
/// an unusable path fails before training, not after it), written after it
/// under the same never-overwrite rule.
struct JsonOut {
    path: PathBuf,
}

impl JsonOut {
    fn create(path: &Path) -> anyhow::Result<JsonOut> {
        open_new(path)?;
        std::fs::remove_file(path).with_context(|| format!("cannot remove the probe of --json {}", path.display()))?;
        Ok(JsonOut { path: path.to_owned() })
    }

    fn write(self, summary: &RunSummary) -> anyhow::Result<()> {
        let mut file = open_new(&self.path)?;
        let written = serde_json::to_writer_pretty(&mut file, summary)
            .map_err(anyhow::Error::from)
            .and_then(|()| writeln!(file).map_err(anyhow::Error::from))
            .and_then(|()| file.sync_all().map_err(anyhow::Error::from));
        if let Err(err) = written {
            drop(file);
            let _ = std::fs::remove_file(&self.path);
            return Err(err.context(format!("cannot write the summary to {} (nothing was kept)", self.path.display())));
        }
        say(&format!("summary written to {}", self.path.display()));
        Ok(())
    }
}

fn open_new(path: &Path) -> anyhow::Result<File> {
    match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(file) => Ok(file),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            bail!("{} already exists; steptrace never overwrites a result: choose another --json path", path.display())
        }
        Err(e) => Err(e).with_context(|| format!("cannot create --json {}", path.display())),
    }
}

fn print_summary(s: &RunSummary) {
    // The backend label can be hundreds of characters long (a fallback names every reason):
    // it is printed once above the table, wrapped, so that the table stays narrow.
    say(&format!("backend: {}", s.backend));
    let mut table = Table::new();
    table
        .load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(console::WIDTH as u16)
        .set_header(["", "value"]);
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
    match &s.cold_start {
        Some(Figure::Known(cold)) => {
            for line in cold.lines() {
                say(&format!("cold start: {line}"));
            }
        }
        Some(Figure::Absent(why)) => say(&format!("cold start: {why}")),
        None => {}
    }
    say(&format!("sync {}", s.sync));
    say("unit: ms/step are wall-clock step windows (ProfilerStep boundaries); samples/s = batch / median step; startup is kept apart from the steady figures.");
    for anomaly in &s.anomalies {
        say(&format!("after startup, step {}: {}", anomaly.step, anomaly.what));
    }
    for trace in &s.traces {
        say(&format!(
            "wrote {} (cycle {}, steps {}{})",
            trace.path.display(),
            trace.cycle,
            steps_text(&trace.steps),
            if trace.partial { ", PARTIAL" } else { "" }
        ));
    }
    for trace in &s.traces {
        for warning in &trace.label_warnings {
            console::warn(&format!("steptrace: warning: {}: {warning}", trace.path.display()));
        }
    }
    for err in &s.trace_errors {
        say(&format!("trace error: {err}"));
    }
}

/// A list of steps for the console: short lists in full (`[12, 13, 14]`),
/// long runs of consecutive steps as a range with their count.
fn steps_text(steps: &[u64]) -> String {
    const SHOWN: usize = 8;
    let consecutive = steps.windows(2).all(|w| w[0].checked_add(1) == Some(w[1]));
    match steps {
        [] => "[]".to_owned(),
        _ if steps.len() <= SHOWN => format!("{steps:?}"),
        [first, .., last] if consecutive => format!("{first}..={last} ({} steps)", steps.len()),
        [first, second, .., last] => format!("[{first}, {second}, …, {last}] ({} steps)", steps.len()),
        _ => format!("{steps:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::steps_text;

    #[test]
    fn long_step_lists_are_shortened_with_their_count() {
        assert_eq!(steps_text(&[12, 13, 14]), "[12, 13, 14]");
        assert_eq!(steps_text(&(1..=5364).collect::<Vec<_>>()), "1..=5364 (5364 steps)");
        let gaps: Vec<u64> = (0..20).map(|i| i * 2).collect();
        assert_eq!(steps_text(&gaps), "[0, 2, …, 38] (20 steps)");
        assert_eq!(steps_text(&[]), "[]");
    }
}
