//! The step-driven profiler handle and its builder.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tracing::span::EnteredSpan;
use tracing_chrome::FlushGuard;
use tracing_core::Subscriber;
use tracing_subscriber::filter::{Filtered, Targets};
use tracing_subscriber::layer::{Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

use super::device::DeviceCollector;
use crate::error::{Error, Result};
use crate::format::names::{STEP_SPAN, TARGET};
use crate::format::{Manifest, ManifestError};
use crate::gate::{GateFilter, GateLayer, Shared};
use crate::schedule::{Action, Schedule};
use super::ranks::RankSpec;
use crate::sink::{
    chrome_layer, DeviceOutcome, FileNames, Linger, RankContext, SavedTrace, SegmentInfo, SegmentWriter, SinkContext,
    DEFAULT_FILE_NAME, LINGER,
};

/// A device collector shared by the builder's clones.
type SharedCollector = Arc<Mutex<Box<dyn DeviceCollector>>>;

/// The layer to add to a `tracing_subscriber::registry()`: the Chrome sink
/// behind the schedule gate.
pub type ProfilerLayer<S> = Filtered<GateLayer<S>, GateFilter, S>;

/// Configures a [`Profiler`].
///
/// # Examples
///
/// ```
/// use steptrace::{Profiler, Schedule};
/// use tracing_subscriber::prelude::*;
///
/// # fn docs() -> Result<(), steptrace::Error> {
/// let schedule: Schedule = "wait=1,warmup=1,active=2,repeat=1".parse()?;
/// let (layer, mut profiler) = Profiler::builder(schedule).out_dir("traces").build()?;
/// tracing_subscriber::registry().with(layer).init();
/// profiler.start();
/// for _ in 0..4 {
///     let _load = tracing::info_span!(target: "steptrace", "data.load").entered();
///     profiler.step();
/// }
/// let saved = profiler.finish()?;
/// assert_eq!(saved[0].steps, vec![2, 3]);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ProfilerBuilder {
    schedule: Schedule,
    out_dir: PathBuf,
    worker: String,
    file_name: String,
    targets: Vec<String>,
    include_args: bool,
    manifest: Manifest,
    manifest_error: Option<ManifestError>,
    limit: Option<u64>,
    pub(crate) device: Option<SharedCollector>,
    pub(crate) device_reason: Option<String>,
    /// One collector per rank, for [`build_ranks`](Self::build_ranks).
    pub(crate) rank_devices: Vec<SharedCollector>,
    /// `distributedInfo.backend` of a run of several ranks.
    pub(crate) rank_backend: Option<String>,
    own_spans: bool,
}

impl std::fmt::Debug for ProfilerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfilerBuilder")
            .field("schedule", &self.schedule)
            .field("out_dir", &self.out_dir)
            .field("worker", &self.worker)
            .field("device_collector", &self.device.is_some())
            .field("device_reason", &self.device_reason)
            .finish_non_exhaustive()
    }
}

