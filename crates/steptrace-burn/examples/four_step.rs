//! The book's four-step example ("The four-step example as a burn program"): an MLP learns
//! the bundled UCI digits for four steps under the schedule `wait=1,warmup=1,active=2,repeat=1`,
//! so step 0 waits, step 1 warms up and steps 2 and 3 are recorded in one trace file.
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

use burn::optim::AdamConfig;
use steptrace::{Profiler, Schedule};
use steptrace_burn::backend::{self, BackendChoice, CacheConfig};
use steptrace_burn::data::{ImageBatches, ImageLayout};
use steptrace_burn::step::{train_step, transfer};
use steptrace_burn::{Loader, SyncPolicy};
use steptrace_models::MlpConfig;

const SCHEDULE: &str = "wait=1,warmup=1,active=2,repeat=1";
const STEPS: u64 = 4;
const BATCH: usize = 64;
const SEED: u64 = 42;

type AnyError = Box<dyn std::error::Error>;

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
        .manifest("model", "mlp")
        .manifest("dataset", "digits")
        .manifest("batch_size", BATCH)
        .try_install()?;

    // 3. The data iterator, created before the profiling window opens: its loader thread
    //    starts here, outside every step. (Created after the profiler is installed, so the
    //    loader thread reports its `data.load` spans to it.)
    let source = ImageBatches::new(steptrace_datasets::digits()?, BATCH, ImageLayout::Flat, SEED);
    let loader = Loader::new(Arc::new(source), 1, 2, Duration::ZERO)?;

    // 4. The steps, on the selected backend's device: burn 0.22's tensors carry no backend
    //    type, so one loop runs on CUDA, wgpu or the CPU.
    let device = selection.device()?.autodiff();
    let mut model = MlpConfig::uci_digits().init(&device);
    let mut optim = AdamConfig::new().init();
    let mut profiler = profiler;
    let mut loader = loader;
    profiler.start(); // ProfilerStep#0 opens here: everything above is outside the steps
    for _ in 0..STEPS {
        let batch = loader.next_batch()?; // `data.load` on the loader thread
        let on_device = transfer(batch, &device)?; // `transfer.h2d`
        let (next, _loss) = train_step(model, &mut optim, on_device, 1e-3, SyncPolicy::Step, &device)?;
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
