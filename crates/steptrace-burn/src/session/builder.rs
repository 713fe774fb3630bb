//! [`SessionBuilder`]: what a [`Session`] records, and where, before anything starts.

use std::path::PathBuf;

use burn::prelude::Device;
use steptrace::{Profiler, ProfilerBuilder, Schedule};

use super::Session;
use crate::backend::{BackendChoice, CacheConfig, CacheState, Selection};
use crate::console::Console;
use crate::device::DeviceActivityMode;
use crate::error::{Error, Result};
use crate::signals::Signals;
use crate::sync::SyncPolicy;

/// The schedule a session starts with when none is given: step 0 waits (the cold start is
/// never recorded), one step warms the collector up, three are recorded, once.
pub const DEFAULT_SCHEDULE: &str = "wait=1,warmup=1,active=3,repeat=1";

/// Which backend a session runs on ([`SessionBuilder::backend`]): a [`BackendChoice`], a
/// [`Selection`] already made, or the program's own [`Device`], each turned into this by
/// `From`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum BackendRequest {
    /// Chosen when the session starts by [`select`](crate::backend::select), with the
    /// labelled fallback.
    Choice(BackendChoice),
    /// Already selected by [`select`](crate::backend::select).
    Selected(Selection),
    /// The program's own device (a CUDA, wgpu or CPU device it built itself, plain or
    /// autodiff), labelled in every trace as the program's choice rather than steptrace's.
    Device(Device),
}

impl From<BackendChoice> for BackendRequest {
    fn from(choice: BackendChoice) -> Self {
        BackendRequest::Choice(choice)
    }
}

impl From<Selection> for BackendRequest {
    fn from(selection: Selection) -> Self {
        BackendRequest::Selected(selection)
    }
}

impl From<Device> for BackendRequest {
    fn from(device: Device) -> Self {
        BackendRequest::Device(device)
    }
}

/// What a session does with Ctrl-C, SIGTERM and SIGHUP ([`SessionBuilder::signals`]).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum SignalHandling {
    /// Nothing: the program's own handlers, or the default (the process ends). The default
    /// of a library.
    #[default]
    Off,
    /// The session installs handlers: the first signal ends the run after the current step,
    /// whose [`step`](Session::step) returns [`Error::Interrupted`] with the cycle in progress
    /// saved; a second one exits at once. They are taken away when the session ends.
    Install,
    /// Handlers installed earlier with [`signals::install`](crate::signals::install), so that
    /// a signal that came before the session started is kept (`steptrace train` does this).
    Given(Signals),
}

/// Whether a session records, and through which profiler ([`SessionBuilder::profiling`]).
// A builder's setting, made once: the profiler is moved in whole rather than boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Default)]
#[non_exhaustive]
pub enum Profiling {
    /// The session builds the profiler and installs it as the global `tracing` subscriber
    /// (the default).
    #[default]
    Install,
    /// A profiler whose layer the program installed itself, in a subscriber of its own (with
    /// another layer beside steptrace's, or scoped to a thread with
    /// `tracing::dispatcher::with_default`): the session installs nothing, and uses it. Add
    /// [`StampLayer`](crate::StampLayer) to that subscriber for kernel attribution. The
    /// builder's output folder, worker name, device activity and profiler settings are the
    /// given profiler's then.
    Installed(Profiler),
    /// Records nothing: no profiler is installed and no trace is written, while the backend,
    /// the phase helpers, the step times and the failure reports work as usual (what a
    /// baseline against the profiled run needs).
    Off,
}

/// A schedule given as text (`"wait=1,warmup=1,active=3"`, `"on-demand"`) or as a
/// [`Schedule`]: what [`SessionBuilder::schedule`] takes.
pub trait IntoSchedule {
    /// The schedule, or [`Error::Schedule`] with the core's reason when the text is not one.
    fn into_schedule(self) -> Result<Schedule>;
}

impl IntoSchedule for Schedule {
    fn into_schedule(self) -> Result<Schedule> {
        Ok(self)
    }
}

impl IntoSchedule for &str {
    fn into_schedule(self) -> Result<Schedule> {
        self.parse::<Schedule>().map_err(|source| Error::Schedule { text: self.to_owned(), source })
    }
}

impl IntoSchedule for String {
    fn into_schedule(self) -> Result<Schedule> {
        self.as_str().into_schedule()
    }
}

