//! Fashion-MNIST (Zalando): an IDX reader, with the t10k split embedded.

use std::path::{Path, PathBuf};

use crate::idx::{parse_images, parse_labels, IdxImages};
use crate::io::{embedded_label, maybe_gunzip, read_file};
use crate::{DataSource, DatasetError, ImageDataset};

const DATASET: &str = "fashion-mnist";

/// Where the Debian package `dataset-fashion-mnist` installs the four `.gz` IDX files.
pub const FASHION_MNIST_DEBIAN_DIR: &str = "/usr/share/datasets/fashion-mnist";
/// The shape of one Fashion-MNIST image, `[C, H, W]`.
pub const FASHION_SAMPLE_SHAPE: [usize; 3] = [1, 28, 28];

/// The embedded t10k images, relative to the crate root.
pub const FASHION_T10K_IMAGES_FILE: &str = "data/fashion-mnist/t10k-images-idx3-ubyte.gz";
/// The embedded t10k labels, relative to the crate root.
pub const FASHION_T10K_LABELS_FILE: &str = "data/fashion-mnist/t10k-labels-idx1-ubyte.gz";

const T10K_IMAGES_GZ: &[u8] = include_bytes!("../data/fashion-mnist/t10k-images-idx3-ubyte.gz");
const T10K_LABELS_GZ: &[u8] = include_bytes!("../data/fashion-mnist/t10k-labels-idx1-ubyte.gz");

/// Licence of Fashion-MNIST.
pub const FASHION_MNIST_LICENCE: &str = "MIT";

/// Attribution for Fashion-MNIST.
pub const FASHION_MNIST_ATTRIBUTION: &str = "Fashion-MNIST, Copyright (c) 2017 Zalando SE; H. Xiao, \
K. Rasul and R. Vollgraf, arXiv:1708.07747; https://github.com/zalandoresearch/fashion-mnist \
(files as packaged in Debian's dataset-fashion-mnist)";

/// The ten class names, indexed by label.
pub const FASHION_MNIST_CLASSES: [&str; 10] =
    ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"];

/// Which Fashion-MNIST split to load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FashionSplit {
    /// The 60 000 training images (`train-*` files).
    Train,
    /// The 10 000 test images (`t10k-*` files); embedded in this crate.
    Test,
}

impl FashionSplit {
    /// The file-name prefix of the split: `train` or `t10k`.
    pub fn prefix(self) -> &'static str {
        match self {
            FashionSplit::Train => "train",
            FashionSplit::Test => "t10k",
        }
    }

    /// Number of samples in the official split.
    pub fn expected_len(self) -> usize {
        match self {
            FashionSplit::Train => 60_000,
            FashionSplit::Test => 10_000,
        }
    }

    fn dataset_name(self) -> &'static str {
        match self {
            FashionSplit::Train => "fashion-mnist-train",
            FashionSplit::Test => "fashion-mnist-t10k",
        }
    }
}

/// Loads a Fashion-MNIST split: 28x28 greyscale images as `[1, 28, 28]` in `[0, 1]`, 10 classes.
///
/// With `dir = Some(d)`, reads `d/{prefix}-images-idx3-ubyte` and `d/{prefix}-labels-idx1-ubyte`,
/// each either raw or gzipped (with or without a `.gz` suffix; gzip is detected by content).
/// With `dir = None`, [`FashionSplit::Test`] uses the copy embedded in this crate (works
/// offline, no files needed) and [`FashionSplit::Train`] reads [`FASHION_MNIST_DEBIAN_DIR`].
///
/// Missing or malformed files give a [`DatasetError`] naming the file and the problem:
/// bad magic number, truncated or oversized data, image size other than 28x28, image and
/// label counts that differ, labels above 9, corrupt gzip.
pub fn fashion_mnist(dir: Option<&Path>, split: FashionSplit) -> Result<ImageDataset, DatasetError> {
    match (dir, split) {
        (None, FashionSplit::Test) => load_embedded_t10k(),
        (None, FashionSplit::Train) => load_dir(Path::new(FASHION_MNIST_DEBIAN_DIR), split),
        (Some(d), _) => load_dir(d, split),
    }
}

fn load_embedded_t10k() -> Result<ImageDataset, DatasetError> {
    let images_label = embedded_label(FASHION_T10K_IMAGES_FILE);
    let labels_label = embedded_label(FASHION_T10K_LABELS_FILE);
    let images = maybe_gunzip(DATASET, &images_label, T10K_IMAGES_GZ.to_vec())?;
    let labels = maybe_gunzip(DATASET, &labels_label, T10K_LABELS_GZ.to_vec())?;
    build(
        FashionSplit::Test,
        (&images, &images_label),
        (&labels, &labels_label),
        DataSource::Embedded { file: FASHION_T10K_IMAGES_FILE },
    )
}

