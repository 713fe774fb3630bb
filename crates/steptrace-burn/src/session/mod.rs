//! [`Session`]: your model, your loop, profiled.

mod builder;
mod describe;
mod lifecycle;
mod oom;
mod peaks;
mod phases;
mod start;
mod upload;

use std::time::Instant;

use burn::prelude::{Device, Tensor};
use steptrace::format::{ColdStart, Figure};
use steptrace::Profiler;

use crate::backend::{CacheState, Selection, StartupCapture};
use crate::console::{self, Console};
use crate::memory::{MemorySampler, Parameters};
use crate::signals::Signals;
use crate::summary::{Anomaly, StepRecord};
use crate::sync::SyncPolicy;

pub use builder::{BackendRequest, IntoSchedule, Profiling, SessionBuilder, SignalHandling, DEFAULT_SCHEDULE};
pub use upload::{Upload, UploadSize};

/// A profiled training run of your own loop: everything `steptrace train` records, for any
/// burn training loop.
///
/// A session chooses the backend (CUDA, else wgpu, else the CPU, every fallback labelled
/// with its reason), installs the profiler the one right way (kernel attribution's stamps,
/// the cold start's log capture, NVTX when a tool is attached, steptrace's own spans around
/// `tracing` where nothing else needs them) and opens the device. Your loop then calls a
/// few helpers that put each part of a step in its span, and [`Session::step`] at the end
/// of each step. When `steptrace peaks` has measured the device, the session puts its
/// measured limits in every trace's manifest ([`crate::peaks`]); it never measures them
/// itself.
///
/// ```no_run
/// use burn::nn::loss::CrossEntropyLossConfig;
/// use burn::nn::{Linear, LinearConfig, Relu};
/// use burn::optim::AdamConfig;
/// use burn::prelude::*;
/// use steptrace_burn::Session;
///
/// #[derive(Module, Debug)]
/// struct Model {
///     hidden: Linear,
///     head: Linear,
///     relu: Relu,
/// }
///
/// impl Model {
///     fn forward(&self, x: Tensor<2>) -> Tensor<2> {
///         self.head.forward(self.relu.forward(self.hidden.forward(x)))
///     }
/// }
///
/// # fn main() -> Result<(), steptrace_burn::Error> {
/// let mut session = Session::builder().schedule("wait=1,warmup=1,active=3").ops().memory().start()?;
/// let device = session.device();
/// let mut model = Model { hidden: LinearConfig::new(64, 128).init(&device), head: LinearConfig::new(128, 10).init(&device), relu: Relu::new() };
/// let mut optim = AdamConfig::new().init();
/// session.watch(&model);
/// let mut batches = (0..20u64).map(|k| {
///     let x: Vec<f32> = (0..32 * 64).map(|i| ((i as u64 * 7 + k) % 13) as f32 / 13.0).collect();
///     let y: Vec<i64> = (0..32).map(|i| (i % 10) as i64).collect();
///     (TensorData::new(x, [32, 64]), TensorData::new(y, [32]))
/// });
/// while let Some(batch) = session.load(|| batches.next())? {
///     let (x, y) = session.copy(batch, |(x, y)| (Tensor::<2>::from_data(x, &device), Tensor::<1, Int>::from_data(y, &device)))?;
///     let logits = session.forward(|| model.forward(x))?;
///     let loss = session.loss(|| CrossEntropyLossConfig::new().init(&device).forward(logits, y))?;
///     let grads = session.backward(|| loss.backward())?;
///     model = session.optimize(&mut optim, 1e-3, model, grads)?;
///     session.step()?;
/// }
/// let run = session.finish()?;
/// println!("{} traces", run.traces.len());
/// # Ok(())
/// # }
/// ```
///
/// # What each call records
///
/// | call | span | and |
/// |---|---|---|
/// | [`load`](Session::load) | `data.load` | the step's batch number |
/// | [`copy`](Session::copy) | `transfer.h2d` | the bytes of input and target, so that a report tells the batch's copies from other uploads; the first shape, and any new shape after startup |
/// | [`forward`](Session::forward), [`loss`](Session::loss), [`backward`](Session::backward), [`optimizer`](Session::optimizer) / [`optimize`](Session::optimize) | the phase | a memory sample after each phase with [`memory_phases`](SessionBuilder::memory_phases); a sync after each with [`SyncPolicy::Phase`] |
/// | [`read_loss`](Session::read_loss) | `loss.read` | the step's loss |
/// | [`infer`](Session::infer) | `infer.request` > `forward` | one inference request |
/// | [`step`](Session::step) | `sync`, then `ProfilerStep#N` ends | the step's time, a check that the step's work ran (below), the cold start after step 0, Ctrl-C |
///
/// A step's parts are not wrapped in a span of the session's: the step is `ProfilerStep#N`,
/// and spans of your own (a micro-batch, say) nest as you open them.
///
/// Layers: put [`layer`](crate::layer) spans around yours to name them; without any, a
/// training step's kernels are named after the module path of the parameters their
/// operations read (`blocks.1 > inner`), for forward, backward and optimizer kernels alike,
/// as long as the session sees the model's parameters: [`watch`](Session::watch) once and
/// [`optimize`](Session::optimize) each step do that. (An inference request's kernels keep
/// the span path `infer.request > forward` and your layer spans.)
///
/// # Failures
///
/// Each helper runs its closure so that a panic of burn or cubecl (a device that ran out of
/// memory, a kernel that failed) becomes [`Error::StepFailed`](crate::Error::StepFailed):
/// the cycle in progress is saved, cut short with the failure as its reason, and an
/// out-of-memory is explained (what was asked for, what the device held, the batch that
/// would have fit; [`oom`](crate::failure::oom)). burn reports a failed allocation where a tensor it
/// fed is read, not at a sync. So the startup steps end by reading one element of the step's
/// loss (the tensor [`loss`](Session::loss) returned), which waits for the device as a sync
/// does and reports such a failure in the step it happened in: a batch too large fails
/// there (with [`SyncPolicy::None`] nothing waits, and nothing is
/// read). Later steps end with a plain sync, which costs less; a failure in one of them
/// surfaces at the next read ([`read_loss`](Session::read_loss), or the next check), and is
/// reported as that step's. [`check_every_step`](SessionBuilder::check_every_step) reads the
/// loss at the end of every step. After a failure, every call returns
/// [`Error::Ended`](crate::Error::Ended).
///
/// On the CPU backend the device's memory is the process's, and a failed allocation aborts
/// the process rather than panic. With [`host_oom::Allocator`](crate::failure::host_oom::Allocator) as
/// the program's global allocator (one line), such a step ends with the same out-of-memory
/// report instead, the cycle in progress kept as the `.partial` file it streamed to, and the
/// process exits with status 1 ([`host_oom`](crate::failure::host_oom)).
///
/// With [`SignalHandling::Install`](crate::SignalHandling::Install), a first Ctrl-C (SIGTERM,
/// SIGHUP) ends the run after the current step: that [`step`](Session::step) saves the cycle
/// in progress and returns [`Error::Interrupted`](crate::Error::Interrupted) with the run's
/// summary. A second one exits at once. By default a session installs no handler and prints
/// nothing: [`signals`](SessionBuilder::signals) and [`console`](SessionBuilder::console) turn
/// them on.
///
/// It lives on the thread that runs the loop (the profiler's step spans belong to that
/// thread). Dropping it without [`finish`](Session::finish) saves the cycle in progress as a
/// partial file.
pub struct Session {
    selection: Selection,
    /// The device the model trains on (autodiff).
    device: Device,
    cache: CacheState,
    profiler: Option<Profiler>,
    sync: SyncPolicy,
    /// Whether kernels are tied to layers (the module tree's ids are noted).
    attributed: bool,
    clock: StepClock,
    memory: MemoryWatch,
    failure: FailureState,
    output: Output,
}

