//! Gzip-compressed traces (`.json.gz`, as Perfetto and torch.profiler
//! save them), recognised by their magic bytes rather than their name, and
//! decompressed as they are parsed: the decompressed text is never held
//! whole.

use std::io::{self, BufRead, BufReader, Read};

use flate2::bufread::GzDecoder;

use super::error::{ReadError, ReadErrorKind};
use super::window::Source;

/// The first two bytes of every gzip member.
pub(super) const MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The most a gzip trace may expand to, as a multiple of its compressed
/// size: see [`gzip_limit`](super::gzip_limit).
pub const GZIP_MAX_RATIO: u64 = 100;

/// The most any gzip trace may expand to, however small: see
/// [`gzip_limit`](super::gzip_limit).
pub const GZIP_MIN_LIMIT: u64 = 256 << 20;

/// The most bytes a gzip trace of `compressed` bytes is decompressed to:
/// [`GZIP_MAX_RATIO`] times its size, and at least [`GZIP_MIN_LIMIT`].
///
/// Traces compress about tenfold (steptrace's and torch.profiler's
/// alike), so a real trace stays far below the limit; a decompression bomb
/// (a small file that expands a thousandfold, to exhaust memory or time)
/// goes past it, and is refused as soon as it does: what came out is
/// counted as it is parsed, never held.
///
/// # Examples
///
/// ```
/// use steptrace::reader::{gzip_limit, GZIP_MIN_LIMIT};
///
/// assert_eq!(gzip_limit(1 << 20), GZIP_MIN_LIMIT);
/// assert_eq!(gzip_limit(1 << 30), 100 << 30);
/// ```
#[must_use]
pub fn gzip_limit(compressed: u64) -> u64 {
    compressed.saturating_mul(GZIP_MAX_RATIO).max(GZIP_MIN_LIMIT)
}

/// A reader that counts the bytes it passes on.
struct Counted<R> {
    inner: R,
    count: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count += n as u64;
        Ok(n)
    }
}

type Input<R> = BufReader<Counted<R>>;

enum State<R> {
    /// Inside a member.
    Member(GzDecoder<Input<R>>),
    /// After a complete member: another one, NUL padding, or the end.
    Between(Input<R>),
    End,
}

/// The decompressed bytes of every member of a gzip stream, in turn.
///
/// A stream cut short inside a member ends there (its [`cut`](Source::cut)
/// is then true), as a JSON file cut short does; NUL bytes after the last
/// member are ignored, as `gzip -d` ignores them; anything else after it
/// is an error, as is decompressing past the limit.
pub(super) struct Gunzip<R> {
    state: State<R>,
    out: u64,
    limit: u64,
    compressed: u64,
    cut: bool,
}

impl<R: Read> Gunzip<R> {
    /// Decompresses `raw`, of `compressed` bytes, to at most `limit` bytes.
    pub(super) fn new(raw: R, compressed: u64, limit: u64) -> Self {
        let input = BufReader::with_capacity(64 << 10, Counted { inner: raw, count: 0 });
        Gunzip { state: State::Member(GzDecoder::new(input)), out: 0, limit, compressed, cut: false }
    }

    /// What follows a complete member, once its decoder is done.
    fn after_member(input: &mut Input<R>) -> Result<Option<()>, ReadError> {
        let io = |err| ReadError::whole(ReadErrorKind::Io(err));
        let at = input.get_ref().count - input.buffer().len() as u64;
        let mut padded = false;
        loop {
            let next = input.fill_buf().map_err(io)?;
            let Some(&first) = next.first() else { return Ok(None) };
            if !padded && first == MAGIC[0] && next.get(1).is_none_or(|&b| b == MAGIC[1]) {
                return Ok(Some(()));
            }
            let nuls = next.iter().take_while(|&&b| b == 0).count();
            if nuls == 0 {
                return Err(ReadError::whole(ReadErrorKind::GzipTrailingGarbage { offset: at }));
            }
            input.consume(nuls);
            padded = true;
        }
    }
}

