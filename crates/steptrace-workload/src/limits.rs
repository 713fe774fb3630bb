//! Sizes checked before any tensor is made: a shape the models cannot take,
//! or a run whose host memory would exceed the machine, is refused with the
//! limit named instead of failing inside burn or the allocator.

use steptrace_models::ModelKind;

use crate::config::{ConfigError, RunConfig};

/// The longest sequence the Transformer is configured for.
pub const MAX_SEQ_LEN: usize = 4096;
/// The smallest image side the ConvNet takes (two 2x2 poolings).
pub const CONVNET_MIN_SIDE: usize = 4;
/// Bytes per element of every host tensor (f32 inputs, i64 targets at most).
const ELEMENT_BYTES: u128 = 8;
/// The MLP's hidden widths when none are given (`MlpConfig`'s default).
const MLP_HIDDEN: [usize; 2] = [128, 128];
/// The most hidden layers the MLP takes.
pub const MLP_MAX_LAYERS: usize = 16;
/// The widest hidden layer the MLP takes.
pub const MLP_MAX_WIDTH: usize = 1 << 20;
/// The longest delay a batch read may be given (an hour): a planted input bottleneck, not
/// a run that sleeps for ever.
pub const MAX_LOADER_DELAY_MS: u64 = 3_600_000;
/// The most loader threads a run may start.
pub const MAX_PREFETCH: usize = 256;
/// Parameter, gradient and two Adam moments per weight.
const COPIES_PER_WEIGHT: u128 = 4;

/// Checks the settings that need no data: learning rate, sequence length,
/// synthetic shape, and the host memory the data and batches need.
pub(crate) fn check_settings(cfg: &RunConfig) -> Result<(), ConfigError> {
    if !cfg.learning_rate.is_finite() || cfg.learning_rate <= 0.0 {
        return Err(ConfigError::BadLearningRate { value: cfg.learning_rate.to_string() });
    }
    if let Some(hidden) = &cfg.mlp_hidden {
        if cfg.model != ModelKind::Mlp {
            return Err(ConfigError::HiddenNotMlp { model: cfg.model });
        }
        if hidden.len() > MLP_MAX_LAYERS {
            let limit = format!("0..={MLP_MAX_LAYERS}");
            return Err(ConfigError::OutOfRange {
                what: "the number of hidden layers",
                value: hidden.len() as u128,
                limit,
            });
        }
        if let Some(&width) = hidden.iter().find(|w| !(1..=MLP_MAX_WIDTH).contains(*w)) {
            let limit = format!("1..={MLP_MAX_WIDTH}");
            return Err(ConfigError::OutOfRange { what: "a hidden layer's width", value: width as u128, limit });
        }
    }
    if cfg.loader_delay_ms > MAX_LOADER_DELAY_MS {
        let limit = format!("0..={MAX_LOADER_DELAY_MS} (ms)");
        return Err(ConfigError::OutOfRange {
            what: "the loader delay",
            value: u128::from(cfg.loader_delay_ms),
            limit,
        });
    }
    if cfg.prefetch > MAX_PREFETCH {
        let limit = format!("0..={MAX_PREFETCH}");
        return Err(ConfigError::OutOfRange { what: "the prefetch threads", value: cfg.prefetch as u128, limit });
    }
    if cfg.model == ModelKind::Transformer && !(1..=MAX_SEQ_LEN).contains(&cfg.seq_len) {
        return Err(ConfigError::OutOfRange {
            what: "seq-len",
            value: cfg.seq_len as u128,
            limit: format!("1..={MAX_SEQ_LEN}"),
        });
    }
    if cfg.dataset == "synthetic" {
        let features = features(&cfg.synthetic_shape);
        if cfg.model == ModelKind::ConvNet {
            check_image(&cfg.synthetic_shape)?;
        }
        let dataset = features.saturating_mul(cfg.synthetic_samples as u128).saturating_mul(4);
        check_memory("the synthetic dataset", dataset, available_memory())?;
    }
    // Shapes known without loading anything: checked now, before any file,
    // thread or tensor exists ([`check_shapes`] checks again on the data).
    let known = match cfg.dataset.as_str() {
        "synthetic" => Some(cfg.synthetic_shape.to_vec()),
        "shakespeare" => Some(Vec::new()),
        name => steptrace_datasets::sample_shape_of(name).map(|s| s.to_vec()),
    };
    if let Some(shape) = known {
        check_shapes(cfg, &shape)?;
    }
    Ok(())
}

