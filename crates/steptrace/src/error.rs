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
    #[error("trace directory {path} is not usable: {what}: {source}")]
    OutDir {
        /// The directory.
        path: PathBuf,
        /// Which step failed: creating the directory, or a file in it.
        what: &'static str,
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
    /// Writing a trace file failed (for example, a full disk). What was
    /// written of the cycle, if anything, is kept in its partial file.
    #[error("writing trace {path} failed: {source}{kept}", kept = kept_note(.kept))]
    Write {
        /// The file that was being written.
        path: PathBuf,
        /// The partial file left on disk, if it holds anything.
        kept: Option<Kept>,
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
    #[error(
        "invalid target directive `{directive}`: {reason} (expected e.g. `my_crate=info` or `cubecl_runtime=trace`)"
    )]
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
    /// A rank of a run of several cannot be profiled as asked.
    #[error("rank {rank} of {world_size}: {why}")]
    Rank {
        /// The rank asked for.
        rank: u32,
        /// The run's number of ranks.
        world_size: u32,
        /// What is wrong.
        why: String,
    },
    /// A trace could not be read.
    #[error(transparent)]
    Read(#[from] crate::read::reader::ReadError),
}

/// A partial trace file left on disk after a failed write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kept {
    /// The file.
    pub path: PathBuf,
    /// Its size when the error was reported.
    pub bytes: u64,
}

impl Kept {
    /// What `partial` holds: `None` if it does not exist, or if it is empty
    /// (then it is removed: it was created by this process and says
    /// nothing).
    pub(crate) fn of(partial: &std::path::Path) -> Option<Kept> {
        let bytes = std::fs::metadata(partial).ok()?.len();
        if bytes == 0 {
            let _ = std::fs::remove_file(partial);
            return None;
        }
        Some(Kept { path: partial.to_path_buf(), bytes })
    }
}

fn kept_note(kept: &Option<Kept>) -> String {
    match kept {
        Some(k) => format!(
            " ({} bytes written so far are kept in {}, readable as a trace cut short)",
            k.bytes,
            k.path.display()
        ),
        None => " (nothing of this cycle was kept)".to_owned(),
    }
}

/// A `Result` with the core [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
