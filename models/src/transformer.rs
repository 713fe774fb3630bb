//! A small character-level, decoder-only Transformer language model.
//!
//! Architecture: token embedding + learned positional embedding → `n_layers`
//! pre-norm burn [`TransformerEncoder`] layers with a causal (autoregressive)
//! attention mask → final [`LayerNorm`] → linear head producing next-token
//! logits at every position.
//!
//! The defaults (d_model 64, 2 layers, 4 heads, d_ff 256, context 64) make a
//! few hundred CPU training steps cheap.

use burn::module::Initializer;
use burn::nn::attention::generate_autoregressive_mask;
use burn::nn::transformer::{TransformerEncoder, TransformerEncoderConfig};
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::prelude::*;
use steptrace::layer;

/// The span names of the first encoder layers, written without an allocation per step.
const ENCODER_LAYERS: [&str; 8] = [
    "encoder.layer0",
    "encoder.layer1",
    "encoder.layer2",
    "encoder.layer3",
    "encoder.layer4",
    "encoder.layer5",
    "encoder.layer6",
    "encoder.layer7",
];

/// Standard deviation of the normal initialisation of both embedding tables
/// (GPT-style small init, instead of burn's default N(0, 1)).
const EMBEDDING_INIT_STD: f64 = 0.02;

/// Configuration of a [`CharTransformer`].
///
/// Only `vocab_size` is required (see [`CharTransformerConfig::new`]).
#[derive(Config, Debug)]
pub struct CharTransformerConfig {
    /// Number of distinct tokens (characters); token ids must lie in `0..vocab_size`.
    pub vocab_size: usize,
    /// Width of the embeddings and of the residual stream. Must be divisible by `n_heads`.
    #[config(default = 64)]
    pub d_model: usize,
    /// Number of Transformer layers.
    #[config(default = 2)]
    pub n_layers: usize,
    /// Number of attention heads per layer.
    #[config(default = 4)]
    pub n_heads: usize,
    /// Hidden width of each position-wise feed-forward block.
    #[config(default = 256)]
    pub d_ff: usize,
    /// Maximum sequence length (context size); the size of the positional embedding table.
    #[config(default = 64)]
    pub max_seq_len: usize,
    /// Dropout probability inside the Transformer layers during training.
    /// `0.0` disables dropout.
    #[config(default = 0.0)]
    pub dropout: f64,
}

impl CharTransformerConfig {
    /// Initialises a [`CharTransformer`] with freshly initialised parameters on `device`.
    ///
    /// # Panics
    ///
    /// If `d_model` is not a positive multiple of `n_heads`, or if `vocab_size`,
    /// `n_heads` or `max_seq_len` is zero.
    pub fn init(&self, device: &Device) -> CharTransformer {
        assert!(
            self.vocab_size > 0 && self.max_seq_len > 0 && self.n_heads > 0,
            "CharTransformer needs non-zero vocab_size, max_seq_len and n_heads: {self}"
        );
        assert!(
            self.d_model > 0 && self.d_model.is_multiple_of(self.n_heads),
            "CharTransformer d_model ({}) must be a positive multiple of n_heads ({})",
            self.d_model,
            self.n_heads
        );
        let embedding_init = Initializer::Normal { mean: 0.0, std: EMBEDDING_INIT_STD };
        CharTransformer {
            token_embedding: EmbeddingConfig::new(self.vocab_size, self.d_model)
                .with_initializer(embedding_init.clone())
                .init(device),
            position_embedding: EmbeddingConfig::new(self.max_seq_len, self.d_model)
                .with_initializer(embedding_init)
                .init(device),
            encoder: TransformerEncoderConfig::new(self.d_model, self.d_ff, self.n_heads, self.n_layers)
                .with_dropout(self.dropout)
                .with_norm_first(true)
                .init(device),
            final_norm: LayerNormConfig::new(self.d_model).init(device),
            head: LinearConfig::new(self.d_model, self.vocab_size).init(device),
            vocab_size: self.vocab_size,
            max_seq_len: self.max_seq_len,
        }
    }
}

/// A causal character-level Transformer language model.
///
/// Position `i` of the output only depends on input tokens `0..=i`, so the
/// logits at position `i` are a prediction of token `i + 1`. Build it with
/// [`CharTransformerConfig::init`]; train it with [`crate::lm_loss`] on
/// `(tokens[.., ..t], tokens[.., 1..=t])` pairs.
#[derive(Module, Debug)]
pub struct CharTransformer {
    token_embedding: Embedding,
    position_embedding: Embedding,
    encoder: TransformerEncoder,
    final_norm: LayerNorm,
    head: Linear,
    vocab_size: usize,
    max_seq_len: usize,
}

