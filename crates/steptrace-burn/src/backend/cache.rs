//! Persistent cubecl caches (autotune results, compiled kernels), cubecl's autotune level,
//! and the autotune log sink the startup breakdown reads.
//!
//! cubecl 0.11 keeps its settings in one process-wide `CubeClRuntimeConfig`, loaded lazily
//! from `cubecl.toml` / `burn.toml [cubecl]` (searched upwards from the working directory)
//! the first time a runtime needs it, and settable exactly once before that. Its persistent
//! caches live in an *environment*: one local store (a database file) per environment name,
//! holding every cached namespace (autotune results, compiled kernels, throughput
//! measurements), under `[environment] path` (by default `target/` beside the nearest
//! `Cargo.toml`). They exist only in a build with cubecl's `persistence` feature, which
//! steptrace-burn's `cuda` and `wgpu` features turn on (through burn's). [`configure_cubecl_cache`]
//! keeps every other setting of those files (and of the `CUBECL_*` environment variables),
//! puts the environment store under one directory, and turns both caches on there:
//!
//! * autotune results: kept unless `[autotune] disable_cache` is set;
//! * compiled kernels: `[compilation] cache` (CUDA's PTX; wgpu's WGSL shaders are compiled
//!   again in every run).
//!
//! [`AutotuneLevel`] says what cubecl's autotune level does; [`configure_cubecl_cache`] says
//! which autotune log sink the startup breakdown needs and how it is added.

use std::path::{Path, PathBuf};

#[cfg(any(feature = "cuda", feature = "wgpu"))]
use cubecl::config::cache::CacheConfig as CubeCacheConfig;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
use cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};

#[cfg(any(feature = "cuda", feature = "wgpu"))]
use super::guard::catch_silently;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
use cubecl::config::autotune::{AutotuneLevel as CubeAutotuneLevel, AutotuneLogLevel};
#[cfg(any(feature = "cuda", feature = "wgpu"))]
use cubecl_environment::config::logger::LogCrateLevel;

/// Where steptrace keeps cubecl's caches, whether to use them, and cubecl's autotune level.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CacheConfig {
    /// Cache root. Default: `$STEPTRACE_CACHE_DIR`, else `$XDG_CACHE_HOME/steptrace/cubecl`,
    /// else `~/.cache/steptrace/cubecl` (else `<tmp>/steptrace/cubecl`).
    pub dir: PathBuf,
    /// When `false`, cubecl's configuration is left untouched (unless
    /// [`autotune_level`](Self::autotune_level) is set: then only the level is applied).
    pub enabled: bool,
    /// cubecl's autotune level (see [`AutotuneLevel`]); `None` keeps
    /// what cubecl's configuration says (`cubecl.toml`, `CUBECL_AUTOTUNE_LEVEL`, else
    /// `balanced`).
    #[serde(default)]
    pub autotune_level: Option<AutotuneLevel>,
}

/// cubecl's autotune levels (`--autotune-level`).
///
/// [`CacheConfig::autotune_level`] sets cubecl's `autotune.level` (what `CUBECL_AUTOTUNE_LEVEL`
/// and `[autotune] level` in `cubecl.toml` set). In cubecl 0.10 the level only changes how
/// coarsely autotune keys round their sizes (`cubecl_runtime::tune::anchor`: a base of
/// 2 × 1.25 at `minimal`, 2 at `balanced`, 2 × 0.75 at `extensive`, exact sizes at `full`). At
/// `minimal` more shapes share one tuning result, so a run whose shapes vary tunes fewer
/// times; a run of one shape tunes as often at every level. The level does not lower the
/// number of candidates benchmarked for one key, nor their samples, and nothing in cubecl
/// 0.10's configuration turns autotune off (burn's `autotune` cargo feature does, at build
/// time). cubecl reads the level once, at the first autotune key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AutotuneLevel {
    /// Coarsest keys: sizes rounded to powers of 2.5, the fewest tuning runs when shapes vary.
    Minimal,
    /// cubecl's default: sizes rounded to powers of 2.
    Balanced,
    /// Finer keys: sizes rounded to powers of 1.5.
    Extensive,
    /// Exact sizes: one tuning run per distinct shape.
    Full,
}

impl AutotuneLevel {
    /// Every level, from the cheapest start to the most tuning.
    pub const ALL: [AutotuneLevel; 4] =
        [AutotuneLevel::Minimal, AutotuneLevel::Balanced, AutotuneLevel::Extensive, AutotuneLevel::Full];

