//! The bytes the parser reads, through a bounded window.
//!
//! A [`Window`] holds the part of the input from the start of the value
//! being parsed to what was last read: bytes before it are dropped once
//! checked (valid UTF-8), so that memory follows the largest single value,
//! not the file. The input's *content* is what the parser sees: a tail of
//! NUL bytes that runs to the end of the input (what some file systems
//! leave after a crash) is counted, never buffered; NUL bytes followed by
//! anything else are content, on which parsing stops at the first one (a
//! NUL byte is never valid JSON): a run that a read ends inside is buffered
//! as one NUL byte, followed by what came after it.

use std::io::{self, Read};

use super::error::{ReadError, ReadErrorKind};

/// How many bytes a read asks for, at least.
pub(super) const CHUNK: usize = 256 << 10;

/// Where a window's bytes come from: a plain stream, or the decompressed
/// members of a gzip stream.
pub(super) trait Source {
    /// Reads up to `buf.len()` bytes; 0 at the end.
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ReadError>;

    /// Whether the input ended because it was cut short (a compressed
    /// stream cut inside a member).
    fn cut(&self) -> bool {
        false
    }
}

/// A plain stream.
pub(super) struct Plain<R>(pub(super) R);

impl<R: Read> Source for Plain<R> {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ReadError> {
        loop {
            match self.0.read(buf) {
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                other => return other.map_err(|err| ReadError::whole(ReadErrorKind::Io(err))),
            }
        }
    }
}

/// The part of the input being parsed.
pub(super) struct Window<'a> {
    src: Box<dyn Source + 'a>,
    /// Bytes `base..base + buf.len()` of the content.
    buf: Vec<u8>,
    base: usize,
    /// Bytes before this offset are checked UTF-8 (and may be dropped).
    checked: usize,
    /// Whether the content ends at [`end`](Self::end).
    done: bool,
    /// NUL bytes read after the last byte of `buf` and held back.
    held: u64,
    /// Once `done`: the NUL bytes the input ended with, not content.
    nul_tail: u64,
    /// The first run of NUL bytes that more bytes followed and that a read
    /// ended inside: its offset and length. It is buffered as one NUL byte
    /// (see the module docs), where parsing stops.
    nul_run: Option<(usize, u64)>,
    chunk: usize,
}

impl<'a> Window<'a> {
    /// A window on `src` that reads `chunk` bytes at a time, at least.
    pub(super) fn new(src: Box<dyn Source + 'a>, chunk: usize) -> Self {
        Window {
            src,
            buf: Vec::new(),
            base: 0,
            checked: 0,
            done: false,
            held: 0,
            nul_tail: 0,
            nul_run: None,
            chunk: chunk.max(1),
        }
    }

    /// The offset just past the content read so far.
    pub(super) fn end(&self) -> usize {
        self.base + self.buf.len()
    }

    /// Whether the content ends at [`end`](Self::end).
    pub(super) fn done(&self) -> bool {
        self.done
    }

    /// The byte at `at`, if it is in the window.
    pub(super) fn byte(&self, at: usize) -> Option<u8> {
        self.buf.get(at.checked_sub(self.base)?).copied()
    }

    /// The window's content from `at` on.
    pub(super) fn from(&self, at: usize) -> &[u8] {
        at.checked_sub(self.base).and_then(|i| self.buf.get(i..)).unwrap_or_default()
    }

    /// The NUL bytes the input ended with (once done), or held so far.
    pub(super) fn nul_tail(&self) -> u64 {
        self.nul_tail + self.held
    }

    /// The NUL run that stops the content at `at`, if any.
    pub(super) fn nul_run_at(&self, at: usize) -> Option<u64> {
        self.nul_run.filter(|&(start, _)| start == at).map(|(_, len)| len)
    }

    /// Whether the source was cut short.
    pub(super) fn cut(&self) -> bool {
        self.src.cut()
    }

    /// Reads more: at least `more` bytes of content, or to the end. Bytes
    /// before `keep` are dropped first (checked as UTF-8 on the way out).
    ///
    /// # Errors
    ///
    /// A read error, or invalid UTF-8 among the dropped bytes (the file's
    /// verdict whatever follows: see [`check_until`](Self::check_until)).
    pub(super) fn fill(&mut self, keep: usize, more: usize) -> Result<(), ReadError> {
        self.drop_before(keep)?;
        let want = more.max(self.chunk);
        let start = self.buf.len();
        while !self.done && self.buf.len() - start < want {
            let len = self.buf.len();
            let ask = (want - (len - start)).max(self.chunk);
            self.buf.resize(len + ask, 0);
            let got = self.src.read(&mut self.buf[len..]);
            self.buf.truncate(len + *got.as_ref().unwrap_or(&0));
            match got? {
                0 => {
                    self.done = true;
                    self.nul_tail = std::mem::take(&mut self.held);
                }
                _ => self.hold_nuls(len),
            }
        }
        Ok(())
    }

    /// Reads until at least `n` bytes follow `at`, or to the end.
    pub(super) fn ensure(&mut self, at: usize, n: usize) -> Result<(), ReadError> {
        while !self.done && self.end() < at + n {
            self.fill(at, n)?;
        }
        Ok(())
    }

