//! Profiling a process whose ranks are threads: one profiler per rank, one
//! file per rank and cycle.
//!
//! burn trains on several devices in one process, a thread per device.
//! [`ProfilerBuilder::build_ranks`] makes, from one builder, a profiler
//! per rank and one [`RankLayer`] that sends each span to its rank's file:
//!
//! - every rank follows the same schedule from the same step 0, so cycle
//!   `k` covers the same `ProfilerStep#N` numbers on every rank, as long
//!   as each rank calls [`Profiler::step`] once per training step;
//! - a rank's files sit in one folder per cycle,
//!   `{worker}.{run time}.cycle{k}/`, named by
//!   [`RANK_FILE_NAME`](crate::collect::sink::RANK_FILE_NAME) (rank and world size
//!   in the name), each headed by torch.profiler's `distributedInfo`, so
//!   that Holistic Trace Analysis loads one folder as the run's ranks;
//! - the ranks share the run's clock: `metadata.clock.epoch_unix_ms` is
//!   the same in every file, and `clock.offset_us` says where each rank's
//!   trace time 0 lies on it.
//!
//! # Which file a span goes to
//!
//! A thread belongs to a rank once it takes that rank's profiler
//! ([`RankProfilers::take`]) or enters the rank ([`enter`]), as a data
//! loader's thread does for the rank it feeds. A span goes to the file of
//! the rank its thread belonged to when it was created, wherever it is
//! entered later; an event, to its thread's rank. Threads of no rank are
//! not recorded (nothing is created for them), and
//! [`RankProfilers::unattributed`] counts the spans they tried to open
//! while a window was open. tracing-chrome binds each thread to one
//! writer for life: a thread that records for two ranks loses the second
//! rank's events, counted in each file's `lost_events_other_sink`. The
//! thread that builds the ranks is bound to rank 0's writer: it may take
//! rank 0, and no other.
//!
//! # Examples
//!
//! ```
//! use steptrace::Profiler;
//! use tracing_subscriber::prelude::*;
//!
//! # fn docs() -> Result<(), steptrace::Error> {
//! let (layer, ranks) = Profiler::builder("wait=1,warmup=1,active=2,repeat=1".parse()?)
//!     .out_dir("traces")
//!     .worker("ddp")
//!     .build_ranks(2)?;
//! tracing_subscriber::registry().with(layer).init();
//! std::thread::scope(|s| {
//!     for rank in 0..2 {
//!         let ranks = &ranks;
//!         s.spawn(move || -> Result<(), steptrace::Error> {
//!             let mut profiler = ranks.take(rank)?;
//!             profiler.start();
//!             for _ in 0..4 {
//!                 let _step = tracing::info_span!(target: "steptrace", "train.step").entered();
//!                 drop(_step);
//!                 profiler.step();
//!             }
//!             profiler.finish().map(drop)
//!         });
//!     }
//! });
//! # Ok(()) }
//! ```

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Interest, Metadata, Subscriber};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::{Context, Filter, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

use super::profiler::Core;
use crate::collect::gate::GateLayer;
use crate::error::{Error, Result};
use crate::format::DistributedInfo;
use crate::{Profiler, ProfilerBuilder};

/// The most ranks one process may profile.
pub const MAX_RANKS: u32 = 4096;

/// The `distributedInfo.backend` of a builder that names none.
pub const DEFAULT_RANK_BACKEND: &str = "threads";

const NO_RANK: u32 = u32::MAX;

/// Why a rank's device is not observed when the builder had one collector
/// for the whole process.
pub const ONE_COLLECTOR: &str = "one device collector was given for several ranks; each rank needs its own \
     (ProfilerBuilder::rank_device_collectors): a process-wide tracer such as CUPTI is not yet split by rank";

thread_local! {
    /// The rank this thread records for.
    static THREAD_RANK: Cell<u32> = const { Cell::new(NO_RANK) };
}

/// The rank the calling thread records for, if any.
#[must_use]
pub fn current() -> Option<u32> {
    let rank = THREAD_RANK.with(Cell::get);
    (rank != NO_RANK).then_some(rank)
}

/// Makes the calling thread record for `rank` until the returned guard
/// drops (then it records for the rank it had before, if any). For helper
/// threads of a rank, such as its data loader's.
pub fn enter(rank: u32) -> RankScope {
    let previous = THREAD_RANK.with(|r| r.replace(rank));
    RankScope { previous, _not_send: std::marker::PhantomData }
}

/// Returned by [`enter`]: restores the thread's previous rank on drop.
#[derive(Debug)]
#[must_use = "the thread records for the rank only while the scope lives"]
pub struct RankScope {
    previous: u32,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for RankScope {
    fn drop(&mut self) {
        THREAD_RANK.with(|r| r.set(self.previous));
    }
}

/// What a rank's profiler is built with, shared by the group.
#[derive(Debug)]
pub(crate) struct RankSpec {
    pub(crate) info: DistributedInfo,
    /// Names the run's cycle folders.
    pub(crate) run_stamp: String,
    /// The run's time 0, in Unix ms and as an instant.
    pub(crate) epoch_unix_ms: u128,
    pub(crate) origin: Instant,
}

/// The per-rank profilers of one run, waiting to be taken by their
/// threads. See the [module docs](self).
#[derive(Debug)]
pub struct RankProfilers {
    slots: Mutex<Vec<Option<Core>>>,
    world_size: u32,
    unattributed: Arc<AtomicU64>,
}

impl RankProfilers {
    /// Takes rank `rank`'s profiler on the calling thread, which then
    /// records for that rank. Step it on this thread.
    ///
    /// # Errors
    ///
    /// [`Error::Rank`] when `rank` is not below the world size, or its
    /// profiler was taken already.
    pub fn take(&self, rank: u32) -> Result<Profiler> {
        let refuse = |why: String| Error::Rank { rank, world_size: self.world_size, why };
        let mut slots = self.slots.lock().map_err(|_| refuse("the profilers' lock was poisoned".into()))?;
        let slot = slots.get_mut(rank as usize).ok_or_else(|| refuse("there is no such rank".into()))?;
        let core = slot.take().ok_or_else(|| refuse("its profiler was taken already".into()))?;
        THREAD_RANK.with(|r| r.set(rank));
        Ok(core.into_profiler())
    }

    /// How many ranks.
    #[must_use]
    pub fn world_size(&self) -> u32 {
        self.world_size
    }

    /// Spans that threads of no rank tried to open while a rank recorded:
    /// not written anywhere.
    #[must_use]
    pub fn unattributed(&self) -> u64 {
        self.unattributed.load(Ordering::Relaxed)
    }

    /// Changes the manifest of every rank whose profiler is not taken yet
    /// (taken ones change their own, with
    /// [`Profiler::update_manifest`]).
    pub fn update_manifest(&self, change: impl Fn(&mut crate::format::Manifest)) {
        if let Ok(slots) = self.slots.lock() {
            for core in slots.iter().flatten() {
                core.update_manifest(&change);
            }
        }
    }

    /// Finishes the profilers no thread took (saving nothing: they never
    /// started), and returns their ranks.
    pub fn untaken(&self) -> Vec<u32> {
        let Ok(mut slots) = self.slots.lock() else { return Vec::new() };
        let mut ranks = Vec::new();
        for (rank, slot) in slots.iter_mut().enumerate() {
            if let Some(core) = slot.take() {
                drop(core.into_profiler());
                ranks.push(rank as u32);
            }
        }
        ranks
    }
}

// === impl ProfilerBuilder (ranks) ===

impl ProfilerBuilder {
    /// Builds one profiler per rank for a process whose `world_size` ranks
    /// are threads, and the layer that routes each thread's spans to its
    /// rank's files. See the [module docs](crate::collect::ranks).
    ///
    /// The layer filters globally, like
    /// [`build_global`](Self::build_global): make it the subscriber's only
    /// layer. Device collectors are given per rank
    /// ([`rank_device_collectors`](Self::rank_device_collectors)); a
    /// single [`device_collector`](Self::device_collector) cannot serve
    /// several ranks: it is left unused, and every file says why the
    /// device is not observed ([`ONE_COLLECTOR`]).
    ///
    /// # Errors
    ///
    /// Those of [`build`](Self::build); [`Error::Rank`] for a world size
    /// of 0 or above [`MAX_RANKS`], or collectors that do not match the
    /// ranks; [`Error::Template`] for a file name without `{rank}`.
    pub fn build_ranks<S>(mut self, world_size: u32) -> Result<(RankLayer<S>, RankProfilers)>
    where
        S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let refuse = |why: &str| Error::Rank { rank: 0, world_size, why: why.to_owned() };
        if world_size == 0 || world_size > MAX_RANKS {
            return Err(refuse(&format!("a run has 1 to {MAX_RANKS} ranks")));
        }
        if self.device.take().is_some() && self.rank_devices.is_empty() {
            // A tracer of the whole process (CUPTI) cannot be opened and closed by each
            // rank on its own: say so in every file rather than fail the run.
            self.device_reason = Some(ONE_COLLECTOR.to_owned());
        }
        let mut collectors = std::mem::take(&mut self.rank_devices);
        if !collectors.is_empty() && collectors.len() != world_size as usize {
            return Err(refuse(&format!("{} device collectors were given for {world_size} ranks", collectors.len())));
        }
        let backend = self.rank_backend.clone().unwrap_or_else(|| DEFAULT_RANK_BACKEND.to_owned());
        let now = SystemTime::now();
        let origin = Instant::now();
        let epoch_unix_ms = now.duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
        let run_stamp = crate::collect::sink::utc_stamp(now);
        let mut layers = Vec::with_capacity(world_size as usize);
        let mut cores = Vec::with_capacity(world_size as usize);
        let mut targets = None;
        // Building a Chrome layer binds the building thread to its writer: build rank 0's
        // last, so that this thread can be rank 0's.
        for rank in (0..world_size).rev() {
            let spec = RankSpec {
                info: DistributedInfo::new(backend.clone(), rank, world_size),
                run_stamp: run_stamp.clone(),
                epoch_unix_ms,
                origin,
            };
            let mut builder = self.clone();
            builder.device = collectors.pop();
            let (chrome, rank_targets, core) = builder.parts::<S>(Some(&spec))?;
            layers.push(GateLayer::new(chrome, core.shared_state(), Some(rank_targets.clone())));
            targets.get_or_insert(rank_targets);
            cores.push(Some(core));
        }
        layers.reverse();
        cores.reverse();
        let unattributed = Arc::new(AtomicU64::new(0));
        let layer =
            RankLayer { ranks: layers, targets: targets.unwrap_or_default(), unattributed: unattributed.clone() };
        Ok((layer, RankProfilers { slots: Mutex::new(cores), world_size, unattributed }))
    }

    /// Builds with [`build_ranks`](Self::build_ranks) and installs the
    /// layer in a registry, as the process's global default subscriber.
    ///
    /// # Errors
    ///
    /// Those of [`build_ranks`](Self::build_ranks), and
    /// [`Error::Install`] when a global subscriber is installed already.
    pub fn try_install_ranks(self, world_size: u32) -> Result<RankProfilers> {
        let (layer, ranks) = self.build_ranks(world_size)?;
        tracing_subscriber::registry().with(layer).try_init().map_err(|e| Error::Install(e.to_string()))?;
        Ok(ranks)
    }
}

// === impl RankLayer ===

/// The layer of a run of several ranks: each rank's gate and Chrome sink,
/// and the routing between them. See the [module docs](self).
pub struct RankLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    ranks: Vec<GateLayer<S>>,
    targets: Targets,
    unattributed: Arc<AtomicU64>,
}

