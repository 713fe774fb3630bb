//! The process's `log` logger that reads cubecl's records while a run starts, and the
//! [`StartupCapture`] a run holds meanwhile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::thread::ThreadId;
use std::time::Instant;

use steptrace::format::{ColdStart, Figure};
use tracing::level_filters::LevelFilter;
use tracing_log::log::{self, Level, Log, Metadata, Record};
use tracing_log::{AsLog, AsTrace};

use super::breakdown::{cold_start, Event, Facts, Span, Timeline};
use super::marker::{classify, is_candidate, Marker, CUBECL_LOGGER};
use crate::backend::BackendKind;

/// The logger; a unit value, so that it can be `'static`.
static LOGGER: StartupLog = StartupLog;
/// Whether [`LOGGER`] holds the `log` slot, or why not.
static INSTALLED: OnceLock<Result<(), LogSlotTaken>> = OnceLock::new();
/// Set while at least one [`StartupCapture`] is live: markers are recorded.
static ARMED: AtomicBool = AtomicBool::new(false);
/// Set when the autotune logger's `log` sink is steptrace's alone: its records are not
/// forwarded to the trace.
static PRIVATE_SINK: AtomicBool = AtomicBool::new(false);
/// What the live captures have recorded.
static STATE: Mutex<State> = Mutex::new(State::new());

// Only cubecl backends create clients or configure cubecl's loggers.
#[cfg_attr(not(any(feature = "cuda", feature = "wgpu")), allow(dead_code))]
/// What [`configure_cubecl_cache`](crate::backend::configure_cubecl_cache) added to cubecl's
/// autotune logger ([the sink](crate::backend::configure_cubecl_cache#the-autotune-log-sink)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct AutotuneSink {
    /// A `log` sink at the trace level was added.
    pub(crate) added: bool,
    /// No other cubecl logger writes to that level: its records are steptrace's alone.
    pub(crate) private: bool,
}

/// Notes what was added to the autotune logger of the configuration just installed.
#[cfg_attr(not(any(feature = "cuda", feature = "wgpu")), allow(dead_code))]
pub(crate) fn note_autotune_sink(sink: AutotuneSink) {
    PRIVATE_SINK.store(sink.added && sink.private, Ordering::Relaxed);
}

struct State {
    /// Live captures.
    captures: usize,
    /// Whether two captures overlapped since the buffer was last cleared.
    overlapped: bool,
    /// The time the markers are counted from.
    origin: Option<Instant>,
    threads: Vec<ThreadId>,
    events: Vec<Event>,
    clients: Vec<Span>,
}

impl State {
    const fn new() -> State {
        State {
            captures: 0,
            overlapped: false,
            origin: None,
            threads: Vec::new(),
            events: Vec::new(),
            clients: Vec::new(),
        }
    }

    fn since(&self, at: Instant) -> f64 {
        self.origin.and_then(|o| at.checked_duration_since(o)).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    }
}

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

// === the logger ===

/// Reads the markers while armed, and forwards every record to `tracing` exactly as
/// tracing-log's `LogTracer` does (same level test, same event), so that it can stand in for
/// it.
struct StartupLog;

impl Log for StartupLog {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        ARMED.load(Ordering::Relaxed) || forwards(metadata.level(), metadata.target())
    }

    fn log(&self, record: &Record<'_>) {
        if ARMED.load(Ordering::Relaxed) && is_candidate(record.target()) {
            if let Some(marker) = classify(record.target(), record.level(), record.args()) {
                let at = Instant::now();
                let mut s = state();
                let me = std::thread::current().id();
                let thread = match s.threads.iter().position(|t| *t == me) {
                    Some(i) => i,
                    None => {
                        s.threads.push(me);
                        s.threads.len() - 1
                    }
                };
                let at = s.since(at);
                s.events.push(Event { at, thread, marker });
            }
        }
        if forwards(record.level(), record.target()) {
            let _ = tracing_log::format_trace(record);
        }
    }

    fn flush(&self) {}
}