impl IntoSchedule for &String {
    fn into_schedule(self) -> Result<Schedule> {
        self.as_str().into_schedule()
    }
}

/// A change to the profiler's builder, applied when the session starts.
type Configure = Box<dyn FnOnce(ProfilerBuilder) -> ProfilerBuilder>;

/// Configures a [`Session`]; [`start`](Self::start) chooses the backend and installs the
/// profiler. Every setting has a default: `Session::builder().start()?` records steps 2 to 4
/// of any loop on the best backend here, with device activity where CUPTI runs.
#[must_use = "a builder does nothing until `start` is called"]
pub struct SessionBuilder {
    pub(crate) schedule: Result<Schedule>,
    pub(crate) backend: BackendRequest,
    pub(crate) cache: CacheConfig,
    pub(crate) cache_state: Option<CacheState>,
    pub(crate) profiling: Profiling,
    pub(crate) out_dir: PathBuf,
    pub(crate) worker: Option<String>,
    pub(crate) device_activity: DeviceActivityMode,
    pub(crate) memory: bool,
    pub(crate) memory_phases: bool,
    pub(crate) sync: SyncPolicy,
    pub(crate) console: Console,
    pub(crate) signals: SignalHandling,
    pub(crate) steps: Option<u64>,
    pub(crate) startup_steps: Option<u64>,
    pub(crate) batch_size: Option<usize>,
    pub(crate) configure: Vec<Configure>,
    pub(crate) manifest: Vec<(String, serde_json::Value)>,
    pub(crate) command: Option<String>,
    pub(crate) check_every_step: bool,
}

impl std::fmt::Debug for SessionBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionBuilder")
            .field("schedule", &self.schedule)
            .field("backend", &self.backend)
            .field("out_dir", &self.out_dir)
            .field("device_activity", &self.device_activity)
            .field("memory", &self.memory)
            .field("sync", &self.sync)
            .field("console", &self.console)
            .finish_non_exhaustive()
    }
}

impl Default for SessionBuilder {
    fn default() -> Self {
        SessionBuilder {
            schedule: DEFAULT_SCHEDULE.into_schedule(),
            backend: BackendRequest::Choice(BackendChoice::Auto),
            cache: CacheConfig::default(),
            cache_state: None,
            profiling: Profiling::Install,
            out_dir: PathBuf::from("traces"),
            worker: None,
            device_activity: DeviceActivityMode::Auto,
            memory: false,
            memory_phases: false,
            sync: SyncPolicy::Step,
            console: Console::Off,
            signals: SignalHandling::Off,
            steps: None,
            startup_steps: None,
            batch_size: None,
            configure: Vec::new(),
            manifest: Vec::new(),
            command: None,
            check_every_step: false,
        }
    }
}

impl SessionBuilder {
    /// Which steps are recorded: torch.profiler's `schedule(skip_first, wait, warmup, active,
    /// repeat)` as text (`"skip_first=10,wait=1,warmup=1,active=3,repeat=2"`), `"on-demand"`
    /// (nothing until `steptrace capture PID` asks), or a [`Schedule`]. Default
    /// [`DEFAULT_SCHEDULE`]. Text that is not a schedule fails [`start`](Self::start).
    pub fn schedule(mut self, schedule: impl IntoSchedule) -> Self {
        self.schedule = schedule.into_schedule();
        self
    }

    /// The backend: a [`BackendChoice`] (`auto` by default: CUDA, else wgpu, else the CPU,
    /// every fallback labelled with its reason; a pinned one is an error when it cannot run
    /// here), a [`Selection`] already made by [`select`](crate::backend::select), or the
    /// program's own [`Device`] (plain or autodiff; [`Session::device`] gives the autodiff
    /// form back), labelled in every trace as the program's choice.
    pub fn backend(mut self, backend: impl Into<BackendRequest>) -> Self {
        self.backend = backend.into();
        self
    }

