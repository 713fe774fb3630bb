//! The peaks cache: one small JSON file per device, backend and software version (see
//! [the module docs](super#the-cache)).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use steptrace::format::peaks::Peaks;

use super::{PeaksError, PeaksKey};

/// A peaks file is a few KiB; a larger file is not one.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// Where steptrace keeps peaks by default: `$STEPTRACE_CACHE_DIR/peaks` when that variable is
/// set, else `$XDG_CACHE_HOME/steptrace/peaks`, else `~/.cache/steptrace/peaks` (else
/// `<tmp>/steptrace/peaks`): beside cubecl's caches, which steptrace keeps under the same
/// root.
pub fn default_dir() -> PathBuf {
    if let Some(dir) = steptrace::settings::cache_dir() {
        return dir.join("peaks");
    }
    let non_empty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    non_empty("XDG_CACHE_HOME")
        .or_else(|| non_empty("HOME").map(|h| h.join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("steptrace")
        .join("peaks")
}

/// Peaks read from the cache, and the file they came from.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedPeaks {
    /// The peaks.
    pub peaks: Peaks,
    /// The file.
    pub path: PathBuf,
}

/// A folder of peaks files.
///
/// # Examples
///
/// ```
/// use steptrace_burn::peaks::PeaksCache;
///
/// let cache = PeaksCache::new(std::env::temp_dir().join("steptrace-doc-peaks"));
/// let selection = steptrace_burn::backend::select(steptrace_burn::backend::BackendChoice::Cpu)?;
/// // Never measures: the file of this device, or `None`.
/// let found = cache.load(&steptrace_burn::peaks::PeaksKey::of(&selection)).ok().flatten();
/// # let _ = found;
/// # Ok::<(), steptrace_burn::backend::BackendError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeaksCache {
    dir: PathBuf,
}

impl Default for PeaksCache {
    /// The cache at [`default_dir`].
    fn default() -> Self {
        PeaksCache::new(default_dir())
    }
}

impl PeaksCache {
    /// The cache in `dir` (created when peaks are first stored).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        PeaksCache { dir: dir.into() }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file that holds (or would hold) `key`'s peaks.
    pub fn path(&self, key: &PeaksKey) -> PathBuf {
        self.dir.join(key.file_name())
    }