impl<S> std::fmt::Debug for RankLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankLayer").field("ranks", &self.ranks.len()).finish_non_exhaustive()
    }
}

/// The rank a span was created for.
struct OwnerRank(u32);

impl<S> RankLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    /// The calling thread's rank's layer.
    fn here(&self) -> Option<&GateLayer<S>> {
        current().and_then(|rank| self.ranks.get(rank as usize))
    }

    /// The layer of the rank `id` was created for.
    fn owner(&self, id: &Id, ctx: &Context<'_, S>) -> Option<&GateLayer<S>> {
        let span = ctx.span(id)?;
        let rank = span.extensions().get::<OwnerRank>()?.0;
        self.ranks.get(rank as usize)
    }
}

impl<S> Layer<S> for RankLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if self.targets.would_enable(meta.target(), meta.level()) {
            Interest::sometimes()
        } else {
            Interest::never()
        }
    }

    #[inline]
    fn enabled(&self, meta: &Metadata<'_>, ctx: Context<'_, S>) -> bool {
        match self.here() {
            Some(layer) => layer.enabled(meta, ctx),
            None => {
                if self.ranks.iter().any(|l| l.enabled(meta, ctx.clone())) {
                    self.unattributed.fetch_add(1, Ordering::Relaxed);
                }
                false
            }
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Filter::<S>::max_level_hint(&self.targets)
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(rank) = current().filter(|r| (*r as usize) < self.ranks.len()) else { return };
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(OwnerRank(rank));
        }
        self.ranks[rank as usize].on_new_span(attrs, id, ctx);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(layer) = self.owner(id, &ctx) {
            layer.on_record(id, values, ctx);
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if let Some(layer) = self.owner(id, &ctx) {
            layer.on_enter(id, ctx);
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if let Some(layer) = self.owner(id, &ctx) {
            layer.on_exit(id, ctx);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if let Some(layer) = self.here() {
            layer.on_event(event, ctx);
        }
    }
}
