//! The bundled models' batches on the device: [`to_device`] of a [`HostBatch`], the models'
//! inputs and logits, and one optimisation step on them ([`train_batch`]) for the
//! out-of-memory probe, which runs outside any session.

use burn::module::Module;
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::prelude::*;
use burn::tensor::DType;
use steptrace::format::names::{BACKWARD, FORWARD, LOSS, OPTIMIZER, TRAIN_STEP, TRANSFER_H2D};
use steptrace_burn::data::HostBatch;
use steptrace_burn::Upload;
use steptrace_models::{classification_loss, lm_loss, CharTransformer, ConvNet, Mlp};

/// Why a bundled model's step could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
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
    /// The loop lost its model (a bug).
    #[error("the model is missing: {what}")]
    Missing {
        /// What was missing.
        what: &'static str,
    },
    /// Waiting for the device failed (the out-of-memory probe's steps).
    #[error("device sync failed: {0}")]
    Sync(#[from] steptrace_burn::sync::SyncError),
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
pub fn transfer(batch: HostBatch, device: &Device) -> Result<DeviceBatch, BatchError> {
    // tracing takes literal field names: the test
    // `transfer_records_the_batch_bytes_under_the_format_names` keeps them
    // equal to `names::args::INPUT_BYTES` and `names::args::TARGET_BYTES`.
    let _h2d = steptrace::own_span!(
        TRANSFER_H2D,
        batch = batch.index,
        input_bytes = batch.input.upload_size(device).input_bytes,
        target_bytes = batch.target.upload_size(device).input_bytes,
    );
    to_device(batch, device)
}

/// [`transfer`] without its span: the tensors of a host batch, made on `device` (for a
/// [`Session::copy`](steptrace_burn::Session::copy), whose span it is then).
pub fn to_device(batch: HostBatch, device: &Device) -> Result<DeviceBatch, BatchError> {
    let input = match (batch.input.dtype(), batch.input.shape().len()) {
        (DType::F32, 2) => DeviceInput::Flat(Tensor::from_data(batch.input, device)),
        (DType::F32, 4) => DeviceInput::Images(Tensor::from_data(batch.input, device)),
        (DType::I64, 2) => DeviceInput::Tokens(Tensor::from_data(batch.input, device)),
        (dtype, rank) => return Err(BatchError::UnsupportedInput { dtype: format!("{dtype:?}"), rank }),
    };
    let target = match batch.target.shape().len() {
        1 => DeviceTarget::Classes(Tensor::from_data(batch.target, device)),
        2 => DeviceTarget::Tokens(Tensor::from_data(batch.target, device)),
        rank => return Err(BatchError::UnsupportedTarget { rank }),
    };
    Ok(DeviceBatch { input, target })
}

/// The shape of a host batch's input, for detecting new shapes.
pub fn input_shape(data: &TensorData) -> Vec<usize> {
    data.shape().to_vec()
}

/// A model that steptrace can train: maps a device input to logits.
pub trait StepModel: Module {
    /// Runs the model on `input`.
    fn logits(&self, input: DeviceInput) -> Result<Logits, BatchError>;
}

impl StepModel for Mlp {
    fn logits(&self, input: DeviceInput) -> Result<Logits, BatchError> {
        match input {
            DeviceInput::Flat(x) => Ok(Logits::Classes(self.forward(x))),
            _ => Err(BatchError::WrongInput { model: "MLP", expected: "flat [batch, features]" }),
        }
    }
}

impl StepModel for ConvNet {
    fn logits(&self, input: DeviceInput) -> Result<Logits, BatchError> {
        match input {
            DeviceInput::Images(x) => Ok(Logits::Classes(self.forward(x))),
            _ => Err(BatchError::WrongInput { model: "ConvNet", expected: "[batch, C, H, W]" }),
        }
    }
}

impl StepModel for CharTransformer {
    fn logits(&self, input: DeviceInput) -> Result<Logits, BatchError> {
        match input {
            DeviceInput::Tokens(x) => Ok(Logits::Tokens(self.forward(x))),
            _ => Err(BatchError::WrongInput { model: "transformer", expected: "[batch, seq] token" }),
        }
    }
}

/// Cross-entropy for either kind of logits.
pub fn loss(logits: Logits, target: DeviceTarget) -> Result<Tensor<1>, BatchError> {
    match (logits, target) {
        (Logits::Classes(l), DeviceTarget::Classes(t)) => Ok(classification_loss(l, t)),
        (Logits::Tokens(l), DeviceTarget::Tokens(t)) => Ok(lm_loss(l, t)),
        _ => Err(BatchError::Mismatch),
    }
}

/// Logits and targets of one kind, checked: its [`loss`](LossInput::loss) cannot fail.
#[derive(Debug)]
pub enum LossInput {
    /// Classes: `[batch, classes]` logits and `[batch]` targets.
    Classes(Tensor<2>, Tensor<1, Int>),
    /// Tokens: `[batch, seq, vocab]` logits and `[batch, seq]` targets.
    Tokens(Tensor<3>, Tensor<2, Int>),
}

impl LossInput {
    /// Pairs `logits` with `target`, when they are of one kind.
    pub fn new(logits: Logits, target: DeviceTarget) -> Result<LossInput, BatchError> {
        match (logits, target) {
            (Logits::Classes(l), DeviceTarget::Classes(t)) => Ok(LossInput::Classes(l, t)),
            (Logits::Tokens(l), DeviceTarget::Tokens(t)) => Ok(LossInput::Tokens(l, t)),
            _ => Err(BatchError::Mismatch),
        }
    }

    /// Cross-entropy.
    pub fn loss(self) -> Tensor<1> {
        match self {
            LossInput::Classes(l, t) => classification_loss(l, t),
            LossInput::Tokens(l, t) => lm_loss(l, t),
        }
    }
}

/// Elements of the constant that [`planted_upload`] uploads each step.
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

/// One optimisation step: `train.step` > `forward`, `loss`, `backward`, `optimizer`, then a
/// sync. Returns the updated model and the loss (still on the device).
fn train_step<M: Module, O>(
    model: M,
    optim: &mut ModuleOptimizer,
    learning_rate: f64,
    device: &Device,
    forward: impl FnOnce(&M) -> O,
    loss: impl FnOnce(O) -> Tensor<1>,
) -> Result<(M, Tensor<1>), BatchError> {
    let _step = steptrace::own_span!(TRAIN_STEP);
    let output = {
        let _forward = steptrace::own_span!(FORWARD);
        forward(&model)
    };
    let loss = {
        let _loss = steptrace::own_span!(LOSS);
        loss(output)
    };
    let grads = {
        let _backward = steptrace::own_span!(BACKWARD);
        loss.backward()
    };
    let model = {
        let _optimizer = steptrace::own_span!(OPTIMIZER);
        let grads = GradientsParams::from_grads(grads, &model);
        optim.step(learning_rate, model, grads)
    };
    steptrace_burn::sync::sync(device)?;
    Ok((model, loss))
}

/// One optimisation step of a bundled model on a [`DeviceBatch`], synced at its end.
pub fn train_batch<M: StepModel>(
    model: M,
    optim: &mut ModuleOptimizer,
    batch: DeviceBatch,
    learning_rate: f64,
    device: &Device,
) -> Result<(M, Tensor<1>), BatchError> {
    let DeviceBatch { input, target } = batch;
    let mut failed = None;
    let out = train_step(
        model,
        optim,
        learning_rate,
        device,
        |m| m.logits(input),
        |logits| match logits.and_then(|l| LossInput::new(l, target)) {
            Ok(pair) => pair.loss(),
            Err(e) => {
                failed = Some(e);
                Tensor::zeros([1], device)
            }
        },
    )?;
    match failed {
        Some(e) => Err(e),
        None => Ok(out),
    }
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
