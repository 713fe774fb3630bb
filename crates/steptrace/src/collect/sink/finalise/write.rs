//! Writing the final file, and linking it into place without replacing
//! anything.

use std::borrow::Cow;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use crate::format::device::DeviceProperties;
use crate::format::TraceMetadata;

pub(super) fn write_final(
    path: &Path,
    events: &[Cow<'_, [u8]>],
    metadata: &TraceMetadata,
    devices: &[DeviceProperties],
) -> io::Result<u64> {
    let file = OpenOptions::new().write(true).create_new(true).open(path)?;
    let mut out = io::BufWriter::with_capacity(1 << 16, file);
    out.write_all(b"{\"traceEvents\":[\n")?;
    for (i, event) in events.iter().enumerate() {
        if i > 0 {
            out.write_all(b",\n")?;
        }
        out.write_all(event)?;
    }
    out.write_all(b"\n],\n\"displayTimeUnit\":\"ms\",\n")?;
    if !devices.is_empty() {
        out.write_all(b"\"deviceProperties\":")?;
        serde_json::to_writer(&mut out, devices)?;
        out.write_all(b",\n")?;
    }
    out.write_all(b"\"metadata\":")?;
    serde_json::to_writer_pretty(&mut out, metadata)?;
    out.write_all(b"}\n")?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(file.metadata()?.len())
}

/// Links `from` to `to` only if `to` does not exist.
pub(super) fn link_no_clobber(from: &Path, to: &Path) -> io::Result<()> {
    match fs::hard_link(from, to) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Err(err),
        // Filesystems without hard links: check, then rename.
        Err(_) if !to.exists() => fs::rename(from, to),
        Err(_) => Err(io::Error::new(io::ErrorKind::AlreadyExists, "destination exists")),
    }
}