impl<R: Read> Source for Gunzip<R> {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ReadError> {
        loop {
            match &mut self.state {
                State::Member(decoder) => match decoder.read(buf) {
                    Ok(0) => {
                        let State::Member(decoder) = std::mem::replace(&mut self.state, State::End) else { continue };
                        self.state = State::Between(decoder.into_inner());
                    }
                    Ok(n) => {
                        self.out += n as u64;
                        if self.out > self.limit {
                            let (limit, compressed) = (self.limit, self.compressed);
                            return Err(ReadError::whole(ReadErrorKind::TooLarge { limit, compressed }));
                        }
                        return Ok(n);
                    }
                    Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                    // Cut short: what came out before the cut is kept.
                    Err(err) if err.kind() == io::ErrorKind::UnexpectedEof && self.out > 0 => {
                        self.cut = true;
                        self.state = State::End;
                    }
                    Err(err) => return Err(ReadError::whole(ReadErrorKind::Gzip(err))),
                },
                State::Between(input) => match Self::after_member(input)? {
                    Some(()) => {
                        let State::Between(input) = std::mem::replace(&mut self.state, State::End) else { continue };
                        self.state = State::Member(GzDecoder::new(input));
                    }
                    None => self.state = State::End,
                },
                State::End => return Ok(0),
            }
        }
    }

    fn cut(&self) -> bool {
        self.cut
    }
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

    /// Everything `bytes` decompresses to, and whether it was cut.
    fn gunzip(bytes: &[u8], limit: u64) -> Result<(Vec<u8>, bool), ReadError> {
        let mut src = Gunzip::new(bytes, bytes.len() as u64, limit);
        let mut out = Vec::new();
        let mut buf = [0; 7];
        loop {
            match src.read(&mut buf)? {
                0 => return Ok((out, src.cut())),
                n => out.extend_from_slice(&buf[..n]),
            }
        }
    }

    #[test]
    fn members_are_concatenated_and_cuts_kept() {
        let mut two = gz(b"[{\"name\":\"a\"},");
        two.extend(gz(b"{\"name\":\"b\"}]"));
        assert_eq!(gunzip(&two, 1000).unwrap(), (b"[{\"name\":\"a\"},{\"name\":\"b\"}]".to_vec(), false));
        let whole = gz(&b"[{\"name\":\"a\"}]".repeat(100));
        let (prefix, cut) = gunzip(&whole[..whole.len() - 12], 10_000).unwrap();
        assert!(cut);
        assert!(!prefix.is_empty());
        // A second member cut inside its header is a cut too.
        let mut cut_header = gz(b"[]");
        cut_header.extend_from_slice(&[0x1f, 0x8b, 8]);
        assert_eq!(gunzip(&cut_header, 1000).unwrap(), (b"[]".to_vec(), true));
    }

    #[test]
    fn nul_padding_is_ignored_and_garbage_named() {
        let mut padded = gz(b"[]");
        padded.extend_from_slice(&[0; 300]);
        assert_eq!(gunzip(&padded, 1000).unwrap(), (b"[]".to_vec(), false));
        for tail in [&b"\n"[..], b"x", b"trailing text after the member", b"\0\0junk"] {
            let mut bytes = gz(b"[]");
            let end = bytes.len() as u64;
            bytes.extend_from_slice(tail);
            let err = gunzip(&bytes, 1000).unwrap_err();
            assert!(matches!(err.kind(), ReadErrorKind::GzipTrailingGarbage { offset } if *offset == end), "{err}");
            assert!(err.to_string().contains("trailing garbage after a complete gzip member"), "{err}");
        }
    }

    #[test]
    fn garbage_and_bombs_are_errors() {
        let err = gunzip(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff], 1000).unwrap_err();
        assert!(matches!(err.kind(), ReadErrorKind::Gzip(_)), "{err}");
        assert!(err.to_string().starts_with("invalid trace: not a readable gzip file"), "{err}");
        let bomb = gz(&[b' '; 4096]);
        let err = gunzip(&bomb, 1000).unwrap_err();
        assert!(matches!(err.kind(), ReadErrorKind::TooLarge { limit: 1000, .. }), "{err}");
        assert!(err.to_string().contains("decompresses to more than 1000 bytes"), "{err}");
        assert!(err.to_string().contains("refused as a decompression bomb"), "{err}");
    }

    #[test]
    fn the_limit_is_a_ratio_with_a_floor() {
        assert_eq!(gzip_limit(0), GZIP_MIN_LIMIT);
        assert_eq!(gzip_limit(u64::MAX), u64::MAX);
        assert_eq!(gzip_limit(10 << 20), 1000 << 20);
    }
}
