//! One training step or inference request, with its phase spans.
//!
//! A training step is a `train.step` span with children `forward`, `loss`,
//! `backward` and `optimizer`. The host-to-device copy is a `transfer.h2d`
//! span before it.

use burn::module::Module;
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::prelude::*;
use burn::tensor::DType;
use steptrace_models::{classification_loss, lm_loss, CharTransformer, ConvNet, Mlp};

use steptrace::format::names::{BACKWARD, FORWARD, INFER_REQUEST, LOSS, OPTIMIZER, TRAIN_STEP, TRANSFER_H2D};

use crate::config::SyncPolicy;
use crate::data::HostBatch;

/// Why a step could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StepError {
    /// The host batch's input has a type or rank no model takes.
    #[error("unsupported input batch: {dtype} of rank {rank}")]
    UnsupportedInput {
        /// The element type.
        dtype: String,
        /// The rank.
        rank: usize,
    },
    /// The host batch's target has a rank no loss takes.
    #[error("unsupported target batch of rank {rank}")]
    UnsupportedTarget {
        /// The rank.
        rank: usize,
    },
    /// The model was given an input of the wrong kind.
    #[error("the {model} takes {expected} inputs")]
    WrongInput {
        /// The model.
        model: &'static str,
        /// What it takes.
        expected: &'static str,
    },
    /// Logits and targets are of different kinds.
    #[error("logits and targets do not match (classes vs tokens)")]
    Mismatch,
    /// Waiting for the device failed.
    #[error("device sync failed: {reason}")]
    Sync {
        /// The backend's explanation.
        reason: String,
    },
    /// Reading a value back from the device failed (the device reported an earlier error).
    #[error("reading the loss back from the device failed: {reason}")]
    Read {
        /// The backend's explanation.
        reason: String,
    },
    /// The step panicked (burn and cubecl panic on some device errors): the panic's message.
    #[error("the step panicked: {message}")]
    Panicked {
        /// The panic's message.
        message: String,
    },
    /// The loop lost its model (a bug).
    #[error("the model is missing: {what}")]
    Missing {
        /// What was missing.
        what: &'static str,
    },
}

/// Waits for the device, as a [`StepError`].
pub(crate) fn sync(device: &Device) -> Result<(), StepError> {
    crate::sync::sync(device).map_err(|e| StepError::Sync { reason: e.reason })
}

/// A batch on the device.
#[derive(Debug)]
pub struct DeviceBatch {
    /// The inputs.
    pub input: DeviceInput,
    /// The targets.
    pub target: DeviceTarget,
}

/// Model inputs on the device.
#[derive(Debug)]
pub enum DeviceInput {
    /// `[batch, features]`.
    Flat(Tensor<2>),
    /// `[batch, C, H, W]`.
    Images(Tensor<4>),
    /// `[batch, seq]` tokens.
    Tokens(Tensor<2, Int>),
}

/// Targets on the device.
#[derive(Debug)]
pub enum DeviceTarget {
    /// One class per sample.
    Classes(Tensor<1, Int>),
    /// One next token per position.
    Tokens(Tensor<2, Int>),
}

/// Model outputs.
#[derive(Debug)]
pub enum Logits {
    /// `[batch, classes]`.
    Classes(Tensor<2>),
    /// `[batch, seq, vocab]`.
    Tokens(Tensor<3>),
}

