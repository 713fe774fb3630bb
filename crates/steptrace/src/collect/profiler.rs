//! The step-driven profiler handle.

use std::fs;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;
use tracing::span::EnteredSpan;
use tracing_chrome::FlushGuard;

use super::builder::{ProfilerBuilder, SharedCollector};
use super::capture::{CaptureHandle, OnDemand};
use super::direct::{self, DirectStep};
use crate::collect::gate::Shared;
use crate::collect::schedule::{Action, Schedule};
use crate::collect::sink::{
    DeviceOutcome, FileNames, SavedTrace, SegmentInfo, SegmentWriter, SinkContext, LINGER, NAME_VARIANTS,
};
use crate::error::{Error, Result};
use crate::format::names::{STEP_SPAN, TARGET};
use crate::format::{Manifest, ManifestError};

/// How far ahead a closing window looks for the next one (see
/// [`DeviceCollector::next_window_in`](crate::collect::device::DeviceCollector::next_window_in)).
const NEXT_WINDOW_HORIZON: u64 = 1024;

/// The profiler handle: advance it once per training step.
///
/// Like `torch.profiler.profile`, the profiler opens `ProfilerStep#0` when
/// it starts, and each [`step`](Profiler::step) closes the current step's
/// span, advances the [`Schedule`], and opens the next one. A cycle's file
/// is saved when its last active step ends. Finishing (or dropping) the
/// profiler in the middle of a cycle saves that partial cycle, marked
/// `"partial": true`.
///
/// The profiler lives on the thread that drives the steps; spans of other
/// threads are gated by the same schedule.
///
/// Write failures never panic the training thread: they are kept in
/// [`errors`](Profiler::errors) and returned by
/// [`finish`](Profiler::finish); nothing is printed.
pub struct Profiler {
    core: Core,
    /// The open `ProfilerStep#N` span, entered on the stepping thread.
    current: Option<StepSpan>,
}

/// A step's span: through tracing, or kept as records (see [`direct`](super::direct)).
enum StepSpan {
    Span(#[allow(dead_code)] EnteredSpan),
    Direct(DirectStep),
}

/// Everything a profiler holds but its entered step span: `Send`, so that
/// a rank's profiler can be prepared on one thread and taken on the
/// rank's own (see [`RankProfilers`](crate::collect::RankProfilers)).
pub(crate) struct Core {
    pub(super) schedule: Schedule,
    pub(super) step: u64,
    pub(super) action: Action,
    pub(super) started: bool,
    pub(super) finished: bool,
    pub(super) shared: Arc<Shared>,
    pub(super) guard: Option<FlushGuard>,
    pub(super) names: FileNames,
    pub(super) context: Arc<SinkContext>,
    pub(super) limit: Option<u64>,
    pub(super) segment: Option<Arc<Mutex<SegmentInfo>>>,
    pub(super) next_segment: u64,
    pub(super) device: Option<SharedCollector>,
    /// Why the device collector did not open for the current cycle.
    pub(super) device_error: Option<String>,
    /// Trace time 0.
    pub(super) origin: Instant,
    /// The cycle whose file could not be created.
    pub(super) failed_cycle: Option<u64>,
    /// Captures asked for while running, with an on-demand schedule.
    pub(super) on_demand: Option<OnDemand>,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core").field("schedule", &self.schedule).field("step", &self.step).finish_non_exhaustive()
    }
}