impl ProfilerBuilder {
    /// Writes trace files into `dir` (created if missing). Default: `traces`.
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.out_dir = dir.into();
        self
    }

    /// Names this process in file names and traces. Default: `steptrace-{pid}`.
    pub fn worker(mut self, worker: impl Into<String>) -> Self {
        self.worker = worker.into();
        self
    }

    /// Sets the file-name template (see [`DEFAULT_FILE_NAME`]).
    pub fn file_name(mut self, template: impl Into<String>) -> Self {
        self.file_name = template.into();
        self
    }

    /// Opts in to other crates' spans, as `tracing_subscriber::filter::Targets`
    /// directives such as `"my_crate=info"` or `"cubecl_runtime=trace"`.
    ///
    /// steptrace's own spans are always kept; see the
    /// [target policy](crate::gate#target-policy).
    pub fn targets<I, T>(mut self, directives: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.targets.extend(directives.into_iter().map(Into::into));
        self
    }

    /// Whether span fields are written as event arguments. Default: true.
    pub fn include_args(mut self, include: bool) -> Self {
        self.include_args = include;
        self
    }

    /// Adds a field to the run manifest written into every trace's
    /// metadata: a known [`Manifest`] field by its name, or a field of
    /// your own. A value of the wrong type for a known field makes
    /// [`build`](Self::build) fail.
    pub fn manifest(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        if let Err(err) = self.manifest.set(&key.into(), value.into()) {
            self.manifest_error.get_or_insert(err);
        }
        self
    }

    /// Records device activity with `collector` in every cycle (see
    /// [`collect::device`](crate::collect::device)).
    pub fn device_collector(mut self, collector: Box<dyn DeviceCollector>) -> Self {
        self.device = Some(Arc::new(Mutex::new(collector)));
        self
    }

    /// Records device activity for a run of several ranks
    /// ([`build_ranks`](Self::build_ranks)): one collector per rank, in
    /// rank order, each recording its rank's device. [`build`](Self::build)
    /// and [`build_global`](Self::build_global) do not use them.
    pub fn rank_device_collectors(mut self, collectors: Vec<Box<dyn DeviceCollector>>) -> Self {
        self.rank_devices = collectors.into_iter().map(|c| Arc::new(Mutex::new(c))).collect();
        self
    }

    /// Names what connects the ranks of a run of several
    /// ([`build_ranks`](Self::build_ranks)), as written in each file's
    /// `distributedInfo.backend`. Default:
    /// [`DEFAULT_RANK_BACKEND`](crate::collect::ranks::DEFAULT_RANK_BACKEND).
    pub fn rank_backend(mut self, backend: impl Into<String>) -> Self {
        self.rank_backend = Some(backend.into());
        self
    }

    /// Says why no device activity is recorded: every file reports the
    /// device as "not observed" with this reason.
    pub fn device_not_observed(mut self, reason: impl Into<String>) -> Self {
        self.device_reason = Some(reason.into());
        self
    }

    /// Sets the whole run manifest.
    pub fn with_manifest(mut self, manifest: Manifest) -> Self {
        self.manifest = manifest;
        self
    }

    /// Caps each trace file at `bytes`; beyond it, writing stops and the
    /// cycle is reported as a write error, like a full disk.
    pub fn max_file_bytes(mut self, bytes: u64) -> Self {
        self.limit = Some(bytes);
        self
    }

    /// Builds the layer and the profiler for any subscriber `S`, with a
    /// per-layer filter so the layer composes with others (a log formatter,
    /// say).
    ///
    /// Add the layer to a subscriber, make it the default, then call
    /// [`Profiler::start`] right before the first step. Fails if the output
    /// directory cannot be created or written, the file-name template is
    /// unusable, or a target directive does not parse. See the
    /// [gate docs](crate::gate) for what per-layer filtering costs.
    pub fn build<S>(self) -> Result<(ProfilerLayer<S>, Profiler)>
    where
        S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let (chrome, targets, core) = self.parts::<S>(None)?;
        let shared = core.shared.clone();
        let layer = GateLayer::new(chrome, shared.clone(), None).with_filter(GateFilter::new(shared, targets));
        Ok((layer, core.into_profiler()))
    }

    /// Like [`build`](Self::build), but the gate filters globally: spans it
    /// rejects (wait and skip phases, other crates' targets) are never
    /// created. Use it when the layer is the subscriber's only layer.
    pub fn build_global<S>(self) -> Result<(GateLayer<S>, Profiler)>
    where
        S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let self_own = self.own_spans;
        let (chrome, targets, core) = self.parts::<S>(None)?;
        let layer = GateLayer::new(chrome, core.shared.clone(), Some(targets)).keeping_own_spans(self_own);
        Ok((layer, core.into_profiler()))
    }

    /// Has [`build_global`](Self::build_global)'s gate create steptrace's own spans in every
    /// step, not only in recorded ones, for another layer that mirrors them (NVTX ranges for
    /// Nsight, say); they are still written only in the schedule's windows. Outside windows
    /// each of steptrace's spans then costs its creation in the registry. [`build`](Self::build)'s
    /// per-layer filter leaves every span to the other layers already.
    pub fn own_spans_in_every_step(mut self) -> Self {
        self.own_spans = true;
        self
    }

    /// The layer, its targets and the profiler's core; `rank` places the
    /// files as one rank's of a group (see [`RankProfilers`]).
    ///
    /// [`RankProfilers`]: crate::collect::RankProfilers
    pub(crate) fn parts<S>(self, rank: Option<&RankSpec>) -> Result<(tracing_chrome::ChromeLayer<S>, Targets, Core)>
    where
        S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let mut names = FileNames::new(self.out_dir.clone(), &self.file_name, &self.worker, self.schedule.repeat())?;
        if let Some(spec) = rank {
            names = names.for_rank(&spec.info, &spec.run_stamp)?;
        }
        prepare_dir(&self.out_dir)?;
        if let Some(path) = names.fixed_path(0).filter(|p| p.exists()) {
            return Err(Error::Exists { path });
        }
        let mut targets = Targets::new().with_target(TARGET, tracing::Level::TRACE);
        let mut described = vec![format!("{TARGET}=trace")];
        for directive in &self.targets {
            let parsed: Targets = directive.parse().map_err(|e: tracing_subscriber::filter::ParseError| {
                Error::Targets { directive: directive.clone(), reason: e.to_string() }
            })?;
            targets = targets.with_targets(parsed);
            described.push(directive.clone());
        }

        if let Some(err) = self.manifest_error {
            return Err(Error::Manifest(err));
        }
        let shared = Arc::new(Shared::new());
        let epoch_unix_ms = match rank {
            Some(spec) => spec.epoch_unix_ms,
            None => SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0),
        };
        let (chrome, guard) = chrome_layer::<S>(self.include_args);
        // tracing-chrome's clock starts inside `build`: this is trace time 0
        // to within the few nanoseconds the call takes to return.
        let origin = Instant::now();
        shared.bind_current_thread();
        let rank = rank.map(|spec| RankContext {
            info: spec.info.clone(),
            offset_us: origin.saturating_duration_since(spec.origin).as_secs_f64() * 1e6,
        });
        let context = Arc::new(SinkContext {
            rank,
            worker: crate::sink::sanitize_worker(&self.worker),
            schedule: self.schedule,
            targets: described.join(","),
            epoch_unix_ms,
            manifest: Mutex::new(self.manifest),
            device_reason: self.device_reason,
            results: Mutex::new(Vec::new()),
            shared: shared.clone(),
            linger: Linger::new(),
        });
        let core = Core {
            schedule: self.schedule,
            step: 0,
            action: Action::None,
            started: false,
            finished: false,
            shared,
            guard: Some(guard),
            names,
            context,
            limit: self.limit,
            segment: None,
            next_segment: 1,
            device: self.device,
            device_error: None,
            origin,
            failed_cycle: None,
        };
        Ok((chrome, targets, core))
    }

    /// Builds with [`build_global`](Self::build_global) and installs a
    /// registry with the layer as the process's global default subscriber.
    ///
    /// Call [`Profiler::start`] right before the first step, so that set-up
    /// work is not counted in `ProfilerStep#0`.
    pub fn try_install(self) -> Result<Profiler> {
        let (layer, profiler) = self.build_global()?;
        tracing_subscriber::registry()
            .with(layer)
            .try_init()
            .map_err(|e| Error::Install(e.to_string()))?;
        Ok(profiler)
    }

    /// Like [`try_install`](Self::try_install), but panics on failure.
    pub fn install(self) -> Profiler {
        self.try_install().expect("failed to install the steptrace profiler")
    }
}

