//! The book's four-step example ("The four-step example as a burn program"): a small model of
//! its own learns synthetic points for four steps under the schedule
//! `wait=1,warmup=1,active=2,repeat=1`, so step 0 waits, step 1 warms up and steps 2 and 3 are
//! recorded in one trace file. It chooses the backend itself (so that it can refuse a run
//! that is not on a GPU), reads its data through steptrace's `Loader`, and runs each step's
//! phases through a `Session`; it needs nothing of steptrace's bundled models or datasets.
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
use steptrace_burn::backend::{self, BackendChoice};
use steptrace_burn::data::{BatchSource, HostBatch, Loader, SourceError, SourceInfo};
use steptrace_burn::Session;

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
        Net {
            hidden: LinearConfig::new(FEATURES, 64).init(device),
            out: LinearConfig::new(64, CLASSES).init(device),
            relu: Relu::new(),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.out.forward(self.relu.forward(self.hidden.forward(x)))
    }
}

/// Synthetic points: batch `k` is always the same; a point's class is its largest of the
/// first `CLASSES` coordinates.
struct Points;

impl BatchSource for Points {
    fn batch(&self, index: u64) -> Result<HostBatch, SourceError> {
        let x: Vec<f32> = (0..BATCH * FEATURES)
            .map(|i| (((i as u64 + 1) * (index + 7) * 2_654_435_761) % 1000) as f32 / 1000.0)
            .collect();
        let y: Vec<i64> = x
            .chunks(FEATURES)
            .map(|row| (0..CLASSES).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap_or(0) as i64)
            .collect();
        Ok(HostBatch {
            index,
            input: TensorData::new(x, [BATCH, FEATURES]),
            target: TensorData::new(y, [BATCH]),
            samples: BATCH,
        })
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
            other => {
                return Err(format!("unknown argument {other:?}; usage: four_step [--backend B] [--gpu] [--out DIR]"))
            }
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
            eprintln!(
                "Its trace would time {}, not a GPU. Run without --gpu to profile it as what it is.",
                selection.kind
            );
            return Ok(ExitCode::from(2));
        }
        println!("NOTE: not a GPU: this trace describes {} and is labelled so.", selection.kind);
    }
    // cubecl reads its cache settings when the first device client is created: before the model.
    // The session installs the profiler and opens the device; its manifest says the backend
    // (and any fallback's reason) in every trace.
    let mut session = Session::builder()
        .backend(selection)
        .schedule(SCHEDULE)
        .out_dir(&args.out)
        .worker("four-step")
        .steps(STEPS)
        .batch_size(BATCH)
        .manifest("model", "two-layer net")
        .manifest("dataset", "synthetic points")
        .start()?;
    let mut loader = Loader::new(Arc::new(Points), 1, 2, Duration::ZERO)?;

    let device = session.device();
    device.seed(SEED);
    let mut model = Net::new(&device);
    let mut optim = AdamConfig::new().init();
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    session.watch(&model);
    for _ in 0..STEPS {
        // `ProfilerStep#N` opens at the step's first call: everything above is outside the steps.
        let batch = session.next_batch(&mut loader)?; // `data.load` on the loader thread
        let (x, y) = session.copy(batch, |b| {
            // `transfer.h2d`
            (Tensor::<2>::from_data(b.input, &device), Tensor::<1, Int>::from_data(b.target, &device))
        })?;
        let logits = session.forward(|| model.forward(x))?;
        let loss = session.loss(|| loss_fn.forward(logits, y))?;
        let grads = session.backward(|| loss.backward())?;
        model = session.optimize(&mut optim, 1e-3, model, grads)?;
        session.step()?; // a sync, then the step ends
    }
    let run = session.finish()?;
    for trace in &run.traces {
        println!("wrote {} (cycle {}, steps {:?})", trace.path.display(), trace.cycle, trace.steps);
    }
    Ok(ExitCode::SUCCESS)
}