/// The step clock: where the run is, each step's time and what it saw.
struct StepClock {
    /// When the session started (the set-up runs from here to step 0).
    started: Instant,
    /// When step 0 began.
    setup_end: Option<Instant>,
    /// When the current step began.
    step_start: Instant,
    /// The current step (`ProfilerStep#N`).
    step: u64,
    /// Whether the current step has begun: a step begins at the first call that belongs to
    /// it (step 0 after the set-up, the next one after [`step`](Session::step) ended this
    /// one), and its `ProfilerStep#N` opens there.
    in_step: bool,
    startup_steps: u64,
    /// Whether the program declared the startup steps itself (else they are a fifth of the
    /// planned steps, or step 0 alone).
    fixed_startup: bool,
    planned_steps: Option<u64>,
    batch_size: Option<usize>,
    records: Vec<StepRecord>,
    anomalies: Vec<Anomaly>,
    shapes: Vec<Vec<usize>>,
    first_shape: Option<Vec<usize>>,
    /// This step's samples, from its copy.
    samples: Option<usize>,
    /// This step's loss, when read.
    loss: Option<f64>,
    /// The cold start's capture until step 0 ends, then its figure.
    startup: Option<StartupCapture>,
    cold_start: Option<Figure<ColdStart>>,
    /// Whether the session has served inference requests (its mode, in the summary).
    inferred: bool,
    /// The model's load before the first request, ms.
    model_load_ms: Option<f64>,
}

