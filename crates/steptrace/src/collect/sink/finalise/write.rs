//! Writing the final file, and linking it into place without replacing
//! anything.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::super::names::finishing_path;

use crate::format::device::DeviceProperties;
use crate::format::TraceMetadata;

/// How many names [`create_exclusive`] tries before giving up.
const NAME_TRIES: u32 = 64;

/// Creates a new temporary file for `final_path`: `.NAME.finishing`, or, if
/// someone else holds that name, `.NAME.PID-N.finishing`. Never opens an
/// existing file, so the caller may delete what it gets back (and nothing
/// else).
pub(super) fn create_exclusive(final_path: &Path) -> io::Result<(PathBuf, File)> {
    let pid = std::process::id();
    let mut last = None;
    for n in 0..NAME_TRIES {
        let tag = (n > 0).then(|| format!("{pid}-{n}"));
        let path = finishing_path(final_path, tag.as_deref());
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => return Ok((path, file)),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => last = Some(err),
            Err(err) => return Err(err),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::AlreadyExists, "no free temporary name")))
}

/// Writes the final file into `file` (created by [`create_exclusive`]) as
/// its events come: opened by `head` (a rank's `distributedInfo`) when
/// given, then each event, then [`finish`](EventWriter::finish) writes the
/// metadata.
pub(super) struct EventWriter {
    out: io::BufWriter<File>,
    events: usize,
}

impl EventWriter {
    pub(super) fn new(file: File, head: Option<&str>) -> io::Result<EventWriter> {
        let mut out = io::BufWriter::with_capacity(1 << 16, file);
        match head {
            Some(head) => {
                out.write_all(head.as_bytes())?;
                out.write_all(b"\"traceEvents\":[\n")?;
            }
            None => out.write_all(b"{\"traceEvents\":[\n")?,
        }
        Ok(EventWriter { out, events: 0 })
    }

    /// Writes one event line.
    pub(super) fn event(&mut self, line: &[u8]) -> io::Result<()> {
        if self.events > 0 {
            self.out.write_all(b",\n")?;
        }
        self.out.write_all(line)?;
        self.events += 1;
        Ok(())
    }

    /// Events written so far.
    pub(super) fn events(&self) -> usize {
        self.events
    }

    /// Closes the event array, writes the devices and the metadata, and
    /// syncs the file; its size.
    pub(super) fn finish(mut self, metadata: &TraceMetadata, devices: &[DeviceProperties]) -> io::Result<u64> {
        let out = &mut self.out;
        out.write_all(b"\n],\n\"displayTimeUnit\":\"ms\",\n")?;
        if !devices.is_empty() {
            out.write_all(b"\"deviceProperties\":")?;
            serde_json::to_writer(&mut *out, devices)?;
            out.write_all(b",\n")?;
        }
        out.write_all(b"\"metadata\":")?;
        serde_json::to_writer_pretty(&mut *out, metadata)?;
        out.write_all(b"}\n")?;
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok(file.metadata()?.len())
    }
}

/// Links `from` to `to` only if `to` does not exist.
pub(crate) fn link_no_clobber(from: &Path, to: &Path) -> io::Result<()> {
    match fs::hard_link(from, to) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Err(err),
        // Filesystems without hard links: check, then rename.
        Err(_) if !to.exists() => fs::rename(from, to),
        Err(_) => Err(io::Error::new(io::ErrorKind::AlreadyExists, "destination exists")),
    }
}
