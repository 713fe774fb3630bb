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

use crate::config::SyncPolicy;
use crate::data::HostBatch;

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
pub fn transfer<B: Backend>(batch: HostBatch, device: &B::Device) -> Result<DeviceBatch<B>, String> {
    let _h2d = tracing::info_span!(target: "steptrace", "transfer.h2d", batch = batch.index).entered();
    let input = match (batch.input.dtype, batch.input.shape.len()) {
        (DType::F32, 2) => DeviceInput::Flat(Tensor::from_data(batch.input, device)),
        (DType::F32, 4) => DeviceInput::Images(Tensor::from_data(batch.input, device)),
        (DType::I64, 2) => DeviceInput::Tokens(Tensor::from_data(batch.input, device)),
        (dtype, rank) => return Err(format!("unsupported input batch: {dtype:?} of rank {rank}")),
    };
    let target = match batch.target.shape.len() {
        1 => DeviceTarget::Classes(Tensor::from_data(batch.target, device)),
        2 => DeviceTarget::Tokens(Tensor::from_data(batch.target, device)),
        rank => return Err(format!("unsupported target batch of rank {rank}")),
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
    fn logits(&self, input: DeviceInput<B>) -> Result<Logits<B>, String>;
}

impl<B: Backend> StepModel<B> for Mlp<B> {
    fn logits(&self, input: DeviceInput<B>) -> Result<Logits<B>, String> {
        match input {
            DeviceInput::Flat(x) => Ok(Logits::Classes(self.forward(x))),
            _ => Err("the MLP takes flat [batch, features] inputs".into()),
        }
    }
}

impl<B: Backend> StepModel<B> for ConvNet<B> {
    fn logits(&self, input: DeviceInput<B>) -> Result<Logits<B>, String> {
        match input {
            DeviceInput::Images(x) => Ok(Logits::Classes(self.forward(x))),
            _ => Err("the ConvNet takes [batch, C, H, W] inputs".into()),
        }
    }
}

impl<B: Backend> StepModel<B> for CharTransformer<B> {
    fn logits(&self, input: DeviceInput<B>) -> Result<Logits<B>, String> {
        match input {
            DeviceInput::Tokens(x) => Ok(Logits::Tokens(self.forward(x))),
            _ => Err("the transformer takes [batch, seq] token inputs".into()),
        }
    }
}

/// Cross-entropy for either kind of logits.
pub fn loss<B: Backend>(logits: Logits<B>, target: DeviceTarget<B>) -> Result<Tensor<B, 1>, String> {
    match (logits, target) {
        (Logits::Classes(l), DeviceTarget::Classes(t)) => Ok(classification_loss(l, t)),
        (Logits::Tokens(l), DeviceTarget::Tokens(t)) => Ok(lm_loss(l, t)),
        _ => Err("logits and targets do not match (classes vs tokens)".into()),
    }
}

/// Syncs if the policy asks for a sync after each phase.
fn phase_sync<B: Backend>(policy: SyncPolicy, device: &B::Device) -> Result<(), String> {
    if policy == SyncPolicy::Phase {
        crate::sync::sync::<B>(device)?;
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
) -> Result<(M, Tensor<B, 1>), String>
where
    B: AutodiffBackend,
    M: StepModel<B> + AutodiffModule<B>,
    O: Optimizer<M, B>,
{
    let _step = tracing::info_span!(target: "steptrace", "train.step").entered();
    let logits = {
        let _forward = tracing::info_span!(target: "steptrace", "forward").entered();
        let logits = model.logits(batch.input)?;
        phase_sync::<B>(policy, device)?;
        logits
    };
    let loss = {
        let _loss = tracing::info_span!(target: "steptrace", "loss").entered();
        let loss = loss(logits, batch.target)?;
        phase_sync::<B>(policy, device)?;
        loss
    };
    let grads = {
        let _backward = tracing::info_span!(target: "steptrace", "backward").entered();
        let grads = loss.backward();
        phase_sync::<B>(policy, device)?;
        grads
    };
    let model = {
        let _optimizer = tracing::info_span!(target: "steptrace", "optimizer").entered();
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
) -> Result<Tensor<B, 1>, String>
where
    B: Backend,
    M: StepModel<B>,
{
    let _request = tracing::info_span!(target: "steptrace", "infer.request").entered();
    let logits = {
        let _forward = tracing::info_span!(target: "steptrace", "forward").entered();
        let logits = model.logits(batch.input)?;
        phase_sync::<B>(policy, device)?;
        logits
    };
    loss(logits, batch.target)
}