fn load_dir(dir: &Path, split: FashionSplit) -> Result<ImageDataset, DatasetError> {
    if !dir.is_dir() {
        return Err(DatasetError::NotFound {
            dataset: DATASET,
            path: dir.to_path_buf(),
            what: "directory",
            hint: "; install the Debian package dataset-fashion-mnist or pass a directory \
                   holding the IDX files"
                .to_string(),
        });
    }
    let prefix = split.prefix();
    let images_path = find_file(dir, &format!("{prefix}-images-idx3-ubyte"))?;
    let labels_path = find_file(dir, &format!("{prefix}-labels-idx1-ubyte"))?;
    let images_label = images_path.display().to_string();
    let labels_label = labels_path.display().to_string();
    let images = maybe_gunzip(DATASET, &images_label, read_file(DATASET, &images_path)?)?;
    let labels = maybe_gunzip(DATASET, &labels_label, read_file(DATASET, &labels_path)?)?;
    build(split, (&images, &images_label), (&labels, &labels_label), DataSource::File { path: dir.to_path_buf() })
}

/// `dir/stem` if it exists, else `dir/stem.gz`; an error naming both when neither does.
fn find_file(dir: &Path, stem: &str) -> Result<PathBuf, DatasetError> {
    let raw = dir.join(stem);
    let gz = dir.join(format!("{stem}.gz"));
    if raw.exists() {
        return Ok(raw);
    }
    if gz.exists() {
        return Ok(gz);
    }
    Err(DatasetError::NotFound { dataset: DATASET, path: gz, what: "file", hint: format!(" (nor {})", raw.display()) })
}

fn corrupt(file: &str, problem: String) -> DatasetError {
    DatasetError::Corrupt { dataset: DATASET, file: file.to_string(), problem }
}