/// The memory watch: the sampler, and what the session counts exactly.
struct MemoryWatch {
    wanted: bool,
    phases: bool,
    sampler: Option<MemorySampler>,
    /// Why memory is not observed, when it is not.
    note: Option<String>,
    /// Whether this step's start sample was taken.
    sampled_start: bool,
    /// The model's float parameters (bytes, the largest), from [`watch`](Session::watch).
    parameters: Option<(Parameters, usize)>,
    /// The optimizer's state, bytes, once read.
    optimizer_state: Option<u64>,
    optimizer_state_tried: bool,
    /// The optimizer, as it was after its first update, until its state's size is read at
    /// the end of a step whose work ran.
    pending_optimizer: Option<burn::optim::ModuleOptimizer>,
    /// The current batch's bytes on the device.
    batch_bytes: u64,
}

/// What a failure needs: how the step's work is checked, how far it got, and whether the
/// session has ended.
struct FailureState {
    /// The step's loss tensor, read at the step's end to learn whether its work ran.
    witness: Option<Tensor<1>>,
    /// The last phase of the current step that returned.
    reached: Option<&'static str>,
    /// Whether every step's end reads its loss (else startup steps only).
    check_every_step: bool,
    /// Why the session takes no more steps, once it does not.
    ended: Option<crate::error::Ended>,
    /// The signal that stopped the run.
    interrupted: Option<String>,
    /// Whether the device's memory is the process's (the CPU backend): the session then
    /// notes its progress for a failed host allocation's report ([`crate::failure::host_oom`]).
    host_memory: bool,
}

/// What the session says and listens to: the console and the signal handlers.
struct Output {
    console: Console,
    live: Option<console::LiveLine>,
    signals: Option<Signals>,
    /// Whether the session installed the signal handlers (and takes them away at its end).
    owns_signals: bool,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("backend", &self.selection.label())
            .field("step", &self.clock.step)
            .field("sync", &self.sync)
            .field("profiling", &self.profiler.is_some())
            .field("ended", &self.failure.ended)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Starts configuring a session: see [`SessionBuilder`].
    pub fn builder() -> SessionBuilder {
        SessionBuilder::default()
    }

    /// The device to build the model and the batches on: the chosen backend's, with
    /// autodiff.
    pub fn device(&self) -> Device {
        self.device.clone()
    }

    /// The backend, its label and any fallback's reason.
    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// cubecl's caches for this run.
    pub fn cache(&self) -> &CacheState {
        &self.cache
    }

    /// The current step (the `N` of `ProfilerStep#N`).
    pub fn step_num(&self) -> u64 {
        self.clock.step
    }

    /// The sync policy.
    pub fn sync_policy(&self) -> SyncPolicy {
        self.sync
    }

    /// Whether the current step is recorded (its spans and device activity reach a trace).
    pub fn recording(&self) -> bool {
        self.profiler.as_ref().is_some_and(|p| p.action().records())
    }

    /// The profiler, for what the session does not wrap (`capture_handle`, `errors`); `None`
    /// with [`Profiling::Off`](crate::Profiling::Off).
    pub fn profiler(&self) -> Option<&Profiler> {
        self.profiler.as_ref()
    }

    /// Adds or replaces a field of the manifest that traces saved from now on carry.
    pub fn set_manifest(&self, key: impl Into<String>, value: impl Into<serde_json::Value>) {
        if let Some(p) = &self.profiler {
            let (key, value) = (key.into(), value.into());
            if let Err(e) = p.set_manifest(key.clone(), value) {
                tracing::warn!(target: steptrace::format::names::TARGET, "manifest field {key}: {e}");
            }
        }
    }

    /// Changes the manifest in place.
    pub fn update_manifest(&self, change: impl FnOnce(&mut steptrace::format::Manifest)) {
        if let Some(p) = &self.profiler {
            p.update_manifest(change);
        }
    }

    /// The steps recorded so far, each with its time (from its boundary to the next, after
    /// its sync), samples and loss when read.
    pub fn records(&self) -> &[StepRecord] {
        &self.clock.records
    }

    /// The cold start, itemised, once step 0 has ended.
    pub fn cold_start(&self) -> Option<&Figure<ColdStart>> {
        self.clock.cold_start.as_ref()
    }
}
