//! A session's life: started, stepped, finished, or failed.

use std::time::Instant;

use steptrace::format::names::{instants, TARGET};
use steptrace::{Profiler, SavedTrace};

use super::builder::{install_signals, SessionBuilder, Wanted};
use super::console::{self as lines, said_above, LiveLine};
use super::Session;
use crate::backend::{self, StartupCapture};
use crate::console::{say, warn};
use crate::config::SyncPolicy;
use crate::error::{Error, Result, StepFailure};
use crate::signals::signal_name;
use crate::step::StepError;
use crate::summary::{startup_steps, Anomaly, RunSummary, Stats, StepRecord};

/// Steady steps whose median a new step is compared with, to flag it as slow.
const SLOW_WINDOW: usize = 64;

impl Session {
    /// Starts a session as `b` says ([`SessionBuilder::start`]).
    pub(crate) fn start(b: SessionBuilder) -> Result<Session> {
        let schedule = b.schedule.clone().map_err(Error::Config)?;
        let signals = install_signals(&b.signals)?;
        let (selection, own) = match b.backend {
            Wanted::Choice(choice) => (backend::select(choice)?, None),
            Wanted::Selected(selection) => (selection, None),
            Wanted::Device(device) => (backend::Selection::of_device(&device)?, Some(device)),
        };
        let console = b.console;
        if console.start() {
            lines::backend_lines(&selection);
            // Environment variables not understood, and experiments' knobs that are set.
            for line in steptrace::settings::warnings() {
                warn(&line);
            }
        }
        let cache = match b.cache_state {
            Some(state) => state,
            None => backend::configure_cubecl_cache(&b.cache),
        };
        if console.start() {
            lines::cache_line(&selection, &cache);
        }
        // The device's measured limits, when `steptrace peaks` cached them: never measured here.
        let peaks = super::peaks::find(&selection, console.start(), b.profile || b.installed.is_some());
        if console.start() {
            say(&format!("sync: {} ({})", b.sync, b.sync.meaning()));
        }
        // With a profiler the program installed, its subscriber decides (StampLayer beside it):
        // the parameters are noted, which costs nothing when no window records attribution.
        let attributed = selection.kind.uses_cubecl()
            && (b.installed.is_some() || (b.profile && b.device_activity == crate::device::DeviceActivityMode::Attributed));
        let profiler = if let Some(profiler) = b.installed {
            for (key, value) in b.manifest {
                let _ = profiler.set_manifest(key, value);
            }
            Some(profiler)
        } else if b.profile {
            let mode = b.device_activity;
            let setup = crate::device::setup_on(mode, &selection, own.as_ref());
            if console.start() {
                let described = setup.describe(mode);
                say(&format!("device activity: {}", said_above(&described, selection.fallback_reason.as_deref())));
            }
            let mut builder = Profiler::builder(schedule).out_dir(&b.out_dir);
            if let Some(worker) = &b.worker {
                builder = builder.worker(worker.clone());
            }
            builder = match setup {
                crate::device::DeviceSetup::Collector(collector, _) => builder.device_collector(collector),
                crate::device::DeviceSetup::NotObserved(reason) => builder.device_not_observed(reason),
            };
            for (key, value) in b.manifest {
                builder = builder.manifest(key, value);
            }
            for change in b.configure {
                builder = change(builder);
            }
            let profiler = backend::install_profiler(builder)?;
            if console.start() {
                for warning in profiler.warnings() {
                    warn(&format!("steptrace: warning: {warning}"));
                }
                if schedule.is_on_demand() {
                    say(&format!(
                        "on demand: recording nothing until asked; from another terminal: steptrace capture {} --out {} [--steps N] \
                         (a warmup step, then {} active steps by default)",
                        std::process::id(),
                        b.out_dir.display(),
                        schedule.active()
                    ));
                }
            }
            let command = b.command.clone();
            profiler.update_manifest(|m| {
                m.command = command;
                m.device_activity = Some(mode.to_string());
            });
            Some(profiler)
        } else {
            None
        };
        // Before the device client is created: the cold start is read from here on.
        let startup = StartupCapture::begin(selection.kind);
        let started = Instant::now();
        let device = match own {
            Some(device) => {
                let _ = backend::timed_client(|| device.sync());
                device
            }
            None => selection.device()?,
        };
        let device = if device.is_autodiff() { device } else { device.autodiff() };
        let startup_steps = b.startup_steps.or(b.steps.map(startup_steps)).unwrap_or(1);
        let host_memory = selection.kind == backend::BackendKind::Cpu;
        let session = Session {
            selection,
            device,
            cache,
            profiler,
            sync: b.sync,
            console,
            live: None,
            signals,
            startup: Some(startup),
            cold_start: None,
            started,
            setup_end: None,
            step_start: started,
            step: 0,
            in_step: false,
            startup_steps,
            fixed_startup: b.startup_steps.is_some(),
            planned_steps: b.steps,
            batch_size: b.batch_size,
            records: Vec::with_capacity(b.steps.unwrap_or(64).min(1 << 16) as usize),
            anomalies: Vec::new(),
            shapes: Vec::new(),
            first_shape: None,
            samples: None,
            loss: None,
            witness: None,
            pending_optimizer: None,
            owns_signals: matches!(b.signals, super::builder::SignalSetting::Install),
            memory_wanted: b.memory,
            memory_phases: b.memory_phases,
            memory: None,
            memory_note: None,
            sampled_start: false,
            parameters: None,
            optimizer_state: None,
            optimizer_state_tried: false,
            reached: None,
            batch_bytes: 0,
            attributed,
            check_every_step: b.check_every_step,
            inferred: false,
            model_load_ms: None,
            ended: None,
            interrupted: None,
            host_memory,
        };
        session.describe_run();
        if let (Some(profiler), Some(peaks)) = (&session.profiler, &peaks) {
            super::peaks::record(profiler, peaks);
        }
        Ok(session)
    }

