//! Host-side batches: a [`BatchSource`] of your data, and the [`Loader`] that reads it in
//! `data.load` spans, on the training thread or on prefetch threads.

mod loader;

use burn::tensor::TensorData;

pub use loader::{Loader, LoaderError};

/// What a [`BatchSource`] returns when it cannot read a batch: any error of the program's.
pub type SourceError = Box<dyn std::error::Error + Send + Sync>;

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
        SourceInfo {
            name: name.into(),
            source: "not stated".into(),
            licence: "not stated".into(),
            ..SourceInfo::default()
        }
    }
}

/// A deterministic source of batches for the [`Loader`]: batch `k` is always
/// the same. Only [`batch`](Self::batch) and [`batch_size`](Self::batch_size) are required.
pub trait BatchSource: Send + Sync {
    /// Reads batch `index` on the host.
    fn batch(&self, index: u64) -> Result<HostBatch, SourceError>;
    /// Samples per batch.
    fn batch_size(&self) -> usize;
    /// What the data is, for the manifest (by default, nothing stated).
    fn info(&self) -> SourceInfo {
        SourceInfo::named("the program's own data")
    }
    /// A held-out batch for evaluation, if the data has a held-out part (by default none).
    fn held_out(&self, index: u64) -> Option<Result<HostBatch, SourceError>> {
        let _ = index;
        None
    }
}
