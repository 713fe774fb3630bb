//! [`LearnerProfiler`]: the handle a burn-train program holds.

use std::sync::Arc;

use burn::module::Module;
use burn::optim::{ModuleOptimizer, Optimizer};
use burn::prelude::Device;
use burn::train::ApplicationLoggerInstaller;
use steptrace::{Profiler, ProfilerBuilder, SavedTrace};

use super::batcher::ProfiledBatcher;
use super::driver::Driver;
use super::optimizer::{Plan, Profiled};
use super::watch::{Watch, WatchSettings};
use super::{LearnerError, EPOCH_BOUNDARY};
use crate::backend::Selection;
use crate::device::{DeviceActivityMode, DeviceSetup};
use crate::SyncPolicy;

/// Profiles a burn-train run: wraps its optimizer and batcher, and opens
/// `ProfilerStep#0` when `launch` begins. See the [module docs](super).
///
/// The profiler stays on the thread that created the handle; `launch` must
/// run on that thread (burn-train's default single-device strategy runs
/// the loop on the calling thread). Dropping the handle there finishes the
/// profiler, saving a cycle cut short as a partial file;
/// [`finish`](LearnerProfiler::finish) also returns what was written.
#[derive(Debug)]
pub struct LearnerProfiler {
    pub(super) driver: Arc<Driver>,
    /// The session it came from ([`from_session`](LearnerProfiler::from_session)): the
    /// backend, the device, what the console says.
    pub(super) session: Option<crate::Session>,
}

/// What a profiled run wrote, from [`LearnerProfiler::finish`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ProfiledRun {
    /// Every trace file, in cycle order.
    pub saved: Vec<SavedTrace>,
    /// Optimizer updates, one per `ProfilerStep#N`.
    pub updates: u64,
    /// Steps that also held validation, and after it checkpointing: the
    /// [epoch boundaries](super#epoch-boundaries).
    pub epoch_boundary_steps: Vec<u64>,
    /// Updates that could not end a step: made on another thread than the
    /// profiler's, or after it finished. Zero in a single-device run.
    pub missed_updates: u64,
    /// With one profiler per rank ([`LearnerProfiler::install_ranks`]):
    /// the ranks, whose files `saved` lists in rank order.
    pub world_size: Option<u32>,
    /// Ranks whose threads still ran at [`LearnerProfiler::finish`]:
    /// their files are saved when those threads end.
    pub running_ranks: Vec<u32>,
}

impl LearnerProfiler {
    /// Builds the profiler, installs it as the process's global `tracing`
    /// subscriber, and fills in the manifest fields this integration knows
    /// (see the [module docs](super#the-manifest)).
    ///
    /// # Errors
    ///
    /// [`LearnerError::SubscriberExists`] when a global subscriber is
    /// already installed (burn-train's application logger, say): nothing is
    /// installed then. [`LearnerError::Profiler`] when the builder's output
    /// directory, file-name template, targets or manifest are unusable.
    pub fn install(builder: ProfilerBuilder) -> Result<Self, LearnerError> {
        // The one install of every steptrace-burn program: kernel attribution's stamps, the
        // cold start's log capture, NVTX when a tool is attached, the direct span path.
        let profiler = crate::backend::install_profiler(builder)?;
        Ok(Self::from_profiler(profiler))
    }

