//! The process-wide collector: buffer callbacks, windows of enabled activity kinds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cudarc::cupti::sys::CUpti_ActivityKind as K;

use crate::buffers::{self, lock, SINK};
use crate::clock::ClockPair;
use crate::error::CuptiError;
use crate::ffi::{guarded, Lib};
use crate::launch::{on_driver_api, LAUNCHES};
use crate::records::LAUNCH_CBIDS;
use crate::window::{name_os_threads, LaunchSource, Window};

/// Set while a [`Collector`] exists (CUPTI is process-wide: one collector at a time).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Set once the buffer callbacks are registered; they stay registered for the process.
static REGISTERED: AtomicBool = AtomicBool::new(false);

pub(crate) fn is_active() -> bool {
    ACTIVE.load(Ordering::Acquire)
}

/// How launch records are collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LaunchRecords {
    /// No launch records.
    Off,
    /// The callback API, for launch callback ids only (the default; see the crate docs).
    #[default]
    Callback,
    /// The `DRIVER` activity kind (every driver call is recorded by CUPTI; non-launches
    /// are dropped as records are read). Costs more; measured +2.8–5.6% on a 2 ms step.
    DriverActivity,
}

/// What to collect, and how much memory to give CUPTI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectorConfig {
    /// `CONCURRENT_KERNEL` records.
    pub kernels: bool,
    /// `MEMCPY` records (and `MEMCPY2`, peer copies, where CUPTI supports it).
    pub memcpy: bool,
    /// `MEMSET` records.
    pub memset: bool,
    /// `SYNCHRONIZATION` records.
    pub synchronization: bool,
    /// Launch records.
    pub launches: LaunchRecords,
    /// Size of each activity buffer handed to CUPTI (at least 64 KiB).
    pub buffer_bytes: usize,
    /// Buffers allocated up front and kept for reuse (at most 8).
    pub pooled_buffers: usize,
    /// Kernel records to reserve room for at each `enable` (copies, launches in proportion).
    pub expected_kernels: usize,
    /// Leave the activity kinds and launch callbacks enabled after a window closes, so that
    /// the next `enable` turns nothing on: it only opens the sink. Every launch between
    /// windows then pays CUPTI's per-launch cost, and the records of work done between
    /// windows are discarded (counted in [`Window::outside_records`]).
    pub keep_enabled: bool,
}

impl Default for CollectorConfig {
    fn default() -> Self {
        Self {
            kernels: true,
            memcpy: true,
            memset: true,
            synchronization: false,
            launches: LaunchRecords::Callback,
            buffer_bytes: 4 << 20,
            pooled_buffers: 2,
            expected_kernels: 16_384,
            keep_enabled: false,
        }
    }
}

impl CollectorConfig {
    /// The activity kinds to enable, each with whether failing to enable it is fatal.
    fn kinds(&self) -> Vec<(K, bool)> {
        let mut kinds = Vec::new();
        if self.kernels {
            kinds.push((K::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, true));
        }
        if self.memcpy {
            kinds.push((K::CUPTI_ACTIVITY_KIND_MEMCPY, true));
            kinds.push((K::CUPTI_ACTIVITY_KIND_MEMCPY2, false));
        }
        if self.memset {
            kinds.push((K::CUPTI_ACTIVITY_KIND_MEMSET, true));
        }
        if self.synchronization {
            kinds.push((K::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, true));
        }
        if self.launches == LaunchRecords::DriverActivity {
            kinds.push((K::CUPTI_ACTIVITY_KIND_DRIVER, true));
        }
        kinds
    }
}

/// The state of an open window.
#[derive(Debug)]
struct OpenWindow {
    open: ClockPair,
    kinds: Vec<K>,
    callbacks: Vec<u32>,
    problems: Vec<CuptiError>,
    /// What opening took, by part.
    open_cost: Vec<(&'static str, Duration)>,
    /// Opened with the kinds already on from an earlier window: records of work done before
    /// it opened may reach it.
    reopened: bool,
}

/// What a kept collector left on when its last window closed.
#[derive(Debug)]
struct Kept {
    kinds: Vec<K>,
    callbacks: Vec<u32>,
}

/// The process-wide CUPTI activity collector. See the crate docs for the life cycle.
#[derive(Debug)]
pub struct Collector {
    lib: Lib,
    config: CollectorConfig,
    launch_source: LaunchSource,
    subscriber: Option<usize>,
    window: Option<OpenWindow>,
    /// Kinds and callbacks left enabled between windows ([`CollectorConfig::keep_enabled`]).
    kept: Option<Kept>,
}

impl Collector {
    /// Registers the activity buffer callbacks (and, for [`LaunchRecords::Callback`],
    /// subscribes to the callback API). Works before any CUDA context exists: contexts
    /// created later are covered. Fails with [`CuptiError::Unavailable`] when
    /// [`probe`](crate::probe) would say CUPTI is not available, and with
    /// [`CuptiError::AlreadyStarted`] while another collector exists in the process.
    pub fn start(config: CollectorConfig) -> Result<Collector, CuptiError> {
        if config.buffer_bytes < 64 << 10 {
            return Err(CuptiError::InvalidConfig("buffer_bytes must be at least 64 KiB"));
        }
        let lib = Lib::load().map_err(|e| CuptiError::Unavailable(Box::new(e)))?;
        if ACTIVE.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Err(CuptiError::AlreadyStarted);
        }
        Self::start_claimed(lib, config).inspect_err(|_| ACTIVE.store(false, Ordering::Release))
    }

