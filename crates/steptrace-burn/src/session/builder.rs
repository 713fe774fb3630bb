//! [`SessionBuilder`]: what a [`Session`] records, and where, before anything starts.

use std::path::PathBuf;

use burn::prelude::Device;
use steptrace::{Profiler, ProfilerBuilder, Schedule};

use super::console::Console;
use super::Session;
use crate::backend::{BackendChoice, CacheConfig, CacheState, Selection};
use crate::config::SyncPolicy;
use crate::device::DeviceActivityMode;
use crate::error::{Error, Result};
use crate::signals::Signals;

/// The schedule a session starts with when none is given: step 0 waits (the cold start is
/// never recorded), one step warms the collector up, three are recorded, once.
pub const DEFAULT_SCHEDULE: &str = "wait=1,warmup=1,active=3,repeat=1";

/// Which backend a session runs on.
#[derive(Debug, Clone)]
pub(crate) enum Wanted {
    /// Chosen now by [`select`](crate::backend::select), with the labelled fallback.
    Choice(BackendChoice),
    /// Already selected.
    Selected(Selection),
    /// The program's own device, labelled as such.
    Device(Device),
}

/// Whether the session installs its Ctrl-C handlers.
#[derive(Debug, Clone)]
pub(crate) enum SignalSetting {
    Install,
    Given(Signals),
    Off,
}

/// A schedule given as text (`"wait=1,warmup=1,active=3"`, `"on-demand"`) or as a
/// [`Schedule`]: what [`SessionBuilder::schedule`] takes.
pub trait IntoSchedule {
    /// The schedule, or why the text is not one.
    fn into_schedule(self) -> std::result::Result<Schedule, String>;
}

impl IntoSchedule for Schedule {
    fn into_schedule(self) -> std::result::Result<Schedule, String> {
        Ok(self)
    }
}

impl IntoSchedule for &str {
    fn into_schedule(self) -> std::result::Result<Schedule, String> {
        self.parse::<Schedule>().map_err(|e| format!("schedule {self:?}: {e}"))
    }
}

impl IntoSchedule for String {
    fn into_schedule(self) -> std::result::Result<Schedule, String> {
        self.as_str().into_schedule()
    }
}

impl IntoSchedule for &String {
    fn into_schedule(self) -> std::result::Result<Schedule, String> {
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
    pub(crate) schedule: std::result::Result<Schedule, String>,
    pub(crate) backend: Wanted,
    pub(crate) cache: CacheConfig,
    pub(crate) cache_state: Option<CacheState>,
    pub(crate) installed: Option<Profiler>,
    pub(crate) out_dir: PathBuf,
    pub(crate) worker: Option<String>,
    pub(crate) device_activity: DeviceActivityMode,
    pub(crate) memory: bool,
    pub(crate) memory_phases: bool,
    pub(crate) sync: SyncPolicy,
    pub(crate) console: Console,
    pub(crate) signals: SignalSetting,
    pub(crate) steps: Option<u64>,
    pub(crate) startup_steps: Option<u64>,
    pub(crate) batch_size: Option<usize>,
    pub(crate) profile: bool,
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
            backend: Wanted::Choice(BackendChoice::Auto),
            cache: CacheConfig::default(),
            cache_state: None,
            installed: None,
            out_dir: PathBuf::from("traces"),
            worker: None,
            device_activity: DeviceActivityMode::Auto,
            memory: false,
            memory_phases: false,
            sync: SyncPolicy::Step,
            console: Console::Full,
            signals: SignalSetting::Install,
            steps: None,
            startup_steps: None,
            batch_size: None,
            profile: true,
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

    /// The backend to choose: `auto` (the default: CUDA, else wgpu, else the CPU, every
    /// fallback labelled with its reason), or one pinned (an error when it cannot run here).
    pub fn backend(mut self, choice: BackendChoice) -> Self {
        self.backend = Wanted::Choice(choice);
        self
    }

    /// A backend already chosen by [`select`](crate::backend::select).
    pub fn selection(mut self, selection: Selection) -> Self {
        self.backend = Wanted::Selected(selection);
        self
    }

    /// The program's own device (a CUDA, wgpu or CPU device it built itself), labelled in
    /// every trace as the program's choice rather than steptrace's. Give the plain device or
    /// its autodiff form; [`Session::device`] gives the autodiff form back.
    pub fn device(mut self, device: Device) -> Self {
        self.backend = Wanted::Device(device);
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

    /// A profiler whose layer the program installed itself, in a subscriber of its own (with
    /// another layer beside steptrace's, or scoped to a thread with
    /// `tracing::dispatcher::with_default`): the session installs nothing, and uses it. Add
    /// [`StampLayer`](crate::StampLayer) to that subscriber for kernel attribution. The
    /// builder's output folder, worker name, device activity and profiler settings are the
    /// given profiler's then.
    pub fn installed_profiler(mut self, profiler: Profiler) -> Self {
        self.installed = Some(profiler);
        self.profile = true;
        self
    }

    /// Says nothing on the console (the default says what `steptrace train` says: the
    /// backend and any fallback's reason, the cold start, the files written).
    pub fn quiet(mut self) -> Self {
        self.console = Console::Off;
        self
    }

    /// What the session says on the console ([`Console::Full`] by default).
    pub fn console(mut self, console: Console) -> Self {
        self.console = console;
        self
    }

    /// Whether the session installs Ctrl-C (and SIGTERM, SIGHUP) handlers: the first signal
    /// ends the run after the current step, whose [`step`](Session::step) returns
    /// [`Error::Interrupted`] with the cycle in progress saved; a second one exits at once.
    /// On by default.
    pub fn signals(mut self, install: bool) -> Self {
        self.signals = if install { SignalSetting::Install } else { SignalSetting::Off };
        self
    }

    /// Handlers installed earlier (by [`signals::install`](crate::signals::install)), so that
    /// a signal that came before the session started is kept.
    pub fn signal_flags(mut self, signals: Signals) -> Self {
        self.signals = SignalSetting::Given(signals);
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

    /// Records nothing: no profiler is installed and no trace is written, while the backend,
    /// the phase helpers, the step times and the failure reports work as usual (what a
    /// baseline against the profiled run needs).
    pub fn no_profiler(mut self) -> Self {
        self.profile = false;
        self.installed = None;
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

    /// Any other setting of the core profiler's builder: `.profiler(|b| b.targets(["my_crate=debug"]))`,
    /// `.profiler(|b| b.max_file_bytes(1 << 30))`, `.profiler(|b| b.file_name("{worker}.{cycle}.json"))`.
    pub fn profiler(mut self, change: impl FnOnce(ProfilerBuilder) -> ProfilerBuilder + 'static) -> Self {
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
        if let Err(why) = &self.schedule {
            return Err(Error::Config(why.clone()));
        }
        Session::start(self)
    }
}

/// The stop flag a session watches, from its signal setting.
pub(crate) fn install_signals(setting: &SignalSetting) -> Result<Option<Signals>> {
    match setting {
        SignalSetting::Off => Ok(None),
        SignalSetting::Given(signals) => Ok(Some(signals.clone())),
        SignalSetting::Install => crate::signals::install()
            .map(Some)
            .map_err(|e| Error::Config(format!("cannot install the Ctrl-C handler: {e}"))),
    }
}
