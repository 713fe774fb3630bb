//! A model of your own, in your own loop, profiled (the book's "Your model, your loop").
//!
//! A residual MLP of three blocks learns to classify synthetic points. One block is planted
//! wide (`--wide`, 16 times the width of the others by default), so that it is by far the
//! slowest layer: the report should name it, in forward and in backward, whether the blocks
//! carry `layer` spans (`--spans`) or not (their names then come from the module tree).
//!
//! The lines marked `// steptrace` are all that profiling adds to the plain loop.
//!
//! ```sh
//! cargo run -p steptrace-burn --example own_model -- [--backend auto|cuda|wgpu|cpu] [--out DIR]
//!     [--steps N] [--batch N] [--wide N] [--spans] [--schedule S] [--ops] [--memory] [--check]
//! steptrace report DIR
//! ```

use std::process::ExitCode;

use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig, Relu};
use burn::optim::AdamConfig;
use burn::prelude::*;
use steptrace_burn::backend::BackendChoice;
use steptrace_burn::{Console, Error, Session, SignalHandling};

/// On the CPU backend a step whose allocation fails ends with the out-of-memory report, the
/// cycle kept, rather than Rust's abort.
#[global_allocator]
static ALLOCATOR: steptrace_burn::failure::host_oom::Allocator = steptrace_burn::failure::host_oom::Allocator; // steptrace

// ANCHOR: model
/// A linear layer with a skip connection: `x + relu(out(relu(inner(x))))`.
#[derive(Module, Debug)]
struct Block {
    inner: Linear,
    out: Linear,
    relu: Relu,
}

impl Block {
    fn new(width: usize, hidden: usize, device: &Device) -> Block {
        Block {
            inner: LinearConfig::new(width, hidden).init(device),
            out: LinearConfig::new(hidden, width).init(device),
            relu: Relu::new(),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let h = self.relu.forward(self.inner.forward(x.clone()));
        x + self.relu.forward(self.out.forward(h))
    }
}

/// Three residual blocks between an input and an output layer.
#[derive(Module, Debug)]
struct ResMlp {
    input: Linear,
    blocks: Vec<Block>,
    head: Linear,
}

impl ResMlp {
    /// Blocks of `hidden` units, but block 1 of `hidden * wide`.
    fn new(features: usize, width: usize, hidden: usize, wide: usize, classes: usize, device: &Device) -> ResMlp {
        let blocks = (0..3).map(|i| Block::new(width, if i == 1 { hidden * wide } else { hidden }, device)).collect();
        ResMlp {
            input: LinearConfig::new(features, width).init(device),
            blocks,
            head: LinearConfig::new(width, classes).init(device),
        }
    }

    fn forward(&self, x: Tensor<2>, spans: bool) -> Tensor<2> {
        let mut x = self.input.forward(x);
        for (i, block) in self.blocks.iter().enumerate() {
            x = if spans {
                let _layer = steptrace_burn::layer_span(["block0", "block1", "block2"][i]); // steptrace (optional)
                block.forward(x)
            } else {
                block.forward(x)
            };
        }
        self.head.forward(x)
    }
}
// ANCHOR_END: model

/// Batch `k` of synthetic points: `features` coordinates, the class is which coordinate of
/// the first `classes` is largest.
fn batch(k: u64, size: usize, features: usize, classes: usize) -> (TensorData, TensorData) {
    let mut state = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32
    };
    let x: Vec<f32> = (0..size * features).map(|_| next()).collect();
    let y: Vec<i64> = x
        .chunks(features)
        .map(|row| (0..classes).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap_or(0) as i64)
        .collect();
    (TensorData::new(x, [size, features]), TensorData::new(y, [size]))
}

