//! A burn-train `SupervisedTraining` run, profiled by steptrace.
//!
//! An MLP learns the embedded UCI digits on the CPU (burn-flex with
//! autodiff) for two short epochs; each optimizer update is one
//! `ProfilerStep#N`, and the schedule's cycles are written as Chrome traces:
//!
//! ```sh
//! cargo run -p steptrace-burn --example learner -- [TRACES_DIR] [ARTIFACTS_DIR]
//!     [--backend cpu|wgpu|cuda|auto] [--memory] [--batch N] [--hidden N] [--epochs N] [--schedule S]
//! cargo run -p steptrace-cli -- report traces
//! ```
//!
//! `TRACES_DIR` defaults to `traces`; burn-train's checkpoints and metric
//! logs go to `ARTIFACTS_DIR`, by default a temporary folder removed at the
//! end. The backend is the CPU unless `--backend` says otherwise; `--memory`
//! samples device memory by category; `--hidden N` gives the MLP one hidden
//! layer N wide (it has two of 128 by default). The lines that differ from a plain
//! burn-train program are marked `steptrace:`.

use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::DataLoaderBuilder;
use burn::data::dataset::InMemDataset;
use burn::optim::AdamConfig;
use burn::prelude::*;
use burn::train::logger::{EvaluationProgressLogger, TrainingProgressLogger};
use burn::train::metric::{AccuracyMetric, LossMetric, MetricDefinition};
use burn::train::renderer::{
    EvaluationName, MetricState, MetricsRenderer, MetricsRendererEvaluation, MetricsRendererTraining,
};
use burn::train::{
    ClassificationOutput, ExecutionStrategy, InferenceStep, Learner, MultiDeviceOptim, SupervisedTraining, TrainOutput,
    TrainStep,
};
use steptrace_burn::backend::BackendChoice;
use steptrace_burn::learner::{self, LearnerProfiler, ProfiledRun};
use steptrace_burn::{Console, Session, SignalHandling};
use steptrace_models::{classification_loss, Mlp, MlpConfig};

/// Skip 5 steps, then two cycles of 5 waiting, 2 warm-up and 4 recorded
/// steps: 12-15 (inside epoch 1) and 23-26. The digits give 1438 training
/// images, 23 batches of 64, so step 23 is the first of epoch 2 and also
/// holds epoch 1's validation and checkpoint: the second cycle shows an
/// epoch boundary, the first does not.
pub const SCHEDULE: &str = "skip_first=5,wait=5,warmup=2,active=4,repeat=2";
const SEED: u64 = 7;

/// What to run.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Where the traces go.
    pub traces: PathBuf,
    /// Where burn-train writes checkpoints and metric logs.
    pub artifacts: PathBuf,
    /// The steptrace schedule.
    pub schedule: String,
    /// Training epochs.
    pub epochs: usize,
    /// Samples per batch.
    pub batch_size: usize,
    /// Data loader threads.
    pub workers: usize,
    /// Training devices: above 1, burn-train's `MultiDevice` strategy on the
    /// CPU device listed that many times (the CPU backend has one device;
    /// burn-train runs one worker per entry all the same).
    pub devices: usize,
    /// A last change to the profiler builder (tests give it a synthetic
    /// device collector; the example leaves it as it is).
    pub customise: fn(steptrace::ProfilerBuilder) -> steptrace::ProfilerBuilder,
    /// The backend (the CPU by default).
    pub backend: BackendChoice,
    /// Device memory by category (the session's `memory`).
    pub memory: bool,
    /// The widths of the MLP's hidden layers (two of 128 by default).
    pub hidden: Vec<usize>,
}

impl Settings {
    /// The example's defaults, writing into `traces` and `artifacts`.
    pub fn new(traces: PathBuf, artifacts: PathBuf) -> Self {
        Self {
            traces,
            artifacts,
            schedule: SCHEDULE.into(),
            epochs: 2,
            batch_size: 64,
            workers: 2,
            devices: 1,
            customise: |b| b,
            backend: BackendChoice::Cpu,
            memory: false,
            hidden: vec![128, 128],
        }
    }
}

/// What a run did.
#[derive(Debug)]
pub struct Outcome {
    /// What the profiler recorded.
    pub run: ProfiledRun,
    /// Training images (the validation split is the rest).
    pub train_items: usize,
}

/// One image and its class.
#[derive(Clone, Debug)]
pub struct DigitItem {
    pixels: Vec<f32>,
    label: i64,
}

/// A batch on the device.
#[derive(Clone, Debug)]
pub struct DigitsBatch {
    images: Tensor<2>,
    targets: Tensor<1, Int>,
}

