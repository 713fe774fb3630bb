//! A session's life: started, stepped, finished, or failed.

use std::time::Instant;

use steptrace::format::names::{instants, TARGET};
use steptrace::terminal::say;
use steptrace::{Profiler, SavedTrace};

use super::Session;
use crate::backend;
use crate::console::{self as lines, LiveLine};
use crate::error::{Ended, Error, Result};
use crate::failure::{StepError, StepFailure};
use crate::signals::signal_name;
use crate::summary::{Anomaly, RunSummary, Stats, StepRecord};
use crate::sync::SyncPolicy;

/// Steady steps whose median a new step is compared with, to flag it as slow.
const SLOW_WINDOW: usize = 64;

impl Session {
    /// Fails with [`Error::Ended`] once the session takes no more steps.
    pub(super) fn check_running(&self) -> Result<()> {
        match &self.failure.ended {
            Some(why) => Err(Error::Ended(why.clone())),
            None => Ok(()),
        }
    }

    /// Begins the current step if it has not begun, at the first call that belongs to it:
    /// step 0 after the set-up, step N + 1 after [`step`](Self::step) ended step N. Its
    /// `ProfilerStep#N` opens here: what the program did between the two (a progress line, a
    /// log) is in the trace's step before, and in neither step's time.
    pub(super) fn begin(&mut self) -> Result<()> {
        self.check_running()?;
        if self.clock.in_step {
            return Ok(());
        }
        self.clock.in_step = true;
        if self.clock.setup_end.is_none() {
            self.clock.setup_end = Some(Instant::now());
            if self.output.console.full() {
                self.output.live = Some(LiveLine::start());
            }
            if let Some(profiler) = &mut self.profiler {
                profiler.start();
            }
            // Step 0 starts once its `ProfilerStep#0` is open.
            self.clock.step_start = Instant::now();
        } else {
            // The boundary: what the profiler does there (ending a recorded step, beginning the
            // next, handing the records to the writer) is in the step it begins, as in the
            // trace's `ProfilerStep` spans.
            self.clock.step_start = Instant::now();
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
        self.memory.sampled_start = false;
        self.failure.reached = None;
        let recorded = self.recording();
        if let Some(memory) = &mut self.memory.sampler {
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
            let witness = self.failure.witness.take();
            // A step whose loss was read is checked already; otherwise startup steps are (a
            // batch too large fails at once), or every step when asked.
            let check = self.clock.loss.is_none()
                && (self.failure.check_every_step || self.clock.step < self.clock.startup_steps);
            let outcome = backend::catch_silently(|| wait(&self.device, witness.filter(|_| check)));
            match outcome {
                Ok(Ok(())) => {}
                Ok(Err(source)) => return Err(self.fail(source)),
                Err(message) => return Err(self.fail(StepError::Panicked { message })),
            }
        }
        self.failure.witness = None;
        // The step's work ran: the optimizer's state can be read now.
        self.read_optimizer_state();
        if self.memory.sampler.is_some() {
            let last = self.clock.planned_steps.is_some_and(|planned| self.clock.step + 1 >= planned);
            let next = !last && self.profiler.as_ref().is_some_and(|p| p.schedule().action(p.step_num() + 1).records());
            if let Some(memory) = &mut self.memory.sampler {
                // The next step's start sample, asked now so that its answer is ready then.
                memory.ask_ahead(next);
            }
        }
        let step_end = Instant::now();
        let ms = (step_end - self.clock.step_start).as_secs_f64() * 1000.0;
        let record = StepRecord {
            step: self.clock.step,
            ms,
            samples: self.clock.samples.or(self.clock.batch_size).unwrap_or(0),
            loss: self.clock.loss,
        };
        self.watch_time(record.step, ms);
        if self.clock.step == 0 {
            self.end_startup(step_end);
        }
        self.clock.records.push(record.clone());
        self.clock.samples = None;
        self.clock.loss = None;
        if let Some(signal) = self.stop_requested() {
            return Err(self.interrupt(signal));
        }
        // The next step begins at the next call that belongs to it.
        self.clock.step += 1;
        self.clock.in_step = false;
        self.note_host_step_end();
        Ok(record)
    }

    /// The signal number that asked the run to stop, if any.
    fn stop_requested(&self) -> Option<usize> {
        let signal = self.output.signals.as_ref()?.received();
        (signal != 0).then_some(signal)
    }

    /// A signal asked the run to stop after step `self.clock.step`: the cycle in progress is saved
    /// as cut short.
    fn interrupt(&mut self, signal: usize) -> Error {
        if let Some(signals) = &self.output.signals {
            signals.announce();
        }
        let step = self.clock.step;
        let reason = format!("interrupted ({}) after step {step}", signal_name(signal));
        let ran = step + 1;
        let startup = self.startup_of(ran);
        let planned = self.clock.planned_steps;
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
        self.failure.interrupted = Some(reason);
        self.failure.ended = Some(Ended::Interrupted { signal, step });
        let summary = self.conclude();
        Error::Interrupted { signal, summary: Box::new(summary) }
    }

    /// Ends profiling: closes the current step, saves a cycle cut short as a partial file,
    /// waits for every file, and sums the run up (say so on the console with
    /// [`Console::Full`](crate::Console::Full)).
    ///
    /// # Errors
    ///
    /// [`Error::Ended`] after a failure or an interruption (their errors carried what was
    /// saved).
    pub fn finish(mut self) -> Result<RunSummary> {
        self.check_running()?;
        self.failure.ended = Some(Ended::Finished);
        // A loop that ran fewer steps than it declared: its startup, as the summary counts it.
        // The last step's `ProfilerStep` ends where it ended, as every other's does at the
        // next step's begin.
        if !self.clock.in_step && self.clock.setup_end.is_some() {
            if let Some(profiler) = &mut self.profiler {
                profiler.step();
            }
        }
        let ran = self.clock.records.len() as u64;
        if let (Some(planned), Some(profiler)) = (self.clock.planned_steps.filter(|p| ran < *p), &self.profiler) {
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
        if let Some(live) = &mut self.output.live {
            live.stop();
        }
        let (traces, trace_errors) = self.finish_profiler();
        let trace_errors: Vec<String> = trace_errors.iter().map(ToString::to_string).collect();
        if self.output.console.full() {
            lines::written_lines(&traces, &trace_errors);
        }
        self.summary(traces, trace_errors)
    }

    /// Whether the program declared how long the run is or which steps are startup.
    pub(crate) fn declared_startup(&self) -> bool {
        self.clock.fixed_startup || self.clock.planned_steps.is_some()
    }

    /// What the burn-train wrapper takes over for memory and a failed step's report.
    pub(crate) fn watch_settings(&self) -> crate::learner::WatchSettings {
        crate::learner::WatchSettings {
            memory: self.memory.wanted,
            batch_size: self.clock.batch_size.map(|n| n as u64),
            console_full: self.output.console.full(),
        }
    }

    /// Prints one line, when the console prints the run's lines.
    pub(crate) fn say_line(&self, line: &str) {
        if self.output.console.full() {
            say(line);
        }
    }

    /// Whether kernels are tied to layers (with names from the module tree).
    pub(crate) fn names_layers(&self) -> bool {
        self.attributed
    }

    /// Takes the signal handlers the session installed away again: nothing watches their flag
    /// once the session has ended (or handed its profiler over).
    pub(crate) fn release_signals(&mut self) {
        if self.output.owns_signals {
            if let Some(signals) = &self.output.signals {
                signals.uninstall();
            }
            self.output.owns_signals = false;
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
        if self.output.console.full() {
            lines::written_lines(traces, errors);
        }
    }

    /// Finishes the profiler: the traces written and the errors met.
    pub(super) fn finish_profiler(&mut self) -> (Vec<SavedTrace>, Vec<steptrace::Error>) {
        let Some(profiler) = self.profiler.take() else { return (Vec::new(), Vec::new()) };
        let (mut saved, mut errors) = (Vec::new(), Vec::new());
        for outcome in profiler.finish_all() {
            match outcome {
                Ok(trace) => saved.push(trace),
                Err(err) => errors.push(err),
            }
        }
        (saved, errors)
    }

    /// Notes the step's input shape: the first, and any shape first seen after startup.
    pub(super) fn watch_shape(&mut self, shape: Vec<usize>) {
        if self.clock.first_shape.is_none() {
            if let Some(profiler) = &self.profiler {
                let dims = shape.iter().map(|&d| d as u64).collect();
                let samples = self.clock.samples.map(|n| n as u64);
                profiler.update_manifest(|m| {
                    m.input_shape = Some(dims);
                    // Without a batch size from the program, the first copy's samples.
                    m.batch_size = m.batch_size.or(samples);
                });
            }
            self.clock.first_shape = Some(shape.clone());
        }
        if self.clock.shapes.contains(&shape) {
            return;
        }
        if self.clock.step >= self.clock.startup_steps {
            tracing::warn!(target: TARGET, step = self.clock.step, shape = ?shape, "{}", instants::NEW_SHAPE);
            self.clock
                .anomalies
                .push(Anomaly { step: self.clock.step, what: format!("new input shape {shape:?} after startup") });
        }
        if self.clock.shapes.len() < 1024 {
            self.clock.shapes.push(shape);
        }
    }

    /// Flags a steady step far slower than the steady median so far.
    fn watch_time(&mut self, step: u64, elapsed: f64) {
        if step < self.clock.startup_steps {
            return;
        }
        // The median of the last steady steps (at most SLOW_WINDOW of them): constant work
        // per step, however long the run.
        let steady_so_far = self.clock.records.len().saturating_sub(self.clock.startup_steps as usize);
        let recent = &self.clock.records[self.clock.records.len() - steady_so_far.min(SLOW_WINDOW)..];
        let steady: Vec<f64> = recent.iter().map(|r| r.ms).collect();
        if let Some(s) = Stats::of(&steady).filter(|s| s.n >= 3) {
            if elapsed > 3.0 * s.median && elapsed - s.median > 2.0 {
                tracing::warn!(target: TARGET, step, ms = elapsed, median_ms = s.median, "{}", instants::SLOW_STEP);
                self.clock.anomalies.push(Anomaly {
                    step,
                    what: format!("{elapsed:.1} ms, {:.1}x the steady median: a new compile path?", elapsed / s.median),
                });
            }
        }
    }

    /// A step failed with `source`: the cycle in progress is saved, cut short with the
    /// failure as its reason, and a failure for lack of device memory is explained.
    pub(super) fn fail(&mut self, source: StepError) -> Error {
        let step = self.clock.step;
        if let Some(live) = &mut self.output.live {
            live.stop();
        }
        let out_of_memory =
            source.out_of_memory().map(|(shortage, requested)| self.explain_oom(shortage, requested, &source));
        let reason = crate::failure::reason(step, &source, out_of_memory.as_ref());
        if let Some(profiler) = &mut self.profiler {
            crate::failure::mark(profiler, &reason, out_of_memory.as_ref());
        }
        self.end_host_watch();
        let (traces, trace_errors) = self.finish_profiler();
        self.failure.ended = Some(Ended::Failed { step });
        self.release_signals();
        let failure = StepFailure { step, cause: source, traces, kept: Vec::new(), trace_errors, out_of_memory };
        if self.output.console.full() {
            failure.print();
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
fn wait(
    device: &burn::prelude::Device,
    witness: Option<burn::prelude::Tensor<1>>,
) -> std::result::Result<(), StepError> {
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
