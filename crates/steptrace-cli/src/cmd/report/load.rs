//! The traces `report` reads: files, or the most recent run of a folder,
//! each read once.
//!
//! A file given twice (the same canonical path) or a copy of one (the same
//! bytes under another name) is read once, with a warning: counted twice,
//! its steps would weigh double in every figure. A folder stands for its
//! most recent run: its `*.trace.json` files (also `.gz`) and the
//! `*.trace.json.partial` files a crash or Ctrl-C leaves, which are read
//! as cut short, in it and in its folders one level down (each cycle of a
//! run of several ranks has its own folder). Beside steptrace's runs, a file
//! that cannot say its run (no steptrace metadata: cut short, or another
//! program's) is left out with a warning naming it, never taken for a run
//! of its own; a file whose steptrace metadata does not read is an error.
//!
//! Files are read as they are parsed, never held whole, nor their events:
//! each is kept as what the report reads of it ([`LoadedTrace`]: its spans
//! and device work, built event by event). A folder's files
//! are first read for their run alone (their metadata and first events,
//! their bytes hashed on the way), then the most recent run's in full; a
//! file given by name is hashed before it is parsed, so that a copy is
//! never parsed nor held. Only regular files are read: a FIFO or a device
//! named as a trace is refused, and skipped with a warning in a folder.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap};
use std::hash::Hasher;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use steptrace::analysis::LoadedTrace;
use steptrace::display::escape;
use steptrace::reader::{read_trace_head, ReadError, ReadErrorKind, Trace, TraceFile};

/// The events of a file read for its run alone: steptrace's header event
/// is among a partial file's first events.
const HEAD_EVENTS: usize = 16;

/// The files read, and what was set aside.
pub(crate) struct Loaded {
    pub(crate) files: Vec<(String, LoadedTrace)>,
    pub(crate) warnings: Vec<String>,
}

/// Reads the given files; a directory stands for its most recent run.
pub(crate) fn load(paths: &[PathBuf]) -> anyhow::Result<Loaded> {
    let mut seen = Seen::default();
    let mut files = Vec::new();
    for path in paths {
        let chosen = if path.is_dir() { latest_run(path, &mut seen)? } else { vec![(path.clone(), None)] };
        for (path, digest) in chosen {
            if seen.again(&path) {
                continue;
            }
            // A copy is known by its bytes before it is parsed: never held twice.
            let digest = match digest {
                Some(digest) => digest,
                None => {
                    hashed(TraceFile::open(&path)?, |file, _| io::copy(file, &mut io::sink()))
                        .map_err(|err| ReadError::io(&path, err))?
                        .1
                }
            };
            if !seen.copy(&path, digest) {
                let file = TraceFile::open(&path)?;
                let size = file.len();
                files.push((
                    path.display().to_string(),
                    LoadedTrace::read(file, size).map_err(|err| err.with_path(&path))?,
                ));
            }
        }
    }
    Ok(Loaded { files, warnings: seen.warnings })
}

/// A file's size and a hash of its bytes.
type Digest = (u64, u64);

/// What `read` makes of `file` (given its size), and the digest of the bytes it read.
fn hashed<T, E>(file: TraceFile, read: impl FnOnce(&mut dyn Read, u64) -> Result<T, E>) -> Result<(T, Digest), E> {
    let size = file.len();
    let mut hashing = Hashing { inner: file, hasher: DefaultHasher::new(), len: 0 };
    let value = read(&mut hashing, size)?;
    Ok((value, (hashing.len, hashing.hasher.finish())))
}

/// A reader that hashes the bytes it passes on.
struct Hashing<R> {
    inner: R,
    hasher: DefaultHasher,
    len: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let read = buf.get(..n).unwrap_or_default();
        self.hasher.write(read);
        self.len += n as u64;
        Ok(n)
    }
}

/// The files read so far, by canonical path and by content.
#[derive(Default)]
struct Seen {
    paths: HashMap<PathBuf, String>,
    contents: HashMap<Digest, Vec<(PathBuf, String)>>,
    warnings: Vec<String>,
}