    /// The name cubecl's configuration uses: `minimal`, `balanced`, `extensive`, `full`.
    pub fn as_str(self) -> &'static str {
        match self {
            AutotuneLevel::Minimal => "minimal",
            AutotuneLevel::Balanced => "balanced",
            AutotuneLevel::Extensive => "extensive",
            AutotuneLevel::Full => "full",
        }
    }
}

impl std::fmt::Display for AutotuneLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(any(feature = "cuda", feature = "wgpu"))]
impl From<AutotuneLevel> for CubeAutotuneLevel {
    fn from(level: AutotuneLevel) -> Self {
        match level {
            AutotuneLevel::Minimal => CubeAutotuneLevel::Minimal,
            AutotuneLevel::Balanced => CubeAutotuneLevel::Balanced,
            AutotuneLevel::Extensive => CubeAutotuneLevel::Extensive,
            AutotuneLevel::Full => CubeAutotuneLevel::Full,
        }
    }
}

#[cfg(any(feature = "cuda", feature = "wgpu"))]
impl From<&CubeAutotuneLevel> for AutotuneLevel {
    fn from(level: &CubeAutotuneLevel) -> Self {
        match level {
            CubeAutotuneLevel::Minimal => AutotuneLevel::Minimal,
            CubeAutotuneLevel::Balanced => AutotuneLevel::Balanced,
            CubeAutotuneLevel::Extensive => AutotuneLevel::Extensive,
            CubeAutotuneLevel::Full => AutotuneLevel::Full,
        }
    }
}

impl CacheConfig {
    /// The default cache root (see [`CacheConfig::dir`]).
    pub fn default_dir() -> PathBuf {
        let non_empty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        if let Some(dir) = steptrace::settings::cache_dir() {
            return dir;
        }
        let cache_home = non_empty("XDG_CACHE_HOME")
            .or_else(|| non_empty("HOME").map(|h| h.join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        cache_home.join("steptrace").join("cubecl")
    }

    /// An enabled cache at `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        CacheConfig { dir: dir.into(), enabled: true, autotune_level: None }
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
    /// Whether cubecl's compilation cache (CUDA PTX; wgpu's shaders compile in every run) is
    /// on and stored under `dir`.
    pub compilation_cache: bool,
    /// Whether cubecl's autotune cache is stored under `dir`.
    pub autotune_cache: bool,
    /// Number of files under `dir` before this run. A directory with files is not a warm
    /// start by itself (they may hold another model's kernels): whether this run found what
    /// it needed there is told after step 0, from what cubecl compiled and tuned
    /// ([`StartupCapture`](super::StartupCapture)).
    pub files_before: usize,
    /// cubecl's autotune level for this process (`minimal`, `balanced`, `extensive`, `full`),
    /// or `unknown` when there is no cubecl runtime in this build.
    pub autotune_level: String,
    /// Where the level comes from: `steptrace --autotune-level`, `CUBECL_AUTOTUNE_LEVEL`, or
    /// `cubecl configuration` (a `cubecl.toml` / `burn.toml`, else cubecl's default).
    pub autotune_level_source: String,
    /// Why the caches are not (both) under `dir`, when they are not: disabled, directory not
    /// creatable, or cubecl's configuration was already fixed before this call.
    pub note: Option<String>,
}

/// Points cubecl's autotune cache at `cfg.dir`, turns its compilation cache on there, applies
/// [`CacheConfig::autotune_level`], and gives the autotune logger the sink the startup
/// breakdown reads.
///
/// # The autotune log sink
///
/// The startup breakdown ([`StartupCapture`](super::StartupCapture)) times each autotune
/// from cubecl's `Tuning {key}` log record to the autotune logger's `Fastest result` line,
/// and counts persistent-cache hits from its `validate checksum` lines, which cubecl writes
/// only at its `full` autotune log level. When the configuration gives the autotune logger
/// no `log` sink, steptrace adds one (at the `log` crate's trace level); when it gives the
/// logger no sink at all (cubecl's default: nothing is written anywhere), steptrace also
/// raises its level to `full`. Neither changes what is tuned or chosen (at `full` cubecl
/// also formats its plan while it tunes); the records of the added sink are not forwarded
/// to the trace.
///
/// # When it applies
/// Must run before the first backend client is created (before
/// [`Selection::device`](super::Selection::device)).
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
        files_before: 0,
        autotune_level: "unknown".to_string(),
        autotune_level_source: "cubecl configuration".to_string(),
        note: None,
    };
    if !cfg.enabled {
        state.files_before = count_cache_files(&dir);
        state.note = Some("steptrace cache disabled; cubecl defaults apply".to_string());
        if cfg.autotune_level.is_some() {
            install(None, cfg.autotune_level, &mut state);
        }
        return state;
    }
    if let Err(e) = std::fs::create_dir_all(&dir) {
        state.note = Some(format!("cannot create {}: {e}; cubecl defaults apply", dir.display()));
        if cfg.autotune_level.is_some() {
            install(None, cfg.autotune_level, &mut state);
        }
        return state;
    }
    state.files_before = count_cache_files(&dir);
    install(Some(&dir), cfg.autotune_level, &mut state);
    state
}

