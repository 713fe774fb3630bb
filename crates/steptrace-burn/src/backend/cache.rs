//! Persistent cubecl caches (autotune results, compiled CUDA kernels).
//!
//! cubecl 0.10 keeps its settings in one process-wide `CubeClRuntimeConfig`, loaded lazily
//! from `cubecl.toml` / `burn.toml [cubecl]` (searched upwards from the working directory)
//! the first time a runtime needs it, and settable exactly once before that
//! (`RuntimeConfig::set` panics afterwards). By default its autotune cache lives in
//! `target/` beside the nearest `Cargo.toml` (else the user cache dir) and its compilation
//! cache is off. [`configure_cubecl_cache`] keeps every other setting of those files (and of
//! the `CUBECL_*` environment variables) and points both caches at one directory:
//!
//! * autotune results: `<dir>/autotune/<cubecl version>/<device>/<op>.json.log`
//! * compiled kernels: `<dir>/cuda/<cubecl version>/ptx/...` — cubecl 0.10 has a
//!   compilation cache for CUDA (PTX) and HIP only; wgpu recompiles shaders every run.

use std::path::{Path, PathBuf};
#[cfg(any(feature = "cuda", feature = "wgpu"))]
use std::sync::Arc;

#[cfg(any(feature = "cuda", feature = "wgpu"))]
use cubecl::config::cache::CacheConfig as CubeCacheConfig;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
use cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};

#[cfg(any(feature = "cuda", feature = "wgpu"))]
use super::guard::catch_silently;

/// Where steptrace keeps cubecl's caches, and whether to use them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CacheConfig {
    /// Cache root. Default: `$STEPTRACE_CACHE_DIR`, else `$XDG_CACHE_HOME/steptrace/cubecl`,
    /// else `~/.cache/steptrace/cubecl` (else `<tmp>/steptrace/cubecl`).
    pub dir: PathBuf,
    /// When `false`, cubecl's configuration is left untouched.
    pub enabled: bool,
}

impl CacheConfig {
    /// The default cache root (see [`CacheConfig::dir`]).
    pub fn default_dir() -> PathBuf {
        let non_empty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        if let Some(dir) = non_empty("STEPTRACE_CACHE_DIR") {
            return dir;
        }
        let cache_home = non_empty("XDG_CACHE_HOME")
            .or_else(|| non_empty("HOME").map(|h| h.join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        cache_home.join("steptrace").join("cubecl")
    }

    /// An enabled cache at `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        CacheConfig {
            dir: dir.into(),
            enabled: true,
        }
    }
}

impl Default for CacheConfig {
    /// Enabled, at [`CacheConfig::default_dir`].
    fn default() -> Self {
        CacheConfig::at(CacheConfig::default_dir())
    }
}

/// What [`configure_cubecl_cache`] did, for the run manifest.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CacheState {
    /// The cache root.
    pub dir: PathBuf,
    /// Whether cubecl's compilation cache (CUDA PTX; cubecl 0.10 has none for wgpu) is on
    /// and stored under `dir`.
    pub compilation_cache: bool,
    /// Whether cubecl's autotune cache is stored under `dir`.
    pub autotune_cache: bool,
    /// Whether `dir` already held cache files before this run (a warm start: fewer
    /// compilations and autotune runs in the first steps).
    pub warm: bool,
    /// Number of files under `dir` before this run.
    pub files_before: usize,
    /// Why the caches are not (both) under `dir`, when they are not: disabled, directory not
    /// creatable, or cubecl's configuration was already fixed before this call.
    pub note: Option<String>,
}

/// Points cubecl's autotune cache at `cfg.dir` and turns its compilation cache on there.
///
/// Must run before the first backend client is created (before [`run_on`](super::run_on)).
/// Never panics. If cubecl's configuration is already fixed (set, or read by a runtime that
/// started earlier), it is left alone and the returned state says where the caches
/// actually are; calling this twice with the same directory is harmless. A build without
/// the `cuda` and `wgpu` features has no cubecl runtime: nothing is configured, and the
/// state's note says so.
pub fn configure_cubecl_cache(cfg: &CacheConfig) -> CacheState {
    let dir = cfg.dir.clone();
    let mut state = CacheState {
        dir: dir.clone(),
        compilation_cache: false,
        autotune_cache: false,
        warm: false,
        files_before: 0,
        note: None,
    };
    if !cfg.enabled {
        state.files_before = count_cache_files(&dir);
        state.note = Some("steptrace cache disabled; cubecl defaults apply".to_string());
        return state;
    }
    if let Err(e) = std::fs::create_dir_all(&dir) {
        state.note = Some(format!("cannot create {}: {e}; cubecl defaults apply", dir.display()));
        return state;
    }
    state.files_before = count_cache_files(&dir);
    state.warm = state.files_before > 0;
    install(&dir, &mut state);
    state
}

/// Installs cubecl's configuration with both caches under `dir`, or records in `state`
/// where they are if cubecl's configuration was already fixed.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn install(dir: &Path, state: &mut CacheState) {
    // Keep what cubecl.toml / burn.toml / CUBECL_* say; a malformed file makes cubecl panic,
    // in which case its defaults are used.
    let (mut config, load_note) =
        match catch_silently(|| CubeClRuntimeConfig::from_current_dir().override_from_env()) {
            Ok(c) => (c, None),
            Err(panic) => (
                CubeClRuntimeConfig::default(),
                Some(format!("cubecl config file ignored ({panic})")),
            ),
        };
    config.autotune.cache = CubeCacheConfig::File(dir.to_path_buf());
    config.compilation.cache = Some(CubeCacheConfig::File(dir.to_path_buf()));

    let installed = {
        let mut slot = CubeClRuntimeConfig::storage().lock();
        match slot.as_ref() {
            Some(existing) => Err(Arc::clone(existing)),
            None => {
                *slot = Some(Arc::new(config));
                Ok(())
            }
        }
    };
    match installed {
        Ok(()) => {
            state.compilation_cache = true;
            state.autotune_cache = true;
            state.note = load_note;
        }
        Err(existing) => {
            state.autotune_cache = points_at(Some(&existing.autotune.cache), dir);
            state.compilation_cache = points_at(existing.compilation.cache.as_ref(), dir);
            if !(state.autotune_cache && state.compilation_cache) {
                state.note = Some(format!(
                    "cubecl's configuration was already fixed before configure_cubecl_cache \
                     (a backend client was created first); autotune cache: {}, compilation \
                     cache: {}",
                    describe(Some(&existing.autotune.cache)),
                    describe(existing.compilation.cache.as_ref()),
                ));
            }
        }
    }
}