impl Seen {
    /// Whether the file at `path` was read already (under this name or
    /// another that leads to it); says so.
    fn again(&mut self, path: &Path) -> bool {
        let shown = path.display().to_string();
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if let Some(first) = self.paths.get(&canonical) {
            let also = if *first == shown { String::new() } else { format!(" (also as {})", escape(first)) };
            self.warnings.push(format!("{} is given twice{also}: read once", escape(&shown)));
            return true;
        }
        self.paths.insert(canonical, shown);
        false
    }

    /// Whether the file at `path`, just read with `digest`, is a copy of
    /// one read before; says which.
    fn copy(&mut self, path: &Path, digest: Digest) -> bool {
        let shown = path.display().to_string();
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let same = self.contents.entry(digest).or_default();
        // A hash is not proof: compare the bytes of a candidate.
        if let Some((_, first)) = same.iter().find(|(p, _)| same_bytes(p, &canonical)) {
            self.warnings.push(format!(
                "{} has the same content as {}: counted once (a copy would count its steps twice)",
                escape(&shown),
                escape(first)
            ));
            return true;
        }
        same.push((canonical, shown));
        false
    }
}

/// Whether the files at `a` and `b` hold the same bytes, read side by
/// side.
fn same_bytes(a: &Path, b: &Path) -> bool {
    let (Ok(mut a), Ok(mut b)) = (TraceFile::open(a), TraceFile::open(b)) else { return false };
    if a.len() != b.len() {
        return false;
    }
    let (mut x, mut y) = (vec![0; 64 << 10], vec![0; 64 << 10]);
    loop {
        match (fill(&mut a, &mut x), fill(&mut b, &mut y)) {
            (Ok(0), Ok(0)) => return true,
            (Ok(n), Ok(m)) if n == m && x.get(..n) == y.get(..m) => {}
            _ => return false,
        }
    }
}

/// Reads until `buf` is full or the end.
fn fill(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(n)
}

/// How a folder's file is named: a finished trace, or one cut short.
fn kind_of(name: &str) -> Option<bool> {
    let finished = name.ends_with(".trace.json") || name.ends_with(".trace.json.gz");
    let partial = name.ends_with(".trace.json.partial");
    (finished || partial).then_some(partial)
}

/// The run a trace belongs to: its start time and worker; `None` for a
/// file without steptrace's part (another program's trace, or a steptrace
/// file cut short before its metadata).
fn run_key(path: &Path, trace: &Trace) -> anyhow::Result<Option<(u64, String)>> {
    let st = trace
        .steptrace()
        .with_context(|| format!("{}: its steptrace metadata does not read", escape(&path.display().to_string())))?;
    Ok(st.map(|s| {
        let worker = s.metadata.as_ref().and_then(|m| m.worker.clone()).or(s.header.as_ref().map(|h| h.worker.clone()));
        (s.epoch_unix_ms().unwrap_or(0), worker.unwrap_or_default())
    }))
}

/// The paths in `dir` and in its folders one level down (where a run of
/// several ranks keeps each cycle's files), in no particular order; not
/// the folders themselves.
fn candidates(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let list = |d: &Path| -> anyhow::Result<Vec<PathBuf>> {
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(d).with_context(|| format!("cannot list {}", d.display()))? {
            paths.push(entry.with_context(|| format!("cannot list {}", d.display()))?.path());
        }
        Ok(paths)
    };
    let mut out = Vec::new();
    for path in list(dir)? {
        if path.is_dir() {
            // A folder that cannot be listed holds nothing of ours.
            out.extend(list(&path).unwrap_or_default().into_iter().filter(|p| !p.is_dir()));
        } else {
            out.push(path);
        }
    }
    Ok(out)
}