/// LogTracer's test (the level against the subscribers' maximum), and the records of the
/// autotune sink steptrace added are kept out.
fn forwards(level: Level, target: &str) -> bool {
    if level.as_trace() > LevelFilter::current() {
        return false;
    }
    !(level == Level::Trace && target == CUBECL_LOGGER && PRIVATE_SINK.load(Ordering::Relaxed))
}

/// The `log` crate's maximum level when no capture is live: the subscribers' maximum, as
/// LogTracer sets it.
fn baseline() -> log::LevelFilter {
    LevelFilter::current().as_log()
}

/// Makes steptrace's logger the process's `log` logger, if no other one is: it forwards every
/// record to `tracing` as tracing-log's `LogTracer` does (install it after the global
/// subscriber, as `try_init` would), and reads cubecl's records while a run starts.
///
/// [`Session`](crate::Session) calls it; call it yourself (or use [`install_profiler`](super::install_profiler))
/// when something else would otherwise take the slot first, since `log` allows one logger
/// per process: a later `tracing_subscriber` `try_init` then fails to add its `LogTracer`.
///
/// # Errors
///
/// [`LogSlotTaken`] when another logger holds the slot; the startup breakdown is then absent
/// with its message as the reason.
pub fn install_log_capture() -> Result<(), LogSlotTaken> {
    *INSTALLED.get_or_init(|| {
        log::set_logger(&LOGGER).map_err(|_| LogSlotTaken)?;
        log::set_max_level(baseline());
        Ok(())
    })
}

/// Another `log` logger holds the process's one slot, so cubecl's records cannot be read:
/// [`install_log_capture`]'s error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "not observed: another `log` logger was installed in this process before steptrace's \
     (install the subscriber with steptrace_burn::backend::install_profiler)"
)]
pub struct LogSlotTaken;

/// Runs `create` (the creation of a device client) and, while a capture is live, records how
/// long it took.
#[cfg_attr(not(any(feature = "cuda", feature = "wgpu")), allow(dead_code))]
pub(crate) fn timed_client<R>(create: impl FnOnce() -> R) -> R {
    let start = Instant::now();
    let out = create();
    let end = Instant::now();
    if ARMED.load(Ordering::Relaxed) {
        let mut s = state();
        let span = (s.since(start), s.since(end));
        s.clients.push(span);
    }
    out
}

// === impl StartupCapture ===

/// Reads cubecl's compile and autotune records from the start of a run to the end of its
/// step 0, and itemises the cold start: device client, kernel compilation, autotune, and the
/// rest.
///
/// A run's first step on cubecl is mostly one-off work: compiling kernels (NVRTC on CUDA,
/// naga and the driver on wgpu) and autotuning them. cubecl 0.10 has no profiling API for
/// either, but it writes `log` records at their boundaries (`marker.rs` lists them, with
/// their places in cubecl's source). It reads those records in-process, from
/// the start of a run to the end of step 0, through a `log` logger that steptrace installs
/// (no environment variable, nothing written to disk), and turns them into a
/// [`ColdStart`](steptrace::format::ColdStart):
///
/// * **device client**: timed by steptrace around cubecl's `Runtime::client` in
///   [`Selection::device`](crate::backend::Selection::device), exactly;
/// * **compile**: how many kernels were compiled and how many came from cubecl's
///   persistent compilation cache instead; the time where both ends are logged (wgpu:
///   `compiling WGSL module` to wgpu-core's `create_compute_pipeline`). cubecl-cuda 0.10
///   logs only the start of an NVRTC compile: on CUDA the time is absent, with an upper
///   bound (to the next record on the compiling thread);
/// * **autotune**: runs (cache misses that benchmarked), persistent-cache hits, and their
///   time, from `Tuning {key}` to the autotune logger's `Fastest result` (see
///   [`configure_cubecl_cache`](crate::backend::configure_cubecl_cache#the-autotune-log-sink));
/// * **rest**: the phase minus those; it says what it still holds when an item is absent.
///
/// The same records tell whether this run was `cold`, `partly warm` or `warm`: what it
/// compiled and tuned against what it found in the persistent caches — not whether the
/// cache directory had files.
///
/// # Cost
///
/// While a capture is live the `log` crate passes every level (the records of other crates
/// are dropped after a comparison of their target); when step 0 ends the level goes back to
/// what the tracing subscribers need, as tracing-log's `LogTracer` sets it. The steady state
/// pays nothing more than it did with `LogTracer`.
///
/// # One run at a time
///
/// The records are process-wide. If two runs start at the same time in one process (tests
/// in parallel threads), both breakdowns are absent, with that reason.
///
/// # Use
///
/// [`begin`](Self::begin) it before the device client is created;
/// [`finish`](Self::finish) it when step 0 ends. Dropping it unfinished stops the reading.
/// [`Session`](crate::Session) does both.
#[derive(Debug)]
pub struct StartupCapture {
    mode: Mode,
}

