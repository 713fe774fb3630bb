//! A small convolutional classifier for single- or multi-channel images.
//!
//! Architecture: two blocks of `Conv2d (same padding) → ReLU → MaxPool 2×2`,
//! then flatten, optional dropout and one linear layer producing class logits.
//! Each pooling halves height and width (rounding down), so the flattened
//! feature size is `channels[1] * (height / 4) * (width / 4)`, computed from
//! the input shape stored in the config ([`ConvNetConfig::flattened_size`]).
//!
//! Presets: [`ConvNetConfig::uci_digits`] (1×8×8, flattened 32·2·2 = 128) and
//! [`ConvNetConfig::fashion_mnist`] (1×28×28, flattened 32·7·7 = 1568).

use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{Dropout, DropoutConfig, Linear, LinearConfig, PaddingConfig2d, Relu};
use burn::prelude::*;
use steptrace::layer;

/// Total down-sampling factor of the two 2×2 max-pooling stages.
const DOWNSAMPLE: usize = 4;

/// Configuration of a [`ConvNet`].
///
/// The input shape (`in_channels`, `height`, `width`) and `n_classes` are
/// required (see [`ConvNetConfig::new`]); the rest have defaults.
#[derive(Config, Debug)]
pub struct ConvNetConfig {
    /// Number of input channels (1 for grey-scale digits / Fashion-MNIST).
    pub in_channels: usize,
    /// Input image height in pixels. Must be at least 4.
    pub height: usize,
    /// Input image width in pixels. Must be at least 4.
    pub width: usize,
    /// Number of output classes.
    pub n_classes: usize,
    /// Output channels of the first and second convolution blocks.
    #[config(default = "[16, 32]")]
    pub channels: [usize; 2],
    /// Square kernel size of both convolutions (odd sizes keep padding symmetric).
    #[config(default = 3)]
    pub kernel_size: usize,
    /// Dropout probability applied to the flattened features before the linear
    /// head during training. `0.0` disables dropout.
    #[config(default = 0.0)]
    pub dropout: f64,
}

impl ConvNetConfig {
    /// Preset for UCI optical digits: 1×8×8 input, 10 classes.
    pub fn uci_digits() -> Self {
        Self::new(1, 8, 8, 10)
    }

    /// Preset for Fashion-MNIST: 1×28×28 input, 10 classes.
    pub fn fashion_mnist() -> Self {
        Self::new(1, 28, 28, 10)
    }

    /// Size of the flattened feature vector fed to the linear head:
    /// `channels[1] * (height / 4) * (width / 4)`.
    pub fn flattened_size(&self) -> usize {
        self.channels[1] * (self.height / DOWNSAMPLE) * (self.width / DOWNSAMPLE)
    }

    /// Initialises a [`ConvNet`] with freshly initialised parameters on `device`.
    ///
    /// # Panics
    ///
    /// If `height` or `width` is smaller than 4 (the two poolings would leave
    /// no spatial extent), or if any channel count or `kernel_size` is zero.
    pub fn init(&self, device: &Device) -> ConvNet {
        assert!(
            self.height >= DOWNSAMPLE && self.width >= DOWNSAMPLE,
            "ConvNet needs images of at least {DOWNSAMPLE}x{DOWNSAMPLE} pixels, got {}x{}",
            self.height,
            self.width
        );
        assert!(
            self.in_channels > 0 && self.channels.iter().all(|&c| c > 0) && self.kernel_size > 0,
            "ConvNet channel counts and kernel size must be non-zero: {self}"
        );
        let kernel = [self.kernel_size, self.kernel_size];
        let conv = |c_in: usize, c_out: usize| {
            Conv2dConfig::new([c_in, c_out], kernel).with_padding(PaddingConfig2d::Same).init(device)
        };
        ConvNet {
            conv1: conv(self.in_channels, self.channels[0]),
            conv2: conv(self.channels[0], self.channels[1]),
            pool: MaxPool2dConfig::new([2, 2]).init(),
            activation: Relu::new(),
            dropout: DropoutConfig::new(self.dropout).init(),
            head: LinearConfig::new(self.flattened_size(), self.n_classes).init(device),
            in_channels: self.in_channels,
            height: self.height,
            width: self.width,
            n_classes: self.n_classes,
        }
    }
}

/// A two-block convolutional network producing class logits.
///
/// Build it with [`ConvNetConfig::init`]; the input shape is fixed by the config.
#[derive(Module, Debug)]
pub struct ConvNet {
    conv1: Conv2d,
    conv2: Conv2d,
    pool: MaxPool2d,
    activation: Relu,
    dropout: Dropout,
    head: Linear,
    in_channels: usize,
    height: usize,
    width: usize,
    n_classes: usize,
}

