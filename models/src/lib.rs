//! Small burn models used by steptrace's examples, benchmarks and tests.
//!
//! Three models, each usable on any burn [`Device`] (the backend is chosen at
//! run time by the device, e.g. `Device::flex()` or `Device::default().autodiff()`),
//! each built from a `#[derive(Config)]` configuration with `init(&device)`, and
//! each with a `forward` that returns unnormalised logits:
//!
//! | kind | model | input | logits | loss helper |
//! |------|-------|-------|--------|-------------|
//! | [`ModelKind::Mlp`] | [`Mlp`] | `[batch, features]` float | `[batch, classes]` | [`classification_loss`] |
//! | [`ModelKind::ConvNet`] | [`ConvNet`] | `[batch, channels, height, width]` float | `[batch, classes]` | [`classification_loss`] |
//! | [`ModelKind::Transformer`] | [`CharTransformer`] | `[batch, seq]` int tokens | `[batch, seq, vocab]` | [`lm_loss`] |
//!
//! Parameter counts are available through burn's
//! [`burn::module::Module::num_params`] on every model.

#![warn(missing_docs)]

use std::fmt;
use std::str::FromStr;

use burn::nn::loss::CrossEntropyLossConfig;
use burn::prelude::*;
use serde::{Deserialize, Serialize};

pub mod convnet;
pub mod mlp;
pub mod transformer;

pub use convnet::{ConvNet, ConvNetConfig};
pub use mlp::{Mlp, MlpConfig};
pub use transformer::{CharTransformer, CharTransformerConfig};

/// Which of the three models to use, e.g. as chosen on a command line.
///
/// Parses from and displays as `"mlp"`, `"convnet"` and `"transformer"`
/// (parsing ignores ASCII case and surrounding whitespace); serde uses the same names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// The multi-layer perceptron, [`Mlp`].
    Mlp,
    /// The convolutional network, [`ConvNet`].
    ConvNet,
    /// The character-level Transformer language model, [`CharTransformer`].
    Transformer,
}

impl ModelKind {
    /// Every kind, in a stable order.
    pub const ALL: [ModelKind; 3] = [ModelKind::Mlp, ModelKind::ConvNet, ModelKind::Transformer];

    /// The canonical lowercase name (`"mlp"`, `"convnet"`, `"transformer"`).
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Mlp => "mlp",
            ModelKind::ConvNet => "convnet",
            ModelKind::Transformer => "transformer",
        }
    }
}

impl fmt::Display for ModelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ModelKind {
    type Err = ParseModelKindError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim();
        ModelKind::ALL
            .into_iter()
            .find(|kind| kind.name().eq_ignore_ascii_case(wanted))
            .ok_or_else(|| ParseModelKindError { input: s.to_owned() })
    }
}

/// Error returned when parsing an unknown [`ModelKind`] name.
///
/// Its message names the rejected input and lists the valid names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseModelKindError {
    input: String,
}

impl ParseModelKindError {
    /// The string that failed to parse.
    pub fn input(&self) -> &str {
        &self.input
    }
}

impl fmt::Display for ParseModelKindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown model {:?}; valid models: ", self.input)?;
        for (i, kind) in ModelKind::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(kind.name())?;
        }
        Ok(())
    }
}

impl std::error::Error for ParseModelKindError {}

/// Mean cross-entropy loss of class logits against integer class targets.
///
/// # Shapes
///
/// - `logits`: `[batch, classes]`, unnormalised (softmax is applied inside)
/// - `targets`: `[batch]`, class ids in `0..classes`
/// - output: `[1]`, the mean loss over the batch
///
/// # Panics
///
/// If the batch sizes of `logits` and `targets` differ.
pub fn classification_loss(logits: Tensor<2>, targets: Tensor<1, Int>) -> Tensor<1> {
    let [batch, _] = logits.dims();
    let [target_batch] = targets.dims();
    assert_eq!(
        batch, target_batch,
        "classification_loss: logits have batch {batch} but targets have batch {target_batch}"
    );
    CrossEntropyLossConfig::new().init(&logits.device()).forward(logits, targets)
}

