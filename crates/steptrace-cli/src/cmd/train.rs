//! `steptrace train`: a profiled run, then its summary.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
use indicatif::{ProgressBar, ProgressStyle};
use steptrace::format::Figure;
use steptrace::Schedule;
use steptrace_burn::backend;
use steptrace_burn::console::{said_above, written_lines};
use steptrace_burn::signals::{self, Signals};
use steptrace_burn::{Console, Profiling, RunSummary, Session, SignalHandling};

use crate::args::{Detail, TrainArgs};
use crate::console::{self, say};
use crate::convert::{command_line, config, device_activity, INTERNAL_TARGETS};

/// Runs `steptrace train`. `signals` are the handlers `main` installed before parsing the
/// arguments (installed here when absent).
pub fn run(a: TrainArgs, signals: Option<std::io::Result<Signals>>) -> anyhow::Result<ExitCode> {
    // Created first (exclusively), so that an unusable path fails before anything else; removed
    // again if the run fails, unless a refusal or a failure report is written to it.
    if a.json.as_ref().is_some_and(|json| same_path(json, &a.out)) {
        bail!(
            "--json {} names the folder the traces go to (--out): give the summary a file of its own",
            a.out.display()
        );
    }
    let json = match &a.json {
        Some(path) => Some(JsonOut::create(path)?),
        None => None,
    };
    let mut cfg = match config(&a.workload, a.steps) {
        Ok(cfg) => cfg,
        Err(err) => return Err(refused(err, json)),
    };
    cfg.internals = matches!(a.detail, Detail::Internals);
    cfg.memory = a.memory;
    cfg.memory_phases = a.memory_phases;
    cfg.notes = a.notes.clone();
    cfg.loss_every = a.loss_every;
    let schedule: Schedule = a.schedule.parse()?;
    if a.no_profile && schedule.is_on_demand() {
        bail!(
            "--schedule on-demand records when `steptrace capture` asks, and --no-profile records nothing: drop one \
             of them"
        );
    }
    if let Err(invalid) = cfg.validate() {
        return Err(refused(steptrace_workload::Error::Config(invalid).into(), json));
    }
    let signals = signals.unwrap_or_else(signals::install).context("cannot install the Ctrl-C handler")?;
    cfg.stop = Some(signals.stop.clone());

    let selection = cfg.select()?.clone();
    // A run whose schedule records none of its steps is said up front, not discovered after
    // (once the backend is known: a run that cannot start says that first).
    let records_nothing =
        !a.no_profile && !schedule.is_on_demand() && first_recorded(&schedule).is_none_or(|first| first >= cfg.steps);
    if records_nothing {
        console::warn(&format!(
            "steptrace: warning: the schedule {} records none of this run's {} steps (its first recorded step \
             is {}): no trace will be written; run more steps (--steps) or choose a shorter schedule (--schedule)",
            a.schedule,
            cfg.steps,
            first_recorded(&schedule).map_or_else(|| "never".to_owned(), |s| s.to_string()),
        ));
    }
    // The session says the backend, the cache, the sync policy and the device activity, and
    // installs the profiler the one way every program gets (steptrace_burn::Session); the
    // summary below is this command's.
    let worker = a.worker.clone().unwrap_or_else(|| format!("{}-{}", cfg.model, selection.kind));
    let mut builder = Session::builder()
        .schedule(schedule)
        .backend(selection.clone())
        .cache(cfg.cache.clone())
        .console(Console::Start)
        .signals(SignalHandling::Given(signals.clone()))
        .out_dir(&a.out)
        .worker(worker)
        .device_activity(device_activity(a.device_activity, a.detail))
        .command(command_line(&a));
    if a.no_profile {
        builder = builder.profiling(Profiling::Off);
    }
    if cfg.internals {
        builder = builder.configure(|b| b.targets(INTERNAL_TARGETS.iter().copied()));
    }

    let bar = if a.quiet { ProgressBar::hidden() } else { ProgressBar::new(cfg.steps) };
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} steps  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    if selection.kind == backend::BackendKind::Cpu {
        // A failed host allocation ends the process from inside the allocator: the same
        // report and --json as a failed step's, said from there.
        let (bar, json) = (bar.clone(), json.clone());
        steptrace_burn::failure::host_oom::on_failure(move |failure| {
            bar.finish_and_clear();
            failure.print();
            if let Some(json) = json.clone() {
                if let Err(err) = json.write(&super::failure::FailedRun::of(failure), "the failure report") {
                    console::warn(&format!("steptrace: error: {err:#}"));
                }
            }
            console::warn(&format!("steptrace: error: {failure}"));
        });
    }
    let batch = cfg.batch_size as f64;
    let mut startup = StartupLine::start(&bar);
    let trained = steptrace_workload::train(&cfg, builder, &mut |record| {
        startup.stop();
        bar.set_message(format!(
            "step {} {:.1} ms ({:.0} samples/s){}",
            record.step,
            record.ms,
            batch / (record.ms / 1000.0),
            record.loss.map(|l| format!("  loss {l:.4}")).unwrap_or_default()
        ));
        bar.inc(1);
    });
    startup.stop();
    bar.finish_and_clear();
    signals.announce();
    let trained = match trained {
        Ok(trained) => trained,
        Err(steptrace_workload::Error::Session(steptrace_burn::Error::StepFailed(failure))) => {
            // What was saved and, for an out-of-memory, why: before the error line.
            failure.print();
            if let Some(json) = json {
                json.write(&super::failure::FailedRun::of(&failure), "the failure report")?;
            }
            return Err(anyhow::Error::new(*failure));
        }
        Err(err) => return Err(refused(err.into(), json)),
    };
    let summary = &trained.summary;
    for warning in &trained.warnings {
        console::warn(&format!("steptrace: warning: {warning}"));
    }
    if schedule.is_on_demand() && !a.no_profile && summary.traces.is_empty() {
        say("no trace written: no capture was asked for (steptrace capture PID)");
    }
    if let Some(why) = steptrace::settings::why_no_trace().filter(|_| !a.no_profile && summary.traces.is_empty()) {
        say(&format!("no trace written: {why}"));
    }
    if records_nothing && summary.traces.is_empty() {
        say(&format!(
            "no trace written: the schedule {} recorded none of the {} steps that ran",
            a.schedule,
            summary.steps.len()
        ));
    }
    print_summary(summary, selection.fallback_reason.as_deref());
    if let Some(json) = json {
        json.write(&trained, "summary")?;
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

/// While step 0 runs, the progress line says what the cold start is doing: kernels compiled,
/// autotune keys decided and the one being benchmarked, and the time so far, from the
/// startup capture's live counts (`steptrace_burn::backend::startup_progress`), polled four
/// times a second on a thread of its own (the step's threads are not touched).
struct StartupLine {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StartupLine {
    fn start(bar: &ProgressBar) -> StartupLine {
        let done = Arc::new(AtomicBool::new(false));
        let thread = (!bar.is_hidden())
            .then(|| {
                let (bar, done) = (bar.clone(), Arc::clone(&done));
                std::thread::Builder::new()
                    .name("steptrace-startup-line".into())
                    .spawn(move || {
                        while !done.load(Ordering::Relaxed) {
                            if let Some(progress) = backend::startup_progress() {
                                bar.set_message(steptrace_burn::console::startup_message(&progress));
                            }
                            std::thread::park_timeout(Duration::from_millis(250));
                        }
                    })
                    .ok()
            })
            .flatten();
        StartupLine { done, thread }
    }

    /// Stops the updates (at the end of step 0, or of the run).
    fn stop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

/// The first step `schedule` records, if any: it lies within the first cycle after the
/// skipped steps.
fn first_recorded(schedule: &Schedule) -> Option<u64> {
    let start = schedule.skip_first();
    let end = start.saturating_add(schedule.cycle_len()).saturating_add(1);
    (start..end).find(|&step| schedule.action(step).records())
}

/// `err`, after writing `--json` where the run was refused before its first step for the host
/// memory it would need (no step ran: `--json` says so, as it says what a failed step left).
fn refused(err: anyhow::Error, json: Option<JsonOut>) -> anyhow::Error {
    let too_large = err.chain().find_map(|cause| {
        let config = cause.downcast_ref::<steptrace_workload::ConfigError>().or(
            match cause.downcast_ref::<steptrace_workload::Error>() {
                Some(steptrace_workload::Error::Config(c)) => Some(c),
                _ => None,
            },
        )?;
        matches!(config, steptrace_workload::ConfigError::TooLarge { .. }).then_some(config)
    });
    if let (Some(json), Some(too_large)) = (json, too_large) {
        let error = err.to_string();
        if let Err(e) = json.write(&super::failure::RefusedRun::of(&error, too_large), "the refusal") {
            return e.context(error);
        }
    }
    err
}

/// The `--json` file: checked before the run (created, then removed again:
/// an unusable path fails before training, not after it), written after it
/// under the same never-overwrite rule.
#[derive(Clone)]
struct JsonOut {
    path: PathBuf,
}

impl JsonOut {
    fn create(path: &Path) -> anyhow::Result<JsonOut> {
        open_new(path)?;
        std::fs::remove_file(path).with_context(|| format!("cannot remove the probe of --json {}", path.display()))?;
        Ok(JsonOut { path: path.to_owned() })
    }

    fn write(self, value: &impl serde::Serialize, what: &str) -> anyhow::Result<()> {
        let mut file = open_new(&self.path)?;
        let written = serde_json::to_writer_pretty(&mut file, value)
            .map_err(anyhow::Error::from)
            .and_then(|()| writeln!(file).map_err(anyhow::Error::from))
            .and_then(|()| file.sync_all().map_err(anyhow::Error::from));
        if let Err(err) = written {
            drop(file);
            let _ = std::fs::remove_file(&self.path);
            return Err(err.context(format!("cannot write the {what} to {} (nothing was kept)", self.path.display())));
        }
        say(&format!("{what} written to {}", self.path.display()));
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

fn print_summary(s: &RunSummary, reason: Option<&str>) {
    // The backend label is printed again above the table, its fallback reason (which the
    // first line gave in full) pointed to rather than repeated.
    say(&format!("backend: {}", said_above(&s.backend, reason)));
    let mut table = Table::new();
    table
        .load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(console::WIDTH as u16)
        .set_header(["", "value"]);
    table.add_row(["mode".to_owned(), s.mode.to_string()]);
    table.add_row(["sync".to_owned(), s.sync.to_string()]);
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
    crate::console::out(&table);
    match &s.cold_start {
        Some(Figure::Known(cold)) => {
            for line in cold.lines() {
                say(&format!("cold start: {line}"));
            }
        }
        Some(Figure::Absent(why)) => say(&format!("cold start: {why}")),
        None => {}
    }
    say(&format!("sync {}: {}", s.sync, s.sync.meaning()));
    say("unit: ms/step are wall-clock step windows (ProfilerStep boundaries); samples/s = batch / median step; startup is kept apart from the steady figures.");
    for anomaly in &s.anomalies {
        say(&format!("after startup, step {}: {}", anomaly.step, anomaly.what));
    }
    written_lines(&s.traces, &s.trace_errors);
}

/// Whether two paths name one place: the same text, or (where both exist) the same file.
fn same_path(a: &Path, b: &Path) -> bool {
    a == b || matches!((std::fs::canonicalize(a), std::fs::canonicalize(b)), (Ok(x), Ok(y)) if x == y)
}
