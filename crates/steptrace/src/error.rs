//! The core crate's error type.

use std::io;
use std::path::PathBuf;

/// Errors from the profiler and its trace sink.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The schedule is invalid.
    #[error(transparent)]
    Schedule(#[from] crate::ScheduleError),
    /// The output directory could not be created or is not writable.
    #[error("trace directory {path} is not usable: {source}")]
    OutDir {
        /// The directory.
        path: PathBuf,
        /// Why it could not be used.
        #[source]
        source: io::Error,
    },
    /// A trace file already exists at the chosen path: steptrace never
    /// overwrites a trace.
    #[error("trace file {path} already exists; steptrace never overwrites a trace: choose another output directory or file name")]
    Exists {
        /// The existing file, left untouched.
        path: PathBuf,
    },
    /// Writing a trace file failed (for example, a full disk). The partial
    /// file, if any, is kept.
    #[error("writing trace {path} failed: {source}{kept}", kept = kept_note(.kept))]
    Write {
        /// The file that was being written.
        path: PathBuf,
        /// The partial file left on disk, if any.
        kept: Option<PathBuf>,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },
    /// The file-name template is unusable.
    #[error("invalid trace file name template `{template}`: {reason}")]
    Template {
        /// The template as given.
        template: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A target directive could not be parsed.
    #[error("invalid target directive `{directive}`: {reason} (expected e.g. `my_crate=info` or `cubecl_runtime=trace`)")]
    Targets {
        /// The directive as given.
        directive: String,
        /// The parser's explanation.
        reason: String,
    },
    /// The subscriber could not be installed as the global default.
    #[error("could not install the steptrace subscriber: {0}")]
    Install(String),
    /// A manifest field was given a value of the wrong type.
    #[error(transparent)]
    Manifest(#[from] crate::format::ManifestError),
    /// A trace could not be read.
    #[error(transparent)]
    Read(#[from] crate::reader::ReadError),
}

fn kept_note(kept: &Option<PathBuf>) -> String {
    match kept {
        Some(path) => format!(" (what was written so far is kept in {})", path.display()),
        None => String::new(),
    }
}

/// A `Result` with the core [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
