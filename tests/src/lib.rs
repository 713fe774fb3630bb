//! Helpers for steptrace's end-to-end tests: a fake multi-threaded workload
//! (no burn) and an independent model of the torch.profiler schedule.

mod book;

pub mod fake_gpu;
pub mod ranks;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use steptrace::{Profiler, SavedTrace, Schedule};
use tracing::Dispatch;
use tracing_subscriber::prelude::*;

/// A fake training workload: a stepping thread plus loader threads.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Schedule string.
    pub schedule: String,
    /// Number of `step()` calls.
    pub steps: u64,
    /// Loader threads that emit `data.load` spans concurrently.
    pub loaders: usize,
    /// Work per phase.
    pub phase: Duration,
    /// Output directory.
    pub out: PathBuf,
    /// Call `finish()` explicitly (otherwise the profiler is dropped).
    pub explicit_finish: bool,
    /// A fake device collector, or the reason the device is not observed.
    pub device: Option<Result<fake_gpu::FakeGpu, String>>,
}

impl Workload {
    /// A workload writing into `out`.
    pub fn new(schedule: &str, steps: u64, out: &Path) -> Workload {
        Workload {
            schedule: schedule.to_owned(),
            steps,
            loaders: 2,
            phase: Duration::from_micros(300),
            out: out.to_owned(),
            explicit_finish: true,
            device: None,
        }
    }

    /// Runs the workload under a scoped subscriber (not the global one), so
    /// several workloads can run in one test process. Returns the saved
    /// traces (read from the directory when the profiler was dropped).
    pub fn run(&self) -> Result<Vec<SavedTrace>, steptrace::Error> {
        let schedule: Schedule = self.schedule.parse()?;
        let mut builder = Profiler::builder(schedule).out_dir(&self.out).worker("fake").manifest("workload", "fake");
        builder = match &self.device {
            Some(Ok(gpu)) => builder.device_collector(Box::new(gpu.clone())),
            Some(Err(reason)) => builder.device_not_observed(reason.clone()),
            None => builder,
        };
        let (layer, mut profiler) = builder.build()?;
        let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
        let stop = Arc::new(AtomicBool::new(false));
        let ready = Arc::new(std::sync::Barrier::new(self.loaders + 1));
        // Loads finished, so that each step can wait for one: on a loaded machine a sleeping
        // loader may otherwise not run at all during a short recorded window.
        let loads = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let loaders: Vec<_> = (0..self.loaders)
            .map(|i| {
                let (dispatch, stop, phase, ready) = (dispatch.clone(), stop.clone(), self.phase, ready.clone());
                let loads = loads.clone();
                thread::Builder::new()
                    .name(format!("loader-{i}"))
                    .spawn(move || {
                        tracing::dispatcher::with_default(&dispatch, || {
                            ready.wait();
                            while !stop.load(Ordering::Relaxed) {
                                {
                                    let _load =
                                        tracing::info_span!(target: "steptrace", "data.load", worker = i).entered();
                                    // Sleep rather than spin: on a loaded machine
                                    // the loaders still get scheduled.
                                    thread::sleep(phase * 2);
                                }
                                loads.fetch_add(1, Ordering::Release);
                            }
                        })
                    })
                    .expect("spawn loader")
            })
            .collect();
        ready.wait();
        let result = tracing::dispatcher::with_default(&dispatch, || {
            profiler.start();
            for _ in 0..self.steps {
                let before = loads.load(Ordering::Acquire);
                one_step(self.phase);
                // Each step holds at least one finished load (or a second's wait for one).
                let deadline = std::time::Instant::now() + Duration::from_secs(1);
                while self.loaders > 0
                    && loads.load(Ordering::Acquire) == before
                    && std::time::Instant::now() < deadline
                {
                    thread::sleep(Duration::from_micros(50));
                }
                profiler.step();
            }
            if self.explicit_finish {
                profiler.finish()
            } else {
                drop(profiler);
                Ok(Vec::new())
            }
        });
        stop.store(true, Ordering::Relaxed);
        for loader in loaders {
            let _ = loader.join();
        }
        result
    }
}