fn build(
    split: FashionSplit,
    (images, images_file): (&[u8], &str),
    (labels, labels_file): (&[u8], &str),
    source: DataSource,
) -> Result<ImageDataset, DatasetError> {
    let IdxImages { count, rows, cols, pixels } = parse_images(images).map_err(|p| corrupt(images_file, p))?;
    if (rows, cols) != (28, 28) {
        return Err(corrupt(images_file, format!("images are {rows}x{cols}, expected 28x28")));
    }
    if count == 0 {
        return Err(corrupt(images_file, "contains no images".to_string()));
    }
    let labels = parse_labels(labels).map_err(|p| corrupt(labels_file, p))?;
    if labels.len() != count {
        return Err(corrupt(labels_file, format!("has {} labels but {images_file} has {count} images", labels.len())));
    }
    if let Some((i, &y)) = labels.iter().enumerate().find(|(_, &y)| y > 9) {
        return Err(corrupt(labels_file, format!("label {y} at index {i} is outside 0..=9")));
    }
    Ok(ImageDataset {
        name: split.dataset_name(),
        images: pixels.iter().map(|&p| f32::from(p) / 255.0).collect(),
        labels,
        sample_shape: FASHION_SAMPLE_SHAPE,
        num_classes: 10,
        source,
        licence: FASHION_MNIST_LICENCE,
        attribution: FASHION_MNIST_ATTRIBUTION,
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::idx::tests::{images_file, labels_file};

    fn gz(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    /// A directory holding a t10k split of `n` 28x28 images, gzipped or raw.
    fn dir_with(n: u32, gzipped: bool) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let images = images_file(n, 28, 28, n as usize * 784);
        let labels = labels_file(&(0..n).map(|i| (i % 10) as u8).collect::<Vec<_>>());
        let (img, lbl) = if gzipped { (gz(&images), gz(&labels)) } else { (images, labels) };
        let suffix = if gzipped { ".gz" } else { "" };
        std::fs::write(dir.path().join(format!("t10k-images-idx3-ubyte{suffix}")), img).unwrap();
        std::fs::write(dir.path().join(format!("t10k-labels-idx1-ubyte{suffix}")), lbl).unwrap();
        dir
    }

    #[test]
    fn a_multi_member_gzip_file_is_read_whole() {
        // `cat a.gz b.gz` is a valid gzip file: both members are the data.
        let dir = dir_with(3, false);
        for name in ["t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"] {
            let raw = std::fs::read(dir.path().join(name)).unwrap();
            let (head, tail) = raw.split_at(raw.len() / 2);
            let joined = [gz(head), gz(tail)].concat();
            std::fs::remove_file(dir.path().join(name)).unwrap();
            std::fs::write(dir.path().join(format!("{name}.gz")), joined).unwrap();
        }
        let d = fashion_mnist(Some(dir.path()), FashionSplit::Test).expect("multi-member gzip reads");
        assert_eq!(d.len(), 3);
    }

    fn err_text(dir: &Path) -> String {
        fashion_mnist(Some(dir), FashionSplit::Test).unwrap_err().to_string()
    }

    #[test]
    fn embedded_t10k_is_the_full_test_split() {
        let d = fashion_mnist(None, FashionSplit::Test).expect("embedded t10k loads");
        assert_eq!(d.len(), 10_000);
        assert_eq!(d.sample_shape, [1, 28, 28]);
        assert_eq!(d.images.len(), 10_000 * 784);
        assert_eq!(d.num_classes, 10);
        // The official test split has exactly 1000 images per class.
        assert_eq!(d.class_counts(), vec![1000; 10]);
        assert!(d.images.iter().all(|&x| (0.0..=1.0).contains(&x)));
        assert_eq!(d.images.iter().cloned().fold(0.0f32, f32::max), 1.0);
        // First test labels of Fashion-MNIST: 9 (ankle boot), 2, 1, 1, 6.
        assert_eq!(&d.labels[..5], &[9, 2, 1, 1, 6]);
        assert_eq!(d.name, "fashion-mnist-t10k");
        assert_eq!(d.info().source, "embedded:data/fashion-mnist/t10k-images-idx3-ubyte.gz");
    }

    #[test]
    fn reads_raw_and_gzipped_directories() {
        for gzipped in [false, true] {
            let dir = dir_with(3, gzipped);
            let d = fashion_mnist(Some(dir.path()), FashionSplit::Test).unwrap();
            assert_eq!(d.len(), 3);
            assert_eq!(d.labels, vec![0, 1, 2]);
            assert_eq!(d.source, DataSource::File { path: dir.path().to_path_buf() });
            assert_eq!(d.sample(0).0[1], 1.0 / 255.0);
        }
    }

    #[test]
    fn missing_directory_and_files_are_named() {
        let e = err_text(Path::new("/nonexistent/fmnist"));
        assert!(e.starts_with("fashion-mnist: /nonexistent/fmnist: directory not found; install"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let e = err_text(dir.path());
        let p = dir.path().display();
        assert_eq!(
            e,
            format!("fashion-mnist: {p}/t10k-images-idx3-ubyte.gz: file not found (nor {p}/t10k-images-idx3-ubyte)")
        );
        // Images present, labels missing.
        let dir = dir_with(2, true);
        std::fs::remove_file(dir.path().join("t10k-labels-idx1-ubyte.gz")).unwrap();
        assert!(err_text(dir.path()).contains("t10k-labels-idx1-ubyte.gz: file not found"));
    }

    #[test]
    fn bad_magic_short_and_truncated_files_are_reported() {
        let dir = dir_with(2, true);
        let images = dir.path().join("t10k-images-idx3-ubyte.gz");
        std::fs::write(&images, gz(&[0u8; 16 + 2 * 784])).unwrap();
        assert_eq!(
            err_text(dir.path()),
            format!("fashion-mnist: {}: bad magic 0x00000000, expected 0x00000803", images.display())
        );
        std::fs::write(&images, gz(&[0, 0, 8, 3])).unwrap();
        assert!(
            err_text(dir.path()).ends_with("file too short: 4 bytes, but an IDX header with 3 dimension(s) needs 16")
        );
        std::fs::write(&images, gz(&images_file(2, 28, 28, 784 + 10))).unwrap();
        assert!(err_text(dir.path()).contains(
            "truncated: the header promises 2 images of 28x28 (1568 bytes of data) but only 794 bytes follow"
        ));
        std::fs::write(&images, gz(&images_file(2, 27, 28, 2 * 27 * 28))).unwrap();
        assert!(err_text(dir.path()).ends_with("images are 27x28, expected 28x28"));
    }

    #[test]
    fn corrupt_gzip_and_mismatched_labels_are_reported() {
        let dir = dir_with(2, true);
        let images = dir.path().join("t10k-images-idx3-ubyte.gz");
        let mut data = std::fs::read(&images).unwrap();
        data.truncate(data.len() / 2);
        std::fs::write(&images, data).unwrap();
        let e = err_text(dir.path());
        assert!(e.contains("t10k-images-idx3-ubyte.gz: gzip data is corrupt or truncated"), "{e}");

        let dir = dir_with(2, false);
        let labels = dir.path().join("t10k-labels-idx1-ubyte");
        std::fs::write(&labels, labels_file(&[1, 2, 3])).unwrap();
        let e = err_text(dir.path());
        assert!(e.contains("t10k-labels-idx1-ubyte: has 3 labels but"), "{e}");
        assert!(e.ends_with("has 2 images"), "{e}");
        std::fs::write(&labels, labels_file(&[1, 12])).unwrap();
        assert!(err_text(dir.path()).ends_with("label 12 at index 1 is outside 0..=9"));
    }

    #[test]
    fn debian_train_split_when_installed() {
        // Runs for real where the Debian package is installed; elsewhere checks the error.
        let dir = Path::new(FASHION_MNIST_DEBIAN_DIR);
        match fashion_mnist(None, FashionSplit::Train) {
            Ok(d) => {
                assert_eq!(d.len(), 60_000);
                assert_eq!(d.class_counts(), vec![6000; 10]);
                assert_eq!(d.source, DataSource::File { path: dir.to_path_buf() });
                // The embedded t10k files are the Debian package's.
                let from_dir = fashion_mnist(Some(dir), FashionSplit::Test).unwrap();
                let embedded = fashion_mnist(None, FashionSplit::Test).unwrap();
                assert_eq!((from_dir.images, from_dir.labels), (embedded.images, embedded.labels));
            }
            Err(e) => {
                assert!(!dir.join("train-images-idx3-ubyte.gz").exists(), "{e}");
                eprintln!("skipping Debian train split: {e}");
            }
        }
    }
}