impl Core {
    /// The state the gate reads.
    pub(crate) fn shared_state(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// Changes the manifest of the traces saved from now on.
    pub(crate) fn update_manifest(&self, change: impl FnOnce(&mut Manifest)) {
        if let Ok(mut manifest) = self.context.manifest.lock() {
            change(&mut manifest);
        }
    }

    /// The profiler that steps this core on the calling thread.
    pub(crate) fn into_profiler(self) -> Profiler {
        Profiler { core: self, current: None }
    }

    /// What the profiler does in `step`: the schedule's word, or, on
    /// demand, the capture's.
    fn action_at(&self, step: u64) -> Action {
        match &self.on_demand {
            Some(on_demand) => on_demand.action(step),
            None => self.schedule.action(step),
        }
    }

    /// The cycle `step` belongs to, with what a captured cycle's trace says
    /// of its capture, and the cycle's active steps.
    /// In how many steps from the current one the next window opens (0: this step), looking
    /// [`NEXT_WINDOW_HORIZON`] steps ahead; `None` beyond that, and on demand (a capture
    /// comes when someone asks).
    fn next_window_in(&self) -> Option<u64> {
        if self.on_demand.is_some() {
            return None;
        }
        (0..NEXT_WINDOW_HORIZON).find(|ahead| self.schedule.action(self.step.saturating_add(*ahead)).collects())
    }

    fn cycle_at(&self, step: u64) -> (u64, Option<Value>, u64) {
        match self.on_demand.as_ref().and_then(|o| o.plan_at(step)) {
            Some(plan) => (plan.cycle, Some(plan.record()), plan.active),
            None => (self.schedule.cycle_of(step).unwrap_or(0), None, self.schedule.active()),
        }
    }
}

impl std::fmt::Debug for Profiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler")
            .field("schedule", &self.core.schedule)
            .field("step", &self.core.step)
            .field("action", &self.core.action)
            .finish_non_exhaustive()
    }
}

impl Profiler {
    /// Starts configuring a profiler with a schedule.
    pub fn builder(schedule: Schedule) -> ProfilerBuilder {
        ProfilerBuilder::new(schedule)
    }

    /// Opens step 0. Call it once the layer is installed, right before the
    /// first step's work; [`step`] calls it if it was not called, and step 0
    /// then holds nothing.
    ///
    /// [`step`]: Profiler::step
    pub fn start(&mut self) {
        if self.core.started || self.core.finished {
            return;
        }
        self.core.started = true;
        self.enter_step(self.core.action_at(0));
    }

    /// Ends the current step and begins the next one.
    pub fn step(&mut self) {
        if self.core.finished {
            return;
        }
        if !self.core.started {
            self.start();
        }
        let prev = self.core.action;
        // Ending a step whose next one writes to the same file (the schedule says so before
        // any capture request is read, and a request cannot end a cycle early): its end is
        // handed to the writer with the next step's begin.
        let same_file =
            prev.collects() && prev != Action::RecordAndSave && self.core.action_at(self.core.step + 1).collects();
        self.end_step(same_file);
        self.core.step += 1;
        if let Some(on_demand) = &mut self.core.on_demand {
            on_demand.at_boundary(self.core.step);
            if on_demand.awaits_save() {
                if let Ok(results) = self.core.context.results.lock() {
                    on_demand.note_results(&results);
                }
            }
        }
        let next = self.core.action_at(self.core.step);
        let closes = prev.collects() && (prev == Action::RecordAndSave || !next.collects());
        debug_assert!(!(same_file && closes), "a step's end waited for a begin in a file that closed");
        if closes {
            self.close_segment(false);
        }
        self.enter_step(next);
    }

    /// The state the gate shares, for tests.
    #[cfg(test)]
    pub(crate) fn shared(&self) -> &crate::collect::gate::Shared {
        &self.core.shared
    }

    /// The current step number (the `N` of `ProfilerStep#N`).
    pub fn step_num(&self) -> u64 {
        self.core.step
    }

    /// The current step's action.
    pub fn action(&self) -> Action {
        self.core.action
    }

    /// The schedule.
    pub fn schedule(&self) -> Schedule {
        self.core.schedule
    }

    /// The file the cycle being recorded will be saved as (until then its events stream to
    /// `NAME.partial` beside it), or `None` outside a cycle.
    pub fn recording_to(&self) -> Option<PathBuf> {
        let info = self.core.segment.as_ref()?.lock().ok()?;
        Some(info.final_path.clone())
    }

    /// A handle that asks this profiler for a capture from any thread (see
    /// [`capture`](crate::collect::capture)); `None` unless the schedule is
    /// [on demand](Schedule::on_demand).
    pub fn capture_handle(&self) -> Option<CaptureHandle> {
        self.core.on_demand.as_ref().map(OnDemand::handle)
    }