    /// Fails with [`Error::Ended`] once the session takes no more steps.
    pub(super) fn check_running(&self) -> Result<()> {
        match &self.ended {
            Some(why) => Err(Error::Ended { why: why.clone() }),
            None => Ok(()),
        }
    }

    /// Begins the current step if it has not begun, at the first call that belongs to it:
    /// step 0 after the set-up, step N + 1 after [`step`](Self::step) ended step N. Its
    /// `ProfilerStep#N` opens here: what the program did between the two (a progress line, a
    /// log) is in the trace's step before, and in neither step's time.
    pub(super) fn begin(&mut self) -> Result<()> {
        self.check_running()?;
        if self.in_step {
            return Ok(());
        }
        self.in_step = true;
        if self.setup_end.is_none() {
            self.setup_end = Some(Instant::now());
            if self.console.full() {
                self.live = Some(LiveLine::start());
            }
            if let Some(profiler) = &mut self.profiler {
                profiler.start();
            }
            // Step 0 starts once its `ProfilerStep#0` is open.
            self.step_start = Instant::now();
        } else {
            // The boundary: what the profiler does there (ending a recorded step, beginning the
            // next, handing the records to the writer) is in the step it begins, as in the
            // trace's `ProfilerStep` spans.
            self.step_start = Instant::now();
            if let Some(profiler) = &mut self.profiler {
                profiler.step();
            }
        }
        self.begin_memory();
        self.note_host_step();
        Ok(())
    }

    /// The step's memory bookkeeping as it begins.
    fn begin_memory(&mut self) {
        self.sampled_start = false;
        self.reached = None;
        let recorded = self.recording();
        if let Some(memory) = &mut self.memory {
            memory.begin_step(recorded);
        }
    }

