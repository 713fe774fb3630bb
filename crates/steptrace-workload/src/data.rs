//! The bundled datasets as batch sources: image batches for the MLP and the ConvNet, text
//! windows for the Transformer.

use std::sync::Arc;

use burn::tensor::TensorData;
use steptrace_burn::data::{BatchSource, HostBatch, SourceError, SourceInfo};
use steptrace_datasets::{CharCorpus, CorpusSplit, DataInfo, ImageDataset, SplitMix64};
use steptrace_models::ModelKind;

use crate::config::RunConfig;
use crate::error::Result;

/// A bundled dataset's description, for the manifest.
pub fn source_info(info: DataInfo) -> SourceInfo {
    let mut out = SourceInfo::named(info.name);
    out.source = info.source;
    out.synthetic = info.synthetic;
    out.licence = info.licence;
    out.samples = info.samples;
    out.sample_shape = info.sample_shape;
    out.num_classes = info.num_classes;
    out
}

/// How image samples are laid out for the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageLayout {
    /// `[batch, C*H*W]` for the MLP.
    Flat,
    /// `[batch, C, H, W]` for the ConvNet.
    Chw,
}

/// Batches drawn from an image dataset, with a held-out split.
#[derive(Debug)]
pub struct ImageBatches {
    train: ImageDataset,
    test: ImageDataset,
    batch: usize,
    layout: ImageLayout,
    seed: u64,
}

impl ImageBatches {
    /// Splits `data` 80/20 with `seed` and draws batches of `batch` samples.
    pub fn new(data: ImageDataset, batch: usize, layout: ImageLayout, seed: u64) -> ImageBatches {
        let (train, test) = data.split(0.2, seed);
        ImageBatches { train, test, batch, layout, seed }
    }

    fn draw(&self, data: &ImageDataset, index: u64, salt: u64) -> Result<HostBatch, SourceError> {
        if data.is_empty() {
            return Err(format!("dataset {} has no samples", data.name).into());
        }
        let mut rng = SplitMix64::new(self.seed ^ salt ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let indices: Vec<usize> = (0..self.batch).map(|_| rng.below(data.len())).collect();
        let (pixels, labels) = data.gather(&indices);
        let [c, h, w] = data.sample_shape;
        let shape = match self.layout {
            ImageLayout::Flat => vec![self.batch, c * h * w],
            ImageLayout::Chw => vec![self.batch, c, h, w],
        };
        Ok(HostBatch {
            index,
            input: TensorData::new(pixels, shape),
            target: TensorData::new(labels, [self.batch]),
            samples: self.batch,
        })
    }
}

impl BatchSource for ImageBatches {
    fn batch(&self, index: u64) -> Result<HostBatch, SourceError> {
        self.draw(&self.train, index, 0)
    }
    fn info(&self) -> SourceInfo {
        let mut info = self.train.info();
        info.samples = self.train.len() + self.test.len();
        source_info(info)
    }
    fn batch_size(&self) -> usize {
        self.batch
    }
    fn held_out(&self, index: u64) -> Option<Result<HostBatch, SourceError>> {
        (!self.test.is_empty()).then(|| self.draw(&self.test, index, 0x5EED_7E57))
    }
}

/// Windows of a character corpus for next-character prediction.
#[derive(Debug)]
pub struct TextBatches {
    corpus: CharCorpus,
    batch: usize,
    seq_len: usize,
    seed: u64,
}

impl TextBatches {
    /// Draws `batch` windows of `seq_len` characters per batch.
    pub fn new(corpus: CharCorpus, batch: usize, seq_len: usize, seed: u64) -> TextBatches {
        TextBatches { corpus, batch, seq_len, seed }
    }

    /// The corpus's vocabulary size.
    pub fn vocab_size(&self) -> usize {
        self.corpus.vocab_size()
    }

    fn draw(&self, split: CorpusSplit, index: u64, salt: u64) -> Result<HostBatch, SourceError> {
        let seed = self.seed ^ salt ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let tokens = self.corpus.windows(split, self.seq_len, self.batch, seed)?;
        let shape = [tokens.batch_size, tokens.seq_len];
        Ok(HostBatch {
            index,
            input: TensorData::new(tokens.inputs, shape),
            target: TensorData::new(tokens.targets, shape),
            samples: tokens.batch_size,
        })
    }
}

impl BatchSource for TextBatches {
    fn batch(&self, index: u64) -> Result<HostBatch, SourceError> {
        self.draw(CorpusSplit::Train, index, 0)
    }
    fn info(&self) -> SourceInfo {
        source_info(self.corpus.info())
    }
    fn batch_size(&self) -> usize {
        self.batch
    }
    fn held_out(&self, index: u64) -> Option<Result<HostBatch, SourceError>> {
        Some(self.draw(CorpusSplit::Valid, index, 0x5EED_7E57))
    }
}

/// The data a run asks for, as a batch source, plus the vocabulary size for
/// text.
pub fn source_for(cfg: &RunConfig) -> Result<(Arc<dyn BatchSource>, Option<usize>)> {
    if cfg.dataset == "shakespeare" {
        let text = TextBatches::new(steptrace_datasets::shakespeare()?, cfg.batch_size, cfg.seq_len, cfg.seed);
        let vocab = text.vocab_size();
        return Ok((Arc::new(text), Some(vocab)));
    }
    let data = if cfg.dataset == "synthetic" {
        steptrace_datasets::synthetic(&steptrace_datasets::SyntheticConfig {
            samples: cfg.synthetic_samples,
            sample_shape: cfg.synthetic_shape,
            classes: 10,
            seed: cfg.seed,
        })?
    } else {
        steptrace_datasets::from_name(&cfg.dataset, cfg.data_dir.as_deref())?
    };
    let layout = match cfg.model {
        ModelKind::ConvNet => ImageLayout::Chw,
        _ => ImageLayout::Flat,
    };
    Ok((Arc::new(ImageBatches::new(data, cfg.batch_size, layout, cfg.seed)), None))
}