    /// Adds or replaces a manifest field by name (a known [`Manifest`]
    /// field, or one of your own); it appears in traces saved from now on.
    ///
    /// # Errors
    ///
    /// When the value does not fit a known field's type; the manifest is
    /// unchanged then.
    pub fn set_manifest(&self, key: impl Into<String>, value: impl Into<Value>) -> Result<(), ManifestError> {
        let (key, value) = (key.into(), value.into());
        match self.core.context.manifest.lock() {
            Ok(mut manifest) => manifest.set(&key, value),
            Err(_) => Ok(()),
        }
    }

    /// Changes the manifest in place; the change appears in traces saved
    /// from now on.
    pub fn update_manifest(&self, change: impl FnOnce(&mut Manifest)) {
        self.core.update_manifest(change);
    }

    /// Keeps steptrace's own spans of the stepping thread ([`own_span!`](crate::own_span),
    /// [`layer`](crate::layer) and the step's `ProfilerStep#N`) as records in that thread's
    /// buffer, around tracing's registry
    /// and layers: the lines written are the same, at a fraction of the cost inside a
    /// launch-bound step (see [`direct`](crate::collect::direct)). Returns whether it is on.
    ///
    /// Call it only when this profiler's layer, from
    /// [`build_global`](crate::ProfilerBuilder::build_global), is in the process's global
    /// subscriber and no other layer needs steptrace's own spans, except while `veto` returns
    /// true (it is asked at each span's begin). [`try_install`](crate::ProfilerBuilder::try_install)
    /// calls it. It is refused (false) for a per-layer gate ([`build`](crate::ProfilerBuilder::build)),
    /// with [`own_spans_in_every_step`](crate::ProfilerBuilder::own_spans_in_every_step), and
    /// for a second profiler in one process.
    ///
    /// `STEPTRACE_OWN_SPANS=tracing` refuses it too (an experiment's knob, to measure one path
    /// against the other); every trace's metadata says which path the spans took (`own_spans`).
    pub fn record_own_spans_directly(&self, veto: Option<fn() -> bool>) -> bool {
        use crate::collect::gate::OwnSpans;
        let shared = &self.core.shared;
        if crate::settings::own_spans_tracing() {
            shared.set_own_spans(OwnSpans::TracingAsked);
            return false;
        }
        let on = shared.direct_allowed() && super::direct::enable(shared.clone(), veto);
        if on {
            shared.set_own_spans(OwnSpans::Direct);
        }
        on
    }

    /// Warnings about the configuration (for example a schedule without
    /// warmup), for the caller to show.
    pub fn warnings(&self) -> Vec<String> {
        self.core.schedule.warning().into_iter().map(|w| w.to_string()).collect()
    }

    /// Traces finished so far (the writer finalises them in the background).
    pub fn saved(&self) -> Vec<SavedTrace> {
        self.core
            .context
            .results
            .lock()
            .map(|r| r.iter().filter_map(|(_, r)| r.as_ref().ok().cloned()).collect())
            .unwrap_or_default()
    }

    /// Errors so far, as messages (with an on-demand schedule, a ready file
    /// that could not be kept up to date too).
    pub fn errors(&self) -> Vec<String> {
        let mut errors: Vec<String> = self
            .core
            .context
            .results
            .lock()
            .map(|r| r.iter().filter_map(|(_, r)| r.as_ref().err().map(|e| e.to_string())).collect())
            .unwrap_or_default();
        errors.extend(self.core.on_demand.as_ref().and_then(|o| o.problem.clone()));
        errors
    }

    /// Events dropped because their thread was bound to another profiler's
    /// sink (tracing-chrome binds each thread to one Chrome layer for life).
    pub fn lost_events(&self) -> u64 {
        self.core.shared.lost_events()
    }

    /// Ends profiling: closes the current step, saves a cycle cut short,
    /// waits for every file to be written, and returns them.
    ///
    /// Returns the first write error if any cycle could not be saved (the
    /// others are still on disk); [`finish_all`](Profiler::finish_all)
    /// gives every file and every error.
    pub fn finish(self) -> Result<Vec<SavedTrace>> {
        let mut saved = Vec::new();
        for result in self.finish_all() {
            saved.push(result?);
        }
        Ok(saved)
    }