/// Collates images into a batch: the user's batcher, unchanged.
#[derive(Clone, Debug)]
pub struct DigitsBatcher {
    features: usize,
}

impl Batcher<DigitItem, DigitsBatch> for DigitsBatcher {
    fn batch(&self, items: Vec<DigitItem>, device: &Device) -> DigitsBatch {
        let n = items.len();
        let pixels: Vec<f32> = items.iter().flat_map(|item| item.pixels.iter().copied()).collect();
        let labels: Vec<i64> = items.iter().map(|item| item.label).collect();
        DigitsBatch {
            images: Tensor::from_data(TensorData::new(pixels, [n, self.features]), device),
            targets: Tensor::from_data(TensorData::new(labels, [n]), device),
        }
    }
}

/// The MLP as a burn-train model, with steptrace's phase spans.
#[derive(Module, Debug)]
pub struct Classifier {
    mlp: Mlp,
}

impl Classifier {
    fn classify(&self, batch: DigitsBatch) -> ClassificationOutput {
        let logits = learner::forward(|| self.mlp.forward(batch.images));
        let loss = learner::loss(|| classification_loss(logits.clone(), batch.targets.clone()));
        ClassificationOutput::new(loss, logits, batch.targets)
    }
}

impl TrainStep for Classifier {
    type Input = DigitsBatch;
    type Output = ClassificationOutput;

    fn step(&self, batch: DigitsBatch) -> TrainOutput<ClassificationOutput> {
        let item = self.classify(batch);
        let grads = learner::backward(|| item.loss.backward());
        TrainOutput::new(self, grads, item)
    }
}

impl InferenceStep for Classifier {
    type Input = DigitsBatch;
    type Output = ClassificationOutput;

    fn step(&self, batch: DigitsBatch) -> ClassificationOutput {
        self.classify(batch)
    }
}

/// Trains and profiles; the traces are on disk when it returns.
pub fn run(settings: &Settings) -> Result<Outcome, Box<dyn Error>> {
    let digits = steptrace_datasets::digits()?;
    let info = digits.info();
    let features = digits.features();
    let (train, valid) = digits.split(0.2, SEED);
    let items = |part: &steptrace_datasets::ImageDataset| -> Vec<DigitItem> {
        (0..part.len())
            .filter_map(|i| part.get(i))
            .map(|(pixels, label)| DigitItem { pixels: pixels.to_vec(), label: i64::from(label) })
            .collect()
    };
    let (train_items, valid_items) = (items(&train), items(&valid));
    let train_len = train_items.len();

    // steptrace: a session chooses the backend (the CPU by default, burn-flex) and labels it,
    // installs the profiler and opens the device; the Learner wrapper drives its profiler.
    let mut session = Session::builder()
        .backend(settings.backend)
        .schedule(settings.schedule.as_str())
        .out_dir(&settings.traces)
        .worker("learner-mlp")
        .console(Console::Full)
        .signals(SignalHandling::Install)
        .manifest("model", "mlp")
        .manifest("dataset", info.name.clone())
        .manifest("data_source", info.source.clone())
        .manifest("data_licence", info.licence.clone())
        .manifest("synthetic", info.synthetic)
        .batch_size(settings.batch_size)
        .manifest("prefetch_workers", settings.workers)
        .manifest("seed", SEED)
        .manifest("devices", settings.devices)
        .configure(settings.customise);
    if settings.memory {
        session = session.memory(); // steptrace: memory by category
    }
    let session = session.start()?;
    let device = session.device();
    device.seed(SEED);
    let profiler = LearnerProfiler::from_session(session)?;

    let batcher = profiler.batcher(DigitsBatcher { features }); // steptrace: was `DigitsBatcher { features }`
    let dataloader_train = DataLoaderBuilder::new(batcher.clone())
        .batch_size(settings.batch_size)
        .shuffle(SEED)
        .num_workers(settings.workers)
        .build(InMemDataset::new(train_items));
    let dataloader_valid = DataLoaderBuilder::new(batcher)
        .batch_size(settings.batch_size)
        .num_workers(settings.workers)
        .build(InMemDataset::new(valid_items));

    let mut training = SupervisedTraining::new(&settings.artifacts, dataloader_train, dataloader_valid)
        .metrics((AccuracyMetric::new(), LossMetric::new()))
        .with_default_checkpointers()
        .with_application_logger(profiler.application_logger()) // steptrace: burn-train's logger off
        .renderer(Box::new(Quiet))
        .num_epochs(settings.epochs);
    if settings.devices > 1 {
        let devices = vec![device.clone(); settings.devices];
        training = training
            .with_training_strategy(ExecutionStrategy::multi(devices, MultiDeviceOptim::OptimMainDevice).into());
    }
    let config = MlpConfig::new(features, info.num_classes).with_hidden(settings.hidden.clone());
    let model = Classifier { mlp: config.init(&device) };
    let optimizer = profiler.optimizer(AdamConfig::new().build(), &model); // steptrace: was `AdamConfig::new().init()`
                                                                           // steptrace: was `training.launch(Learner::new(model, optimizer, 1e-3))`; a failed step
                                                                           // comes back as an error, its cycle saved and an out-of-memory explained.
    let (_trained, run) = profiler.launch(training, Learner::new(model, optimizer, 1e-3))?;

    Ok(Outcome { run, train_items: train_len })
}

