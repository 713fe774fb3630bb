//! The one error type of this crate.

use std::path::PathBuf;

/// Everything that can go wrong while loading or sampling a dataset.
///
/// Every message starts with the dataset and, where there is one, the file it
/// concerns, so that it can be shown to a user as is, e.g.
/// `fashion-mnist: /x/t10k-images-idx3-ubyte.gz: bad magic 0x00000000, expected 0x00000803`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetError {
    /// A file or directory that the dataset needs does not exist.
    #[error("{dataset}: {}: {what} not found{hint}", .path.display())]
    NotFound {
        /// The dataset being loaded.
        dataset: &'static str,
        /// The path that was looked for.
        path: PathBuf,
        /// `"file"` or `"directory"`.
        what: &'static str,
        /// Extra guidance, starting with `"; "` or `" ("`, or empty.
        hint: String,
    },
    /// A file exists but could not be read.
    #[error("{dataset}: {}: cannot read: {error}", .path.display())]
    Io {
        /// The dataset being loaded.
        dataset: &'static str,
        /// The file that could not be read.
        path: PathBuf,
        /// The underlying I/O error (part of the message, not a separate `source`).
        error: std::io::Error,
    },
    /// A file was read but its content is not what the format requires.
    #[error("{dataset}: {file}: {problem}")]
    Corrupt {
        /// The dataset being loaded.
        dataset: &'static str,
        /// The file: a path, or `embedded:<file>` for data built into the crate.
        file: String,
        /// What is wrong with it.
        problem: String,
    },
    /// [`crate::from_name`] was given a name it does not know.
    #[error("unknown dataset {name:?}; valid names: {}", .valid.join(", "))]
    UnknownDataset {
        /// The name that was asked for.
        name: String,
        /// The names that would have been accepted.
        valid: &'static [&'static str],
    },
    /// A parameter is out of range (zero classes, a sequence longer than the corpus, ...).
    #[error("{dataset}: invalid argument: {reason}")]
    InvalidArgument {
        /// The dataset concerned.
        dataset: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// [`crate::CharCorpus::encode`] met a character outside the vocabulary.
    #[error("character {ch:?} at position {position} is not in the vocabulary")]
    UnknownChar {
        /// The character.
        ch: char,
        /// Its position in the input, counted in characters.
        position: usize,
    },
    /// [`crate::CharCorpus::decode`] met a token id outside the vocabulary.
    #[error("token {token} at position {position} is outside the vocabulary (size {vocab_size})")]
    UnknownToken {
        /// The token id.
        token: u32,
        /// Its position in the input.
        position: usize,
        /// The vocabulary size; valid ids are `0..vocab_size`.
        vocab_size: usize,
    },
}