/// Copies a host batch to the device inside a `transfer.h2d` span.
///
/// The copy is asynchronous for the caller: the span measures the host side
/// (staging the bytes and queueing the upload). The span carries the batch
/// index and the byte sizes of the input and the target
/// ([`INPUT_BYTES`](steptrace::format::names::args::INPUT_BYTES),
/// [`TARGET_BYTES`](steptrace::format::names::args::TARGET_BYTES)), so that a report can
/// tell the batch's copies from other uploads.
pub fn transfer(batch: HostBatch, device: &Device) -> Result<DeviceBatch, StepError> {
    // tracing takes literal field names: the test
    // `transfer_records_the_batch_bytes_under_the_format_names` keeps them
    // equal to `names::args::INPUT_BYTES` and `names::args::TARGET_BYTES`.
    let _h2d = steptrace::own_span!(
        TRANSFER_H2D,
        batch = batch.index,
        input_bytes = device_bytes(&batch.input, device),
        target_bytes = device_bytes(&batch.target, device),
    );
    let input = match (batch.input.dtype(), batch.input.shape().len()) {
        (DType::F32, 2) => DeviceInput::Flat(Tensor::from_data(batch.input, device)),
        (DType::F32, 4) => DeviceInput::Images(Tensor::from_data(batch.input, device)),
        (DType::I64, 2) => DeviceInput::Tokens(Tensor::from_data(batch.input, device)),
        (dtype, rank) => return Err(StepError::UnsupportedInput { dtype: format!("{dtype:?}"), rank }),
    };
    let target = match batch.target.shape().len() {
        1 => DeviceTarget::Classes(Tensor::from_data(batch.target, device)),
        2 => DeviceTarget::Tokens(Tensor::from_data(batch.target, device)),
        rank => return Err(StepError::UnsupportedTarget { rank }),
    };
    Ok(DeviceBatch { input, target })
}

/// The bytes a batch's input and target take once on `device` ([`transfer`] writes the same
/// figures into its span).
pub(crate) fn batch_device_bytes(batch: &HostBatch, device: &Device) -> u64 {
    device_bytes(&batch.input, device) + device_bytes(&batch.target, device)
}

/// The bytes `data` takes once on the device: its elements at the
/// device's own float or int width (its settings: cubecl stores burn's i64
/// host integers as i32, so a target's device copy is half its host bytes).
fn device_bytes(data: &TensorData, device: &Device) -> u64 {
    let elems = data.num_elements() as u64;
    let settings = device.settings();
    let width = if data.dtype().is_float() {
        DType::from(settings.float_dtype).size()
    } else {
        DType::from(settings.int_dtype).size()
    };
    elems * width as u64
}

/// The shape of a host batch's input, for detecting new shapes.
pub fn input_shape(data: &TensorData) -> Vec<usize> {
    data.shape().to_vec()
}

/// A model that steptrace can train: maps a device input to logits.
pub trait StepModel: Module {
    /// Runs the model on `input`.
    fn logits(&self, input: DeviceInput) -> Result<Logits, StepError>;
}

impl StepModel for Mlp {
    fn logits(&self, input: DeviceInput) -> Result<Logits, StepError> {
        match input {
            DeviceInput::Flat(x) => Ok(Logits::Classes(self.forward(x))),
            _ => Err(StepError::WrongInput { model: "MLP", expected: "flat [batch, features]" }),
        }
    }
}

impl StepModel for ConvNet {
    fn logits(&self, input: DeviceInput) -> Result<Logits, StepError> {
        match input {
            DeviceInput::Images(x) => Ok(Logits::Classes(self.forward(x))),
            _ => Err(StepError::WrongInput { model: "ConvNet", expected: "[batch, C, H, W]" }),
        }
    }
}

impl StepModel for CharTransformer {
    fn logits(&self, input: DeviceInput) -> Result<Logits, StepError> {
        match input {
            DeviceInput::Tokens(x) => Ok(Logits::Tokens(self.forward(x))),
            _ => Err(StepError::WrongInput { model: "transformer", expected: "[batch, seq] token" }),
        }
    }
}

/// Cross-entropy for either kind of logits.
pub fn loss(logits: Logits, target: DeviceTarget) -> Result<Tensor<1>, StepError> {
    match (logits, target) {
        (Logits::Classes(l), DeviceTarget::Classes(t)) => Ok(classification_loss(l, t)),
        (Logits::Tokens(l), DeviceTarget::Tokens(t)) => Ok(lm_loss(l, t)),
        _ => Err(StepError::Mismatch),
    }
}

