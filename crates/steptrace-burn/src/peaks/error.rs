//! What can go wrong while measuring peaks or keeping them in the cache.

use std::path::PathBuf;

use crate::backend::BackendError;

/// An error of [`measure`](super::measure) or of the [peaks cache](super#the-cache).
///
/// A cache file that cannot be used (unreadable, corrupt, of another layout or another
/// device) is an error of its own kind, never a panic: `steptrace peaks` says so and
/// measures again; a [`Session`](crate::Session) says so and runs without peaks.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PeaksError {
    /// The backend could not be selected or its device opened.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// Nothing could be measured on the device: every figure failed.
    #[error("no figure could be measured on {device}: {problems}")]
    NothingMeasured {
        /// The device.
        device: String,
        /// Why each figure failed, joined by "; ".
        problems: String,
    },
    /// The cache file exists but could not be read.
    #[error("peaks cache file {}: cannot be read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The cache file is not a regular file, or far larger than a peaks file can be.
    #[error("peaks cache file {}: {what}", path.display())]
    NotAPeaksFile {
        /// The file.
        path: PathBuf,
        /// What it is instead (`a directory`, `4096 KiB, larger than any peaks file`).
        what: String,
    },
    /// The cache file is not a peaks file's JSON.
    #[error("peaks cache file {}: corrupt: {source}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What the JSON reader said.
        #[source]
        source: serde_json::Error,
    },
    /// The cache file is a peaks file for something else: another layout version, backend,
    /// device or software version.
    #[error("peaks cache file {}: {what}", path.display())]
    Foreign {
        /// The file.
        path: PathBuf,
        /// What differs, e.g. `measured with burn 0.21.0; this is burn 0.22.1`.
        what: String,
    },
    /// The peaks could not be written to the cache.
    #[error("peaks cache file {}: cannot be written: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
}

impl PeaksError {
    /// Whether this is a cache file that exists and cannot be used (unreadable, corrupt,
    /// foreign): a reason to measure again, with a warning.
    pub fn is_unusable_cache(&self) -> bool {
        matches!(
            self,
            PeaksError::Read { .. }
                | PeaksError::NotAPeaksFile { .. }
                | PeaksError::Corrupt { .. }
                | PeaksError::Foreign { .. }
        )
    }
}
