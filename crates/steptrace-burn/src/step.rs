//! One training step or inference request, with its phase spans.
//!
//! A training step is a `train.step` span with children `forward`, `loss`,
//! `backward` and `optimizer`. The host-to-device copy is a `transfer.h2d`
//! span before it.

use burn::module::{AutodiffModule, Module};
use burn::optim::{GradientsParams, Optimizer};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{DType, TensorData};
use steptrace_models::{classification_loss, lm_loss, CharTransformer, ConvNet, Mlp};

use steptrace::format::names::{BACKWARD, FORWARD, INFER_REQUEST, LOSS, OPTIMIZER, TARGET, TRAIN_STEP, TRANSFER_H2D};

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
    /// The loop lost its model (a bug).
    #[error("the model is missing: {what}")]
    Missing {
        /// What was missing.
        what: &'static str,
    },
}

/// Waits for the device, as a [`StepError`].
pub(crate) fn sync<B: Backend>(device: &B::Device) -> Result<(), StepError> {
    crate::sync::sync::<B>(device).map_err(|e| StepError::Sync { reason: e.reason })
}

/// A batch on the device.
#[derive(Debug)]
pub struct DeviceBatch<B: Backend> {
    /// The inputs.
    pub input: DeviceInput<B>,
    /// The targets.
    pub target: DeviceTarget<B>,
}

/// Model inputs on the device.
#[derive(Debug)]
pub enum DeviceInput<B: Backend> {
    /// `[batch, features]`.
    Flat(Tensor<B, 2>),
    /// `[batch, C, H, W]`.
    Images(Tensor<B, 4>),
    /// `[batch, seq]` tokens.
    Tokens(Tensor<B, 2, Int>),
}

/// Targets on the device.
#[derive(Debug)]
pub enum DeviceTarget<B: Backend> {
    /// One class per sample.
    Classes(Tensor<B, 1, Int>),
    /// One next token per position.
    Tokens(Tensor<B, 2, Int>),
}

/// Model outputs.
#[derive(Debug)]
pub enum Logits<B: Backend> {
    /// `[batch, classes]`.
    Classes(Tensor<B, 2>),
    /// `[batch, seq, vocab]`.
    Tokens(Tensor<B, 3>),
}

/// Copies a host batch to the device inside a `transfer.h2d` span.
///
/// The copy is asynchronous for the caller: the span measures the host side
/// (staging the bytes and queueing the upload).
pub fn transfer<B: Backend>(batch: HostBatch, device: &B::Device) -> Result<DeviceBatch<B>, StepError> {
    let _h2d = tracing::info_span!(target: TARGET, TRANSFER_H2D, batch = batch.index).entered();
    let input = match (batch.input.dtype, batch.input.shape.len()) {
        (DType::F32, 2) => DeviceInput::Flat(Tensor::from_data(batch.input, device)),
        (DType::F32, 4) => DeviceInput::Images(Tensor::from_data(batch.input, device)),
        (DType::I64, 2) => DeviceInput::Tokens(Tensor::from_data(batch.input, device)),
        (dtype, rank) => return Err(StepError::UnsupportedInput { dtype: format!("{dtype:?}"), rank }),
    };
    let target = match batch.target.shape.len() {
        1 => DeviceTarget::Classes(Tensor::from_data(batch.target, device)),
        2 => DeviceTarget::Tokens(Tensor::from_data(batch.target, device)),
        rank => return Err(StepError::UnsupportedTarget { rank }),
    };
    Ok(DeviceBatch { input, target })
}

/// The shape of a host batch's input, for detecting new shapes.
pub fn input_shape(data: &TensorData) -> Vec<usize> {
    data.shape.to_vec()
}

/// A model that steptrace can train: maps a device input to logits.
pub trait StepModel<B: Backend>: Module<B> {
    /// Runs the model on `input`.
    fn logits(&self, input: DeviceInput<B>) -> Result<Logits<B>, StepError>;
}