/// Syncs if the policy asks for a sync after each phase.
fn phase_sync(policy: SyncPolicy, device: &Device) -> Result<(), StepError> {
    if policy == SyncPolicy::Phase {
        sync(device)?;
    }
    Ok(())
}

/// Elements of the constant that [`train_step_planted`] uploads each step.
pub const PLANTED_UPLOAD_ELEMENTS: usize = 1000;

/// A deliberate inefficiency, for testing the report's "repeated upload"
/// hypothesis: re-creates a constant of [`PLANTED_UPLOAD_ELEMENTS`] f32 ones
/// on the device from host data (one 4000-byte host-to-device copy) and
/// multiplies `loss` by its mean, exactly 1.0, so that the loss and every
/// gradient are bit-identical to the step without it.
pub fn planted_upload(loss: Tensor<1>, device: &Device) -> Tensor<1> {
    let ones = TensorData::new(vec![1.0f32; PLANTED_UPLOAD_ELEMENTS], [PLANTED_UPLOAD_ELEMENTS]);
    let constant = Tensor::<1>::from_data(ones, device);
    loss * constant.mean()
}

/// One optimisation step: `train.step` > `forward`, `loss`, `backward`,
/// `optimizer`. Returns the updated model and the loss (still on the device).
pub fn train_step<M: StepModel>(
    model: M,
    optim: &mut ModuleOptimizer,
    batch: DeviceBatch,
    learning_rate: f64,
    policy: SyncPolicy,
    device: &Device,
) -> Result<(M, Tensor<1>), StepError> {
    train_step_planted(model, optim, batch, learning_rate, policy, device, false)
}

/// [`train_step`], with the [`planted_upload`] in its `loss` span when
/// `plant_upload` is set ([`RunConfig::plant_upload`](crate::RunConfig::plant_upload)).
pub fn train_step_planted<M: StepModel>(
    model: M,
    optim: &mut ModuleOptimizer,
    batch: DeviceBatch,
    learning_rate: f64,
    policy: SyncPolicy,
    device: &Device,
    plant_upload: bool,
) -> Result<(M, Tensor<1>), StepError> {
    train_step_sampled(model, optim, batch, learning_rate, policy, device, plant_upload, &mut |_| {})
}

