//! A burn-train `SupervisedTraining` run, profiled by steptrace.
//!
//! An MLP learns the embedded UCI digits on the CPU (ndarray with
//! autodiff) for two short epochs; each optimizer update is one
//! `ProfilerStep#N`, and the schedule's cycles are written as Chrome traces:
//!
//! ```sh
//! cargo run -p steptrace-burn --example learner -- [TRACES_DIR] [ARTIFACTS_DIR]
//! cargo run -p steptrace-cli -- report traces
//! ```
//!
//! `TRACES_DIR` defaults to `traces`; burn-train's checkpoints and metric
//! logs go to `ARTIFACTS_DIR`, by default a temporary folder removed at the
//! end. The lines that differ from a plain burn-train program are marked
//! `steptrace:`.

use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::DataLoaderBuilder;
use burn::data::dataset::InMemDataset;
use burn::optim::AdamConfig;
use burn::prelude::*;
use burn::record::CompactRecorder;
use burn::tensor::backend::AutodiffBackend;
use burn::train::metric::{AccuracyMetric, LossMetric, MetricDefinition};
use burn::train::renderer::{
    EvaluationName, EvaluationProgress, MetricState, MetricsRenderer, MetricsRendererEvaluation,
    MetricsRendererTraining, ProgressType, TrainingProgress,
};
use burn::train::{
    ClassificationOutput, ExecutionStrategy, InferenceStep, Learner, MultiDeviceOptim, SupervisedTraining, TrainOutput,
    TrainStep,
};
use steptrace::format::names::{BACKWARD, FORWARD, LOSS, TARGET};
use steptrace_burn::backend::{self, BackendChoice, CpuAutodiff};
use steptrace_burn::learner::{self, LearnerProfiler, ProfiledRun};
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
}

impl Settings {
    /// The example's defaults, writing into `traces` and `artifacts`.
    pub fn new(traces: PathBuf, artifacts: PathBuf) -> Self {
        Self { traces, artifacts, schedule: SCHEDULE.into(), epochs: 2, batch_size: 64, workers: 2, devices: 1, customise: |b| b }
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
pub struct DigitsBatch<B: Backend> {
    images: Tensor<B, 2>,
    targets: Tensor<B, 1, Int>,
}

/// Collates images into a batch: the user's batcher, unchanged.
#[derive(Clone, Debug)]
pub struct DigitsBatcher {
    features: usize,
}

impl<B: Backend> Batcher<B, DigitItem, DigitsBatch<B>> for DigitsBatcher {
    fn batch(&self, items: Vec<DigitItem>, device: &B::Device) -> DigitsBatch<B> {
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
pub struct Classifier<B: Backend> {
    mlp: Mlp<B>,
}

impl<B: Backend> Classifier<B> {
    fn classify(&self, batch: DigitsBatch<B>) -> ClassificationOutput<B> {
        let logits = tracing::info_span!(target: TARGET, FORWARD).in_scope(|| self.mlp.forward(batch.images));
        let loss = tracing::info_span!(target: TARGET, LOSS)
            .in_scope(|| classification_loss(logits.clone(), batch.targets.clone()));
        ClassificationOutput::new(loss, logits, batch.targets)
    }
}

impl<B: AutodiffBackend> TrainStep for Classifier<B> {
    type Input = DigitsBatch<B>;
    type Output = ClassificationOutput<B>;

    fn step(&self, batch: DigitsBatch<B>) -> TrainOutput<ClassificationOutput<B>> {
        let item = self.classify(batch);
        let grads = tracing::info_span!(target: TARGET, BACKWARD).in_scope(|| item.loss.backward());
        TrainOutput::new(self, grads, item)
    }
}

impl<B: Backend> InferenceStep for Classifier<B> {
    type Input = DigitsBatch<B>;
    type Output = ClassificationOutput<B>;

    fn step(&self, batch: DigitsBatch<B>) -> ClassificationOutput<B> {
        self.classify(batch)
    }
}

/// Trains and profiles; the traces are on disk when it returns.
pub fn run(settings: &Settings) -> Result<Outcome, Box<dyn Error>> {
    type B = CpuAutodiff;
    let device = Default::default();
    B::seed(&device, SEED);
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

    // steptrace: the profiler, with what this program knows for the manifest.
    let selection = backend::select(BackendChoice::Cpu)?;
    let builder = steptrace::Profiler::builder(settings.schedule.parse()?)
        .out_dir(&settings.traces)
        .worker("learner-mlp")
        .manifest("model", "mlp")
        .manifest("dataset", info.name.clone())
        .manifest("data_source", info.source.clone())
        .manifest("data_licence", info.licence.clone())
        .manifest("synthetic", info.synthetic)
        .manifest("batch_size", settings.batch_size)
        .manifest("prefetch_workers", settings.workers)
        .manifest("seed", SEED)
        .manifest("devices", settings.devices);
    let profiler = LearnerProfiler::install((settings.customise)(learner::with_backend(builder, &selection)))?;

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
        .with_file_checkpointer(CompactRecorder::new())
        .with_application_logger(profiler.application_logger()) // steptrace: burn-train's logger off
        .renderer(Quiet)
        .num_epochs(settings.epochs);
    if settings.devices > 1 {
        let devices = vec![device; settings.devices];
        training = training.with_training_strategy(ExecutionStrategy::multi(devices, MultiDeviceOptim::OptimMainDevice).into());
    }
    let model = Classifier { mlp: MlpConfig::new(features, info.num_classes).init::<B>(&device) };
    let optimizer = profiler.optimizer(AdamConfig::new().init()); // steptrace: was `AdamConfig::new().init()`
    let _trained = training.launch(Learner::new(model, optimizer, 1e-3));

    Ok(Outcome { run: profiler.finish()?, train_items: train_len })
}

/// A renderer that prints nothing: burn-train's plain one prints every item.
struct Quiet;

impl MetricsRendererTraining for Quiet {
    fn update_train(&mut self, _state: MetricState) {}
    fn update_valid(&mut self, _state: MetricState) {}
    fn render_train(&mut self, _item: TrainingProgress, _progress: Vec<ProgressType>) {}
    fn render_valid(&mut self, _item: TrainingProgress, _progress: Vec<ProgressType>) {}
}

impl MetricsRendererEvaluation for Quiet {
    fn update_test(&mut self, _name: EvaluationName, _state: MetricState) {}
    fn render_test(&mut self, _item: EvaluationProgress, _progress: Vec<ProgressType>) {}
}

impl MetricsRenderer for Quiet {
    fn manual_close(&mut self) {}
    fn register_metric(&mut self, _definition: MetricDefinition) {}
}

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let traces = args.next().map_or_else(|| PathBuf::from("traces"), PathBuf::from);
    let (artifacts, _temporary) = match args.next() {
        Some(dir) => (PathBuf::from(dir), None),
        None => match tempfile::tempdir() {
            Ok(dir) => (dir.path().to_owned(), Some(dir)),
            Err(err) => {
                eprintln!("error: no temporary folder for burn-train's artifacts: {err}");
                return ExitCode::FAILURE;
            }
        },
    };
    match run(&Settings::new(traces.clone(), artifacts)) {
        Ok(Outcome { run, train_items }) => {
            println!("{} optimizer updates ({train_items} training images), one ProfilerStep each", run.updates);
            println!("epoch boundaries (steps that also ran validation and checkpointing): {:?}", run.epoch_boundary_steps);
            for trace in &run.saved {
                println!("wrote {} (cycle {}, steps {:?})", trace.path.display(), trace.cycle, trace.steps);
            }
            println!("read them back with: cargo run -p steptrace-cli -- report {}", traces.display());
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
