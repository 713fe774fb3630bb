//! Offline datasets for steptrace training runs. Nothing is downloaded at run time.
//!
//! | name | function | samples | shape | source | licence |
//! |---|---|---|---|---|---|
//! | `digits` | [`digits`] | 1797 | `[1, 8, 8]`, 10 classes | embedded (UCI, via scikit-learn) | CC BY 4.0 |
//! | `fashion-mnist` | [`fashion_mnist`] | 10 000 (t10k) / 60 000 (train) | `[1, 28, 28]`, 10 classes | t10k embedded; train from a directory (Debian `dataset-fashion-mnist`) | MIT (Zalando) |
//! | `shakespeare` | [`shakespeare`] | ~1.04 M characters, 76 symbols | text | embedded (8 plays) | public domain texts; CC BY 2.5 preparation |
//! | `synthetic` | [`synthetic`] | any | any `[C, H, W]`, any classes | generated, seeded | n/a |
//!
//! Images are host-side `Vec<f32>` scaled to `[0, 1]` in an [`ImageDataset`]; text is a
//! [`CharCorpus`] of character ids. Each can describe itself as a serialisable
//! [`DataInfo`] for a trace manifest; generated data is flagged there (`synthetic: true`).
//! Shuffles, splits, batch windows and synthetic data all use [`SplitMix64`] and are
//! reproducible from their seed. The crate does not depend on burn.
//!
//! Missing or malformed files are reported as a [`DatasetError`] that names the dataset,
//! the file and the problem; loaders never panic on bad input.
//!
//! ```
//! let digits = steptrace_datasets::digits()?;
//! let (train, test) = digits.split(0.2, 42);
//! assert_eq!(train.len() + test.len(), 1797);
//! let (pixels, label) = test.sample(0);
//! assert_eq!((pixels.len(), label < 10), (64, true));
//! # Ok::<(), steptrace_datasets::DatasetError>(())
//! ```

#![deny(missing_docs)]

mod dataset;
mod digits;
mod error;
mod fashion;
mod idx;
mod io;
mod rng;
mod shakespeare;
mod synthetic;

use std::path::Path;

pub use dataset::{DataInfo, DataKind, DataSource, ImageDataset};
pub use digits::{digits, DIGITS_ATTRIBUTION, DIGITS_FILE, DIGITS_LICENCE, DIGITS_SAMPLES, DIGITS_SAMPLE_SHAPE};
pub use error::DatasetError;
pub use fashion::{
    fashion_mnist, FashionSplit, FASHION_MNIST_ATTRIBUTION, FASHION_MNIST_CLASSES, FASHION_MNIST_DEBIAN_DIR,
    FASHION_MNIST_LICENCE, FASHION_SAMPLE_SHAPE, FASHION_T10K_IMAGES_FILE, FASHION_T10K_LABELS_FILE,
};
pub use rng::SplitMix64;
pub use shakespeare::{
    shakespeare, CharCorpus, CorpusSplit, TokenBatch, DEFAULT_VALID_FRACTION, SHAKESPEARE_ATTRIBUTION,
    SHAKESPEARE_FILE, SHAKESPEARE_LICENCE,
};
pub use synthetic::{synthetic, SyntheticConfig};

/// The image dataset names [`from_name`] accepts.
pub const IMAGE_DATASET_NAMES: &[&str] =
    &["digits", "fashion-mnist", "fashion-mnist-t10k", "fashion-mnist-train", "synthetic"];

/// The sample shape `[C, H, W]` of a named image dataset with a fixed shape,
/// known without loading it (`None` for `synthetic`, whose shape is
/// configured, and for names that are not image datasets).
pub fn sample_shape_of(name: &str) -> Option<[usize; 3]> {
    match name {
        "digits" => Some(DIGITS_SAMPLE_SHAPE),
        "fashion-mnist" | "fashion-mnist-t10k" | "fashion-mnist-train" => Some(FASHION_SAMPLE_SHAPE),
        _ => None,
    }
}