/// The files of the most recent run in `dir`, by name, with their digests.
fn latest_run(dir: &Path, seen: &mut Seen) -> anyhow::Result<Vec<(PathBuf, Option<Digest>)>> {
    let mut all = Vec::new();
    let mut skipped = Vec::new();
    for path in candidates(dir)? {
        let Some(partial) = path.file_name().and_then(|n| n.to_str()).and_then(kind_of) else { continue };
        let file = match TraceFile::open(&path) {
            Ok(file) => file,
            // A FIFO or a device named like a trace is not opened.
            Err(err) if matches!(err.kind(), ReadErrorKind::NotAFile { .. }) => {
                skipped.push(format!("skipped {}: {}", escape(&path.display().to_string()), err.kind()));
                continue;
            }
            Err(err) => return Err(err.into()),
        };
        let trace = match hashed(file, |file, size| read_trace_head(file, size, HEAD_EVENTS)) {
            Ok(read) => read,
            // A crash can leave a partial file with nothing readable in it.
            Err(err) if partial => {
                seen.warnings.push(format!("skipped {}", escape(&err.with_path(&path).to_string())));
                continue;
            }
            Err(err) => return Err(err.with_path(&path).into()),
        };
        let (trace, digest) = trace;
        all.push((run_key(&path, &trace)?, path, partial, digest));
    }
    // Beside steptrace's runs, a file that cannot say its run is not taken for a run of its own.
    if all.iter().any(|(k, ..)| k.is_some()) {
        all.retain(|(k, path, partial, _)| {
            if k.is_none() {
                seen.warnings.push(format!(
                    "{}: left out: it holds no steptrace metadata to tell which run it belongs to ({}); pass it by name \
                     to read it",
                    escape(&path.display().to_string()),
                    if *partial { "a .partial file without its header" } else { "a steptrace file cut short, or another program's trace" }
                ));
            }
            k.is_some()
        });
    }
    if all.is_empty() {
        let also = if skipped.is_empty() { String::new() } else { format!("; {}", skipped.join("; ")) };
        bail!(
            "{} holds no *.trace.json file, in it or one folder down (nor a readable *.trace.json.partial){also}",
            dir.display()
        );
    }
    seen.warnings.extend(skipped);
    let partial_count = all.iter().filter(|(_, _, p, _)| *p).count();
    let runs: BTreeSet<_> = all.iter().map(|(k, ..)| k.clone()).collect();
    let latest = runs.iter().next_back().cloned().unwrap_or_default();
    if runs.len() > 1 {
        eprintln!(
            "{} holds {} runs: reporting the most recent one (worker `{}`); pass files to choose another",
            dir.display(),
            runs.len(),
            escape(latest.as_ref().map_or("", |k| k.1.as_str()))
        );
    }
    if partial_count == all.len() {
        eprintln!(
            "{} holds only .partial files: traces cut short (a crash, a second Ctrl-C, a failed write or a failed host allocation inside a cycle); reading their complete \
             events",
            dir.display()
        );
    }
    let mut files: Vec<(PathBuf, Option<Digest>)> =
        all.into_iter().filter(|(k, ..)| *k == latest).map(|(_, p, _, d)| (p, Some(d))).collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

/// The device limits in `path` (`steptrace peaks --json`, or a cache file of it): a regular
/// file, read up to 1 MiB.
pub(crate) fn peaks(path: &Path) -> anyhow::Result<steptrace::format::peaks::Peaks> {
    const CAP: u64 = 1 << 20;
    let shown = escape(&path.display().to_string()).into_owned();
    let file = TraceFile::open(path)?;
    let mut bytes = Vec::new();
    file.take(CAP + 1).read_to_end(&mut bytes).with_context(|| format!("cannot read {shown}"))?;
    if bytes.len() as u64 > CAP {
        bail!("{shown} is larger than 1 MiB: not a file of device limits (`steptrace peaks --json` writes one)");
    }
    let peaks: steptrace::format::peaks::Peaks = serde_json::from_slice(&bytes)
        .with_context(|| format!("{shown} holds no device limits (`steptrace peaks --json` writes them)"))?;
    // Another layout's file, or one with no usable bandwidth or f32 throughput, is refused
    // here, by name, rather than read as limits the trace does not have.
    if let Err(why) = peaks.check() {
        bail!("{shown}: {}", steptrace::display::line(&why));
    }
    Ok(peaks)
}
