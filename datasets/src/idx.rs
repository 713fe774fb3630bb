//! Parsing of the IDX format used by MNIST and Fashion-MNIST (crate-private).
//!
//! An IDX file is a big-endian header — magic `0x0000TTNN` (`TT` = element type, `0x08` for
//! unsigned bytes; `NN` = number of dimensions), then one `u32` per dimension — followed by
//! the elements. Problems are returned as plain text; the caller adds dataset and file.

/// Magic number of an IDX file of unsigned bytes with three dimensions (images).
pub(crate) const IMAGES_MAGIC: u32 = 0x0000_0803;
/// Magic number of an IDX file of unsigned bytes with one dimension (labels).
pub(crate) const LABELS_MAGIC: u32 = 0x0000_0801;

/// Images decoded from an IDX3 file.
#[derive(Debug)]
pub(crate) struct IdxImages {
    pub(crate) count: usize,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) pixels: Vec<u8>,
}

fn be_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at + 4)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// Checks the header (length and magic) and returns the `ndims` dimensions.
fn header(bytes: &[u8], magic: u32, ndims: usize) -> Result<Vec<usize>, String> {
    let header_len = 4 + 4 * ndims;
    if bytes.len() < header_len {
        return Err(format!(
            "file too short: {} bytes, but an IDX header with {ndims} dimension(s) needs {header_len}",
            bytes.len()
        ));
    }
    let found = be_u32(bytes, 0).unwrap_or(0);
    if found != magic {
        return Err(format!("bad magic 0x{found:08x}, expected 0x{magic:08x}"));
    }
    Ok((0..ndims).map(|d| be_u32(bytes, 4 + 4 * d).unwrap_or(0) as usize).collect())
}

/// Checks that exactly `expected` element bytes follow a header of `header_len` bytes.
fn body<'a>(bytes: &'a [u8], header_len: usize, expected: usize, what: &str) -> Result<&'a [u8], String> {
    let found = bytes.len().saturating_sub(header_len);
    if found < expected {
        return Err(format!(
            "truncated: the header promises {what} ({expected} bytes of data) but only {found} bytes follow"
        ));
    }
    if found > expected {
        return Err(format!("{} unexpected trailing bytes after {what} ({expected} bytes of data)", found - expected));
    }
    Ok(&bytes[header_len..])
}

/// Parses an IDX3 file of unsigned-byte images.
pub(crate) fn parse_images(bytes: &[u8]) -> Result<IdxImages, String> {
    let dims = header(bytes, IMAGES_MAGIC, 3)?;
    let (count, rows, cols) = (dims[0], dims[1], dims[2]);
    let what = format!("{count} images of {rows}x{cols}");
    let expected = count
        .checked_mul(rows)
        .and_then(|n| n.checked_mul(cols))
        .ok_or_else(|| format!("implausible dimensions: {what}"))?;
    let pixels = body(bytes, 16, expected, &what)?.to_vec();
    Ok(IdxImages { count, rows, cols, pixels })
}

/// Parses an IDX1 file of unsigned-byte labels.
pub(crate) fn parse_labels(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let dims = header(bytes, LABELS_MAGIC, 1)?;
    let count = dims[0];
    Ok(body(bytes, 8, count, &format!("{count} labels"))?.to_vec())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An IDX3 image file in memory.
    pub(crate) fn images_file(count: u32, rows: u32, cols: u32, data_len: usize) -> Vec<u8> {
        let mut v = Vec::new();
        for x in [IMAGES_MAGIC, count, rows, cols] {
            v.extend_from_slice(&x.to_be_bytes());
        }
        v.extend((0..data_len).map(|i| (i % 256) as u8));
        v
    }

    /// An IDX1 label file in memory.
    pub(crate) fn labels_file(labels: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&LABELS_MAGIC.to_be_bytes());
        v.extend_from_slice(&(labels.len() as u32).to_be_bytes());
        v.extend_from_slice(labels);
        v
    }

    #[test]
    fn parses_well_formed_files() {
        let img = parse_images(&images_file(2, 3, 4, 24)).unwrap();
        assert_eq!((img.count, img.rows, img.cols, img.pixels.len()), (2, 3, 4, 24));
        assert_eq!(parse_labels(&labels_file(&[1, 2, 3])).unwrap(), vec![1, 2, 3]);
    }

    #[test]
    fn rejects_malformed_files() {
        assert_eq!(parse_images(&[0u8; 16]).unwrap_err(), "bad magic 0x00000000, expected 0x00000803");
        assert_eq!(parse_labels(&images_file(1, 1, 1, 1)).unwrap_err(), "bad magic 0x00000803, expected 0x00000801");
        assert!(parse_images(&[0, 0, 8, 3, 0]).unwrap_err().starts_with("file too short: 5 bytes"));
        let e = parse_images(&images_file(2, 3, 4, 23)).unwrap_err();
        assert_eq!(e, "truncated: the header promises 2 images of 3x4 (24 bytes of data) but only 23 bytes follow");
        let e = parse_images(&images_file(2, 3, 4, 25)).unwrap_err();
        assert!(e.starts_with("1 unexpected trailing bytes"), "{e}");
        let mut labels = labels_file(&[1, 2, 3]);
        labels.pop();
        assert!(parse_labels(&labels).unwrap_err().starts_with("truncated"));
    }
}