impl<B: Backend> StepModel<B> for Mlp<B> {
    fn logits(&self, input: DeviceInput<B>) -> Result<Logits<B>, StepError> {
        match input {
            DeviceInput::Flat(x) => Ok(Logits::Classes(self.forward(x))),
            _ => Err(StepError::WrongInput { model: "MLP", expected: "flat [batch, features]" }),
        }
    }
}

impl<B: Backend> StepModel<B> for ConvNet<B> {
    fn logits(&self, input: DeviceInput<B>) -> Result<Logits<B>, StepError> {
        match input {
            DeviceInput::Images(x) => Ok(Logits::Classes(self.forward(x))),
            _ => Err(StepError::WrongInput { model: "ConvNet", expected: "[batch, C, H, W]" }),
        }
    }
}

impl<B: Backend> StepModel<B> for CharTransformer<B> {
    fn logits(&self, input: DeviceInput<B>) -> Result<Logits<B>, StepError> {
        match input {
            DeviceInput::Tokens(x) => Ok(Logits::Tokens(self.forward(x))),
            _ => Err(StepError::WrongInput { model: "transformer", expected: "[batch, seq] token" }),
        }
    }
}

/// Cross-entropy for either kind of logits.
pub fn loss<B: Backend>(logits: Logits<B>, target: DeviceTarget<B>) -> Result<Tensor<B, 1>, StepError> {
    match (logits, target) {
        (Logits::Classes(l), DeviceTarget::Classes(t)) => Ok(classification_loss(l, t)),
        (Logits::Tokens(l), DeviceTarget::Tokens(t)) => Ok(lm_loss(l, t)),
        _ => Err(StepError::Mismatch),
    }
}

/// Syncs if the policy asks for a sync after each phase.
fn phase_sync<B: Backend>(policy: SyncPolicy, device: &B::Device) -> Result<(), StepError> {
    if policy == SyncPolicy::Phase {
        sync::<B>(device)?;
    }
    Ok(())
}

/// One optimisation step: `train.step` > `forward`, `loss`, `backward`,
/// `optimizer`. Returns the updated model and the loss (still on the device).
pub fn train_step<B, M, O>(
    model: M,
    optim: &mut O,
    batch: DeviceBatch<B>,
    learning_rate: f64,
    policy: SyncPolicy,
    device: &B::Device,
) -> Result<(M, Tensor<B, 1>), StepError>
where
    B: AutodiffBackend,
    M: StepModel<B> + AutodiffModule<B>,
    O: Optimizer<M, B>,
{
    let _step = tracing::info_span!(target: TARGET, TRAIN_STEP).entered();
    let logits = {
        let _forward = tracing::info_span!(target: TARGET, FORWARD).entered();
        let logits = model.logits(batch.input)?;
        phase_sync::<B>(policy, device)?;
        logits
    };
    let loss = {
        let _loss = tracing::info_span!(target: TARGET, LOSS).entered();
        let loss = loss(logits, batch.target)?;
        phase_sync::<B>(policy, device)?;
        loss
    };
    let grads = {
        let _backward = tracing::info_span!(target: TARGET, BACKWARD).entered();
        let grads = loss.backward();
        phase_sync::<B>(policy, device)?;
        grads
    };
    let model = {
        let _optimizer = tracing::info_span!(target: TARGET, OPTIMIZER).entered();
        let grads = GradientsParams::from_grads(grads, &model);
        let model = optim.step(learning_rate, model, grads);
        phase_sync::<B>(policy, device)?;
        model
    };
    Ok((model, loss))
}

/// One inference request on an eval-mode model: `infer.request` >
/// `forward`. Returns the loss against the targets, for checking.
pub fn infer_request<B, M>(
    model: &M,
    batch: DeviceBatch<B>,
    policy: SyncPolicy,
    device: &B::Device,
) -> Result<Tensor<B, 1>, StepError>
where
    B: Backend,
    M: StepModel<B>,
{
    let _request = tracing::info_span!(target: TARGET, INFER_REQUEST).entered();
    let logits = {
        let _forward = tracing::info_span!(target: TARGET, FORWARD).entered();
        let logits = model.logits(batch.input)?;
        phase_sync::<B>(policy, device)?;
        logits
    };
    loss(logits, batch.target)
}