/// Every dataset name, images and text ([`shakespeare`] is loaded by its own
/// function).
pub const DATASET_NAMES: &[&str] =
    &["digits", "fashion-mnist", "fashion-mnist-t10k", "fashion-mnist-train", "shakespeare", "synthetic"];

/// Loads an image dataset by name, for command-line use.
///
/// * `digits`: the embedded UCI digits.
/// * `fashion-mnist` or `fashion-mnist-t10k`: the Fashion-MNIST test split, from `dir` if
///   given, else embedded.
/// * `fashion-mnist-train`: the Fashion-MNIST training split, from `dir` if given, else from
///   [`FASHION_MNIST_DEBIAN_DIR`].
/// * `synthetic`: [`SyntheticConfig::default`].
///
/// `digits` and `synthetic` read no files, so a `dir` for them is an error rather than being
/// silently ignored. An unknown name is an error listing [`IMAGE_DATASET_NAMES`].
pub fn from_name(name: &str, dir: Option<&Path>) -> Result<ImageDataset, DatasetError> {
    let no_dir = |dataset: &'static str| match dir {
        Some(d) => Err(DatasetError::InvalidArgument {
            dataset,
            reason: format!("this dataset reads no files, but a directory was given: {}", d.display()),
        }),
        None => Ok(()),
    };
    match name {
        "digits" => no_dir("digits").and_then(|()| digits()),
        "fashion-mnist" | "fashion-mnist-t10k" => fashion_mnist(dir, FashionSplit::Test),
        "fashion-mnist-train" => fashion_mnist(dir, FashionSplit::Train),
        "synthetic" => no_dir("synthetic").and_then(|()| synthetic(&SyntheticConfig::default())),
        "shakespeare" => Err(DatasetError::InvalidArgument {
            dataset: "shakespeare",
            reason: "a text corpus, not images: load it with shakespeare()".to_owned(),
        }),
        // The text corpus has its own loader, but a user choosing by name
        // must see it among the choices.
        _ => Err(DatasetError::UnknownDataset { name: name.to_string(), valid: DATASET_NAMES }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_name_dispatches_and_rejects_unknown_names() {
        assert_eq!(from_name("digits", None).unwrap().len(), 1797);
        assert_eq!(from_name("fashion-mnist", None).unwrap().len(), 10_000);
        let s = from_name("synthetic", None).unwrap();
        assert!(s.source.is_synthetic());
        assert_eq!((s.len(), s.sample_shape), (10_000, [1, 28, 28]));
        assert_eq!(
            from_name("mnist", None).unwrap_err().to_string(),
            "unknown dataset \"mnist\"; valid names: digits, fashion-mnist, fashion-mnist-t10k, \
             fashion-mnist-train, shakespeare, synthetic"
        );
        let e = from_name("digits", Some(Path::new("/tmp"))).unwrap_err().to_string();
        assert!(e.starts_with("digits: invalid argument: this dataset reads no files"), "{e}");
        let e = from_name("fashion-mnist-train", Some(Path::new("/nonexistent"))).unwrap_err().to_string();
        assert!(e.starts_with("fashion-mnist: /nonexistent: directory not found"), "{e}");
    }

    #[test]
    fn info_describes_each_dataset() {
        let info = digits().unwrap().info();
        assert_eq!(info.name, "digits");
        assert_eq!(info.kind, DataKind::Images);
        assert_eq!(info.source, "embedded:data/digits.csv.gz");
        assert!(!info.synthetic);
        assert_eq!((info.samples, info.sample_shape.as_slice(), info.num_classes), (1797, &[1, 8, 8][..], 10));
        assert!(info.attribution.contains("Alpaydin"));
        let info = synthetic(&SyntheticConfig::default()).unwrap().info();
        assert!(info.synthetic);
        assert_eq!(info.source, "synthetic");
    }
}