/// Mean next-token cross-entropy loss of a language model, over every position
/// of every sequence: `[b, t, v]` logits are reshaped to `[b*t, v]` and
/// `[b, t]` targets to `[b*t]`.
///
/// # Shapes
///
/// - `logits`: `[batch, seq, vocab]`, unnormalised
/// - `targets`: `[batch, seq]`, token ids in `0..vocab` (usually the inputs shifted by one)
/// - output: `[1]`, the mean loss over all `batch * seq` positions
///
/// # Panics
///
/// If the `[batch, seq]` axes of `logits` and `targets` differ.
pub fn lm_loss(logits: Tensor<3>, targets: Tensor<2, Int>) -> Tensor<1> {
    let [batch, seq, vocab] = logits.dims();
    let target_dims = targets.dims();
    assert_eq!(
        [batch, seq],
        target_dims,
        "lm_loss: logits are [batch, seq, vocab] = {:?} but targets are {target_dims:?}",
        [batch, seq, vocab]
    );
    classification_loss(logits.reshape([batch * seq, vocab]), targets.reshape([batch * seq]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPU (burn-flex) device the unit tests run on, without autodiff.
    fn test_device() -> Device {
        Device::flex()
    }

    #[test]
    fn model_kind_round_trips() {
        for kind in ModelKind::ALL {
            assert_eq!(kind.to_string().parse::<ModelKind>(), Ok(kind));
        }
        assert_eq!(" ConvNet ".parse::<ModelKind>(), Ok(ModelKind::ConvNet));
        assert_eq!(ModelKind::Transformer.to_string(), "transformer");
    }

    #[test]
    fn unknown_model_kind_lists_valid_names() {
        let err = "resnet".parse::<ModelKind>().unwrap_err();
        assert_eq!(err.input(), "resnet");
        assert_eq!(err.to_string(), "unknown model \"resnet\"; valid models: mlp, convnet, transformer");
    }

    #[test]
    fn model_kind_serde_names() {
        // serde_json is not a dependency; check the derived names through the
        // Display/serde agreement by deserialising from a string deserializer.
        use serde::de::value::{Error, StrDeserializer};
        use serde::de::IntoDeserializer;
        for kind in ModelKind::ALL {
            let de: StrDeserializer<'_, Error> = kind.name().into_deserializer();
            assert_eq!(ModelKind::deserialize(de), Ok(kind));
        }
    }

    #[test]
    fn classification_loss_matches_uniform_logits() {
        let device = test_device();
        let logits = Tensor::<2>::zeros([4, 10], &device);
        let targets = Tensor::<1, Int>::from_data([0i64, 3, 5, 9], &device);
        let loss: f32 = classification_loss(logits, targets).into_scalar();
        assert!((loss - 10f32.ln()).abs() < 1e-5, "{loss}");
    }

    #[test]
    fn lm_loss_equals_flattened_classification_loss() {
        let device = test_device();
        let values: Vec<f32> = (0..2 * 3 * 5).map(|i| ((i * 7) % 11) as f32 / 5.0).collect();
        let logits = Tensor::<3>::from_data(TensorData::new(values, [2, 3, 5]), &device);
        let targets = Tensor::<2, Int>::from_data([[0i64, 1, 2], [3, 4, 0]], &device);
        let lm: f32 = lm_loss(logits.clone(), targets.clone()).into_scalar();
        let flat: f32 = classification_loss(logits.reshape([6, 5]), targets.reshape([6])).into_scalar();
        assert!((lm - flat).abs() < 1e-6, "{lm} vs {flat}");
        assert!(lm > 0.0);
    }

    #[test]
    #[should_panic(expected = "lm_loss: logits are")]
    fn lm_loss_rejects_mismatched_targets() {
        let device = test_device();
        let logits = Tensor::<3>::zeros([2, 3, 5], &device);
        let targets = Tensor::<2, Int>::zeros([3, 2], &device);
        let _ = lm_loss(logits, targets);
    }
}