/// Installs cubecl's configuration with both caches under `dir` (when given), the autotune
/// `level` (when given) and the autotune log sink, or records in `state` what the
/// configuration already fixed says.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn install(dir: Option<&Path>, level: Option<AutotuneLevel>, state: &mut CacheState) {
    // Keep what cubecl.toml / burn.toml / CUBECL_* say; a malformed file makes cubecl panic,
    // in which case its defaults are used.
    let (mut config, load_note) = match catch_silently(|| CubeClRuntimeConfig::from_current_dir().override_from_env()) {
        Ok(c) => (c, None),
        Err(panic) => (CubeClRuntimeConfig::default(), Some(format!("cubecl config file ignored ({panic})"))),
    };
    if let Some(dir) = dir {
        config.environment.path = CubeCacheConfig::Directory(dir.to_path_buf());
        config.autotune.disable_cache = false;
        config.compilation.cache = true;
    }
    state.autotune_level_source = match level {
        Some(level) => {
            config.autotune.level = level.into();
            "steptrace --autotune-level".to_string()
        }
        None if std::env::var_os("CUBECL_AUTOTUNE_LEVEL").is_some_and(|v| !v.is_empty()) => {
            "CUBECL_AUTOTUNE_LEVEL".to_string()
        }
        None => "cubecl configuration".to_string(),
    };
    let sink = add_autotune_sink(&mut config);

    // `try_set` runs cubecl's own hook (the environment store's root, the streaming policy)
    // as `get` would; it refuses when a runtime already read or set the configuration.
    let installed = if CubeClRuntimeConfig::try_set(config) { Ok(()) } else { Err(CubeClRuntimeConfig::get()) };
    match installed {
        Ok(()) => {
            super::startup::note_autotune_sink(sink);
            state.compilation_cache = dir.is_some();
            state.autotune_cache = dir.is_some();
            state.autotune_level = AutotuneLevel::from(&CubeClRuntimeConfig::get().autotune.level).to_string();
            if dir.is_some() {
                state.note = load_note;
            }
        }
        Err(existing) => {
            state.autotune_level = AutotuneLevel::from(&existing.autotune.level).to_string();
            if level.is_some_and(|l| l != AutotuneLevel::from(&existing.autotune.level)) {
                state.autotune_level_source =
                    "cubecl configuration (already fixed: --autotune-level not applied)".to_string();
            }
            let Some(dir) = dir else { return };
            let here = points_at(&existing.environment.path, dir);
            state.autotune_cache = here && !existing.autotune.disable_cache;
            state.compilation_cache = here && existing.compilation.cache;
            if !(state.autotune_cache && state.compilation_cache) {
                state.note = Some(format!(
                    "cubecl's configuration was already fixed before configure_cubecl_cache \
                     (a backend client was created first); its caches are in {} (autotune cache {}, \
                     compilation cache {})",
                    describe(&existing.environment.path),
                    if existing.autotune.disable_cache { "off" } else { "on" },
                    if existing.compilation.cache { "on" } else { "off" },
                ));
            }
        }
    }
}

/// Gives the autotune logger a `log` sink at the `log` crate's trace level, unless it has
/// one, and raises its level to `full` when it has no sink of its own (see the [function
/// docs](configure_cubecl_cache#the-autotune-log-sink)). Returns what was added.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn add_autotune_sink(config: &mut CubeClRuntimeConfig) -> super::startup::AutotuneSink {
    let logger = &mut config.autotune.logger;
    let own_sink = logger.file.is_some() || logger.stdout || logger.stderr || logger.log.is_some();
    let mut sink = super::startup::AutotuneSink::default();
    if logger.log.is_none() {
        logger.log = Some(LogCrateLevel::Trace);
        sink.added = true;
        // The records the added sink writes are kept out of the trace, unless another
        // cubecl logger writes to the same `log` level (then they cannot be told apart).
        let shared = [
            config.compilation.logger.log,
            config.profiling.logger.log,
            config.streaming.logger.log,
            config.memory.logger.log,
        ];
        sink.private = !shared.contains(&Some(LogCrateLevel::Trace));
    }
    if !own_sink {
        logger.level = AutotuneLogLevel::Full;
    }
    sink
}

