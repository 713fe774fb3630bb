//! A session's start, stage by stage: the signal handlers and the backend, cubecl's caches,
//! the profiler, then the device.

use std::time::Instant;

use steptrace::terminal::{say, warn};
use steptrace::{Profiler, Schedule};

use super::builder::{install_signals, BackendRequest, Profiling, SessionBuilder, SignalHandling};
use super::{FailureState, MemoryWatch, Output, Session, StepClock};
use crate::backend::{self, StartupCapture};
use crate::console::{self as lines, said_above};
use crate::error::{Ended, Error, Result};
use crate::summary::startup_steps;

impl Session {
    /// Starts a session as `b` says ([`SessionBuilder::start`]), stage by stage: the signal
    /// handlers and the backend, cubecl's caches, the profiler, then the device.
    pub(crate) fn start(mut b: SessionBuilder) -> Result<Session> {
        // Taken out of the builder once; what is left in its place is never read.
        let schedule = std::mem::replace(&mut b.schedule, Err(Error::Ended(Ended::Finished)))?;
        let signals = install_signals(&b.signals)?;
        let (selection, own) = choose_backend(&mut b)?;
        let console = b.console;
        if console.start() {
            lines::backend_lines(&selection);
            // Environment variables not understood, and experiments' knobs that are set.
            for line in steptrace::settings::warnings() {
                warn(&line);
            }
        }
        let cache = match b.cache_state.take() {
            Some(state) => state,
            None => backend::configure_cubecl_cache(&b.cache),
        };
        if console.start() {
            lines::cache_line(&selection, &cache);
        }
        let records = !matches!(b.profiling, Profiling::Off);
        // The device's measured limits, when `steptrace peaks` cached them: never measured here.
        let peaks = super::peaks::find(&selection, console.start(), records);
        if console.start() {
            say(&format!("sync: {} ({})", b.sync, b.sync.meaning()));
        }
        // With a profiler the program installed, its subscriber decides (StampLayer beside it):
        // the parameters are noted, which costs nothing when no window records attribution.
        let attributed = selection.kind.uses_cubecl()
            && match &b.profiling {
                Profiling::Installed(_) => true,
                Profiling::Install => b.device_activity == crate::device::DeviceActivityMode::Attributed,
                Profiling::Off => false,
            };
        let profiler = start_profiler(&mut b, schedule, &selection, own.as_ref())?;
        // Before the device client is created: the cold start is read from here on.
        let startup = StartupCapture::begin(selection.kind);
        let started = Instant::now();
        let device = open_device(&selection, own)?;
        let startup_steps = b.startup_steps.or(b.steps.map(startup_steps)).unwrap_or(1);
        let host_memory = selection.kind == backend::BackendKind::Cpu;
        let session = Session {
            selection,
            device,
            cache,
            profiler,
            sync: b.sync,
            attributed,
            clock: StepClock {
                started,
                setup_end: None,
                step_start: started,
                step: 0,
                in_step: false,
                startup_steps,
                fixed_startup: b.startup_steps.is_some(),
                planned_steps: b.steps,
                batch_size: b.batch_size,
                records: Vec::with_capacity(b.steps.unwrap_or(64).min(1 << 16) as usize),
                anomalies: Vec::new(),
                shapes: Vec::new(),
                first_shape: None,
                samples: None,
                loss: None,
                startup: Some(startup),
                cold_start: None,
                inferred: false,
                model_load_ms: None,
            },
            memory: MemoryWatch {
                wanted: b.memory,
                phases: b.memory_phases,
                sampler: None,
                note: None,
                sampled_start: false,
                parameters: None,
                optimizer_state: None,
                optimizer_state_tried: false,
                pending_optimizer: None,
                batch_bytes: 0,
            },
            failure: FailureState {
                witness: None,
                reached: None,
                check_every_step: b.check_every_step,
                ended: None,
                interrupted: None,
                host_memory,
            },
            output: Output { console, live: None, signals, owns_signals: matches!(b.signals, SignalHandling::Install) },
        };
        session.describe_run();
        if let (Some(profiler), Some(peaks)) = (&session.profiler, &peaks) {
            super::peaks::record(profiler, peaks);
        }
        Ok(session)
    }
}

/// The backend stage of [`Session::start`]: the selection, and the program's own device when
/// it gave one.
fn choose_backend(b: &mut SessionBuilder) -> Result<(backend::Selection, Option<burn::prelude::Device>)> {
    let request = std::mem::replace(&mut b.backend, BackendRequest::Choice(backend::BackendChoice::Auto));
    Ok(match request {
        BackendRequest::Choice(choice) => (backend::select(choice)?, None),
        BackendRequest::Selected(selection) => (selection, None),
        BackendRequest::Device(device) => (backend::Selection::of_device(&device)?, Some(device)),
    })
}

/// The device stage of [`Session::start`]: the device's client is made here (timed, for the
/// cold start), and the device is the autodiff one.
fn open_device(selection: &backend::Selection, own: Option<burn::prelude::Device>) -> Result<burn::prelude::Device> {
    let device = match own {
        Some(device) => {
            let _ = backend::timed_client(|| device.sync());
            device
        }
        None => selection.device()?,
    };
    Ok(if device.is_autodiff() { device } else { device.autodiff() })
}

/// The profiler stage of [`Session::start`]: the program's own, a new one installed, or none.
fn start_profiler(
    b: &mut SessionBuilder,
    schedule: Schedule,
    selection: &backend::Selection,
    own: Option<&burn::prelude::Device>,
) -> Result<Option<Profiler>> {
    let console = b.console;
    let manifest = std::mem::take(&mut b.manifest);
    match std::mem::take(&mut b.profiling) {
        Profiling::Off => Ok(None),
        Profiling::Installed(profiler) => {
            for (key, value) in manifest {
                let _ = profiler.set_manifest(key, value);
            }
            Ok(Some(profiler))
        }
        Profiling::Install => {
            let mode = b.device_activity;
            let setup = crate::device::setup_on(mode, selection, own);
            if console.start() {
                let described = setup.describe(mode);
                say(&format!("device activity: {}", said_above(&described, selection.fallback_reason.as_deref())));
            }
            let mut builder = Profiler::builder(schedule).out_dir(&b.out_dir);
            if let Some(worker) = &b.worker {
                builder = builder.worker(worker.clone());
            }
            builder = match setup {
                crate::device::DeviceSetup::Collector(collector, _) => builder.device_collector(collector),
                crate::device::DeviceSetup::NotObserved(reason) => builder.device_not_observed(reason),
            };
            for (key, value) in manifest {
                builder = builder.manifest(key, value);
            }
            for change in std::mem::take(&mut b.configure) {
                builder = change(builder);
            }
            let profiler = backend::install_profiler(builder)?;
            if console.start() {
                for warning in profiler.warnings() {
                    warn(&format!("steptrace: warning: {warning}"));
                }
                if schedule.is_on_demand() {
                    say(&format!(
                        "on demand: recording nothing until asked; from another terminal: steptrace capture {} --out {} [--steps N] \
                         (a warmup step, then {} active steps by default)",
                        std::process::id(),
                        b.out_dir.display(),
                        schedule.active()
                    ));
                }
            }
            let command = b.command.clone();
            profiler.update_manifest(|m| {
                m.command = command;
                m.device_activity = Some(mode.to_string());
            });
            Ok(Some(profiler))
        }
    }
}
