//! File reading and gzip helpers shared by the loaders (crate-private).

use std::io::Read;
use std::path::Path;

use flate2::read::MultiGzDecoder;

use crate::DatasetError;

/// Reads a whole file, mapping "not found" to [`DatasetError::NotFound`].
pub(crate) fn read_file(dataset: &'static str, path: &Path) -> Result<Vec<u8>, DatasetError> {
    std::fs::read(path).map_err(|error| {
        if error.kind() == std::io::ErrorKind::NotFound {
            DatasetError::NotFound { dataset, path: path.to_path_buf(), what: "file", hint: String::new() }
        } else {
            DatasetError::Io { dataset, path: path.to_path_buf(), error }
        }
    })
}

/// True when `bytes` start with the gzip magic number.
pub(crate) fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

/// Decompresses `bytes` if they are gzip (by magic number, not by file name);
/// otherwise returns them unchanged.
pub(crate) fn maybe_gunzip(dataset: &'static str, file: &str, bytes: Vec<u8>) -> Result<Vec<u8>, DatasetError> {
    if !is_gzip(&bytes) {
        return Ok(bytes);
    }
    let mut out = Vec::with_capacity(bytes.len().saturating_mul(2));
    // Every member: a valid gzip file may be several concatenated members.
    MultiGzDecoder::new(bytes.as_slice()).read_to_end(&mut out).map_err(|e| DatasetError::Corrupt {
        dataset,
        file: file.to_string(),
        problem: format!("gzip data is corrupt or truncated: {e}"),
    })?;
    Ok(out)
}

/// The label used in error messages for a file built into the crate.
pub(crate) fn embedded_label(file: &str) -> String {
    format!("embedded:{file}")
}