    /// Holds back the NUL bytes that end the bytes read from `from` on;
    /// a held run that more bytes follow goes back as one NUL byte, before
    /// those bytes.
    fn hold_nuls(&mut self, from: usize) {
        let new = self.buf.get(from..).unwrap_or_default();
        let Some(last) = new.iter().rposition(|&b| b != 0) else {
            self.held += new.len() as u64;
            self.buf.truncate(from);
            return;
        };
        let mut last = from + last;
        if self.held > 0 {
            // The held run, collapsed to one NUL, then what followed it: the parser stops at
            // that NUL and sees after it a byte, as it would with the whole run in one read
            // (not the end of the input, which would make a value cut short of one broken).
            let lead = new.iter().position(|&b| b != 0).unwrap_or(0);
            if self.nul_run.is_none() {
                self.nul_run = Some((self.base + from, self.held + lead as u64));
            }
            self.held = 0;
            self.buf.splice(from..from + lead, [0]);
            last = last + 1 - lead;
        }
        self.held = (self.buf.len() - last - 1) as u64;
        self.buf.truncate(last + 1);
    }

    /// Drops the bytes before `keep`, once checked as UTF-8.
    fn drop_before(&mut self, keep: usize) -> Result<(), ReadError> {
        let keep = keep.min(self.end());
        if keep > self.checked {
            let region = self.buf.get(self.checked - self.base..keep - self.base).unwrap_or_default();
            match std::str::from_utf8(region) {
                Ok(_) => self.checked = keep,
                Err(bad) if bad.error_len().is_some() => {
                    return Err(ReadError::at(ReadErrorKind::InvalidUtf8, self.checked + bad.valid_up_to()));
                }
                // A character cut at `keep` is checked with what follows.
                Err(bad) => self.checked += bad.valid_up_to(),
            }
        }
        let drop = self.checked.saturating_sub(self.base).min(self.buf.len());
        if drop > 0 {
            self.buf.drain(..drop);
            self.base += drop;
            if self.buf.capacity() > 8 * self.chunk.max(CHUNK) && self.buf.len() < self.chunk {
                self.buf.shrink_to(2 * self.chunk);
            }
        }
        Ok(())
    }

    /// The first invalid UTF-8 before `until` (where the content still is
    /// in the window), if any; `complete` also counts a character cut at
    /// `until`.
    pub(super) fn check_until(&self, until: usize, complete: bool) -> Option<ReadError> {
        let from = self.checked.max(self.base);
        let region = self.buf.get(from - self.base..until.min(self.end()).saturating_sub(self.base))?;
        match std::str::from_utf8(region) {
            Err(bad) if complete || bad.error_len().is_some() => {
                Some(ReadError::at(ReadErrorKind::InvalidUtf8, from + bad.valid_up_to()))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(bytes: &[u8], chunk: usize) -> Window<'_> {
        Window::new(Box::new(Plain(bytes)), chunk)
    }

    fn content(bytes: &[u8], chunk: usize) -> (Vec<u8>, u64, Option<(usize, u64)>) {
        let mut w = window(bytes, chunk);
        let mut out = Vec::new();
        while !w.done() {
            let end = w.end();
            w.fill(end, 1).unwrap();
            out.extend_from_slice(w.from(end));
        }
        (out, w.nul_tail(), w.nul_run)
    }

    #[test]
    fn a_nul_tail_is_counted_not_kept_and_a_nul_run_is_one_nul_before_what_follows() {
        for chunk in [1, 2, 3, 7, 1024] {
            assert_eq!(content(b"[1]\0\0\0", chunk), (b"[1]".to_vec(), 3, None), "{chunk}");
            assert_eq!(content(b"\0\0\0\0", chunk), (Vec::new(), 4, None), "{chunk}");
            assert_eq!(content(b"[1]", chunk), (b"[1]".to_vec(), 0, None), "{chunk}");
        }
        // A run held at the end of a read, then followed by more: one NUL, then the rest.
        assert_eq!(content(b"[\0\0x", 1), (b"[\0x".to_vec(), 0, Some((1, 2))));
        assert_eq!(content(b"[\0\0\0xy", 2), (b"[\0xy".to_vec(), 0, Some((1, 3))));
        // Only the first run is noted; a later tail is still a tail.
        assert_eq!(content(b"[\0\0x\0\0y\0", 1), (b"[\0x\0y".to_vec(), 1, Some((1, 2))));
        // A run inside one read stays as it is: parsing stops at its start.
        assert_eq!(content(b"[\0\0x", 1024), (b"[\0\0x".to_vec(), 0, None));
    }

    #[test]
    fn bytes_are_dropped_only_once_checked() {
        let mut w = window("aé\u{1F600}b".as_bytes(), 1);
        w.ensure(0, 8).unwrap();
        // Keeping from inside the emoji keeps its first bytes.
        w.fill(5, 1).unwrap();
        assert_eq!(w.base, 3);
        let mut w = window(b"a\xffbc", 2);
        w.ensure(0, 4).unwrap();
        let err = w.fill(3, 1).unwrap_err();
        assert!(matches!(err.kind(), ReadErrorKind::InvalidUtf8) && err.offset() == Some(1), "{err}");
        let mut w = window(b"ab\xc3", 8);
        w.ensure(0, 3).unwrap();
        assert!(w.check_until(3, false).is_none());
        assert!(w.check_until(3, true).is_some_and(|e| e.offset() == Some(2)));
    }
}