    /// Drives the profiler of `session`: the backend it chose (labelled in every trace, with
    /// any fallback's reason), its device activity and kernel attribution, its on-demand
    /// capture and its console. Build the model on [`Session::device`](crate::Session::device)
    /// and call [`LearnerProfiler::finish`] at the end: it says what was written as the
    /// session would.
    ///
    /// # Errors
    ///
    /// [`LearnerError::NoProfiler`] for a session built with
    /// [`Profiling::Off`](crate::Profiling::Off).
    pub fn from_session(mut session: crate::Session) -> Result<Self, LearnerError> {
        let profiler = session.take_profiler().ok_or(LearnerError::NoProfiler)?;
        // burn-train runs the loop and never looks at the session's Ctrl-C flag: Ctrl-C keeps
        // its usual meaning (a cycle in progress is then left as a readable partial file).
        session.release_signals();
        // burn-train's loop syncs nothing, and its length is the session's to declare only
        // when the program did (`steps`, `startup_steps`).
        let declared = session.declared_startup();
        profiler.update_manifest(|m| {
            m.sync_policy = Some(SyncPolicy::None.to_string());
            m.sync_meaning = Some(SyncPolicy::None.meaning().into());
            if !declared {
                m.startup_steps = None;
            }
        });
        let settings = session.watch_settings();
        if settings.memory {
            profiler.update_manifest(|m| {
                m.extra.insert("memory_description".into(), serde_json::json!(super::watch::METHOD));
            });
        }
        let mut handle = Self::from_profiler(profiler);
        handle.driver.set_watch(Watch::new(session.device(), settings));
        handle.driver.set_names_layers(session.names_layers());
        handle.session = Some(session);
        Ok(handle)
    }

    /// Takes a profiler whose layer the caller has installed in a
    /// subscriber of its own (see [`ProfilerBuilder::build`]), to keep
    /// another layer beside steptrace's. Call it on the thread that will
    /// call `launch`, before the first step.
    pub fn from_profiler(profiler: Profiler) -> Self {
        profiler.update_manifest(|m| describe_trainer(m, "burn-train 0.22 Learner"));
        Self { driver: Driver::bind(profiler), session: None }
    }

    /// One profiler per rank, for a data-parallel run whose ranks each run
    /// their own training loop on a thread of their own (burn-train's
    /// `DistributedDataParallel` strategy): rank `r` trains on
    /// `devices[r]` (the device list given to the strategy, in its order;
    /// devices compare as burn compares them, by hardware, autodiff or
    /// not). Each rank's files go to one folder per cycle (see
    /// [`steptrace::ranks`]), and `steptrace report` compares the ranks.
    ///
    /// A rank's thread takes its profiler at its first optimizer update,
    /// by the device of the parameters it updates (a device listed twice
    /// is taken by the first thread that updates on it), and
    /// `ProfilerStep#0` opens there; batches built on a thread of no rank
    /// are recorded for the rank of their device. burn-train's `MultiDevice` strategy is not that: one
    /// optimizer on the launching thread and one short-lived worker per
    /// device and epoch; profile it with [`install`](Self::install), as
    /// one process (see the book's multi-GPU chapter).
    ///
    /// # Errors
    ///
    /// As [`install`](Self::install), and [`LearnerError::Profiler`] when
    /// `devices` is empty or longer than [`steptrace::ranks::MAX_RANKS`].
    pub fn install_ranks(builder: ProfilerBuilder, devices: Vec<Device>) -> Result<Self, LearnerError> {
        let world = u32::try_from(devices.len()).unwrap_or(u32::MAX);
        let group = builder.rank_backend("burn-train DistributedDataParallel").try_install_ranks(world)?;
        group.update_manifest(|m| describe_trainer(m, "burn-train 0.22 Learner, one profiler per rank"));
        Ok(Self { driver: Driver::bind_ranks(group, devices), session: None })
    }
}

/// The manifest fields this integration knows.
fn describe_trainer(m: &mut steptrace::format::Manifest, trainer: &str) {
    m.mode.get_or_insert_with(|| "train".into());
    if m.sync_policy.is_none() {
        m.sync_policy = Some(SyncPolicy::None.to_string());
        m.sync_meaning = Some(SyncPolicy::None.meaning().into());
    }
    let known = [
        ("trainer", trainer.to_owned()),
        ("step_unit", "one optimizer update: ProfilerStep#N holds update N".to_owned()),
        (
            "data_load",
            "the user's Batcher::batch, on the data loader's threads; it includes the host-to-device \
             copy, so there is no transfer.h2d span"
                .to_owned(),
        ),
        (
            "epoch_boundaries",
            format!("steps that also hold validation and checkpointing carry the instant `{EPOCH_BOUNDARY}`"),
        ),
    ];
    for (key, value) in known {
        m.extra.entry(key).or_insert_with(|| value.into());
    }
}