#[derive(Debug)]
enum Mode {
    NotApplicable,
    Unavailable(String),
    Live(Box<Facts>),
    Done,
}

impl StartupCapture {
    /// Starts reading (on cubecl backends): installs the logger if the `log` slot is free
    /// ([`install_log_capture`]) and lets it see every level until [`finish`](Self::finish).
    /// On the CPU backend (burn-flex) nothing is read.
    pub fn begin(kind: BackendKind) -> StartupCapture {
        if !kind.uses_cubecl() {
            return StartupCapture { mode: Mode::NotApplicable };
        }
        if let Err(why) = install_log_capture() {
            return StartupCapture { mode: Mode::Unavailable(why.to_string()) };
        }
        let facts = super::facts::facts(kind);
        {
            let mut s = state();
            if s.captures > 0 {
                s.overlapped = true;
            } else {
                *s = State::new();
                s.origin = Some(Instant::now());
            }
            s.captures += 1;
        }
        ARMED.store(true, Ordering::Relaxed);
        log::set_max_level(log::LevelFilter::Trace);
        StartupCapture { mode: Mode::Live(Box::new(facts)) }
    }

    /// Stops reading and itemises `setup` (from the start of the run to step 0) and
    /// `first_step` (step 0), each given as its start and end.
    pub fn finish(mut self, setup: (Instant, Instant), first_step: (Instant, Instant)) -> Figure<ColdStart> {
        match std::mem::replace(&mut self.mode, Mode::Done) {
            Mode::NotApplicable => Figure::absent(BackendKind::NOT_CUBECL),
            Mode::Unavailable(why) => Figure::absent(why),
            Mode::Done => Figure::absent("not measured: the capture was already finished"),
            Mode::Live(facts) => {
                let (mut timeline, origin, overlapped) = release(true);
                if overlapped {
                    return Figure::absent(
                        "not measured: another run in this process started while this one's start was being read",
                    );
                }
                let ms = |at: Instant| {
                    origin.and_then(|o| at.checked_duration_since(o)).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
                };
                timeline.setup = (ms(setup.0), ms(setup.1));
                timeline.first_step = (ms(first_step.0), ms(first_step.1));
                // The walls exactly as the run computes them (`setup_ms`, `first_step_ms`).
                let wall = |(a, b): (Instant, Instant)| b.saturating_duration_since(a).as_secs_f64() * 1000.0;
                timeline.walls = Some((wall(setup), wall(first_step)));
                Figure::Known(cold_start(&timeline, &facts))
            }
        }
    }
}

impl Drop for StartupCapture {
    fn drop(&mut self) {
        if let Mode::Live(_) = std::mem::replace(&mut self.mode, Mode::Done) {
            release(false);
        }
    }
}