/// A renderer that prints nothing: burn-train's plain one prints every item.
struct Quiet;

impl MetricsRendererTraining for Quiet {
    fn update_train(&mut self, _state: MetricState) {}
    fn update_valid(&mut self, _state: MetricState) {}
}

impl MetricsRendererEvaluation for Quiet {
    fn update_test(&mut self, _name: EvaluationName, _state: MetricState) {}
}

impl TrainingProgressLogger for Quiet {
    fn start(&mut self, _epochs: usize, _starting_epoch: usize, _items: Option<usize>, _label: Option<&str>) {}
    fn update_epoch(&mut self, _epoch: usize) {}
    fn start_split(&mut self, _split: &str, _items: usize) {}
    fn update_split(&mut self, _items_processed: usize) {}
    fn end_split(&mut self) {}
    fn end(&mut self) {}
    fn log_event_training(&mut self, _event: String) {}
}

impl EvaluationProgressLogger for Quiet {
    fn start_global_progress(&mut self, _tests: usize) {}
    fn start_test(&mut self, _name: &str, _items: usize) {}
    fn update_test_progress(&mut self, _items_processed: usize) {}
    fn end_test(&mut self) {}
    fn end_global_progress(&mut self) {}
    fn log_event_evaluation(&mut self, _event: String) {}
}

impl MetricsRenderer for Quiet {
    fn manual_close(&mut self) {}
    fn register_metric(&mut self, _definition: MetricDefinition) {}
}

/// The command line: two folders, then flags.
fn parse(args: Vec<String>) -> Result<(Settings, Option<tempfile::TempDir>), String> {
    let (mut folders, mut flags) = (Vec::new(), Settings::new(PathBuf::new(), PathBuf::new()));
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--backend" => flags.backend = value("--backend")?.parse().map_err(|e| format!("--backend: {e}"))?,
            "--memory" => flags.memory = true,
            "--batch" => flags.batch_size = value("--batch")?.parse().map_err(|e| format!("--batch: {e}"))?,
            "--hidden" => flags.hidden = vec![value("--hidden")?.parse().map_err(|e| format!("--hidden: {e}"))?],
            "--epochs" => flags.epochs = value("--epochs")?.parse().map_err(|e| format!("--epochs: {e}"))?,
            "--schedule" => flags.schedule = value("--schedule")?,
            flag if flag.starts_with("--") => return Err(format!("unknown flag {flag}")),
            _ => folders.push(PathBuf::from(arg)),
        }
    }
    if flags.batch_size == 0 || flags.hidden.contains(&0) || flags.epochs == 0 {
        return Err("--batch, --hidden and --epochs must be at least 1".into());
    }
    if folders.len() > 2 {
        return Err("at most two folders: TRACES_DIR and ARTIFACTS_DIR".into());
    }
    let mut folders = folders.into_iter();
    flags.traces = folders.next().unwrap_or_else(|| PathBuf::from("traces"));
    let temporary = match folders.next() {
        Some(dir) => {
            flags.artifacts = dir;
            None
        }
        None => {
            let dir =
                tempfile::tempdir().map_err(|e| format!("no temporary folder for burn-train's artifacts: {e}"))?;
            flags.artifacts = dir.path().to_owned();
            Some(dir)
        }
    };
    Ok((flags, temporary))
}

fn main() -> ExitCode {
    let (settings, _temporary) = match parse(std::env::args().skip(1).collect()) {
        Ok(parsed) => parsed,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(2);
        }
    };
    match run(&settings) {
        Ok(Outcome { run, train_items }) => {
            println!("{} optimizer updates ({train_items} training images), one ProfilerStep each", run.updates);
            println!(
                "epoch boundaries (steps that also ran validation and checkpointing): {:?}",
                run.epoch_boundary_steps
            );
            println!("read the traces back with: steptrace report {}", settings.traces.display());
            ExitCode::SUCCESS
        }
        Err(err) => {
            // A failed step's report and the traces it saved are printed above.
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