    fn start_claimed(lib: Lib, config: CollectorConfig) -> Result<Collector, CuptiError> {
        buffers::configure_pool(config.buffer_bytes, config.pooled_buffers);
        if !REGISTERED.load(Ordering::Acquire) {
            guarded("cuptiActivityRegisterCallbacks", || {
                lib.register_callbacks(Some(buffers::buffer_requested), Some(buffers::buffer_completed))
            })?;
            REGISTERED.store(true, Ordering::Release);
        }
        {
            let mut sink = lock(&SINK);
            sink.open = false;
            sink.driver_launches = config.launches == LaunchRecords::DriverActivity;
        }
        let (launch_source, subscriber) = match config.launches {
            LaunchRecords::Off => (LaunchSource::Off, None),
            LaunchRecords::Callback => match guarded("cuptiSubscribe", || lib.subscribe(Some(on_driver_api))) {
                Ok(handle) => (LaunchSource::Callback, Some(handle)),
                Err(e) => (LaunchSource::Unavailable(e), None),
            },
            LaunchRecords::DriverActivity => match lib.use_system_thread_ids() {
                Ok(()) => (LaunchSource::DriverActivity, None),
                Err(e) => (LaunchSource::Unavailable(e), None),
            },
        };
        Ok(Collector { lib, config, launch_source, subscriber, window: None, kept: None })
    }

    /// The configuration this collector was started with.
    pub fn config(&self) -> &CollectorConfig {
        &self.config
    }

    /// Where launch records come from (or why they do not).
    pub fn launch_source(&self) -> &LaunchSource {
        &self.launch_source
    }

    /// The `cuptiGetVersion` of the loaded libcupti.
    pub fn cupti_version(&self) -> u32 {
        self.lib.version()
    }

    /// Whether the next [`disable_and_flush`](Self::disable_and_flush) leaves the kinds
    /// enabled ([`CollectorConfig::keep_enabled`]), decided window by window. Turning it off
    /// while kinds are kept turns them off at the next close.
    pub fn set_keep_enabled(&mut self, keep: bool) {
        self.config.keep_enabled = keep;
    }

    /// True between [`Collector::enable`] and [`Collector::disable_and_flush`].
    pub fn is_enabled(&self) -> bool {
        self.window.is_some()
    }

    /// Opens a window: reads the clocks and turns on the configured activity kinds and
    /// launch callbacks. Call it where a profiler cycle's warmup starts.
    pub fn enable(&mut self) -> Result<(), CuptiError> {
        if self.window.is_some() {
            return Err(CuptiError::State { call: "Collector::enable", reason: "a window is already open" });
        }
        let mut cost = Costs::start();
        let open = ClockPair::sample_from(self.lib)?;
        cost.lap("clocks");
        lock(&SINK).reset(self.config.expected_kernels);
        cost.lap("reserve");
        // Reading CUPTI's dropped count resets it: the window counts only its own.
        let _ = self.lib.dropped_records(std::ptr::null_mut(), 0);
        lock(&SINK).open = true;
        let mut problems = Vec::new();
        if let Some(kept) = self.kept.take() {
            if self.subscriber.is_some() && !kept.callbacks.is_empty() {
                LAUNCHES.open(self.config.expected_kernels);
            }
            cost.lap("kept open");
            self.window = Some(OpenWindow {
                open,
                kinds: kept.kinds,
                callbacks: kept.callbacks,
                problems,
                open_cost: cost.laps,
                reopened: true,
            });
            return Ok(());
        }
        let kinds = match self.enable_kinds(&mut problems) {
            Ok(kinds) => kinds,
            Err(e) => {
                lock(&SINK).open = false;
                return Err(e);
            }
        };
        cost.lap("activity kinds");
        let callbacks = self.enable_launch_callbacks(&mut problems);
        cost.lap("launch callbacks");
        self.window = Some(OpenWindow { open, kinds, callbacks, problems, open_cost: cost.laps, reopened: false });
        Ok(())
    }

    /// Enables the configured kinds; on a fatal failure, disables those already enabled.
    fn enable_kinds(&self, problems: &mut Vec<CuptiError>) -> Result<Vec<K>, CuptiError> {
        let mut enabled = Vec::new();
        for (kind, required) in self.config.kinds() {
            match self.lib.activity_enable(kind) {
                Ok(()) => enabled.push(kind),
                Err(e) if !required => problems.push(e),
                Err(e) => {
                    for &done in &enabled {
                        let _ = self.lib.activity_disable(done);
                    }
                    return Err(e);
                }
            }
        }
        Ok(enabled)
    }