/// Without a cubecl backend there is nothing to configure.
#[cfg(not(any(feature = "cuda", feature = "wgpu")))]
fn install(_dir: Option<&Path>, _level: Option<AutotuneLevel>, state: &mut CacheState) {
    state.note = Some(
        "steptrace-burn was built without its `cuda` and `wgpu` features: no cubecl runtime, \
         no cubecl caches"
            .to_string(),
    );
}

#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn points_at(cache: &CubeCacheConfig, dir: &Path) -> bool {
    matches!(cache, CubeCacheConfig::Directory(p) if p == dir)
}

#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn describe(cache: &CubeCacheConfig) -> String {
    match cache {
        CubeCacheConfig::Directory(p) => p.display().to_string(),
        CubeCacheConfig::Target => "target/ beside the nearest Cargo.toml".to_string(),
        CubeCacheConfig::Local => "the working directory".to_string(),
        CubeCacheConfig::Global => "the user's cache directory".to_string(),
    }
}

/// Number of regular files below `dir` (0 if it does not exist). Symlinks are not followed.
/// A `peaks` folder directly in `dir` is not counted: it holds steptrace's device peaks
/// ([`crate::peaks`]), which live there when `STEPTRACE_CACHE_DIR` roots both caches.
pub fn count_cache_files(dir: &Path) -> usize {
    let mut count = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(t) if t.is_dir() && d == dir && entry.file_name() == "peaks" => {}
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
        if steptrace::settings::cache_dir().is_none() {
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
        // Steptrace's peaks beside cubecl's files are not cubecl's.
        std::fs::create_dir_all(tmp.path().join("peaks")).expect("mkdir");
        std::fs::write(tmp.path().join("peaks/cpu_x.json"), "{}").expect("write");
        assert_eq!(count_cache_files(tmp.path()), 2);
    }

    #[test]
    fn disabled_leaves_cubecl_alone() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let s =
            configure_cubecl_cache(&CacheConfig { dir: tmp.path().join("c"), enabled: false, autotune_level: None });
        assert!(!s.compilation_cache && !s.autotune_cache);
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
        let mut cfg = CacheConfig::at(PathBuf::from(root).join("cubecl"));
        cfg.autotune_level = Some(AutotuneLevel::Minimal);

        let cold = configure_cubecl_cache(&cfg);
        assert_eq!(cold.files_before, 0);
        assert!(cold.compilation_cache && cold.autotune_cache, "{cold:?}");
        assert_eq!(cold.note, None);
        assert_eq!(
            (cold.autotune_level.as_str(), cold.autotune_level_source.as_str()),
            ("minimal", "steptrace --autotune-level")
        );

        // cubecl now uses the directory, the level, and the autotune log sink.
        let live = CubeClRuntimeConfig::get();
        assert!(points_at(&live.environment.path, &cfg.dir));
        assert!(!live.autotune.disable_cache && live.compilation.cache);
        assert!(matches!(live.autotune.level, CubeAutotuneLevel::Minimal));
        if std::env::var_os("CUBECL_DEBUG_LOG").is_none() {
            // No sink of the user's: the added one, at cubecl's `full` level.
            assert_eq!(live.autotune.logger.log, Some(LogCrateLevel::Trace));
            assert!(matches!(live.autotune.logger.level, AutotuneLogLevel::Full));
        }

        // What a finished run leaves behind. The config is already fixed, but at the same
        // directory, so nothing is reported as wrong; the files say nothing of a label.
        std::fs::create_dir_all(cfg.dir.join("env")).expect("mkdir");
        std::fs::write(cfg.dir.join("env/default.db"), "x").expect("write");
        let again = configure_cubecl_cache(&cfg);
        assert_eq!(again.files_before, 1);
        assert!(again.compilation_cache && again.autotune_cache, "{again:?}");
        assert_eq!(again.note, None);
        assert_eq!(again.autotune_level, "minimal");

        // A different level cannot be applied any more: said so.
        let mut other_level = cfg.clone();
        other_level.autotune_level = Some(AutotuneLevel::Full);
        let fixed = configure_cubecl_cache(&other_level);
        assert_eq!(fixed.autotune_level, "minimal");
        assert!(fixed.autotune_level_source.contains("not applied"), "{fixed:?}");

        // A different directory cannot take over any more: reported, not panicked.
        let other = configure_cubecl_cache(&CacheConfig::at(cfg.dir.join("other")));
        assert!(!other.autotune_cache && !other.compilation_cache);
        assert!(other.note.as_deref().is_some_and(|n| n.contains("already fixed")), "{other:?}");
    }
}