fn prepare_dir(dir: &Path) -> Result<()> {
    let err = |what| move |source| Error::OutDir { path: dir.to_path_buf(), what, source };
    if dir.exists() && !dir.is_dir() {
        return Err(err("it is not a directory")(io::Error::from(io::ErrorKind::NotADirectory)));
    }
    fs::create_dir_all(dir).map_err(err("cannot create it"))?;
    // A probe file of our own, created exclusively (a name someone else
    // holds is skipped, never touched), then removed.
    for n in 0..16 {
        let probe = dir.join(format!(".steptrace-probe-{}-{n}", std::process::id()));
        match fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
            Ok(_) => return fs::remove_file(&probe).map_err(err("cannot remove a file created in it")),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(err("cannot create a file in it")(e)),
        }
    }
    Err(err("cannot create a file in it")(io::Error::from(io::ErrorKind::AlreadyExists)))
}

/// Other names tried for a cycle whose first name is taken (see
/// `FileNames::variant`).
const NAME_VARIANTS: u32 = 16;

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
    current: Option<EnteredSpan>,
}

/// Everything a profiler holds but its entered step span: `Send`, so that
/// a rank's profiler can be prepared on one thread and taken on the
/// rank's own (see [`RankProfilers`](crate::collect::RankProfilers)).
pub(crate) struct Core {
    schedule: Schedule,
    step: u64,
    action: Action,
    started: bool,
    finished: bool,
    shared: Arc<Shared>,
    guard: Option<FlushGuard>,
    names: FileNames,
    context: Arc<SinkContext>,
    limit: Option<u64>,
    segment: Option<Arc<Mutex<SegmentInfo>>>,
    next_segment: u64,
    device: Option<SharedCollector>,
    /// Why the device collector did not open for the current cycle.
    device_error: Option<String>,
    /// Trace time 0.
    origin: Instant,
    /// The cycle whose file could not be created.
    failed_cycle: Option<u64>,
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
        ProfilerBuilder {
            schedule,
            out_dir: PathBuf::from("traces"),
            worker: format!("steptrace-{}", std::process::id()),
            file_name: DEFAULT_FILE_NAME.to_owned(),
            targets: Vec::new(),
            include_args: true,
            manifest: Manifest::default(),
            manifest_error: None,
            limit: None,
            device: None,
            device_reason: None,
            rank_devices: Vec::new(),
            rank_backend: None,
            own_spans: false,
        }
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
        self.enter_step(self.core.schedule.action(0));
    }

    /// Ends the current step and begins the next one.
    pub fn step(&mut self) {
        if self.core.finished {
            return;
        }
        if !self.core.started {
            self.start();
        }
        self.current.take();
        let prev = self.core.action;
        self.core.step += 1;
        let next = self.core.schedule.action(self.core.step);
        if prev.collects() && (prev == Action::RecordAndSave || !next.collects()) {
            self.close_segment(false);
        }
        self.enter_step(next);
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

    /// Warnings about the configuration (for example a schedule without
    /// warmup), for the caller to show.
    pub fn warnings(&self) -> Vec<String> {
        self.core.schedule.warning().into_iter().map(|w| w.to_string()).collect()
    }

    /// Traces finished so far (the writer finalises them in the background).
    pub fn saved(&self) -> Vec<SavedTrace> {
        self.core.context
            .results
            .lock()
            .map(|r| r.iter().filter_map(|(_, r)| r.as_ref().ok().cloned()).collect())
            .unwrap_or_default()
    }

    /// Errors so far, as messages.
    pub fn errors(&self) -> Vec<String> {
        self.core.context
            .results
            .lock()
            .map(|r| r.iter().filter_map(|(_, r)| r.as_ref().err().map(|e| e.to_string())).collect())
            .unwrap_or_default()
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
        self.current.take();
        if self.core.segment.is_some() {
            self.close_segment(true);
        }
        self.core.finished = true;
        self.core.context.linger.stop();
        self.core.shared.finish();
        // Dropping the guard stops tracing-chrome's writer thread after it
        // has finalised every file.
        self.core.guard.take();
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
        let span = tracing::info_span!(target: TARGET, STEP_SPAN, step = self.core.step);
        self.current = Some(span.entered());
        if action.collects() {
            if let Some(guard) = &self.core.guard {
                self.core.context.linger.request(LINGER);
                guard.flush();
            }
        }
    }

    fn open_segment(&mut self) {
        let cycle = self.core.schedule.cycle_of(self.core.step).unwrap_or(0);
        if self.core.failed_cycle == Some(cycle) {
            // Its file could not be created: said once, not at every step.
            return;
        }
        let first = self.core.names.final_path(cycle);
        // A rank's files sit in the cycle's folder, made by the first rank there.
        let mut created = match first.parent().filter(|dir| !dir.as_os_str().is_empty() && !dir.is_dir()) {
            Some(dir) => fs::create_dir_all(dir)
                .map_err(|source| Error::OutDir { path: dir.to_path_buf(), what: "cannot create the cycle's folder", source }),
            None => Ok(()),
        }
        .and_then(|()| self.create_segment(cycle, first.clone()));
        // A name taken by a concurrent run of the same worker in the same
        // millisecond: try a few others rather than lose the cycle.
        for n in 1..=NAME_VARIANTS {
            let Err(Error::Exists { .. }) = &created else { break };
            let Some(path) = self.core.names.variant(&first, n) else { break };
            created = self.create_segment(cycle, path);
        }
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
    fn create_segment(&self, cycle: u64, final_path: PathBuf) -> Result<(SegmentWriter, Arc<Mutex<SegmentInfo>>)> {
        let info = Arc::new(Mutex::new(SegmentInfo {
            cycle,
            final_path,
            steps: Vec::new(),
            ended_by_finish: false,
            cut_reason: None,
            device: DeviceOutcome::NotCollected,
        }));
        Ok((SegmentWriter::create(info.clone(), self.core.context.clone(), self.core.limit)?, info))
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
    fn close_device(&mut self) -> DeviceOutcome {
        let Some(device) = &self.core.device else { return DeviceOutcome::NotCollected };
        if let Some(err) = self.core.device_error.take() {
            return DeviceOutcome::Failed(format!("the device tracer did not start: {err}"));
        }
        match device.lock() {
            Ok(mut collector) => match collector.close(self.core.origin) {
                Ok(window) => DeviceOutcome::Window(Box::new(window)),
                Err(err) => DeviceOutcome::Failed(format!("the device tracer failed at the window's end: {err}")),
            },
            Err(_) => DeviceOutcome::Failed("the device collector's lock was poisoned".to_owned()),
        }
    }

    fn close_segment(&mut self, by_finish: bool) {
        self.core.context.linger.stop();
        self.core.shared.set_segment(0);
        if let Some(info) = self.core.segment.take() {
            let device = self.close_device();
            if let Ok(mut info) = info.lock() {
                info.ended_by_finish = by_finish;
                info.device = device;
            }
            if let Some(guard) = &self.core.guard {
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