impl LearnerProfiler {
    /// The optimizer for `Learner::new`: burn's [`ModuleOptimizer`] over
    /// `optimizer` wrapped in [`Profiled`], so that each update of `model`
    /// ends a step.
    ///
    /// `optimizer` is the per-tensor optimizer that a config's `build()`
    /// returns (`AdamConfig::new().build()`), not the `ModuleOptimizer`
    /// that its `init()` returns: burn's `ModuleOptimizer` is a concrete
    /// type, and only what it calls can be wrapped. `init()` also applies
    /// the config's gradient clipping; to keep it, add it to the result:
    /// `.with_grad_clipping(GradientClippingConfig::Norm(1.0).init())`.
    ///
    /// `model` is the model that the optimizer will update (as built, before
    /// `Learner::new`; its parameters are read, not initialised): its
    /// parameters' order and shapes tell which call of burn's optimizer is
    /// the last of an update (see [which call ends an update](super#which-call-ends-an-update)),
    /// and their count goes to the manifest. The optimizer record is `O`'s
    /// unchanged: checkpoints load into either.
    pub fn optimizer<O: Optimizer, M: Module>(&self, optimizer: O, model: &M) -> ModuleOptimizer {
        ModuleOptimizer::from(self.profiled(optimizer, model))
    }

    /// [`optimizer`](Self::optimizer) without the `ModuleOptimizer`: the
    /// per-tensor wrapper, for a `ModuleOptimizer` of several parameter
    /// groups (`ModuleOptimizer::with_group`). Wrap every group's optimizer,
    /// with the same model, so that every parameter's update is seen.
    pub fn profiled<O: Optimizer, M: Module>(&self, optimizer: O, model: &M) -> Profiled<O> {
        #[cfg(feature = "attribution")]
        if self.driver.names_layers() {
            crate::attribute::note_parameters(model);
        }
        if self.driver.watch(|w| w.model(model)).is_none() && !self.driver.is_ranked() {
            // Without a session: the parameters, for a failed step's report.
            if let Some(device) = model.devices().into_iter().next() {
                let settings = WatchSettings { memory: false, batch_size: None, console_full: false };
                let mut watch = Watch::new(device, settings);
                watch.model(model);
                self.driver.set_watch(watch);
            }
        }
        Profiled::new(optimizer, self.driver.clone(), Arc::new(Plan::of(model)))
    }

    /// Wraps the batcher of the data loaders: batches are built in
    /// `data.load` spans. Clone the result into both the training and the
    /// validation loader, so that epoch boundaries are flagged.
    pub fn batcher<Bt>(&self, batcher: Bt) -> ProfiledBatcher<Bt> {
        ProfiledBatcher::new(batcher, self.driver.clone())
    }

    /// For `SupervisedTraining::with_application_logger`: instead of
    /// burn-train's file logger, which would try to install a second global
    /// subscriber, an "installer" that installs nothing and opens
    /// `ProfilerStep#0` as `launch` begins.
    ///
    /// burn-train's `experiment.log` is then not written; `log` records go
    /// through steptrace's subscriber, which keeps only steptrace's own
    /// targets unless [`ProfilerBuilder::targets`] opts others in.
    pub fn application_logger(&self) -> Option<Box<dyn ApplicationLoggerInstaller>> {
        Some(Box::new(LaunchStart { driver: self.driver.clone() }))
    }

    /// Opens `ProfilerStep#0` now, if it is not open yet, for a program
    /// that does not use [`application_logger`](Self::application_logger).
    /// Without either, step 0 opens at the first update and holds only its
    /// optimizer call.
    pub fn start(&self) {
        self.driver.start();
    }

    /// Optimizer updates so far.
    pub fn updates(&self) -> u64 {
        self.driver.updates()
    }

    /// The steps flagged as epoch boundaries so far.
    pub fn epoch_boundary_steps(&self) -> Vec<u64> {
        self.driver.boundaries()
    }