    /// Where trace files go (created if needed; default `traces`). No file is ever replaced.
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.out_dir = dir.into();
        self
    }

    /// The name in file names and in the trace (default `steptrace-{pid}`).
    pub fn worker(mut self, name: impl Into<String>) -> Self {
        self.worker = Some(name.into());
        self
    }

    /// Device activity: [`Auto`](DeviceActivityMode::Auto) (the default: kernels, copies and
    /// launches through CUPTI on CUDA; "not observed", with why, elsewhere),
    /// [`Attributed`](DeviceActivityMode::Attributed) (as [`ops`](Self::ops)), or
    /// [`Off`](DeviceActivityMode::Off).
    pub fn device_activity(mut self, mode: DeviceActivityMode) -> Self {
        self.device_activity = mode;
        self
    }

    /// Ties every kernel to the burn operations it ran and to the layer and phase they were
    /// called in (`steptrace train --detail ops`): by your `layer` spans where you put
    /// them, else by the path of the parameters each operation reads (`blocks.1.linear`). On
    /// wgpu it also times the kernels. It costs a few points of step time while recording.
    pub fn ops(self) -> Self {
        self.device_activity(DeviceActivityMode::Attributed)
    }

    /// Device memory in recorded steps, by category: parameters and optimizer state counted
    /// exactly from your model ([`Session::watch`]) and optimizer ([`Session::optimize`], or
    /// [`Session::watch_optimizer`]), gradients, the input batch, and the rest
    /// (`steptrace train --memory`). An out-of-memory report then also says where memory
    /// stood at the highest sample.
    pub fn memory(mut self) -> Self {
        self.memory = true;
        self
    }

    /// With [`memory`](Self::memory), a sample after each phase too. Each flushes burn's
    /// fusion queue and waits for the device, which cuts fusion at the phase boundaries.
    pub fn memory_phases(mut self) -> Self {
        self.memory = true;
        self.memory_phases = true;
        self
    }

    /// When the step waits for the device (default [`SyncPolicy::Step`]: once, at its end,
    /// so that `ProfilerStep#N` is the step's true time).
    pub fn sync(mut self, policy: SyncPolicy) -> Self {
        self.sync = policy;
        self
    }

    /// cubecl's kernel and autotune caches (default: a persistent folder under
    /// `~/.cache/steptrace/cubecl`).
    pub fn cache(mut self, cache: CacheConfig) -> Self {
        self.cache = cache;
        self
    }

    /// cubecl's caches as the program already configured them
    /// ([`configure_cubecl_cache`](crate::backend::configure_cubecl_cache)): the session
    /// configures nothing then.
    pub fn cache_state(mut self, state: CacheState) -> Self {
        self.cache_state = Some(state);
        self
    }

    /// Whether the session records, and through which profiler: [`Profiling::Install`] (the
    /// default), [`Profiling::Installed`] (a profiler the program installed itself) or
    /// [`Profiling::Off`].
    pub fn profiling(mut self, profiling: Profiling) -> Self {
        self.profiling = profiling;
        self
    }

    /// What the session says on the console: nothing by default ([`Console::Off`]), the
    /// lines before the first step ([`Console::Start`]), or what `steptrace train` says
    /// ([`Console::Full`]).
    pub fn console(mut self, console: Console) -> Self {
        self.console = console;
        self
    }

    /// What the session does with Ctrl-C, SIGTERM and SIGHUP: nothing by default
    /// ([`SignalHandling::Off`]); with [`SignalHandling::Install`] the first signal ends the
    /// run after the current step, its cycle saved.
    pub fn signals(mut self, signals: SignalHandling) -> Self {
        self.signals = signals;
        self
    }

    /// How many steps the loop will run, when known: the first fifth of them are then
    /// declared startup (at least step 0), as `steptrace train` declares them. Without it,
    /// step 0 alone is startup.
    pub fn steps(mut self, steps: u64) -> Self {
        self.steps = Some(steps);
        self
    }

    /// The steps `0..n` are startup (compilation, autotune, first-time shapes), kept apart
    /// from the steady figures in every trace and report. Overrides [`steps`](Self::steps)'
    /// rule.
    pub fn startup_steps(mut self, n: u64) -> Self {
        self.startup_steps = Some(n.max(1));
        self
    }

    /// Samples per step, for samples/s. Without it the first dimension of what
    /// [`Session::copy`] copies is taken.
    pub fn batch_size(mut self, samples: usize) -> Self {
        self.batch_size = Some(samples);
        self
    }

    /// Ends every step by reading one element of its loss, not the startup steps only: a
    /// failed allocation is then reported in the step it happened in, whenever it happens
    /// (burn reports it where a tensor it fed is read, not at a sync). It costs a 4-byte
    /// copy from the device per step beside the sync.
    pub fn check_every_step(mut self) -> Self {
        self.check_every_step = true;
        self
    }

    /// A field of the run manifest that every trace carries (`model`, `dataset`,
    /// `batch_size`, or one of your own). Keep secrets and personal paths out of it.
    pub fn manifest(mut self, key: impl Into<String>, value: impl Into<serde_json::Value>) -> Self {
        self.manifest.push((key.into(), value.into()));
        self
    }

    /// The command that ran this program, in the manifest, for the report's next-experiment
    /// suggestions (`steptrace train` gives its own command line).
    pub fn command(mut self, command: impl Into<String>) -> Self {
        self.command = Some(command.into());
        self
    }

    /// Any other setting of the core profiler's builder: `.configure(|b| b.targets(["my_crate=debug"]))`,
    /// `.configure(|b| b.max_file_bytes(1 << 30))`, `.configure(|b| b.file_name("{worker}.{cycle}.json"))`.
    pub fn configure(mut self, change: impl FnOnce(ProfilerBuilder) -> ProfilerBuilder + 'static) -> Self {
        self.configure.push(Box::new(change));
        self
    }

    /// Chooses the backend, installs the profiler and opens the device; says so on the
    /// console. The first step begins at the first call of the session that belongs to a
    /// step ([`load`](Session::load), [`copy`](Session::copy), a phase), so that building
    /// the model after `start` stays out of step 0.
    ///
    /// # Errors
    ///
    /// A schedule that does not parse, a backend that was asked for and cannot run here, an
    /// output folder that cannot be used, or a global `tracing` subscriber that is already
    /// installed (a process has one: build the profiler's layer yourself with
    /// [`ProfilerBuilder::build`] and use the pieces instead).
    pub fn start(self) -> Result<Session> {
        Session::start(self)
    }
}