impl ConvNet {
    /// Computes class logits.
    ///
    /// # Shapes
    ///
    /// - `images`: `[batch, in_channels, height, width]`, float
    /// - output: `[batch, n_classes]`, unnormalised logits
    ///
    /// # Panics
    ///
    /// If the channel/height/width axes of `images` differ from the config the
    /// model was built with.
    pub fn forward(&self, images: Tensor<4>) -> Tensor<2> {
        let [batch, channels, height, width] = images.dims();
        assert_eq!(
            [channels, height, width],
            self.input_shape(),
            "ConvNet input must be [batch, channels, height, width] = [_, {}, {}, {}]",
            self.in_channels,
            self.height,
            self.width
        );
        // Each layer in a span of its own (`steptrace::layer`): the trace's span tree shows
        // the forward pass layer by layer.
        let x = layer("conv1", || self.pool.forward(self.activation.forward(self.conv1.forward(images))));
        let x = layer("conv2", || self.pool.forward(self.activation.forward(self.conv2.forward(x))));
        let x: Tensor<2> = x.flatten(1, 3);
        debug_assert_eq!(x.dims()[0], batch);
        layer("head", || self.head.forward(self.dropout.forward(x)))
    }

    /// The `[channels, height, width]` shape of one input image.
    pub fn input_shape(&self) -> [usize; 3] {
        [self.in_channels, self.height, self.width]
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

    #[test]
    fn flattened_sizes() {
        assert_eq!(ConvNetConfig::uci_digits().flattened_size(), 32 * 2 * 2);
        assert_eq!(ConvNetConfig::fashion_mnist().flattened_size(), 32 * 7 * 7);
        assert_eq!(ConvNetConfig::new(3, 9, 13, 5).flattened_size(), 32 * 2 * 3);
    }

    #[test]
    fn output_shapes() {
        let device = test_device();
        for (config, batch) in [
            (ConvNetConfig::uci_digits(), 3),
            (ConvNetConfig::fashion_mnist(), 2),
            (ConvNetConfig::new(3, 9, 13, 5).with_dropout(0.2), 4),
        ] {
            let model = config.init(&device);
            let input = Tensor::<4>::zeros([batch, config.in_channels, config.height, config.width], &device);
            assert_eq!(model.forward(input).dims(), [batch, config.n_classes]);
            assert_eq!(model.n_classes(), config.n_classes);
        }
    }

    #[test]
    fn param_count() {
        let device = test_device();
        let model = ConvNetConfig::uci_digits().init(&device);
        // conv1: 1*16*3*3+16, conv2: 16*32*3*3+32, head: 128*10+10
        assert_eq!(model.num_params(), 160 + 4640 + 1290);
    }

    #[test]
    #[should_panic(expected = "ConvNet input must be")]
    fn wrong_input_shape_panics_clearly() {
        let device = test_device();
        let model = ConvNetConfig::uci_digits().init(&device);
        let _ = model.forward(Tensor::zeros([1, 1, 28, 28], &device));
    }

    #[test]
    #[should_panic(expected = "at least 4x4")]
    fn too_small_images_rejected() {
        let device = test_device();
        let _ = ConvNetConfig::new(1, 3, 8, 10).init(&device);
    }

    #[test]
    fn learns_tiny_batch() {
        let device = test_device();
        device.seed(0);
        let (n, classes, side) = (16, 4, 8);
        // Each class is a bright bar at a class-specific position (rows for even
        // classes, columns for odd ones) on a faint deterministic background.
        let mut xs = Vec::with_capacity(n * side * side);
        let mut ys = Vec::with_capacity(n);
        for i in 0..n {
            let class = i % classes;
            let pos = 1 + 2 * (class / 2);
            for r in 0..side {
                for c in 0..side {
                    let on = if class % 2 == 0 { r == pos } else { c == pos };
                    let noise = 0.1 * ((i * 5 + r * 3 + c) % 4) as f32;
                    xs.push(if on { 1.0 } else { noise });
                }
            }
            ys.push(class as i64);
        }
        let x = Tensor::<4>::from_data(TensorData::new(xs, [n, 1, side, side]), &device);
        let y = Tensor::<1, Int>::from_data(TensorData::new(ys, [n]), &device);

        let mut model = ConvNetConfig::new(1, side, side, classes).init(&device);
        let mut optim = AdamConfig::new().init();
        let initial: f32 = classification_loss(model.forward(x.clone()), y.clone()).into_scalar();
        for _ in 0..20 {
            let loss = classification_loss(model.forward(x.clone()), y.clone());
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(3e-3, model, grads);
        }
        let last: f32 = classification_loss(model.forward(x), y).into_scalar();
        eprintln!("convnet tiny-batch loss: {initial} -> {last}");
        assert!(last < 0.7 * initial, "loss did not decrease enough: {initial} -> {last}");
    }
}