    fn enable_launch_callbacks(&mut self, problems: &mut Vec<CuptiError>) -> Vec<u32> {
        let Some(handle) = self.subscriber else {
            return Vec::new();
        };
        LAUNCHES.open(self.config.expected_kernels);
        let mut enabled = Vec::new();
        for cbid in LAUNCH_CBIDS {
            match self.lib.enable_driver_callback(handle, cbid, true) {
                Ok(()) => enabled.push(cbid),
                Err(e) => problems.push(e),
            }
        }
        enabled
    }

    /// Closes the window: turns the launch callbacks and activity kinds off, forces
    /// CUPTI to hand over every buffer (`cuptiActivityFlushAll`), and returns the records.
    /// Synchronise the device first, or kernels still running are counted as incomplete.
    pub fn disable_and_flush(&mut self) -> Result<Window, CuptiError> {
        let Some(mut w) = self.window.take() else {
            return Err(CuptiError::State { call: "Collector::disable_and_flush", reason: "no window is open" });
        };
        let mut cost = Costs::start();
        let close = ClockPair::sample_from(self.lib);
        if self.config.keep_enabled {
            // Copies: the window's own list of callbacks still says below where its launches
            // came from.
            self.kept = Some(Kept { kinds: w.kinds.clone(), callbacks: w.callbacks.clone() });
        } else {
            self.shut_window(&mut w);
            cost.lap("disable");
        }
        let flushed = self.lib.flush_all();
        cost.lap("flush");
        let callback_launches = LAUNCHES.close();
        let (mut records, mut stats) = {
            let mut sink = lock(&SINK);
            sink.open = false;
            sink.take()
        };
        flushed?;
        let close = close?;
        if w.reopened {
            // Kept on, CUPTI went on recording between windows: what ran before this window
            // opened reached the sink with it. Such records are discarded.
            stats.outside_window += records.discard_before(w.open.cupti_ns);
        }
        cost.lap("take");
        let late_drops = self.lib.dropped_records(std::ptr::null_mut(), 0).unwrap_or(0);
        let mut launches = std::mem::take(&mut records.launches);
        let launch_source = match (&self.launch_source, w.callbacks.is_empty()) {
            (LaunchSource::Callback, false) => {
                launches = callback_launches;
                LaunchSource::Callback
            }
            (LaunchSource::Callback, true) => {
                LaunchSource::Unavailable(w.problems.last().cloned().unwrap_or(CuptiError::State {
                    call: "cuptiEnableCallback",
                    reason: "no launch callback was enabled",
                }))
            }
            (other, _) => other.clone(),
        };
        if launch_source == LaunchSource::DriverActivity {
            name_os_threads(&mut launches);
        }
        let mut window = Window {
            kernels: records.kernels,
            memcpys: records.memcpys,
            memsets: records.memsets,
            launches,
            synchronizations: records.syncs,
            dropped_records: stats.dropped + late_drops,
            incomplete_records: stats.incomplete,
            ignored_records: stats.ignored,
            open: w.open,
            close,
            launch_source,
            problems: w.problems,
            outside_records: stats.outside_window,
            open_cost: w.open_cost,
            close_cost: cost.laps,
        };
        window.sort();
        Ok(window)
    }

    /// Turns off what the window turned on, keeping failures as problems.
    fn shut_window(&self, w: &mut OpenWindow) {
        if let Some(handle) = self.subscriber {
            for &cbid in &w.callbacks {
                if let Err(e) = self.lib.enable_driver_callback(handle, cbid, false) {
                    w.problems.push(e);
                }
            }
        }
        for &kind in &w.kinds {
            if let Err(e) = self.lib.activity_disable(kind) {
                w.problems.push(e);
            }
        }
    }
}

impl Drop for Collector {
    /// Disables everything this collector enabled, flushes, unsubscribes, and lets a new
    /// collector start.
    fn drop(&mut self) {
        if let Some(kept) = self.kept.take() {
            let mut w = OpenWindow {
                open: ClockPair::new(std::time::Instant::now(), 0, Duration::ZERO),
                kinds: kept.kinds,
                callbacks: kept.callbacks,
                problems: Vec::new(),
                open_cost: Vec::new(),
                reopened: true,
            };
            self.shut_window(&mut w);
            let _ = self.lib.flush_all();
            let mut sink = lock(&SINK);
            sink.open = false;
            let _ = sink.take();
        }
        if let Some(mut w) = self.window.take() {
            self.shut_window(&mut w);
            let _ = self.lib.flush_all();
            let _ = LAUNCHES.close();
            let mut sink = lock(&SINK);
            sink.open = false;
            let _ = sink.take();
        }
        if let Some(handle) = self.subscriber.take() {
            let _ = self.lib.unsubscribe(handle);
        }
        ACTIVE.store(false, Ordering::Release);
    }
}

/// Laps of a clock, by part: what opening or closing a window took.
struct Costs {
    last: Instant,
    laps: Vec<(&'static str, Duration)>,
}

impl Costs {
    fn start() -> Costs {
        Costs { last: Instant::now(), laps: Vec::with_capacity(6) }
    }

    fn lap(&mut self, part: &'static str) {
        let now = Instant::now();
        self.laps.push((part, now - self.last));
        self.last = now;
    }
}