/// What the command line asked for.
struct Args {
    backend: BackendChoice,
    out: String,
    steps: u64,
    batch: usize,
    wide: usize,
    spans: bool,
    schedule: String,
    ops: bool,
    memory: bool,
    check: bool,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        backend: BackendChoice::Auto,
        out: "runs".into(),
        steps: 12,
        batch: 256,
        wide: 16,
        spans: false,
        schedule: "wait=2,warmup=1,active=3,repeat=1".into(),
        ops: false,
        memory: false,
        check: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--backend" => a.backend = value("--backend")?.parse().map_err(|e| format!("--backend: {e}"))?,
            "--out" => a.out = value("--out")?,
            "--steps" => a.steps = value("--steps")?.parse().map_err(|e| format!("--steps: {e}"))?,
            "--batch" => a.batch = value("--batch")?.parse().map_err(|e| format!("--batch: {e}"))?,
            "--wide" => a.wide = value("--wide")?.parse().map_err(|e| format!("--wide: {e}"))?,
            "--schedule" => a.schedule = value("--schedule")?,
            "--spans" => a.spans = true,
            "--ops" => a.ops = true,
            "--memory" => a.memory = true,
            "--check" => a.check = true,
            other => return Err(format!("unknown argument {other:?} (see the file's header for the usage)")),
        }
    }
    if a.batch == 0 || a.wide == 0 {
        return Err("--batch and --wide must be at least 1".into());
    }
    Ok(a)
}

fn main() -> ExitCode {
    // Mesa's Vulkan device-selection layer prints noise on headless machines (lavapipe).
    if std::env::var_os("NODEVICE_SELECT").is_none() {
        std::env::set_var("NODEVICE_SELECT", "1");
    }
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("own_model: {e}");
            return ExitCode::from(2);
        }
    };
    match train(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("own_model: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// The training loop. Without the lines marked `// steptrace`, it is a plain burn loop.
// ANCHOR: train
fn train(a: &Args) -> Result<(), Error> {
    let (features, width, hidden, classes) = (32, 64, 64, 8);
    let mut session = Session::builder() // steptrace
        .backend(a.backend) // steptrace
        .schedule(a.schedule.as_str()) // steptrace
        .out_dir(&a.out) // steptrace
        .worker("own-model") // steptrace: the name in the files' names
        .console(Console::Full) // steptrace: say what `steptrace train` says
        .signals(SignalHandling::Install) // steptrace: Ctrl-C ends the run after the step, its cycle saved
        .steps(a.steps) // steptrace
        .manifest("model", "residual MLP, block 1 planted wide") // steptrace
        .options(a) // steptrace: --ops, --memory, --check (below)
        .start()?; // steptrace
    let device = session.device(); // steptrace: was `let device = Device::default().autodiff();`
    let mut model = ResMlp::new(features, width, hidden, a.wide, classes, &device);
    let mut optim = AdamConfig::new().init();
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    session.watch(&model); // steptrace
    let mut data = (0..a.steps).map(|k| batch(k, a.batch, features, classes));
    while let Some((x, y)) = session.load(|| data.next())? {
        let (x, y) = session
            .copy((x, y), |(x, y)| (Tensor::<2>::from_data(x, &device), Tensor::<1, Int>::from_data(y, &device)))?;
        let logits = session.forward(|| model.forward(x, a.spans))?;
        let loss = session.loss(|| loss_fn.forward(logits, y))?;
        let grads = session.backward(|| loss.backward())?;
        model = session.optimize(&mut optim, 1e-3, model, grads)?;
        if session.step_num() % 4 == 0 {
            println!("step {} loss {:.4}", session.step_num(), session.read_loss(loss)?);
        }
        session.step()?; // steptrace
    }
    session.finish()?; // steptrace
    Ok(())
}
// ANCHOR_END: train

/// The command line's profiling options, on the builder.
trait Options {
    fn options(self, a: &Args) -> Self;
}

impl Options for steptrace_burn::SessionBuilder {
    fn options(self, a: &Args) -> Self {
        let mut b = self;
        if a.ops {
            b = b.ops();
        }
        if a.memory {
            b = b.memory();
        }
        if a.check {
            b = b.check_every_step();
        }
        b
    }
}
