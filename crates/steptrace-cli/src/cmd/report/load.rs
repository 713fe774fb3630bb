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

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use steptrace::read::display::escape;
use steptrace::reader::{parse_trace, ReadError, Trace};

/// The files read, and what was set aside.
pub(crate) struct Loaded {
    pub(crate) files: Vec<(String, Trace)>,
    pub(crate) warnings: Vec<String>,
}

/// Reads the given files; a directory stands for its most recent run.
pub(crate) fn load(paths: &[PathBuf]) -> anyhow::Result<Loaded> {
    let mut seen = Seen::default();
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            for (name, bytes) in latest_run(path, &mut seen)? {
                let trace = parse_trace(&bytes).map_err(|e| e.with_path(Path::new(&name)))?;
                files.push((name, trace));
            }
        } else {
            let bytes = std::fs::read(path).map_err(|source| ReadError::io(path, source))?;
            if seen.first_time(path, &bytes) {
                files.push((path.display().to_string(), parse_trace(&bytes).map_err(|e| e.with_path(path))?));
            }
        }
    }
    Ok(Loaded { files, warnings: seen.warnings })
}

/// The files read so far, by canonical path and by content.
#[derive(Default)]
struct Seen {
    paths: HashMap<PathBuf, String>,
    contents: HashMap<(u64, usize), Vec<(PathBuf, String)>>,
    warnings: Vec<String>,
}

impl Seen {
    /// Whether the file at `path`, holding `bytes`, is new; if not, says
    /// which file it repeats.
    fn first_time(&mut self, path: &Path, bytes: &[u8]) -> bool {
        let shown = path.display().to_string();
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if let Some(first) = self.paths.get(&canonical) {
            let also = if *first == shown { String::new() } else { format!(" (also as {})", escape(first)) };
            self.warnings.push(format!("{} is given twice{also}: read once", escape(&shown)));
            return false;
        }
        self.paths.insert(canonical.clone(), shown.clone());
        let mut hasher = DefaultHasher::new();
        bytes.hash(&mut hasher);
        let key = (hasher.finish(), bytes.len());
        let same = self.contents.entry(key).or_default();
        // A hash is not proof: compare the bytes of a candidate.
        let twin = same.iter().find(|(p, _)| std::fs::read(p).is_ok_and(|b| b == bytes)).map(|(_, s)| s.clone());
        if let Some(first) = twin {
            self.warnings.push(format!(
                "{} has the same content as {}: counted once (a copy would count its steps twice)",
                escape(&shown),
                escape(&first)
            ));
            return false;
        }
        same.push((canonical, shown));
        true
    }
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
/// several ranks keeps each cycle's files), in no particular order.
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
            out.extend(list(&path).unwrap_or_default().into_iter().filter(|p| p.is_file()));
        } else {
            out.push(path);
        }
    }
    Ok(out)
}

/// The files of the most recent run in `dir`, as `(name, bytes)`.
fn latest_run(dir: &Path, seen: &mut Seen) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut all = Vec::new();
    let mut partial_count = 0;
    for path in candidates(dir)? {
        let Some(partial) = path.file_name().and_then(|n| n.to_str()).and_then(kind_of) else { continue };
        let bytes = std::fs::read(&path).map_err(|source| ReadError::io(&path, source))?;
        let trace = match parse_trace(&bytes) {
            Ok(trace) => trace,
            // A crash can leave a partial file with nothing readable in it.
            Err(err) if partial => {
                seen.warnings.push(format!("skipped {}", escape(&err.with_path(&path).to_string())));
                continue;
            }
            Err(err) => return Err(err.with_path(&path).into()),
        };
        partial_count += usize::from(partial);
        all.push((run_key(&path, &trace)?, path, bytes, partial));
    }
    // Beside steptrace's runs, a file that cannot say its run is not taken for a run of its own.
    if all.iter().any(|(k, ..)| k.is_some()) {
        all.retain(|(k, path, _, partial)| {
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
        partial_count = all.iter().filter(|(.., p)| *p).count();
    }
    if all.is_empty() {
        bail!(
            "{} holds no *.trace.json file, in it or one folder down (nor a readable *.trace.json.partial)",
            dir.display()
        );
    }
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
            "{} holds only .partial files: traces cut short (a crash, a second Ctrl-C or a failed write inside a cycle); reading their complete \
             events",
            dir.display()
        );
    }
    let mut files: Vec<(PathBuf, Vec<u8>)> =
        all.into_iter().filter(|(k, ..)| *k == latest).map(|(_, p, b, _)| (p, b)).collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files.into_iter().filter(|(p, b)| seen.first_time(p, b)).map(|(p, b)| (p.display().to_string(), b)).collect())
}
