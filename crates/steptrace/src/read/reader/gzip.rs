//! Gzip-compressed traces (`.json.gz`, as Perfetto and torch.profiler
//! save them), recognised by their magic bytes rather than their name.

use std::io::{self, Read};

use flate2::read::MultiGzDecoder;

use super::error::{ReadError, ReadErrorKind};

/// The first two bytes of every gzip member.
const MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The most bytes a compressed trace may decompress to: past it, the input
/// is refused rather than exhausting memory.
pub(super) const LIMIT: u64 = 4 << 30;

/// Whether `bytes` starts like a gzip file.
pub(super) fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&MAGIC)
}

/// The decompressed bytes of every member, and whether the compressed
/// stream was cut short (what was decompressed before the cut is kept, as
/// the parser keeps the complete events of a cut JSON file).
pub(super) fn gunzip(bytes: &[u8], limit: u64) -> Result<(Vec<u8>, bool), ReadError> {
    let mut out = Vec::new();
    let mut reader = MultiGzDecoder::new(bytes).take(limit.saturating_add(1));
    let cut = match reader.read_to_end(&mut out) {
        Ok(_) => false,
        Err(err) if err.kind() == io::ErrorKind::UnexpectedEof && !out.is_empty() => true,
        Err(err) => return Err(ReadError::whole(ReadErrorKind::Gzip(err))),
    };
    if out.len() as u64 > limit {
        return Err(ReadError::whole(ReadErrorKind::TooLarge { limit }));
    }
    Ok((out, cut))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::write::GzEncoder;
    use flate2::Compression;

    use super::*;

    fn gz(bytes: &[u8]) -> Vec<u8> {
        let mut enc = GzEncoder::new(Vec::new(), Compression::default());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn members_are_concatenated_and_cuts_kept() {
        let mut two = gz(b"[{\"name\":\"a\"},");
        two.extend(gz(b"{\"name\":\"b\"}]"));
        assert!(is_gzip(&two));
        assert_eq!(gunzip(&two, LIMIT).unwrap(), (b"[{\"name\":\"a\"},{\"name\":\"b\"}]".to_vec(), false));
        let whole = gz(&b"[{\"name\":\"a\"}]".repeat(100));
        let (prefix, cut) = gunzip(&whole[..whole.len() - 12], LIMIT).unwrap();
        assert!(cut);
        assert!(!prefix.is_empty());
    }

    #[test]
    fn garbage_and_bombs_are_errors() {
        let err = gunzip(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff], LIMIT).unwrap_err();
        assert!(matches!(err.kind(), ReadErrorKind::Gzip(_)), "{err}");
        assert!(err.to_string().starts_with("invalid trace: not a readable gzip file"), "{err}");
        let err = gunzip(&gz(&[b' '; 4096]), 1000).unwrap_err();
        assert_eq!(err.to_string(), "invalid trace: the gzip file decompresses to more than 1000 bytes");
    }
}