impl CharTransformer {
    /// Computes next-token logits for every position.
    ///
    /// # Shapes
    ///
    /// - `tokens`: `[batch, seq]`, token ids in `0..vocab_size`, with `1 <= seq <= max_seq_len`
    /// - output: `[batch, seq, vocab_size]`, unnormalised logits
    ///
    /// # Panics
    ///
    /// If `seq` is zero or longer than `max_seq_len`. (Out-of-range token ids
    /// are not checked here; what happens then depends on the backend.)
    pub fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        let [batch, seq] = tokens.dims();
        assert!(
            (1..=self.max_seq_len).contains(&seq),
            "CharTransformer sequence length must be in 1..={}, got {seq}",
            self.max_seq_len
        );
        let device = tokens.device();
        let positions = Tensor::<1, Int>::arange(0..seq as i64, &device).reshape([1, seq]);
        // [batch, seq, d_model] + [1, seq, d_model] (broadcast over the batch).
        let x =
            layer("embedding", || self.token_embedding.forward(tokens) + self.position_embedding.forward(positions));
        let mask = generate_autoregressive_mask(batch, seq, &device);
        // burn's `TransformerEncoder::forward`, a layer at a time, each in a span of its own
        // (`steptrace::layer`): the trace's span tree shows the forward pass layer by layer.
        let mut x = x;
        for (i, encoder_layer) in self.encoder.layers.iter().enumerate() {
            let name: std::borrow::Cow<'static, str> =
                ENCODER_LAYERS.get(i).map_or_else(|| format!("encoder.layer{i}").into(), |n| (*n).into());
            x = layer(&name, || encoder_layer.forward(x, None, Some(mask.clone())));
        }
        layer("head", || self.head.forward(self.final_norm.forward(x)))
    }

    /// Vocabulary size (the last axis of the logits).
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// Maximum sequence length accepted by [`CharTransformer::forward`].
    pub fn max_seq_len(&self) -> usize {
        self.max_seq_len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm_loss;
    use burn::optim::{AdamConfig, GradientsParams};

    /// The CPU (burn-flex) device with autodiff that the unit tests run on.
    fn test_device() -> Device {
        Device::flex().autodiff()
    }

    fn tokens(rows: Vec<Vec<i64>>, device: &Device) -> Tensor<2, Int> {
        let (b, t) = (rows.len(), rows[0].len());
        let flat: Vec<i64> = rows.into_iter().flatten().collect();
        Tensor::from_data(TensorData::new(flat, [b, t]), device)
    }

    #[test]
    fn output_shape_and_defaults() {
        let device = test_device();
        let config = CharTransformerConfig::new(30);
        assert_eq!(
            (config.d_model, config.n_layers, config.n_heads, config.d_ff, config.max_seq_len),
            (64, 2, 4, 256, 64)
        );
        let model = config.init(&device);
        let input = Tensor::<2, Int>::zeros([3, 64], &device);
        assert_eq!(model.forward(input).dims(), [3, 64, 30]);
        let short = Tensor::<2, Int>::zeros([2, 5], &device);
        assert_eq!(model.forward(short).dims(), [2, 5, 30]);
        assert_eq!(model.vocab_size(), 30);
        assert_eq!(model.max_seq_len(), 64);
        assert!(model.num_params() > 100_000, "{}", model.num_params());
    }

    #[test]
    #[should_panic(expected = "sequence length must be in 1..=8")]
    fn too_long_sequence_panics_clearly() {
        let device = test_device();
        let model = CharTransformerConfig::new(5).with_max_seq_len(8).init(&device);
        let _ = model.forward(Tensor::zeros([1, 9], &device));
    }

    #[test]
    fn is_causal() {
        let device = test_device();
        let model = CharTransformerConfig::new(10).with_max_seq_len(8).init(&device).valid();
        // The validation model lives on the same CPU device without autodiff.
        let device = device.inner();
        let a = [[1i64, 2, 3, 4, 5, 6, 7, 8]];
        let b = [[1i64, 2, 3, 4, 9, 0, 9, 0]];
        let la = model.forward(Tensor::from_data(a, &device));
        let lb = model.forward(Tensor::from_data(b, &device));
        let max_diff = |range: std::ops::Range<usize>| -> f32 {
            let pa = la.clone().slice(s![.., range.clone(), ..]);
            let pb = lb.clone().slice(s![.., range, ..]);
            (pa - pb).abs().max().into_scalar()
        };
        // Changing tokens 4.. must not affect logits at positions 0..4 ...
        assert!(max_diff(0..4) < 1e-5, "future tokens leaked: {}", max_diff(0..4));
        // ... but does affect the later positions.
        assert!(max_diff(4..8) > 1e-3, "{}", max_diff(4..8));
    }

    #[test]
    fn learns_tiny_batch() {
        let device = test_device();
        device.seed(0);
        // A cyclic "alphabet" of 8 symbols: each next token is determined by the
        // current one, so the model can drive the loss far below ln(8).
        let (vocab, seq, batch) = (8usize, 16usize, 4usize);
        let window = |start: usize| -> Vec<i64> { (start..start + seq + 1).map(|i| (i % vocab) as i64).collect() };
        let windows: Vec<Vec<i64>> = (0..batch).map(|b| window(3 * b)).collect();
        let inputs = tokens(windows.iter().map(|w| w[..seq].to_vec()).collect(), &device);
        let targets = tokens(windows.iter().map(|w| w[1..].to_vec()).collect(), &device);

        let mut model = CharTransformerConfig::new(vocab).with_max_seq_len(seq).init(&device);
        let mut optim = AdamConfig::new().init();
        let initial: f32 = lm_loss(model.forward(inputs.clone()), targets.clone()).into_scalar();
        for _ in 0..30 {
            let loss = lm_loss(model.forward(inputs.clone()), targets.clone());
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(3e-3, model, grads);
        }
        let last: f32 = lm_loss(model.forward(inputs), targets).into_scalar();
        eprintln!("transformer tiny-batch loss: {initial} -> {last}");
        assert!(last < 0.7 * initial, "loss did not decrease enough: {initial} -> {last}");
    }
}
