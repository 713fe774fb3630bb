//! A multi-layer perceptron classifier for flat feature vectors.
//!
//! The default shape, built by [`MlpConfig::uci_digits`], is the classic
//! UCI optical digits setup: 64 input features (an 8×8 image flattened) →
//! 128 → 128 → 10 classes.

use burn::nn::{Dropout, DropoutConfig, Linear, LinearConfig, Relu};
use burn::prelude::*;
use steptrace::layer;

/// The span names of the first hidden layers (`hidden{i}` beyond them).
const HIDDEN: [&str; 4] = ["hidden0", "hidden1", "hidden2", "hidden3"];

/// Configuration of an [`Mlp`].
///
/// `d_input` and `n_classes` are required (see [`MlpConfig::new`]); the hidden
/// layer sizes and the dropout probability have defaults that can be changed
/// with the generated `with_*` builder methods.
#[derive(Config, Debug)]
pub struct MlpConfig {
    /// Number of input features per example (the `features` axis of the input).
    pub d_input: usize,
    /// Number of output classes (the `classes` axis of the logits).
    pub n_classes: usize,
    /// Width of each hidden layer, in order. An empty list gives a plain linear
    /// (softmax-regression) classifier.
    #[config(default = "vec![128, 128]")]
    pub hidden: Vec<usize>,
    /// Dropout probability applied after every hidden activation during training.
    /// `0.0` disables dropout. Dropout is inactive on devices without autodiff and
    /// in validation mode (e.g. after [`burn::module::Module::valid`]).
    #[config(default = 0.0)]
    pub dropout: f64,
}

impl MlpConfig {
    /// The configuration for UCI optical digits: 64 → 128 → 128 → 10, no dropout.
    pub fn uci_digits() -> Self {
        Self::new(64, 10)
    }

    /// Initialises an [`Mlp`] with freshly initialised parameters on `device`.
    pub fn init(&self, device: &Device) -> Mlp {
        let mut hidden = Vec::with_capacity(self.hidden.len());
        let mut d_in = self.d_input;
        for &d_out in &self.hidden {
            hidden.push(LinearConfig::new(d_in, d_out).init(device));
            d_in = d_out;
        }
        Mlp {
            hidden,
            output: LinearConfig::new(d_in, self.n_classes).init(device),
            activation: Relu::new(),
            dropout: DropoutConfig::new(self.dropout).init(),
            d_input: self.d_input,
            n_classes: self.n_classes,
        }
    }
}

/// A multi-layer perceptron: `(Linear → ReLU → Dropout)*` followed by a linear
/// output layer producing unnormalised class logits.
///
/// Build it with [`MlpConfig::init`].
#[derive(Module, Debug)]
pub struct Mlp {
    hidden: Vec<Linear>,
    output: Linear,
    activation: Relu,
    dropout: Dropout,
    d_input: usize,
    n_classes: usize,
}

impl Mlp {
    /// Computes class logits.
    ///
    /// # Shapes
    ///
    /// - `input`: `[batch, d_input]`, float
    /// - output: `[batch, n_classes]`, unnormalised logits
    pub fn forward(&self, input: Tensor<2>) -> Tensor<2> {
        let mut x = input;
        for (i, linear) in self.hidden.iter().enumerate() {
            let step = |x| self.dropout.forward(self.activation.forward(linear.forward(x)));
            x = match HIDDEN.get(i) {
                Some(name) => layer(name, || step(x)),
                None => layer(&format!("hidden{i}"), || step(x)),
            };
        }
        layer("output", || self.output.forward(x))
    }

    /// Number of input features this model expects.
    pub fn d_input(&self) -> usize {
        self.d_input
    }

    /// Number of classes this model predicts.
    pub fn n_classes(&self) -> usize {
        self.n_classes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classification_loss;
    use burn::optim::{AdamConfig, GradientsParams};

    /// The CPU (burn-flex) device with autodiff that the unit tests run on.
    fn test_device() -> Device {
        Device::flex().autodiff()
    }

    /// A tiny deterministic dataset: `n` examples of `d` features, labels `i % classes`,
    /// each class having a distinct pattern plus a small per-example perturbation.
    fn tiny_batch(n: usize, d: usize, classes: usize, device: &Device) -> (Tensor<2>, Tensor<1, Int>) {
        let mut xs = Vec::with_capacity(n * d);
        let mut ys = Vec::with_capacity(n);
        for i in 0..n {
            let class = i % classes;
            for j in 0..d {
                let v = ((class * 7 + j * 3) % 11) as f32 / 11.0 + 0.05 * ((i * 13 + j) % 5) as f32;
                xs.push(v);
            }
            ys.push(class as i64);
        }
        (Tensor::from_data(TensorData::new(xs, [n, d]), device), Tensor::from_data(TensorData::new(ys, [n]), device))
    }

    #[test]
    fn config_defaults_match_uci_digits() {
        let config = MlpConfig::uci_digits();
        assert_eq!(config.d_input, 64);
        assert_eq!(config.n_classes, 10);
        assert_eq!(config.hidden, vec![128, 128]);
        assert_eq!(config.dropout, 0.0);
    }

    #[test]
    fn output_shape_and_param_count() {
        let device = test_device();
        let model = MlpConfig::uci_digits().init(&device);
        let input = Tensor::<2>::zeros([5, 64], &device);
        assert_eq!(model.forward(input).dims(), [5, 10]);
        assert_eq!(model.d_input(), 64);
        assert_eq!(model.n_classes(), 10);
        // 64*128+128 + 128*128+128 + 128*10+10
        assert_eq!(model.num_params(), 8320 + 16512 + 1290);

        let linear = MlpConfig::new(3, 2).with_hidden(vec![]).init(&device);
        assert_eq!(linear.num_params(), 3 * 2 + 2);
        assert_eq!(linear.d_input(), 3);
        let out = linear.forward(Tensor::zeros([4, 3], &device));
        assert_eq!(out.dims(), [4, 2]);
    }

    #[test]
    fn dropout_model_runs_in_train_and_valid_mode() {
        let device = test_device();
        let model = MlpConfig::new(8, 3).with_hidden(vec![16]).with_dropout(0.5).init(&device);
        let input = Tensor::<2>::ones([2, 8], &device);
        assert_eq!(model.forward(input.clone()).dims(), [2, 3]);
        let valid = model.valid();
        assert_eq!(valid.forward(input.inner()).dims(), [2, 3]);
    }

    #[test]
    fn learns_tiny_batch() {
        let device = test_device();
        device.seed(0);
        let mut model = MlpConfig::uci_digits().init(&device);
        let mut optim = AdamConfig::new().init();
        let (x, y) = tiny_batch(40, 64, 10, &device);

        let loss_of = |model: &Mlp| -> f32 { classification_loss(model.forward(x.clone()), y.clone()).into_scalar() };
        let initial = loss_of(&model);
        for _ in 0..40 {
            let loss = classification_loss(model.forward(x.clone()), y.clone());
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(1e-3, model, grads);
        }
        let last = loss_of(&model);
        eprintln!("mlp tiny-batch loss: {initial} -> {last}");
        assert!(last < 0.7 * initial, "loss did not decrease enough: {initial} -> {last}");
    }
}