/// Checks a run against the dataset's real sample shape (known once the
/// data is loaded, before any model or tensor exists).
pub(crate) fn check_shapes(cfg: &RunConfig, sample_shape: &[usize]) -> Result<(), ConfigError> {
    if cfg.model == ModelKind::ConvNet {
        check_image(sample_shape)?;
    }
    let per_sample =
        if cfg.model == ModelKind::Transformer { cfg.seq_len as u128 * 2 } else { features(sample_shape) + 1 };
    // The batch on the host, plus every batch the loader threads hold ready.
    let held = 1 + (cfg.prefetch as u128).saturating_mul(cfg.prefetch_depth.max(1) as u128);
    let batches = per_sample.saturating_mul(cfg.batch_size as u128).saturating_mul(ELEMENT_BYTES).saturating_mul(held);
    let available = available_memory();
    check_memory(&format!("a batch of {} samples", cfg.batch_size), batches, available)?;
    if cfg.model == ModelKind::Mlp {
        let hidden = cfg.mlp_hidden.as_deref().unwrap_or(&MLP_HIDDEN);
        // Input, hidden layers, and (at least) one output: the weight matrices between them.
        let widths: Vec<u128> =
            std::iter::once(features(sample_shape)).chain(hidden.iter().map(|&w| w as u128)).chain([1]).collect();
        let elements = widths.windows(2).fold(0u128, |acc, w| acc.saturating_add(w[0].saturating_mul(w[1])));
        let weights = elements.saturating_mul(4 * COPIES_PER_WEIGHT);
        check_memory("the MLP's weights (with gradients and Adam state)", weights, available)?;
    }
    Ok(())
}

/// On a backend whose device memory is the host's (the CPU backend, where a failed allocation
/// aborts the process before any report can be written), what the step's activations need at
/// the least: each layer's output and its activation, kept for backward, for the whole batch.
/// A lower bound, not an estimate: the step needs this and more.
pub(crate) fn check_activations(
    cfg: &RunConfig,
    sample_shape: &[usize],
    num_classes: usize,
    vocab: Option<usize>,
) -> Result<(), ConfigError> {
    let batch = cfg.batch_size as u128;
    let per_sample: u128 = match cfg.model {
        ModelKind::Mlp => {
            let hidden = cfg.mlp_hidden.as_deref().unwrap_or(&MLP_HIDDEN);
            hidden.iter().map(|&w| 2 * w as u128).sum::<u128>() + num_classes as u128
        }
        ModelKind::ConvNet => {
            let [_, h, w] = <[usize; 3]>::try_from(sample_shape).unwrap_or([1, 1, 1]);
            let config = steptrace_models::ConvNetConfig::new(1, h, w, num_classes);
            let area = (h as u128).saturating_mul(w as u128);
            let [c0, c1] = [config.channels[0] as u128, config.channels[1] as u128];
            2 * c0 * area + 2 * c1 * (area / 4)
        }
        // The logits and their softmax, one position at a time.
        ModelKind::Transformer => 2 * (cfg.seq_len as u128) * vocab.unwrap_or(num_classes) as u128,
    };
    let bytes = per_sample.saturating_mul(batch).saturating_mul(4);
    check_memory(&format!("a batch of {} samples (its activations alone)", cfg.batch_size), bytes, available_memory())
}

fn features(shape: &[usize]) -> u128 {
    shape.iter().fold(1u128, |acc, &d| acc.saturating_mul(d as u128))
}