    /// Ends the step: waits for the device as the sync policy says
    /// (reading one element of the step's loss, which reports a failed allocation of the
    /// step), records the step's time, and begins the next step.
    ///
    /// # Errors
    ///
    /// [`Error::StepFailed`] when the step's work failed (the cycle in progress is saved, an
    /// out-of-memory explained); [`Error::Interrupted`] when a signal asked the run to stop
    /// (the cycle in progress is saved, and the error holds the run's summary);
    /// [`Error::Ended`] after either.
    pub fn step(&mut self) -> Result<StepRecord> {
        self.begin()?;
        if self.sync != SyncPolicy::None {
            let witness = self.witness.take();
            // A step whose loss was read is checked already; otherwise startup steps are (a
            // batch too large fails at once), or every step when asked.
            let check = self.loss.is_none() && (self.check_every_step || self.step < self.startup_steps);
            let outcome = backend::catch_silently(|| wait(&self.device, witness.filter(|_| check)));
            match outcome {
                Ok(Ok(())) => {}
                Ok(Err(source)) => return Err(self.fail(source)),
                Err(message) => return Err(self.fail(StepError::Panicked { message })),
            }
        }
        self.witness = None;
        // The step's work ran: the optimizer's state can be read now.
        self.read_optimizer_state();
        if self.memory.is_some() {
            let last = self.planned_steps.is_some_and(|planned| self.step + 1 >= planned);
            let next = !last && self.profiler.as_ref().is_some_and(|p| p.schedule().action(p.step_num() + 1).records());
            if let Some(memory) = &mut self.memory {
                // The next step's start sample, asked now so that its answer is ready then.
                memory.ask_ahead(next);
            }
        }
        let step_end = Instant::now();
        let ms = (step_end - self.step_start).as_secs_f64() * 1000.0;
        let record = StepRecord { step: self.step, ms, samples: self.samples.or(self.batch_size).unwrap_or(0), loss: self.loss };
        self.watch_time(record.step, ms);
        if self.step == 0 {
            self.end_startup(step_end);
        }
        self.records.push(record.clone());
        self.samples = None;
        self.loss = None;
        if let Some(signal) = self.stop_requested() {
            return Err(self.interrupt(signal));
        }
        // The next step begins at the next call that belongs to it.
        self.step += 1;
        self.in_step = false;
        self.note_host_step_end();
        Ok(record)
    }

    /// The signal number that asked the run to stop, if any.
    fn stop_requested(&self) -> Option<usize> {
        let signal = self.signals.as_ref()?.received();
        (signal != 0).then_some(signal)
    }

    /// A signal asked the run to stop after step `self.step`: the cycle in progress is saved
    /// as cut short.
    fn interrupt(&mut self, signal: usize) -> Error {
        if let Some(signals) = &self.signals {
            signals.announce();
        }
        let step = self.step;
        let reason = format!("interrupted ({}) after step {step}", signal_name(signal));
        let ran = step + 1;
        let startup = self.startup_of(ran);
        let planned = self.planned_steps;
        if let Some(profiler) = &mut self.profiler {
            profiler.update_manifest(|m| {
                m.startup_steps = Some(startup);
                m.notes.push(match planned {
                    Some(planned) => format!(
                        "{reason}: startup is steps 0..{startup} of the {ran} that ran, not a fifth of the {planned} asked for"
                    ),
                    None => format!("{reason}: {ran} steps ran"),
                });
            });
            profiler.cut_short(reason.clone());
        }
        self.interrupted = Some(reason.clone());
        self.ended = Some(reason);
        let summary = self.conclude();
        Error::Interrupted { signal, summary: Box::new(summary) }
    }