    /// Ends profiling: closes the current step (the one after the last
    /// update, which holds the last validation), saves a cycle cut short,
    /// waits for every file, and says what the run recorded.
    ///
    /// # Errors
    ///
    /// [`LearnerError::WrongThread`] off the thread that created the
    /// handle; [`LearnerError::Profiler`] with the first cycle that could
    /// not be written (the others are on disk).
    pub fn finish(self) -> Result<ProfiledRun, LearnerError> {
        let mut saved = Vec::new();
        let (world_size, running_ranks) = if self.driver.is_ranked() {
            let (outcomes, running) = self.driver.finish_ranks();
            for (_, results) in outcomes {
                for result in results {
                    saved.push(result?);
                }
            }
            (self.driver.world_size(), running)
        } else {
            let profiler = self.driver.take().ok_or(LearnerError::WrongThread)?;
            let mut errors = Vec::new();
            let mut first_error = None;
            for result in profiler.finish_all() {
                match result {
                    Ok(trace) => saved.push(trace),
                    Err(e) => {
                        errors.push(e.to_string());
                        first_error.get_or_insert(e);
                    }
                }
            }
            if let Some(session) = &self.session {
                session.say_written(&saved, &errors);
                if let Some(line) = self.driver.watch(|w| w.summary()).flatten() {
                    session.say_line(&line);
                }
            }
            if let Some(e) = first_error {
                return Err(e.into());
            }
            (None, Vec::new())
        };
        Ok(ProfiledRun {
            saved,
            updates: self.driver.updates(),
            epoch_boundary_steps: self.driver.boundaries(),
            missed_updates: self.driver.missed(),
            world_size,
            running_ranks,
        })
    }
}

impl Drop for LearnerProfiler {
    fn drop(&mut self) {
        // Saves a cycle cut short; errors are the profiler's to print.
        drop(self.driver.take());
    }
}

/// Labels the backend in the manifest with steptrace's [`Selection`]: its
/// label (with `FALLBACK` and the reason when `auto` fell back), kind,
/// device and fallback reason, as `steptrace train` writes them. Without
/// it the first update records burn's own name for the backend.
///
/// ```
/// use steptrace_burn::backend::{self, BackendChoice};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let selection = backend::select(BackendChoice::Cpu)?;
/// let builder = steptrace::Profiler::builder("warmup=1,active=2,repeat=1".parse()?);
/// let builder = steptrace_burn::learner::with_backend(builder, &selection);
/// # drop(builder);
/// # Ok(())
/// # }
/// ```
///
/// It also sets up device activity as `steptrace train` does by default
/// (`--device-activity auto`): on CUDA, CUPTI records kernels, copies and
/// launches inside each window; elsewhere the trace says "not observed" and
/// why. [`with_device_activity`] chooses the mode.
pub fn with_backend(builder: ProfilerBuilder, selection: &Selection) -> ProfilerBuilder {
    with_device_activity(label(builder, selection), DeviceActivityMode::Auto, selection)
}

/// Device activity for the run on `selection`, in `mode`: a CUPTI collector
/// on CUDA, or the reason it is not observed, which every trace then
/// carries.
pub fn with_device_activity(
    builder: ProfilerBuilder,
    mode: DeviceActivityMode,
    selection: &Selection,
) -> ProfilerBuilder {
    let builder = builder.manifest("device_activity", mode.to_string());
    match crate::device::setup(mode, selection) {
        DeviceSetup::Collector(collector, _) => builder.device_collector(collector),
        DeviceSetup::NotObserved(reason) => builder.device_not_observed(reason),
    }
}

fn label(builder: ProfilerBuilder, selection: &Selection) -> ProfilerBuilder {
    builder
        .manifest("backend", selection.label())
        .manifest("backend_kind", selection.kind.to_string())
        .manifest("device", selection.device.clone())
        .manifest("fallback_reason", selection.fallback_reason.clone())
        .manifest("requested_backend", selection.requested.to_string())
        .manifest("burn_type", selection.backend_type_name())
}

/// The [`LearnerProfiler::application_logger`] installer.
struct LaunchStart {
    driver: Arc<Driver>,
}

impl ApplicationLoggerInstaller for LaunchStart {
    fn install(&self) -> Result<(), String> {
        if self.driver.start() {
            Ok(())
        } else {
            Err("steptrace: `launch` runs on another thread than the one that created the LearnerProfiler, \
                 or after it finished: no step will be recorded"
                .into())
        }
    }
}
