//! Trace files opened for reading: regular files only, read through a
//! bound.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::error::{ReadError, ReadErrorKind};

/// A trace file opened for reading: a regular file (a link to one is
/// followed), never a FIFO, a device, a socket or a folder.
///
/// Its type is checked before it is opened, so that a device is never
/// opened, and again once it is open (the name may have changed hands
/// between the two), where it was opened without waiting (`O_NONBLOCK`):
/// a FIFO is refused at once rather than read forever. Reading stops at
/// the size the file had when it was opened ([`len`](Self::len)), so that
/// a file that grows as it is read (a `.partial` trace being written) is
/// read as the prefix it was.
///
/// # Examples
///
/// ```
/// use steptrace::reader::{read_trace, ReadErrorKind, TraceFile};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("t.json");
/// std::fs::write(&path, br#"[{"ph":"i","name":"a","ts":1}]"#)?;
/// let file = TraceFile::open(&path)?;
/// let size = file.len();
/// assert_eq!(read_trace(file, size)?.events.len(), 1);
///
/// let err = TraceFile::open(dir.path()).unwrap_err();
/// assert!(matches!(err.kind(), ReadErrorKind::NotAFile { what: "a folder" }));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct TraceFile {
    file: io::Take<File>,
    len: u64,
    path: PathBuf,
}

impl TraceFile {
    /// Opens the trace file at `path`.
    ///
    /// # Errors
    ///
    /// A [`ReadError`] carrying `path`: of kind [`ReadErrorKind::NotAFile`]
    /// for anything but a regular file, else [`ReadErrorKind::Io`] when it
    /// cannot be opened.
    pub fn open(path: &Path) -> Result<TraceFile, ReadError> {
        let io = |err| ReadError::io(path, err);
        refuse(&std::fs::metadata(path).map_err(io)?).map_err(|e| e.with_path(path))?;
        let file = open_nonblocking(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        refuse(&meta).map_err(|e| e.with_path(path))?;
        let len = meta.len();
        Ok(TraceFile { file: file.take(len), len, path: path.to_path_buf() })
    }

    /// The file's size when it was opened, bytes: the most that is read.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file was empty when it was opened.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The path it was opened by.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Read for TraceFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.file.read(buf)
    }
}

/// What a file of type `meta` is, when it is not a regular file.
#[must_use]
pub(super) fn not_a_file(meta: &std::fs::Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        return None;
    }
    if t.is_dir() {
        return Some("a folder");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("a FIFO (named pipe)");
        }
        if t.is_char_device() {
            return Some("a character device");
        }
        if t.is_block_device() {
            return Some("a block device");
        }
        if t.is_socket() {
            return Some("a socket");
        }
    }
    Some("not a regular file")
}

fn refuse(meta: &std::fs::Metadata) -> Result<(), ReadError> {
    match not_a_file(meta) {
        Some(what) => Err(ReadError::whole(ReadErrorKind::NotAFile { what })),
        None => Ok(()),
    }
}

/// Opens `path` read-only without waiting on it: a FIFO with no writer
/// opens at once (and is then refused by its type).
#[cfg(unix)]
fn open_nonblocking(path: &Path) -> io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    Ok(File::from(rustix::fs::open(path, flags, Mode::empty())?))
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> io::Result<File> {
    File::open(path)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn fifos_devices_and_folders_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f.trace.json");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let err = TraceFile::open(&fifo).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "cannot read trace {}: it is a FIFO (named pipe), not a regular file: traces are read from regular files only",
                fifo.display()
            )
        );
        let zero = dir.path().join("z.json");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let err = TraceFile::open(&zero).unwrap_err();
        assert!(matches!(err.kind(), ReadErrorKind::NotAFile { what: "a character device" }), "{err}");
        assert!(matches!(TraceFile::open(dir.path()).unwrap_err().kind(), ReadErrorKind::NotAFile { .. }));
        let missing = TraceFile::open(&dir.path().join("missing.json")).unwrap_err();
        assert!(matches!(missing.kind(), ReadErrorKind::Io(_)), "{missing}");
    }

    #[test]
    fn reading_stops_at_the_size_when_opened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        std::fs::write(&path, b"[{}]").unwrap();
        let mut file = TraceFile::open(&path).unwrap();
        std::fs::write(&path, b"[{},{},{}]").unwrap();
        let mut text = String::new();
        file.read_to_string(&mut text).unwrap();
        assert_eq!((text.as_str(), file.len()), ("[{},", 4));
    }
}