    /// Says why the run is about to end inside the current cycle (for
    /// example `"interrupted (SIGINT)"`): if the cycle is then saved with
    /// fewer steps than its `active`, its `partial_reason` gives this
    /// reason. Call it right before [`finish`](Profiler::finish); outside a
    /// cycle it does nothing.
    pub fn cut_short(&mut self, reason: impl Into<String>) {
        if let Some(info) = &self.core.segment {
            if let Ok(mut info) = info.lock() {
                info.cut_reason = Some(reason.into());
            }
        }
    }

    /// Ends profiling like [`finish`](Profiler::finish), and returns every
    /// cycle's outcome once, in the order the cycles ended: the saved file,
    /// or why it could not be saved.
    pub fn finish_all(mut self) -> Vec<Result<SavedTrace>> {
        self.finish_inner();
        match self.core.context.results.lock() {
            Ok(mut results) => {
                let mut results = std::mem::take(&mut *results);
                // Stable: a cycle's own outcomes keep their order.
                results.sort_by_key(|(cycle, _)| *cycle);
                results.into_iter().map(|(_, result)| result).collect()
            }
            Err(_) => vec![Err(Error::Install("profiler results lock poisoned".into()))],
        }
    }

    fn finish_inner(&mut self) {
        if self.core.finished {
            return;
        }
        self.end_step(false);
        if self.core.segment.is_some() {
            self.close_segment(true);
        }
        self.core.finished = true;
        self.core.context.linger.stop();
        self.core.shared.finish();
        // Dropping the guard stops tracing-chrome's writer thread after it
        // has finalised every file.
        self.core.guard.take();
        if let Some(on_demand) = &mut self.core.on_demand {
            if let Ok(results) = self.core.context.results.lock() {
                on_demand.end(&results);
            }
        }
    }

    /// Ends the open step span; with `end_waits`, its end is handed to the writer with the
    /// next step's begin.
    fn end_step(&mut self, end_waits: bool) {
        match self.current.take() {
            Some(StepSpan::Direct(step)) => direct::end_step(step, end_waits),
            Some(StepSpan::Span(span)) => {
                self.core.shared.set_step_end_waits(end_waits);
                drop(span);
                self.core.shared.set_step_end_waits(false);
            }
            None => {}
        }
    }

    /// Whether the open step's span is kept as records (see
    /// [`record_own_spans_directly`](Profiler::record_own_spans_directly)); for tests.
    #[doc(hidden)]
    pub fn step_is_direct(&self) -> bool {
        matches!(self.current, Some(StepSpan::Direct(_)))
    }

    fn enter_step(&mut self, action: Action) {
        if action.collects() && self.core.segment.is_none() {
            self.open_segment();
        }
        self.core.action = action;
        self.core.shared.set_action(action);
        if action.records() {
            if let Some(info) = &self.core.segment {
                if let Ok(mut info) = info.lock() {
                    info.steps.push(self.core.step);
                }
            }
        }
        self.current = Some(match direct::begin_step(&self.core.shared, self.core.step) {
            Some(step) => StepSpan::Direct(step),
            None => StepSpan::Span(tracing::info_span!(target: TARGET, STEP_SPAN, step = self.core.step).entered()),
        });
        if action.collects() {
            if let Some(guard) = &self.core.guard {
                self.core.context.linger.request(LINGER);
                guard.flush();
            }
        }
    }