/// Without a cubecl backend there is nothing to configure.
#[cfg(not(any(feature = "cuda", feature = "wgpu")))]
fn install(_dir: &Path, state: &mut CacheState) {
    state.note = Some(
        "steptrace-burn was built without its `cuda` and `wgpu` features: no cubecl runtime, \
         no cubecl caches"
            .to_string(),
    );
}

#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn points_at(cache: Option<&CubeCacheConfig>, dir: &Path) -> bool {
    matches!(cache, Some(CubeCacheConfig::File(p)) if p == dir)
}

#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn describe(cache: Option<&CubeCacheConfig>) -> String {
    match cache {
        None => "off".to_string(),
        Some(CubeCacheConfig::File(p)) => p.display().to_string(),
        Some(CubeCacheConfig::Target) => "target/ beside the nearest Cargo.toml".to_string(),
        Some(CubeCacheConfig::Local) => "the working directory".to_string(),
        Some(CubeCacheConfig::Global) => "the user's local config directory".to_string(),
    }
}

/// Number of regular files below `dir` (0 if it does not exist). Symlinks are not followed.
pub fn count_cache_files(dir: &Path) -> usize {
    let mut count = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(entry.path()),
                Ok(t) if t.is_file() => count += 1,
                _ => {}
            }
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    const CHILD_ENV: &str = "STEPTRACE_CACHE_TEST_DIR";

    #[test]
    fn default_dir_respects_env_precedence() {
        // Only checks the shape: the env of the test process is not ours to change.
        let d = CacheConfig::default_dir();
        if std::env::var_os("STEPTRACE_CACHE_DIR").is_none() {
            assert!(d.ends_with("steptrace/cubecl"), "{}", d.display());
        }
        assert!(CacheConfig::default().enabled);
    }

    #[test]
    fn counting_files() {
        let tmp = tempfile::tempdir().expect("tempdir");
        assert_eq!(count_cache_files(&tmp.path().join("missing")), 0);
        std::fs::create_dir_all(tmp.path().join("a/b")).expect("mkdir");
        std::fs::write(tmp.path().join("a/b/x.json.log"), "x").expect("write");
        std::fs::write(tmp.path().join("top"), "y").expect("write");
        assert_eq!(count_cache_files(tmp.path()), 2);
    }

    #[test]
    fn disabled_leaves_cubecl_alone() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let s = configure_cubecl_cache(&CacheConfig {
            dir: tmp.path().join("c"),
            enabled: false,
        });
        assert!(!s.compilation_cache && !s.autotune_cache && !s.warm);
        assert!(s.note.is_some());
    }

    /// cubecl's configuration can be set once per process, and other tests in this binary
    /// create backend clients: the real check runs in a fresh child process.
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    #[test]
    fn cold_then_warm_in_a_fresh_process() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let exe = std::env::current_exe().expect("test binary");
        let status = std::process::Command::new(exe)
            .args(["--exact", "backend::cache::tests::child_cold_then_warm", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, tmp.path())
            .status()
            .expect("spawn child test");
        assert!(status.success(), "child test failed: {status}");
    }

    /// Runs only as the child of [`cold_then_warm_in_a_fresh_process`].
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    #[test]
    fn child_cold_then_warm() {
        let Some(root) = std::env::var_os(CHILD_ENV) else {
            return;
        };
        let cfg = CacheConfig::at(PathBuf::from(root).join("cubecl"));

        let cold = configure_cubecl_cache(&cfg);
        assert_eq!(cold.files_before, 0);
        assert!(!cold.warm);
        assert!(cold.compilation_cache && cold.autotune_cache, "{cold:?}");
        assert_eq!(cold.note, None);

        // cubecl now uses the directory.
        let live = CubeClRuntimeConfig::get();
        assert!(points_at(Some(&live.autotune.cache), &cfg.dir));
        assert!(points_at(live.compilation.cache.as_ref(), &cfg.dir));

        // What a finished run leaves behind; the next run is warm. The config is already
        // fixed, but at the same directory, so nothing is reported as wrong.
        std::fs::create_dir_all(cfg.dir.join("autotune/0.10.0/dev")).expect("mkdir");
        std::fs::write(cfg.dir.join("autotune/0.10.0/dev/matmul.json.log"), "{}\n").expect("write");
        let warm = configure_cubecl_cache(&cfg);
        assert!(warm.warm);
        assert_eq!(warm.files_before, 1);
        assert!(warm.compilation_cache && warm.autotune_cache, "{warm:?}");
        assert_eq!(warm.note, None);

        // A different directory cannot take over any more: reported, not panicked.
        let other = configure_cubecl_cache(&CacheConfig::at(cfg.dir.join("other")));
        assert!(!other.autotune_cache && !other.compilation_cache);
        assert!(other.note.as_deref().is_some_and(|n| n.contains("already fixed")), "{other:?}");
    }
}
