//! Host-side batches: what the loader reads before anything touches the device.

use std::sync::Arc;

use burn::tensor::TensorData;
use steptrace_datasets::{CharCorpus, CorpusSplit, DataInfo, ImageDataset, SplitMix64};
use steptrace_models::ModelKind;

use crate::config::RunConfig;
use crate::error::{Error, Result};

/// One batch on the host, ready to be transferred.
#[derive(Clone, Debug)]
pub struct HostBatch {
    /// The batch number (0, 1, ...), which fixes its content.
    pub index: u64,
    /// Inputs: `f32` `[batch, features]` or `[batch, C, H, W]`, or `i64`
    /// tokens `[batch, seq]`.
    pub input: TensorData,
    /// Targets: `i64` classes `[batch]` or next tokens `[batch, seq]`.
    pub target: TensorData,
    /// Samples in the batch.
    pub samples: usize,
}

/// What a batch source's data is, for the manifest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SourceInfo {
    /// Its name (`digits`, `my-dataset`).
    pub name: String,
    /// Where it is read from (a path is written relative to the home folder, `~/...`).
    pub source: String,
    /// Whether the data is generated rather than real.
    pub synthetic: bool,
    /// Its licence.
    pub licence: String,
    /// Samples in it.
    pub samples: usize,
    /// One sample's shape (`[C, H, W]`; empty for text).
    pub sample_shape: Vec<usize>,
    /// Classes, or the vocabulary's size for text.
    pub num_classes: usize,
}

impl SourceInfo {
    /// Data called `name`, the rest unknown.
    pub fn named(name: impl Into<String>) -> SourceInfo {
        SourceInfo { name: name.into(), source: "not stated".into(), licence: "not stated".into(), ..SourceInfo::default() }
    }
}

impl From<DataInfo> for SourceInfo {
    fn from(info: DataInfo) -> SourceInfo {
        SourceInfo {
            name: info.name,
            source: info.source,
            synthetic: info.synthetic,
            licence: info.licence,
            samples: info.samples,
            sample_shape: info.sample_shape,
            num_classes: info.num_classes,
        }
    }
}

/// A deterministic source of batches for the [`Loader`](crate::Loader): batch `k` is always
/// the same. Only [`batch`](Self::batch) and [`batch_size`](Self::batch_size) are required.
pub trait BatchSource: Send + Sync {
    /// Reads batch `index` on the host.
    fn batch(&self, index: u64) -> Result<HostBatch>;
    /// Samples per batch.
    fn batch_size(&self) -> usize;
    /// What the data is, for the manifest (by default, nothing stated).
    fn info(&self) -> SourceInfo {
        SourceInfo::named("the program's own data")
    }
    /// A held-out batch for evaluation, if the data has a held-out part (by default none).
    fn held_out(&self, index: u64) -> Option<Result<HostBatch>> {
        let _ = index;
        None
    }
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

    fn draw(&self, data: &ImageDataset, index: u64, salt: u64) -> Result<HostBatch> {
        if data.is_empty() {
            return Err(Error::Config(format!("dataset {} has no samples", data.name)));
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
    fn batch(&self, index: u64) -> Result<HostBatch> {
        self.draw(&self.train, index, 0)
    }
    fn info(&self) -> SourceInfo {
        let mut info = self.train.info();
        info.samples = self.train.len() + self.test.len();
        info.into()
    }
    fn batch_size(&self) -> usize {
        self.batch
    }
    fn held_out(&self, index: u64) -> Option<Result<HostBatch>> {
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

    fn draw(&self, split: CorpusSplit, index: u64, salt: u64) -> Result<HostBatch> {
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
    fn batch(&self, index: u64) -> Result<HostBatch> {
        self.draw(CorpusSplit::Train, index, 0)
    }
    fn info(&self) -> SourceInfo {
        self.corpus.info().into()
    }
    fn batch_size(&self) -> usize {
        self.batch
    }
    fn held_out(&self, index: u64) -> Option<Result<HostBatch>> {
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