/// The stop flag a session watches, from its signal setting.
pub(crate) fn install_signals(setting: &SignalHandling) -> Result<Option<Signals>> {
    match setting {
        SignalHandling::Off => Ok(None),
        SignalHandling::Given(signals) => Ok(Some(signals.clone())),
        SignalHandling::Install => crate::signals::install().map(Some).map_err(Error::Signals),
    }
}

#[cfg(test)]
mod tests {
    use steptrace::ScheduleError;

    use super::*;

    /// A schedule that does not parse fails `start` before anything else, with the core's
    /// own reason kept as a type.
    #[test]
    fn a_bad_schedule_is_the_cores_error_and_starts_nothing() {
        let err = Session::builder().schedule("wait=1,active=0").start().expect_err("active=0 records nothing");
        let Error::Schedule { text, source } = err else { panic!("{err}") };
        assert_eq!(text, "wait=1,active=0");
        assert_eq!(source, ScheduleError::ZeroActive);
        let err = Session::builder().schedule("often").start().expect_err("not key=value");
        assert!(matches!(err, Error::Schedule { source: ScheduleError::NotKeyValue { .. }, .. }), "{err}");
        assert_eq!(err.exit_code(), 1);
    }

    /// A library session keeps quiet and leaves the signals alone unless asked.
    #[test]
    fn the_console_and_the_signal_handlers_are_opt_in() {
        let b = SessionBuilder::default();
        assert_eq!(b.console, Console::Off);
        assert!(matches!(b.signals, SignalHandling::Off));
        assert!(matches!(b.profiling, Profiling::Install));
        let b = b.console(Console::Full).signals(SignalHandling::Install).profiling(Profiling::Off);
        assert_eq!(b.console, Console::Full);
        assert!(matches!(b.signals, SignalHandling::Install));
        assert!(matches!(b.profiling, Profiling::Off));
    }

    /// One setter takes a choice, a selection or a device.
    #[cfg(feature = "cpu")]
    #[test]
    fn one_backend_setter_takes_each_kind_of_request() {
        use crate::backend::BackendChoice;
        let b = SessionBuilder::default().backend(BackendChoice::Cpu);
        assert!(matches!(b.backend, BackendRequest::Choice(BackendChoice::Cpu)));
        let b = b.backend(Device::flex());
        assert!(matches!(b.backend, BackendRequest::Device(_)));
        let selection = crate::backend::select(BackendChoice::Cpu).expect("the CPU backend is built in");
        let b = b.backend(selection.clone());
        assert!(matches!(&b.backend, BackendRequest::Selected(s) if *s == selection));
    }
}
