//! Errors from reading a trace.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// What is wrong with a trace; see [`ReadError::kind`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadErrorKind {
    /// The file could not be read.
    #[error("{0}")]
    Io(#[source] io::Error),
    /// The input holds nothing but whitespace.
    #[error("empty file")]
    Empty,
    /// The input is NUL bytes where a trace starts: nothing but NUL bytes
    /// (what a crash can leave of a file whose data never reached the
    /// disk), or NUL bytes before anything else.
    #[error("{}", nul_bytes(*.count, *.only))]
    NulBytes {
        /// How many NUL bytes the file holds (with `only`), or at least
        /// starts with.
        count: u64,
        /// Whether the file holds nothing else (whitespace aside).
        only: bool,
    },
    /// The path names something other than a regular file: a FIFO, a
    /// device, a socket or a folder, none of which a trace is read from
    /// (a FIFO would block, a device never ends).
    #[error("it is {what}, not a regular file: traces are read from regular files only")]
    NotAFile {
        /// What it is, for example `a FIFO (named pipe)`.
        what: &'static str,
    },
    /// The input starts with something other than `{` or `[`.
    #[error("expected '{{' or '[' at the start of a trace, found {found}")]
    NotATrace {
        /// What was found instead, for example `'<'`.
        found: String,
    },
    /// A complete object-format file has no `traceEvents` key.
    #[error("the trace object has no \"traceEvents\" key")]
    MissingTraceEvents,
    /// The `traceEvents` value is not an array.
    #[error("\"traceEvents\" must be an array, found {found}")]
    TraceEventsNotArray {
        /// What was found instead, for example `a number`.
        found: String,
    },
    /// The `traceEvents` key appears twice.
    #[error("duplicate \"traceEvents\" key")]
    DuplicateTraceEvents,
    /// An element of the event list is not a JSON object.
    #[error("event {index} is not a JSON object (found {found})")]
    EventNotObject {
        /// The position of the element in the event list, from 0.
        index: usize,
        /// What was found instead, for example `a number`.
        found: String,
    },
    /// An event object is malformed: invalid JSON inside it, or a field of
    /// the wrong type (for example `"ph": 5`).
    #[error("event {index}: {message}")]
    InvalidEvent {
        /// The position of the event in the event list, from 0.
        index: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The JSON structure around the events is invalid.
    #[error("{message}")]
    Syntax {
        /// What was expected or found.
        message: String,
    },
    /// The input is not valid UTF-8.
    #[error("invalid UTF-8")]
    InvalidUtf8,
    /// The file is a steptrace trace of a format version this crate cannot
    /// read.
    #[error(transparent)]
    Version(crate::format::VersionError),
    /// Something other than whitespace follows the end of the trace.
    #[error("unexpected characters after the end of the trace")]
    TrailingCharacters,
    /// The input starts like a gzip file but does not decompress.
    #[error("not a readable gzip file: {0}")]
    Gzip(#[source] io::Error),
    /// The input decompresses to more than the reader accepts: see
    /// [`gzip_limit`](super::gzip_limit). Refused as soon as that many
    /// bytes came out, without holding them.
    #[error(
        "the gzip file of {compressed} bytes decompresses to more than {limit} bytes, the most it is read to ({} \
         times its size, {} MiB at least): refused as a decompression bomb",
        super::GZIP_MAX_RATIO,
        super::GZIP_MIN_LIMIT >> 20
    )]
    TooLarge {
        /// The most bytes accepted.
        limit: u64,
        /// The size of the compressed input, bytes.
        compressed: u64,
    },
    /// A gzip file holds bytes after its last complete member that are
    /// neither another member nor NUL padding.
    #[error("not a readable gzip file: trailing garbage after a complete gzip member, at byte {offset} of the compressed file")]
    GzipTrailingGarbage {
        /// Where the garbage starts, in compressed bytes.
        offset: u64,
    },
}

fn nul_bytes(count: u64, only: bool) -> String {
    if only {
        format!(
            "NUL bytes, not JSON: the file holds {count} NUL bytes and nothing else (what a crash can leave of a file \
             whose data never reached the disk)"
        )
    } else {
        format!("NUL bytes, not JSON: the file starts with {count} NUL bytes")
    }
}

/// An error from [`parse_trace`](super::parse_trace) or
/// [`read_trace_file`](super::read_trace_file).
///
/// It displays as `invalid trace at byte 1234: expected ',' or ']' after an
/// event`, prefixed with the file's path when one is known; I/O errors
/// display as `cannot read trace PATH: REASON`.
#[derive(Debug)]
pub struct ReadError {
    kind: ReadErrorKind,
    offset: Option<usize>,
    path: Option<PathBuf>,
    /// Whether `offset` counts bytes of decompressed (gzip) input.
    decompressed: bool,
}

impl ReadError {
    /// A parse error at byte `offset` of the input.
    pub(crate) fn at(kind: ReadErrorKind, offset: usize) -> Self {
        Self { kind, offset: Some(offset), path: None, decompressed: false }
    }

    /// A syntax error at byte `offset`.
    pub(crate) fn syntax(message: impl Into<String>, offset: usize) -> Self {
        Self::at(ReadErrorKind::Syntax { message: message.into() }, offset)
    }

    /// A format-version error (no offset: it is about the whole file).
    pub(crate) fn version(err: crate::format::VersionError) -> Self {
        Self::whole(ReadErrorKind::Version(err))
    }

    /// An error about the whole input, at no offset.
    pub(crate) fn whole(kind: ReadErrorKind) -> Self {
        Self { kind, offset: None, path: None, decompressed: false }
    }