    /// The peaks cached for `key`; `Ok(None)` when there is no file. Never measures.
    ///
    /// # Errors
    ///
    /// A file that exists but cannot be used: unreadable ([`PeaksError::Read`]), not a
    /// regular file or too large ([`PeaksError::NotAPeaksFile`]), not a peaks file's JSON
    /// ([`PeaksError::Corrupt`]), or another key's peaks ([`PeaksError::Foreign`]).
    pub fn load(&self, key: &PeaksKey) -> Result<Option<CachedPeaks>, PeaksError> {
        let path = self.path(key);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(PeaksError::Read { path, source }),
        };
        if !meta.file_type().is_file() {
            let what = if meta.is_dir() { "a directory, not a file" } else { "not a regular file" };
            return Err(PeaksError::NotAPeaksFile { path, what: what.to_owned() });
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let me = rustix::process::geteuid().as_raw();
            if meta.uid() != me {
                let what = format!(
                    "owned by another user (uid {}, this process runs as {me}): a file planted in a shared cache \
                     folder is not trusted",
                    meta.uid()
                );
                return Err(PeaksError::NotAPeaksFile { path, what });
            }
        }
        if meta.len() > MAX_FILE_BYTES {
            let what = format!("{} KiB, larger than any peaks file", meta.len() / 1024);
            return Err(PeaksError::NotAPeaksFile { path, what });
        }
        let mut text = Vec::new();
        let read = std::fs::File::open(&path).and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut text));
        if let Err(source) = read {
            return Err(PeaksError::Read { path, source });
        }
        let peaks: Peaks = match serde_json::from_slice(&text) {
            Ok(peaks) => peaks,
            Err(source) => return Err(PeaksError::Corrupt { path, source }),
        };
        if let Some(what) = key.mismatch(&peaks) {
            return Err(PeaksError::Foreign { path, what });
        }
        // A figure no device measures (zero, negative, beyond any device) is not a
        // measurement: the file is refused rather than printed and copied into every trace.
        let unusable = peaks.unusable_figures();
        if !unusable.is_empty() {
            let what = steptrace::display::line(&format!("figures no device measures: {}", unusable.join("; ")));
            return Err(PeaksError::NotAPeaksFile { path, what });
        }
        Ok(Some(CachedPeaks { peaks, path }))
    }

    /// Writes `peaks` as the file of `key`, atomically: to a temporary file in the same
    /// folder, then renamed over the old one, so that a reader never sees half a file.
    /// Returns the file.
    ///
    /// # Errors
    ///
    /// [`PeaksError::Write`] when the folder cannot be made or the file written.
    pub fn store(&self, key: &PeaksKey, peaks: &Peaks) -> Result<PathBuf, PeaksError> {
        let path = self.path(key);
        let write_err = |source| PeaksError::Write { path: path.clone(), source };
        std::fs::create_dir_all(&self.dir).map_err(write_err)?;
        let mut text = serde_json::to_vec_pretty(peaks).map_err(|e| write_err(std::io::Error::other(e)))?;
        text.push(b'\n');
        let tmp = self.dir.join(format!(".{}.{}.tmp", key.file_name(), std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .and_then(|mut f| f.write_all(&text).and_then(|()| f.sync_all()))
            .and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(write_err(e));
        }
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use steptrace::format::peaks::{Measured, PEAKS_VERSION};

    use super::*;
    use crate::backend::BackendKind;

    fn key() -> PeaksKey {
        PeaksKey { backend: BackendKind::Cpu, device: "test cpu".into(), software: "burn test".into(), cpu: true }
    }

    fn peaks(key: &PeaksKey) -> Peaks {
        Peaks {
            version: PEAKS_VERSION,
            device: key.device.clone(),
            backend: key.backend.to_string(),
            software: key.software.clone(),
            measured_at: "2026-12-05T10:00:00Z".into(),
            read: Some(Measured { value: 1e10, spread: 0.1, method: "sum".into() }),
            write: None,
            copy: None,
            flops: BTreeMap::new(),
            launch_us: None,
            published: BTreeMap::new(),
            problems: vec![],
            cpu: true,
        }
    }

    #[test]
    fn stored_then_loaded() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let cache = PeaksCache::new(tmp.path().join("peaks"));
        let k = key();
        assert_eq!(cache.load(&k).expect("no file is no error"), None);
        let p = peaks(&k);
        let path = cache.store(&k, &p).expect("stored");
        assert_eq!(path, cache.path(&k));
        let found = cache.load(&k).expect("read").expect("found");
        assert_eq!(found.peaks, p);
        // Stored again over it: the temporary file does not stay behind.
        cache.store(&k, &p).expect("stored again");
        let names: Vec<_> = std::fs::read_dir(cache.dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn unusable_files_are_errors_not_panics() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let cache = PeaksCache::new(tmp.path());
        let k = key();
        let path = cache.path(&k);
        for (content, want) in [("{not json", "corrupt"), ("", "corrupt"), ("[1,2]", "corrupt")] {
            std::fs::write(&path, content).unwrap();
            let err = cache.load(&k).expect_err(content);
            assert!(err.is_unusable_cache() && err.to_string().contains(want), "{err}");
        }
        let mut other = peaks(&k);
        other.software = "burn 0.21.0".into();
        std::fs::write(&path, serde_json::to_vec(&other).unwrap()).unwrap();
        let err = cache.load(&k).expect_err("foreign");
        assert!(
            matches!(err, PeaksError::Foreign { .. }) && err.to_string().contains("measured with burn 0.21.0"),
            "{err}"
        );
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let err = cache.load(&k).expect_err("a directory");
        assert!(err.to_string().contains("a directory"), "{err}");
    }

    /// A figure no device measures is refused, not printed as measured and copied into traces.
    #[test]
    fn implausible_figures_are_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let cache = PeaksCache::new(tmp.path());
        let k = key();
        for value in [0.0, -5e10, 1e300] {
            let mut p = peaks(&k);
            p.read = Some(Measured { value, spread: 0.0, method: "planted".into() });
            std::fs::write(cache.path(&k), serde_json::to_vec(&p).unwrap()).unwrap();
            let err = cache.load(&k).expect_err("an implausible figure");
            assert!(matches!(err, PeaksError::NotAPeaksFile { .. }), "{value}: {err}");
            assert!(err.to_string().contains("read bandwidth"), "{err}");
        }
    }

    /// A file another user put in the cache folder is not read (where this process may give
    /// a file away: as root).
    #[cfg(unix)]
    #[test]
    fn another_users_file_is_not_trusted() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let cache = PeaksCache::new(tmp.path());
        let k = key();
        let path = cache.store(&k, &peaks(&k)).expect("stored");
        if std::os::unix::fs::chown(&path, Some(4_242_424), None).is_err() {
            eprintln!("this process cannot give a file away: skipped");
            return;
        }
        let err = cache.load(&k).expect_err("planted by another user");
        assert!(err.to_string().contains("owned by another user (uid 4242424"), "{err}");
    }

    #[test]
    fn an_unwritable_folder_is_an_error() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let blocker = tmp.path().join("file");
        std::fs::write(&blocker, "x").unwrap();
        let cache = PeaksCache::new(blocker.join("peaks"));
        let err = cache.store(&key(), &peaks(&key())).expect_err("a file where the folder would be");
        assert!(matches!(err, PeaksError::Write { .. }), "{err}");
    }
}
