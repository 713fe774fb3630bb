//! The book's four-step example ("The four-step example as a burn program"): a small model of
//! its own learns synthetic points for four steps under the schedule
//! `wait=1,warmup=1,active=2,repeat=1`, so step 0 waits, step 1 warms up and steps 2 and 3 are
//! recorded in one trace file. It is built from steptrace-burn's pieces (backend choice,
//! loader, transfer, training step, sync) rather than a `Session`, and needs nothing of
//! steptrace's bundled models or datasets.
//!
//! ```sh
//! cargo run -p steptrace-burn --example four_step -- [--backend auto|cuda|wgpu|cpu] [--gpu] [--out DIR]
//! steptrace report runs
//! ```
//!
//! `--gpu` says that you want a GPU analysis: the program then refuses to run (exit status 2)
//! when the backend it gets is not a GPU, rather than write a CPU trace that could be read as
//! a GPU one. Traces go to `DIR` (default `runs`), each under a new name.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig, Relu};
use burn::optim::AdamConfig;
use burn::prelude::*;
use steptrace::{Profiler, Schedule};
use steptrace_burn::backend::{self, BackendChoice, CacheConfig};
use steptrace_burn::data::{BatchSource, HostBatch, SourceInfo};
use steptrace_burn::step::{train_step, transfer, DeviceInput, DeviceTarget};
use steptrace_burn::{Loader, SyncPolicy};

const SCHEDULE: &str = "wait=1,warmup=1,active=2,repeat=1";
const STEPS: u64 = 4;
const BATCH: usize = 64;
const SEED: u64 = 42;

type AnyError = Box<dyn std::error::Error>;

/// Features of each point, and classes.
const FEATURES: usize = 16;
const CLASSES: usize = 4;

/// A two-layer network.
#[derive(Module, Debug)]
struct Net {
    hidden: Linear,
    out: Linear,
    relu: Relu,
}

impl Net {
    fn new(device: &Device) -> Net {
        Net { hidden: LinearConfig::new(FEATURES, 64).init(device), out: LinearConfig::new(64, CLASSES).init(device), relu: Relu::new() }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.out.forward(self.relu.forward(self.hidden.forward(x)))
    }
}

/// Synthetic points: batch `k` is always the same; a point's class is its largest of the
/// first `CLASSES` coordinates.
struct Points;

impl BatchSource for Points {
    fn batch(&self, index: u64) -> steptrace_burn::Result<HostBatch> {
        let x: Vec<f32> = (0..BATCH * FEATURES).map(|i| (((i as u64 + 1) * (index + 7) * 2_654_435_761) % 1000) as f32 / 1000.0).collect();
        let y: Vec<i64> = x.chunks(FEATURES).map(|row| (0..CLASSES).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap_or(0) as i64).collect();
        Ok(HostBatch { index, input: TensorData::new(x, [BATCH, FEATURES]), target: TensorData::new(y, [BATCH]), samples: BATCH })
    }

    fn batch_size(&self) -> usize {
        BATCH
    }

    fn info(&self) -> SourceInfo {
        SourceInfo::named("synthetic points")
    }
}

/// What the command line asked for.
struct Args {
    backend: BackendChoice,
    gpu: bool,
    out: PathBuf,
}

fn args() -> Result<Args, String> {
    let mut args = Args { backend: BackendChoice::Auto, gpu: false, out: PathBuf::from("runs") };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--gpu" => args.gpu = true,
            "--backend" => {
                let value = it.next().ok_or("--backend needs a value: auto, cuda, wgpu or cpu")?;
                args.backend = value.parse().map_err(|e| format!("--backend {value}: {e}"))?;
            }
            "--out" => args.out = it.next().ok_or("--out needs a directory")?.into(),
            other => return Err(format!("unknown argument {other:?}; usage: four_step [--backend B] [--gpu] [--out DIR]")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    // Mesa's Vulkan device-selection layer complains on headless machines; as in `steptrace`.
    if std::env::var_os("NODEVICE_SELECT").is_none() {
        std::env::set_var("NODEVICE_SELECT", "1");
    }
    match run() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("four_step: error: {err}");
            ExitCode::from(1)
        }
    }
}

fn run() -> Result<ExitCode, AnyError> {
    let args = args()?;

    // 1. The backend, and what it really is. A fallback is labelled; when a GPU analysis
    //    was asked for, a backend that is not a GPU is refused before anything runs.
    let selection = backend::select(args.backend)?;
    println!("backend: {}", selection.label());
    if !selection.is_gpu() {
        if args.gpu {
            eprintln!("four_step: refused: --gpu asks for a GPU analysis, but this backend is not a GPU.");
            eprintln!("Its trace would time {}, not a GPU. Run without --gpu to profile it as what it is.", selection.kind);
            return Ok(ExitCode::from(2));
        }
        println!("NOTE: not a GPU: this trace describes {} and is labelled so.", selection.kind);
    }
    // cubecl reads its cache settings when the first device client is created: before the model.
    backend::configure_cubecl_cache(&CacheConfig::default());

    // 2. The profiler, under the four-step schedule. Its files get new names
    //    (worker, cycle, time): an existing trace is never replaced.
    let schedule: Schedule = SCHEDULE.parse()?;
    let profiler = Profiler::builder(schedule)
        .out_dir(&args.out)
        .worker("four-step")
        .manifest("backend", selection.label())
        .manifest("backend_kind", selection.kind.as_str())
        .manifest("requested_backend", args.backend.as_str())
        .manifest("fallback_reason", selection.fallback_reason.clone())
        .manifest("device", selection.device.clone())
        .manifest("model", "two-layer net")
        .manifest("dataset", "synthetic points")
        .manifest("batch_size", BATCH)
        .try_install()?;

    // 3. The data iterator, created before the profiling window opens: its loader thread
    //    starts here, outside every step. (Created after the profiler is installed, so the
    //    loader thread reports its `data.load` spans to it.)
    let loader = Loader::new(Arc::new(Points), 1, 2, Duration::ZERO)?;

    // 4. The steps, on the selected backend's device: burn 0.22's tensors carry no backend
    //    type, so one loop runs on CUDA, wgpu or the CPU.
    let device = selection.device()?.autodiff();
    device.seed(SEED);
    let mut model = Net::new(&device);
    let mut optim = AdamConfig::new().init();
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    let mut profiler = profiler;
    let mut loader = loader;
    profiler.start(); // ProfilerStep#0 opens here: everything above is outside the steps
    for _ in 0..STEPS {
        let batch = loader.next_batch()?; // `data.load` on the loader thread
        let on_device = transfer(batch, &device)?; // `transfer.h2d`
        let (DeviceInput::Flat(x), DeviceTarget::Classes(y)) = (on_device.input, on_device.target) else {
            return Err("the points are flat features with one class each".into());
        };
        // `train.step` > `forward`, `loss`, `backward`, `optimizer`, on any model.
        let (next, _loss) = train_step(model, &mut optim, 1e-3, SyncPolicy::Step, &device, |m| m.forward(x), |logits| {
            loss_fn.forward(logits, y)
        })?;
        model = next;
        // The step's device work is finished before the step is closed, so that the
        // step's length is its true time, not its launch time.
        steptrace_burn::sync::sync(&device)?;
        profiler.step();
    }
    let saved = profiler.finish()?;
    for trace in &saved {
        println!("wrote {} (cycle {}, steps {:?})", trace.path.display(), trace.cycle, trace.steps);
    }
    Ok(ExitCode::SUCCESS)
}