/// Ends one capture: the markers so far (when `take`), the time they are counted from,
/// whether captures overlapped, and the logger back to its baseline level when it was the
/// last one.
fn release(take: bool) -> (Timeline, Option<Instant>, bool) {
    let mut s = state();
    let timeline = if take {
        Timeline { events: s.events.clone(), clients: s.clients.clone(), ..Timeline::default() }
    } else {
        Timeline::default()
    };
    let (origin, overlapped) = (s.origin, s.overlapped);
    s.captures = s.captures.saturating_sub(1);
    if s.captures == 0 {
        ARMED.store(false, Ordering::Relaxed);
        log::set_max_level(baseline());
        *s = State::new();
    }
    (timeline, origin, overlapped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_backend_is_not_read() {
        let c = StartupCapture::begin(BackendKind::Cpu);
        let now = Instant::now();
        assert_eq!(c.finish((now, now), (now, now)), Figure::absent(BackendKind::NOT_CUBECL));
    }

    /// Counts the events a subscriber sees, by their (log) target.
    #[derive(Clone, Default)]
    struct Seen(std::sync::Arc<Mutex<Vec<String>>>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Seen {
        fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
            use tracing_log::NormalizeEvent;
            let target = event
                .normalized_metadata()
                .map_or_else(|| event.metadata().target().to_owned(), |m| m.target().to_owned());
            self.0.lock().unwrap_or_else(|p| p.into_inner()).push(target);
        }
    }

    /// As tracing-log's `LogTracer`: a record reaches the subscriber as an event with its
    /// target, levels above the subscriber's are dropped, and the records of the autotune
    /// sink steptrace added are kept out.
    #[test]
    fn records_are_forwarded_as_log_tracer_forwards_them() {
        use tracing_subscriber::layer::{Layer as _, SubscriberExt};
        let seen = Seen::default();
        let subscriber = tracing_subscriber::registry()
            .with(seen.clone().with_filter(tracing_subscriber::filter::LevelFilter::DEBUG));
        let emit = |level: Level, target: &str| {
            LOGGER.log(&Record::builder().level(level).target(target).args(format_args!("a record")).build());
        };
        let before = PRIVATE_SINK.swap(true, Ordering::Relaxed);
        tracing::subscriber::with_default(subscriber, || {
            emit(Level::Info, "cubecl_runtime::tune::tuner");
            emit(Level::Trace, "wgpu_core::device::global");
            emit(Level::Debug, CUBECL_LOGGER);
        });
        PRIVATE_SINK.store(before, Ordering::Relaxed);
        let seen = seen.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert_eq!(seen, ["cubecl_runtime::tune::tuner", CUBECL_LOGGER]);
        assert!(!forwards_private_trace());
    }

    fn forwards_private_trace() -> bool {
        let before = PRIVATE_SINK.swap(true, Ordering::Relaxed);
        let out = forwards(Level::Trace, CUBECL_LOGGER);
        PRIVATE_SINK.store(before, Ordering::Relaxed);
        out
    }
}

/// What a live start has done so far, for a progress line while step 0 runs
/// ([`startup_progress`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StartupProgress {
    /// Seconds since the capture began.
    pub elapsed_s: f64,
    /// Kernels compiled so far.
    pub compiled: usize,
    /// Kernels taken from cubecl's persistent compilation cache.
    pub compile_cache_hits: usize,
    /// Autotune keys benchmarked and decided so far.
    pub tuned: usize,
    /// Autotune keys found in the persistent cache so far.
    pub tune_cache_hits: usize,
    /// The key being benchmarked now, if one is (its last `Tuning {key}` has no end yet).
    pub tuning: Option<String>,
}

/// What the live capture has seen so far, or `None` when no capture is live (the CPU
/// backend, the `log` slot taken by another logger, or step 0 over). Cheap: it counts the
/// markers under the capture's lock, so a caller can poll it a few times a second while step
/// 0 runs on another thread without slowing it.
pub fn startup_progress() -> Option<StartupProgress> {
    if !ARMED.load(Ordering::Relaxed) {
        return None;
    }
    let s = state();
    let origin = s.origin?;
    let mut p = StartupProgress { elapsed_s: origin.elapsed().as_secs_f64(), ..StartupProgress::default() };
    for event in &s.events {
        match &event.marker {
            Marker::CompileStart => p.compiled += 1,
            Marker::CompileCacheHit => p.compile_cache_hits += 1,
            Marker::CompileEnd => {}
            Marker::TuneStart(key) => p.tuning = Some(key.clone()),
            Marker::TuneEnd(end) => {
                p.tuned += 1;
                if p.tuning.as_deref().is_some_and(|key| super::marker::ends_tune(end, key)) {
                    p.tuning = None;
                }
            }
            Marker::TuneValidate(_) => p.tune_cache_hits += 1,
        }
    }
    Some(p)
}