    /// Ends profiling: closes the current step, saves a cycle cut short as a partial file,
    /// waits for every file, and sums the run up (say so on the console with
    /// [`Console::Full`](super::Console::Full)).
    ///
    /// # Errors
    ///
    /// [`Error::Ended`] after a failure or an interruption (their errors carried what was
    /// saved).
    pub fn finish(mut self) -> Result<RunSummary> {
        self.check_running()?;
        self.ended = Some("the session finished".into());
        // A loop that ran fewer steps than it declared: its startup, as the summary counts it.
        // The last step's `ProfilerStep` ends where it ended, as every other's does at the
        // next step's begin.
        if !self.in_step && self.setup_end.is_some() {
            if let Some(profiler) = &mut self.profiler {
                profiler.step();
            }
        }
        let ran = self.records.len() as u64;
        if let (Some(planned), Some(profiler)) = (self.planned_steps.filter(|p| ran < *p), &self.profiler) {
            let startup = self.startup_of(ran);
            profiler.update_manifest(|m| {
                m.startup_steps = Some(startup);
                m.notes.push(format!("{ran} of the {planned} steps declared ran: startup is steps 0..{startup}"));
            });
        }
        Ok(self.conclude())
    }

    /// Finishes the profiler and sums the run up.
    fn conclude(&mut self) -> RunSummary {
        self.release_signals();
        self.end_host_watch();
        if let Some(live) = &mut self.live {
            live.stop();
        }
        let (traces, trace_errors) = self.finish_profiler();
        if self.console.full() {
            lines::written_lines(&traces, &trace_errors);
        }
        self.summary(traces, trace_errors)
    }

    /// Whether the program declared how long the run is or which steps are startup.
    pub(crate) fn declared_startup(&self) -> bool {
        self.fixed_startup || self.planned_steps.is_some()
    }

    /// What the burn-train wrapper takes over for memory and a failed step's report.
    pub(crate) fn watch_settings(&self) -> crate::learner::WatchSettings {
        crate::learner::WatchSettings {
            memory: self.memory_wanted,
            batch_size: self.batch_size.map(|n| n as u64),
            console_full: self.console.full(),
        }
    }

    /// Prints one line, when the console prints the run's lines.
    pub(crate) fn say_line(&self, line: &str) {
        if self.console.full() {
            crate::console::say(line);
        }
    }

    /// Whether kernels are tied to layers (with names from the module tree).
    pub(crate) fn names_layers(&self) -> bool {
        self.attributed
    }

    /// Takes the signal handlers the session installed away again: nothing watches their flag
    /// once the session has ended (or handed its profiler over).
    pub(crate) fn release_signals(&mut self) {
        if self.owns_signals {
            if let Some(signals) = &self.signals {
                signals.uninstall();
            }
            self.owns_signals = false;
        }
    }

    /// Takes the profiler out, for a driver of its own (the burn-train wrapper): the session
    /// then records nothing itself.
    pub(crate) fn take_profiler(&mut self) -> Option<Profiler> {
        self.profiler.take()
    }

    /// Says what was written, as [`finish`](Self::finish) does, for a profiler driven
    /// elsewhere.
    pub(crate) fn say_written(&self, traces: &[SavedTrace], errors: &[String]) {
        if self.console.full() {
            lines::written_lines(traces, errors);
        }
    }

    /// Finishes the profiler: the traces written and the errors met.
    pub(super) fn finish_profiler(&mut self) -> (Vec<SavedTrace>, Vec<String>) {
        let Some(profiler) = self.profiler.take() else { return (Vec::new(), Vec::new()) };
        let (mut saved, mut errors) = (Vec::new(), Vec::new());
        for outcome in profiler.finish_all() {
            match outcome {
                Ok(trace) => saved.push(trace),
                Err(err) => errors.push(err.to_string()),
            }
        }
        (saved, errors)
    }