/// [`train_step_planted`], calling `sample` with the phase's name after each phase (`forward`,
/// `loss`, `backward`, `optimizer`), outside its span: where `--memory` samples the allocator.
#[allow(clippy::too_many_arguments)]
pub(crate) fn train_step_sampled<M: StepModel>(
    model: M,
    optim: &mut ModuleOptimizer,
    batch: DeviceBatch,
    learning_rate: f64,
    policy: SyncPolicy,
    device: &Device,
    plant_upload: bool,
    sample: &mut dyn FnMut(&'static str),
) -> Result<(M, Tensor<1>), StepError> {
    let _step = steptrace::own_span!(TRAIN_STEP);
    let logits = {
        let _forward = steptrace::own_span!(FORWARD);
        let logits = model.logits(batch.input)?;
        phase_sync(policy, device)?;
        logits
    };
    sample(FORWARD);
    let loss = {
        let _loss = steptrace::own_span!(LOSS);
        let mut loss = loss(logits, batch.target)?;
        if plant_upload {
            loss = planted_upload(loss, device);
        }
        phase_sync(policy, device)?;
        loss
    };
    sample(LOSS);
    let grads = {
        let _backward = steptrace::own_span!(BACKWARD);
        let grads = loss.backward();
        phase_sync(policy, device)?;
        grads
    };
    sample(BACKWARD);
    let model = {
        let _optimizer = steptrace::own_span!(OPTIMIZER);
        let grads = GradientsParams::from_grads(grads, &model);
        let model = optim.step(learning_rate, model, grads);
        phase_sync(policy, device)?;
        model
    };
    sample(OPTIMIZER);
    Ok((model, loss))
}

/// One inference request on an eval-mode model: `infer.request` >
/// `forward`. Returns the loss against the targets, for checking.
pub fn infer_request<M: StepModel>(
    model: &M,
    batch: DeviceBatch,
    policy: SyncPolicy,
    device: &Device,
) -> Result<Tensor<1>, StepError> {
    let _request = steptrace::own_span!(INFER_REQUEST);
    let logits = {
        let _forward = steptrace::own_span!(FORWARD);
        let logits = model.logits(batch.input)?;
        phase_sync(policy, device)?;
        logits
    };
    loss(logits, batch.target)
}

#[cfg(all(test, feature = "cpu"))]
mod tests {
    use std::sync::{Arc, Mutex};

    use steptrace::format::names::args;
    use tracing_subscriber::layer::{Context, SubscriberExt};
    use tracing_subscriber::Layer;

    use super::*;

    /// A span's name, with the names and values of its `u64` fields.
    type Opened = (String, Vec<(String, u64)>);

    /// Every span opened.
    #[derive(Clone, Default)]
    struct Fields(Arc<Mutex<Vec<Opened>>>);

    struct U64s(Vec<(String, u64)>);

    impl tracing::field::Visit for U64s {
        fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
            self.0.push((field.name().to_owned(), value));
        }
        fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
    }

    impl<S: tracing::Subscriber> Layer<S> for Fields {
        fn on_new_span(&self, attrs: &tracing::span::Attributes<'_>, _: &tracing::span::Id, _: Context<'_, S>) {
            let mut values = U64s(Vec::new());
            attrs.record(&mut values);
            if let Ok(mut spans) = self.0.lock() {
                spans.push((attrs.metadata().name().to_owned(), values.0));
            }
        }
    }

    /// `transfer.h2d` carries the batch's byte sizes under the format's
    /// names: tracing's field names are literals, kept equal to
    /// `args::INPUT_BYTES` and `args::TARGET_BYTES` here.
    #[test]
    fn transfer_records_the_batch_bytes_under_the_format_names() {
        let fields = Fields::default();
        let subscriber = tracing_subscriber::registry().with(fields.clone());
        let batch = HostBatch {
            index: 7,
            input: TensorData::new(vec![0.5f32; 3 * 5], [3, 5]),
            target: TensorData::new(vec![1i64; 3], [3]),
            samples: 3,
        };
        let on_device = tracing::subscriber::with_default(subscriber, || transfer(batch, &Device::flex()));
        assert!(matches!(on_device, Ok(DeviceBatch { input: DeviceInput::Flat(_), target: DeviceTarget::Classes(_) })));
        let spans = fields.0.lock().expect("fields").clone();
        let want = vec![
            ("batch".to_owned(), 7),
            (args::INPUT_BYTES.to_owned(), 3 * 5 * 4),
            // burn-flex stores integers as i32 (its device defaults): 4 bytes each,
            // half of the host's i64.
            (args::TARGET_BYTES.to_owned(), 3 * 4),
        ];
        assert_eq!(spans, vec![(TRANSFER_H2D.to_owned(), want)]);
    }

    /// The planted constant's mean is exactly 1.0: the loss is unchanged.
    #[test]
    fn the_planted_upload_leaves_the_loss_bit_identical() {
        let device = Device::flex();
        for value in [2.297_4f32, 1e-7, 123.456, -0.0] {
            let loss = Tensor::<1>::from_data(TensorData::new(vec![value], [1]), &device);
            let planted = planted_upload(loss.clone(), &device);
            let bits = |t: Tensor<1>| t.into_data().iter::<f32>().map(f32::to_bits).collect::<Vec<_>>();
            assert_eq!(bits(loss), bits(planted), "{value}");
        }
    }
}