fn check_image(shape: &[usize]) -> Result<(), ConfigError> {
    match shape {
        [c, h, w] if *c >= 1 && *h >= CONVNET_MIN_SIDE && *w >= CONVNET_MIN_SIDE => Ok(()),
        _ => Err(ConfigError::BadShape {
            shape: shape.to_vec(),
            need: format!("the ConvNet needs [C, H, W] with C >= 1 and H, W >= {CONVNET_MIN_SIDE}"),
        }),
    }
}

fn check_memory(what: &str, bytes: u128, available: Option<u64>) -> Result<(), ConfigError> {
    match available {
        Some(free) if bytes > u128::from(free) => {
            Err(ConfigError::TooLarge { what: what.to_owned(), bytes, available: free })
        }
        // Unknown free memory (not Linux): only what cannot be addressed.
        None if bytes > isize::MAX as u128 => {
            Err(ConfigError::TooLarge { what: what.to_owned(), bytes, available: isize::MAX as u64 })
        }
        _ => Ok(()),
    }
}

/// What the process may still allocate on the host ([`steptrace_burn::failure::host_oom::available`]).
fn available_memory() -> Option<u64> {
    steptrace_burn::failure::host_oom::available()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A delay or a thread count no run needs is refused before anything starts.
    #[test]
    fn absurd_loader_settings_are_refused() {
        let mut cfg = RunConfig::new();
        cfg.loader_delay_ms = u64::MAX;
        let err = check_settings(&cfg).expect_err("a delay of 584 million years");
        assert!(err.to_string().contains("the loader delay must be in 0..=3600000"), "{err}");
        cfg.loader_delay_ms = MAX_LOADER_DELAY_MS;
        assert!(check_settings(&cfg).is_ok());
        cfg.prefetch = 100_000;
        let err = check_settings(&cfg).expect_err("a hundred thousand threads");
        assert!(err.to_string().contains("the prefetch threads must be in 0..=256 (got 100000)"), "{err}");
    }

    #[test]
    fn memory_beyond_the_machine_is_refused_with_both_sizes() {
        let err = check_memory("a batch of 9 samples", 10_000, Some(4096)).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("a batch of 9 samples") && text.contains("10000 bytes") && text.contains("4096"),
            "{text}"
        );
        assert!(check_memory("x", 4096, Some(4096)).is_ok());
        assert!(check_memory("x", u128::MAX, None).is_err());
    }

    #[test]
    fn convnet_shapes_are_checked_before_the_model_asserts() {
        assert!(check_image(&[1, 8, 8]).is_ok());
        let err = check_image(&[1, 2, 8]).unwrap_err().to_string();
        assert!(err.contains("H, W >= 4") && err.contains("[1, 2, 8]"), "{err}");
        assert!(check_image(&[0, 8, 8]).is_err());
        assert!(check_image(&[64]).is_err());
    }

    #[test]
    fn learning_rate_and_sequence_length_are_bounded() {
        let mut cfg = RunConfig::new();
        for bad in [f64::NAN, f64::INFINITY, 0.0, -1e-3] {
            cfg.learning_rate = bad;
            let err = check_settings(&cfg).unwrap_err().to_string();
            assert!(err.contains("learning rate"), "{err}");
        }
        cfg.learning_rate = 1e-3;
        cfg.model = ModelKind::Transformer;
        cfg.dataset = "shakespeare".into();
        cfg.seq_len = 0;
        assert!(check_settings(&cfg).unwrap_err().to_string().contains("seq-len"));
        cfg.seq_len = MAX_SEQ_LEN;
        assert!(check_settings(&cfg).is_ok());
    }

    #[test]
    fn a_huge_batch_is_refused_before_any_allocation() {
        let mut cfg = RunConfig::new();
        cfg.batch_size = usize::MAX / 2;
        let err = check_shapes(&cfg, &[64]).unwrap_err().to_string();
        assert!(err.contains("a batch of"), "{err}");
        cfg.batch_size = 64;
        assert!(check_shapes(&cfg, &[64]).is_ok());
    }
}
