//! Profiling a burn-train 0.22 `SupervisedTraining` run.
//!
//! burn-train owns the training loop, so steptrace hooks into the three
//! pieces a program hands it:
//!
//! - the optimizer, wrapped in [`Profiled`] inside burn's
//!   `ModuleOptimizer`: each update runs in an `optimizer` span and then
//!   ends the current `ProfilerStep#N`;
//! - the batcher, wrapped in [`ProfiledBatcher`]: each batch is built in a
//!   `data.load` span on the data loader's own threads;
//! - the application logger slot, given [`LearnerProfiler::application_logger`]:
//!   burn-train installs no subscriber of its own, and `ProfilerStep#0`
//!   opens when `launch` begins.
//!
//! The [`steptrace::Schedule`], the file names, the manifest and the output
//! folder are those of the [`steptrace::ProfilerBuilder`] passed to
//! [`LearnerProfiler::install`], unchanged.
//!
//! # Adding it to a program
//!
//! Two lines are added (installing the profiler, and passing its
//! application logger) and two expressions are wrapped (the batcher and the
//! optimizer); [`finish`](LearnerProfiler::finish) is optional. Everything
//! else is the program as it was. The optimizer is given as the per-tensor
//! optimizer of its config (`build()`, where the program had `init()`),
//! with the model it trains:
//!
//! ```
//! # use burn::data::dataloader::{batcher::Batcher, DataLoaderBuilder};
//! # use burn::data::dataset::InMemDataset;
//! # use burn::nn::{loss::CrossEntropyLossConfig, Linear, LinearConfig};
//! # use burn::optim::SgdConfig;
//! # use burn::prelude::*;
//! # use burn::train::metric::LossMetric;
//! # use burn::train::{ClassificationOutput, InferenceStep, Learner, SupervisedTraining, TrainOutput, TrainStep};
//! # use steptrace_burn::learner::LearnerProfiler;
//! #
//! # #[derive(Module, Debug)]
//! # struct Model {
//! #     linear: Linear,
//! # }
//! # #[derive(Clone, Debug)]
//! # struct Batch {
//! #     x: Tensor<2>,
//! #     y: Tensor<1, Int>,
//! # }
//! # impl Model {
//! #     fn classify(&self, batch: Batch) -> ClassificationOutput {
//! #         let output = self.linear.forward(batch.x);
//! #         let loss = CrossEntropyLossConfig::new().init(&output.device()).forward(output.clone(), batch.y.clone());
//! #         ClassificationOutput::new(loss, output, batch.y)
//! #     }
//! # }
//! # impl TrainStep for Model {
//! #     type Input = Batch;
//! #     type Output = ClassificationOutput;
//! #     fn step(&self, batch: Batch) -> TrainOutput<ClassificationOutput> {
//! #         let item = self.classify(batch);
//! #         TrainOutput::new(self, item.loss.backward(), item)
//! #     }
//! # }
//! # impl InferenceStep for Model {
//! #     type Input = Batch;
//! #     type Output = ClassificationOutput;
//! #     fn step(&self, batch: Batch) -> ClassificationOutput {
//! #         self.classify(batch)
//! #     }
//! # }
//! # #[derive(Clone)]
//! # struct PairBatcher;
//! # impl Batcher<(f32, i64), Batch> for PairBatcher {
//! #     fn batch(&self, items: Vec<(f32, i64)>, device: &Device) -> Batch {
//! #         let n = items.len();
//! #         let x: Vec<f32> = items.iter().flat_map(|(v, _)| [*v, 1.0 - *v]).collect();
//! #         let y: Vec<i64> = items.iter().map(|(_, c)| *c).collect();
//! #         Batch { x: Tensor::from_data(TensorData::new(x, [n, 2]), device), y: Tensor::from_data(TensorData::new(y, [n]), device) }
//! #     }
//! # }
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let device = Device::flex().autodiff();
//! # let (traces, artifacts) = (tempfile::tempdir()?, tempfile::tempdir()?);
//! # let items: Vec<(f32, i64)> = (0..64).map(|i| (i as f32 / 64.0, i % 2)).collect();
//! let profiler = LearnerProfiler::install(                                    // added
//!     steptrace::Profiler::builder("wait=1,warmup=1,active=2,repeat=1".parse()?)
//!         .out_dir(traces.path())
//!         .manifest("model", "linear")
//!         .manifest("batch_size", 16),
//! )?;
//! let batcher = profiler.batcher(PairBatcher);                                // was `PairBatcher`
//! let train = DataLoaderBuilder::new(batcher.clone()).batch_size(16).num_workers(2).build(InMemDataset::new(items.clone()));
//! let valid = DataLoaderBuilder::new(batcher).batch_size(16).build(InMemDataset::new(items));
//! let training = SupervisedTraining::new(artifacts.path(), train, valid)
//!     .metric_train_numeric(LossMetric::new())
//!     .with_application_logger(profiler.application_logger())                 // added
//!     .num_epochs(2);
//! let model = Model { linear: LinearConfig::new(2, 2).init(&device) };
//! let optimizer = profiler.optimizer(SgdConfig::new().build(), &model);       // was `SgdConfig::new().init()`
//! let _trained = training.launch(Learner::new(model, optimizer, 0.1));
//!
//! let run = profiler.finish()?;
//! assert_eq!(run.updates, 8); // 64 items in batches of 16, two epochs
//! assert_eq!(run.epoch_boundary_steps, vec![4, 8]); // each epoch's validation
//! assert_eq!(run.saved[0].steps, vec![2, 3]);
//! # Ok(())
//! # }
//! ```
//!
//! `examples/learner.rs` is the same on the digits dataset with an MLP.
//!
//! # Memory, and a failed step
//!
//! From a [`Session`](crate::Session) built with [`memory`](crate::SessionBuilder::memory),
//! [`LearnerProfiler::from_session`] samples device memory at the start of each recorded
//! step, by category: parameters (from the model given to [`LearnerProfiler::optimizer`]),
//! optimizer state (the states its first update returned, read once) and the rest.
//! [`LearnerProfiler::launch`], in place of `training.launch(learner)`, turns a step that
//! fails (a panic in burn-train's loop, or the error its metric processor hands back) into
//! [`LearnerError::StepFailed`]: the cycle in progress saved, and for lack of device memory
//! the report a session gives.
//!
//! # What a step holds
//!
//! `ProfilerStep#N` runs from the end of update `N - 1` to the end of
//! update `N` (step 0 from `launch`'s start): burn-train's bookkeeping,
//! the batch's arrival, the user's `TrainStep` (put `forward`, `loss` and
//! `backward` spans there to see them), and the `optimizer` span. The
//! batches themselves are built ahead on the loader's threads, in
//! `data.load` spans that need not fall in the step that uses them. The
//! host-to-device copy happens inside the user's `Batcher` (it creates the
//! tensors on the device), so it is part of `data.load`: there is no
//! `transfer.h2d` span. Nothing is synchronised: on an asynchronous backend
//! (CUDA, wgpu) step boundaries are host times, as the manifest's
//! `sync_policy` (`none`) says.
//!
//! # Which call ends an update
//!
//! burn 0.22's `ModuleOptimizer` updates a module one parameter at a time,
//! calling the per-tensor optimizer ([`Profiled`]) once for each parameter
//! that has a gradient, in the module's order. Nothing else of the
//! program's runs between one update's end and the next update's start, so
//! the wrapper must know which call is the last: it keeps the model's
//! parameters (their order and shapes, read when the optimizer is wrapped)
//! and matches each call to the next parameter of its shape. The call for
//! the model's last parameter closes the `optimizer` span and ends the
//! step, whatever the strategy (one device, `MultiDevice`, each rank of
//! `DistributedDataParallel`, or a loop of the program's own).
//!
//! A parameter without a gradient (frozen, or unused by the loss) is
//! skipped by burn and by the matching. When the model's *last* parameters
//! get none, the first update is seen to end only when the second begins
//! (that step also holds the second update's forward and backward passes);
//! from then on the last parameter actually updated ends each update. Wrap
//! the optimizer with the model that [`Learner`](burn::train::Learner)
//! trains: with another one, updates are not told apart.
//!
//! # Epoch boundaries
//!
//! burn-train tells neither the optimizer, the batcher nor the learning
//! rate scheduler which epoch it is in (its metrics learn it later, on the
//! event processor's thread). What is exact is this: after an epoch's last
//! update, the next step also holds that epoch's validation, checkpointing
//! and early-stopping check, and burn-train builds the validation batches
//! for the training device without autodiff (`Device::inner`), while the
//! training batches are built for the autodiff device
//! (`Device::is_autodiff`). So the first validation batch of a step flags
//! it: an instant event named [`EPOCH_BOUNDARY`], with the step
//! as its `step` field, is written at that moment (it is in the trace when
//! the step is recorded), and [`ProfiledRun::epoch_boundary_steps`] lists
//! every such step. The last one is the step closed by `finish`. This
//! needs the wrapped batcher in the validation loader too.
//!
//! Such steps are not steady-state steps: for per-step figures, choose a
//! schedule whose cycles fall inside an epoch, or leave these steps out.
//!
//! # The application logger
//!
//! By default `SupervisedTraining::launch` installs a global subscriber
//! (a file logger for `experiment.log`). A process has one global
//! subscriber, so steptrace's and burn-train's cannot both be installed:
//!
//! - with [`LearnerProfiler::application_logger`] passed to
//!   `with_application_logger`, burn-train installs nothing (passing `None`
//!   does too, but step 0 then opens at the first update);
//! - if burn-train's logger is left on, its installation fails (burn-train
//!   logs a warning and goes on): the run is still profiled, but
//!   `experiment.log` stays empty and step 0 opens at the first update;
//! - if another subscriber was installed first, [`LearnerProfiler::install`]
//!   returns [`LearnerError::SubscriberExists`], never a panic.
//!
//! To keep a log file, build steptrace's layer with
//! [`ProfilerBuilder::build`](steptrace::ProfilerBuilder::build), add it to
//! your own subscriber and pass the profiler to
//! [`LearnerProfiler::from_profiler`].
//!
//! # The manifest
//!
//! Fields the builder set are kept. This integration adds what it knows:
//! `mode` (`train`), `sync_policy` (`none`) and its meaning, `trainer`,
//! `step_unit`, `data_load` and `epoch_boundaries` (what the steps and
//! spans mean), and at the first update the backend as burn names it
//! (`backend`, unless set, e.g. by [`with_backend`] from a
//! [`Selection`](crate::backend::Selection)), `burn_type` and
//! `parameters`. What the program knows and steptrace cannot (`model`,
//! `dataset`, `batch_size`, `prefetch_workers`, `seed`), the program gives
//! through the builder's `manifest`; unset fields stay absent.
//!
//! # Threads
//!
//! The profiler lives on the thread that created the [`LearnerProfiler`],
//! and `launch` must run there, as burn-train's default single-device
//! strategy does. Updates made on another thread end no step and are
//! counted in [`ProfiledRun::missed_updates`]; nothing panics.
//!
//! burn-train's `MultiDevice` strategy keeps that shape (one optimizer, on
//! the launching thread; one worker thread per device, started anew each
//! epoch, runs the forward and backward passes): [`LearnerProfiler::install`]
//! profiles it as one process, the workers' spans on tracks of their own.
//! `DistributedDataParallel` runs each rank's whole loop, optimizer
//! included, on a thread of its own, with a clone of the learner (and so
//! of the optimizer): [`LearnerProfiler::install_ranks`] gives each rank
//! its own profiler and files (see [`steptrace::ranks`]).

mod batcher;
mod driver;
mod error;
mod handle;
mod launch;
mod optimizer;
mod phases;
mod watch;

pub use batcher::ProfiledBatcher;
pub use error::LearnerError;
pub use handle::{with_backend, with_device_activity, LearnerProfiler, ProfiledRun};
pub use optimizer::Profiled;
pub use phases::{backward, forward, loss};
pub(crate) use watch::WatchSettings;

/// The instant event that flags a step holding validation and
/// checkpointing: see [epoch boundaries](self#epoch-boundaries). `steptrace
/// report` notes these steps and does not read them as a new compile path.
pub use steptrace::format::names::instants::EPOCH_BOUNDARY;