    /// An I/O error while reading `path`, for callers that read the bytes
    /// themselves before [`parse_trace`](super::parse_trace).
    #[must_use]
    pub fn io(path: &Path, source: io::Error) -> Self {
        Self { path: Some(path.to_path_buf()), ..Self::whole(ReadErrorKind::Io(source)) }
    }

    /// The same error, its offset counted in the decompressed input.
    pub(crate) fn in_decompressed(mut self) -> Self {
        self.decompressed = self.offset.is_some();
        self
    }

    /// The same error, attributed to the file at `path`.
    #[must_use]
    pub fn with_path(mut self, path: &Path) -> Self {
        self.path = Some(path.to_path_buf());
        self
    }

    /// What is wrong.
    #[must_use]
    pub fn kind(&self) -> &ReadErrorKind {
        &self.kind
    }

    /// The byte offset of the problem in the input, counted from 0; `None`
    /// for I/O errors.
    ///
    /// For JSON syntax errors inside an event, the offset is that of the
    /// offending byte or the one just after it.
    #[must_use]
    pub fn offset(&self) -> Option<usize> {
        self.offset
    }

    /// The file being read, when the error came from
    /// [`read_trace_file`](super::read_trace_file).
    #[must_use]
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Consumes the error, returning its kind.
    #[must_use]
    pub fn into_kind(self) -> ReadErrorKind {
        self.kind
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A file name can hold control characters too.
        let shown = self.path.as_ref().map(|p| crate::display::escape(&p.display().to_string()).into_owned());
        if let ReadErrorKind::Io(_) | ReadErrorKind::NotAFile { .. } = &self.kind {
            return match &shown {
                Some(path) => write!(f, "cannot read trace {path}: {}", self.kind),
                None => write!(f, "cannot read trace: {}", self.kind),
            };
        }
        if let Some(path) = &shown {
            write!(f, "{path}: ")?;
        }
        if let ReadErrorKind::Version(err) = &self.kind {
            return write!(f, "{err}");
        }
        match self.offset {
            Some(offset) if self.decompressed => {
                write!(f, "invalid trace at byte {offset} of the decompressed data: {}", self.kind)
            }
            Some(offset) => write!(f, "invalid trace at byte {offset}: {}", self.kind),
            None => write!(f, "invalid trace: {}", self.kind),
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ReadErrorKind::Io(source) | ReadErrorKind::Gzip(source) => Some(source),
            _ => None,
        }
    }
}

/// Describes the value that starts with byte `b`, for error messages.
pub(crate) fn describe_start(b: u8) -> String {
    match b {
        b'{' => "an object".to_owned(),
        b'[' => "an array".to_owned(),
        b'"' => "a string".to_owned(),
        b'-' | b'0'..=b'9' => "a number".to_owned(),
        b't' | b'f' => "a boolean".to_owned(),
        b'n' => "null".to_owned(),
        _ => describe_byte(b),
    }
}

/// Describes a byte met where some JSON syntax was expected.
pub(crate) fn describe_byte(b: u8) -> String {
    match b {
        0x20..=0x7e => format!("'{}'", char::from(b)),
        _ => format!("byte 0x{b:02x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_offset_and_the_problem() {
        let err = ReadError::syntax("expected ',' or ']' after an event", 1234);
        assert_eq!(err.to_string(), "invalid trace at byte 1234: expected ',' or ']' after an event");
        assert_eq!(err.offset(), Some(1234));
        assert!(err.path().is_none());

        let err = err.with_path(Path::new("/tmp/t.json"));
        assert_eq!(err.to_string(), "/tmp/t.json: invalid trace at byte 1234: expected ',' or ']' after an event");
    }

    #[test]
    fn display_of_each_kind_is_specific() {
        let cases = [
            (ReadErrorKind::Empty, "invalid trace at byte 0: empty file"),
            (
                ReadErrorKind::NotATrace { found: "'<'".into() },
                "invalid trace at byte 0: expected '{' or '[' at the start of a trace, found '<'",
            ),
            (
                ReadErrorKind::EventNotObject { index: 3, found: "a number".into() },
                "invalid trace at byte 0: event 3 is not a JSON object (found a number)",
            ),
            (
                ReadErrorKind::TraceEventsNotArray { found: "a number".into() },
                "invalid trace at byte 0: \"traceEvents\" must be an array, found a number",
            ),
        ];
        for (kind, text) in cases {
            assert_eq!(ReadError::at(kind, 0).to_string(), text);
        }
    }

    #[test]
    fn paths_are_shown_escaped() {
        let err = ReadError::at(ReadErrorKind::Empty, 0).with_path(Path::new("a\u{1b}[2J.json"));
        assert_eq!(err.to_string(), "a\\x1b[2J.json: invalid trace at byte 0: empty file");
    }

    #[test]
    fn io_errors_carry_the_path_and_their_source() {
        let err = ReadError::io(Path::new("a/b.json"), io::Error::new(io::ErrorKind::NotFound, "gone"));
        assert_eq!(err.to_string(), "cannot read trace a/b.json: gone");
        assert_eq!(err.offset(), None);
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("gone"));
        assert!(matches!(err.into_kind(), ReadErrorKind::Io(_)));
    }

    #[test]
    fn describe_start_names_json_values() {
        assert_eq!(describe_start(b'7'), "a number");
        assert_eq!(describe_start(b'"'), "a string");
        assert_eq!(describe_start(b'<'), "'<'");
        assert_eq!(describe_start(0xff), "byte 0xff");
    }
}