    /// Notes the step's input shape: the first, and any shape first seen after startup.
    pub(super) fn watch_shape(&mut self, shape: Vec<usize>) {
        if self.first_shape.is_none() {
            if let Some(profiler) = &self.profiler {
                let dims = shape.iter().map(|&d| d as u64).collect();
                let samples = self.samples.map(|n| n as u64);
                profiler.update_manifest(|m| {
                    m.input_shape = Some(dims);
                    // Without a batch size from the program, the first copy's samples.
                    m.batch_size = m.batch_size.or(samples);
                });
            }
            self.first_shape = Some(shape.clone());
        }
        if self.shapes.contains(&shape) {
            return;
        }
        if self.step >= self.startup_steps {
            tracing::warn!(target: TARGET, step = self.step, shape = ?shape, "{}", instants::NEW_SHAPE);
            self.anomalies.push(Anomaly { step: self.step, what: format!("new input shape {shape:?} after startup") });
        }
        if self.shapes.len() < 1024 {
            self.shapes.push(shape);
        }
    }

    /// Flags a steady step far slower than the steady median so far.
    fn watch_time(&mut self, step: u64, elapsed: f64) {
        if step < self.startup_steps {
            return;
        }
        // The median of the last steady steps (at most SLOW_WINDOW of them): constant work
        // per step, however long the run.
        let steady_so_far = self.records.len().saturating_sub(self.startup_steps as usize);
        let recent = &self.records[self.records.len() - steady_so_far.min(SLOW_WINDOW)..];
        let steady: Vec<f64> = recent.iter().map(|r| r.ms).collect();
        if let Some(s) = Stats::of(&steady).filter(|s| s.n >= 3) {
            if elapsed > 3.0 * s.median && elapsed - s.median > 2.0 {
                tracing::warn!(target: TARGET, step, ms = elapsed, median_ms = s.median, "{}", instants::SLOW_STEP);
                self.anomalies.push(Anomaly {
                    step,
                    what: format!("{elapsed:.1} ms, {:.1}x the steady median: a new compile path?", elapsed / s.median),
                });
            }
        }
    }

    /// A step failed with `source`: the cycle in progress is saved, cut short with the
    /// failure as its reason, and a failure for lack of device memory is explained.
    pub(super) fn fail(&mut self, source: StepError) -> Error {
        let step = self.step;
        if let Some(live) = &mut self.live {
            live.stop();
        }
        let text = source.to_string();
        let out_of_memory = crate::oom::classify(&text).map(|(shortage, requested)| self.explain_oom(shortage, requested, &source));
        let reason = crate::failure::reason(step, &text, out_of_memory.as_ref());
        if let Some(profiler) = &mut self.profiler {
            crate::failure::mark(profiler, &reason, out_of_memory.as_ref());
        }
        self.end_host_watch();
        let (traces, trace_errors) = self.finish_profiler();
        self.ended = Some(reason);
        self.release_signals();
        let failure = StepFailure { step, error: text, traces, kept: Vec::new(), trace_errors, out_of_memory };
        if self.console.full() {
            crate::failure::print(&failure);
        }
        Error::StepFailed(Box::new(failure))
    }
}

impl Drop for Session {
    /// Saves a cycle in progress as a partial file (errors are the profiler's to print).
    fn drop(&mut self) {
        self.release_signals();
        self.end_host_watch();
        if let Some(profiler) = self.profiler.take() {
            drop(profiler.finish_all());
        }
    }
}

/// Waits for `device`, after reading one element of `witness` (the step's loss) when given:
/// burn reports a failed allocation of the step where a tensor it fed is read, not at a sync.
fn wait(device: &burn::prelude::Device, witness: Option<burn::prelude::Tensor<1>>) -> std::result::Result<(), StepError> {
    let _sync = steptrace::own_span!(steptrace::format::names::SYNC);
    if let Some(loss) = witness {
        let n = loss.dims()[0];
        let first = if n > 1 { loss.narrow(0, 0, 1) } else { loss };
        first.try_into_data().map_err(|e| StepError::Read { reason: e.to_string() })?;
    }
    device.sync().map_err(|e| StepError::Sync { reason: e.to_string() })
}

pub(super) fn ms_between(from: Instant, to: Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64() * 1000.0
}