/// One step of fake work with the span layout of a training step.
/// The backend `choice` selects, or `None` (with a note) when it is wgpu and this
/// machine has no Vulkan adapter; any other failure fails the test (CI installs lavapipe).
pub fn select_or_skip(choice: steptrace_burn::backend::BackendChoice) -> Option<steptrace_burn::backend::Selection> {
    match steptrace_burn::backend::select(choice) {
        Ok(s) => Some(s),
        Err(err) => {
            assert_eq!(choice, steptrace_burn::backend::BackendChoice::Wgpu, "{err}");
            eprintln!("skipping: {err}");
            None
        }
    }
}

pub fn one_step(phase: Duration) {
    let _train = tracing::info_span!(target: "steptrace", "train.step").entered();
    for name in ["forward", "loss", "backward", "optimizer"] {
        let _phase = match name {
            "forward" => tracing::info_span!(target: "steptrace", "forward").entered(),
            "loss" => tracing::info_span!(target: "steptrace", "loss").entered(),
            "backward" => tracing::info_span!(target: "steptrace", "backward").entered(),
            _ => tracing::info_span!(target: "steptrace", "optimizer").entered(),
        };
        busy(phase);
    }
    tracing::info!(target: "steptrace", "step done");
}

/// Spins for `d` (sleeping would let the scheduler blur the spans).
pub fn busy(d: Duration) {
    let start = std::time::Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// torch.profiler's `schedule_fn`, written independently of
/// `steptrace::Schedule`: returns 0 none, 1 warmup, 2 record, 3 record-and-save.
pub fn torch_action(
    skip_first: u64,
    wait: u64,
    warmup: u64,
    active: u64,
    repeat: u64,
    skip_first_wait: bool,
    step: u64,
) -> u8 {
    if step < skip_first {
        return 0;
    }
    let mut s = step - skip_first;
    if skip_first_wait {
        s += wait;
    }
    let n = wait + warmup + active;
    if repeat > 0 && s >= repeat * n {
        return 0;
    }
    let m = s % n;
    if m < wait {
        0
    } else if m < wait + warmup {
        1
    } else if m + 1 < n {
        2
    } else {
        3
    }
}

/// The recorded steps per file that torch.profiler would save for a loop of
/// `steps` iterations, each ending in `step()`: a file closes after each
/// record-and-save step, and a cycle cut short by the end of the loop is
/// saved as a partial file.
pub fn expected_files(
    skip_first: u64,
    wait: u64,
    warmup: u64,
    active: u64,
    repeat: u64,
    sfw: bool,
    steps: u64,
) -> Vec<Vec<u64>> {
    let mut files = Vec::new();
    let mut current = Vec::new();
    for step in 0..steps {
        match torch_action(skip_first, wait, warmup, active, repeat, sfw, step) {
            2 => current.push(step),
            3 => {
                current.push(step);
                files.push(std::mem::take(&mut current));
            }
            _ => {}
        }
    }
    if !current.is_empty() {
        files.push(current);
    }
    files
}

/// The thread names a trace declares (`thread_name` metadata events).
pub fn thread_names(trace: &steptrace::reader::Trace) -> Vec<&str> {
    trace
        .events
        .iter()
        .filter(|e| e.ph == "M" && e.name == "thread_name")
        .filter_map(|e| e.args.as_ref()?.get("name")?.as_str())
        .collect()
}

/// Runs `f` with `layer` in a registry as this thread's default subscriber.
pub fn with_layer<L, R>(layer: L, f: impl FnOnce() -> R) -> R
where
    L: tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync + 'static,
{
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, f)
}

/// Whether an event opens a span: a begin, or a complete event (the
/// finaliser writes spans wholly inside the window as complete events).
pub fn opens_span(event: &steptrace::reader::TraceEvent) -> bool {
    event.ph == "B" || event.ph == "X"
}

/// The nesting paths (`outer>inner`) of every span on the thread that ran
/// the span named `anchor`, in start order.
pub fn nesting_paths(trace: &steptrace::reader::Trace, anchor: &str) -> Vec<String> {
    let spans = steptrace::analysis::Spans::from_trace(trace);
    let Some(thread) = spans.spans.iter().find(|s| s.name == anchor).map(|s| s.thread.clone()) else {
        return Vec::new();
    };
    let path = |mut i: usize| {
        let mut names = vec![spans.spans[i].name.clone()];
        while let Some(p) = spans.spans[i].parent {
            names.push(spans.spans[p].name.clone());
            i = p;
        }
        names.reverse();
        names.join(">")
    };
    (0..spans.spans.len()).filter(|&i| spans.spans[i].thread == thread).map(path).collect()
}