    fn open_segment(&mut self) {
        let (cycle, capture, active) = self.core.cycle_at(self.core.step);
        if self.core.failed_cycle == Some(cycle) {
            // Its file could not be created: said once, not at every step.
            return;
        }
        let first = self.core.names.final_path(cycle);
        // A rank's files sit in the cycle's folder, made by the first rank there.
        let mut created = match first.parent().filter(|dir| !dir.as_os_str().is_empty() && !dir.is_dir()) {
            Some(dir) => fs::create_dir_all(dir).map_err(|source| Error::OutDir {
                path: dir.to_path_buf(),
                what: "cannot create the cycle's folder",
                source,
            }),
            None => Ok(()),
        }
        .and_then(|()| self.create_segment(cycle, first.clone(), &capture, active));
        // A name taken by a concurrent run of the same worker in the same
        // millisecond: try a few others rather than lose the cycle (here, and again on the
        // writer thread should the name be taken by the time it creates the file).
        let mut n = 1;
        while n <= NAME_VARIANTS {
            let Err(Error::Exists { .. }) = &created else { break };
            let Some(path) = self.core.names.variant(&first, n) else { break };
            created = self.create_segment(cycle, path, &capture, active);
            n += 1;
        }
        let created =
            created.map(|(writer, info)| (writer.with_variants(self.core.names.clone(), first.clone(), n), info));
        match created {
            Ok((writer, info)) => {
                if let Some(guard) = &self.core.guard {
                    guard.start_new(Some(Box::new(writer)));
                }
                self.core.shared.set_segment(self.core.next_segment);
                self.core.next_segment += 1;
                self.core.segment = Some(info);
                self.open_device();
            }
            Err(err) => {
                self.core.failed_cycle = Some(cycle);
                self.core.context.push_result(cycle, Err(err));
            }
        }
    }

    /// A segment writer for `cycle` at `final_path`, created exclusively.
    fn create_segment(
        &self,
        cycle: u64,
        final_path: PathBuf,
        capture: &Option<Value>,
        active: u64,
    ) -> Result<(SegmentWriter, Arc<Mutex<SegmentInfo>>)> {
        let info = Arc::new(Mutex::new(SegmentInfo {
            cycle,
            final_path,
            active,
            capture: capture.clone(),
            steps: Vec::new(),
            ended_by_finish: false,
            cut_reason: None,
            device: DeviceOutcome::NotCollected,
        }));
        Ok((
            SegmentWriter::create(info.clone(), self.core.context.clone(), self.core.limit, self.core.next_segment)?,
            info,
        ))
    }

    /// Starts the device collector for the cycle that opens.
    fn open_device(&mut self) {
        self.core.device_error = None;
        if let Some(device) = &self.core.device {
            let result = match device.lock() {
                Ok(mut collector) => collector.open().map_err(|e| e.to_string()),
                Err(_) => Err("the device collector's lock was poisoned".to_owned()),
            };
            self.core.device_error = result.err();
        }
    }

    /// Stops the device collector: what it recorded, or why nothing was.
    fn close_device(&mut self, finishing: bool) -> DeviceOutcome {
        let Some(device) = &self.core.device else { return DeviceOutcome::NotCollected };
        if let Some(err) = self.core.device_error.take() {
            return DeviceOutcome::Failed(format!("the device tracer did not start: {err}"));
        }
        let next = if finishing { None } else { self.core.next_window_in() };
        match device.lock() {
            Ok(mut collector) => {
                collector.next_window_in(next);
                match collector.close(self.core.origin) {
                    Ok(window) => DeviceOutcome::Window(Box::new(window)),
                    Err(err) => DeviceOutcome::Failed(format!("the device tracer failed at the window's end: {err}")),
                }
            }
            Err(_) => DeviceOutcome::Failed("the device collector's lock was poisoned".to_owned()),
        }
    }

    fn close_segment(&mut self, by_finish: bool) {
        self.core.context.linger.stop();
        self.core.shared.set_segment(0);
        if let Some(info) = self.core.segment.take() {
            let device = self.close_device(by_finish);
            if let Ok(mut info) = info.lock() {
                info.ended_by_finish = by_finish;
                info.device = device;
            }
            if let Some(guard) = &self.core.guard {
                // The window's last records were handed over unannounced: the flush writes them
                // before tracing-chrome closes the file.
                guard.flush();
                guard.start_new(Some(Box::new(io::sink())));
            }
        }
    }
}

impl Drop for Profiler {
    fn drop(&mut self) {
        self.finish_inner();
    }
}
