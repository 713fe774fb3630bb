//! [`ProfilerBuilder`]: what a [`Profiler`] records and where it writes.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tracing_core::Subscriber;
use tracing_subscriber::filter::{Filtered, Targets};
use tracing_subscriber::layer::{Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

use super::capture::OnDemand;
use super::device::DeviceCollector;
use super::profiler::{Core, Profiler};
use super::ranks::RankSpec;
use crate::collect::gate::{GateFilter, GateLayer, Shared};
use crate::collect::schedule::{Action, Schedule};
use crate::collect::sink::{chrome_layer, FileNames, Linger, RankContext, SinkContext, DEFAULT_FILE_NAME};
use crate::error::{Error, Result};
use crate::format::names::TARGET;
use crate::format::{Manifest, ManifestError};

/// A device collector shared by the builder's clones.
pub(crate) type SharedCollector = Arc<Mutex<Box<dyn DeviceCollector>>>;

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
    pub(crate) fn new(schedule: Schedule) -> ProfilerBuilder {
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
    /// [target policy](crate::collect::gate#target-policy).
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
    /// [gate docs](crate::collect::gate) for what per-layer filtering costs.
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
        if !self_own {
            core.shared.allow_direct();
        }
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
        let on_demand = match (self.schedule.is_on_demand(), rank) {
            (false, _) => None,
            (true, Some(spec)) => {
                return Err(Error::Rank {
                    rank: spec.info.rank,
                    world_size: spec.info.world_size,
                    why: "an on-demand schedule works with one profiler per process, not per rank".to_owned(),
                })
            }
            (true, None) => Some(OnDemand::start(
                &self.out_dir,
                &crate::collect::sink::sanitize_worker(&self.worker),
                &self.schedule,
            )?),
        };
        let shared = Arc::new(Shared::new(self.include_args));
        let epoch_unix_ms = match rank {
            Some(spec) => spec.epoch_unix_ms,
            None => SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0),
        };
        let (chrome, guard) = chrome_layer::<S>(self.include_args);
        // tracing-chrome's clock starts inside `build`: this is trace time 0
        // to within the few nanoseconds the call takes to return.
        let origin = Instant::now();
        shared.batches.set_origin(origin);
        shared.bind_current_thread();
        let rank = rank.map(|spec| RankContext {
            info: spec.info.clone(),
            offset_us: origin.saturating_duration_since(spec.origin).as_secs_f64() * 1e6,
        });
        let context = Arc::new(SinkContext {
            rank,
            worker: crate::collect::sink::sanitize_worker(&self.worker),
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
            on_demand,
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
        tracing_subscriber::registry().with(layer).try_init().map_err(|e| Error::Install(e.to_string()))?;
        // The registry and the gate alone: nothing else needs steptrace's own spans.
        profiler.record_own_spans_directly(None);
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
