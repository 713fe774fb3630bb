//! `compare --backends` starts every backend from one saved initial state:
//! burn draws its random initial weights on the backend, so one seed is not
//! one starting state across backends, and a quality comparison (final loss,
//! held-out) from two draws compares the draws as much as the backends.
//!
//! The first backend that runs saves its initial weights (`--save-init`)
//! into a record that no file was at before: the user's `--save-init FILE`,
//! else a file in a new private temporary directory (removed at the end).
//! Every later run loads it (`--init`). With `--init FILE` alone, every
//! backend loads that record.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use steptrace::read::display::escape;
use tempfile::TempDir;

use crate::args::WorkloadArgs;

/// The starting state the backends of one comparison share.
pub struct SharedStart {
    /// The record every backend starts from (once it exists).
    path: PathBuf,
    /// The user's `--init`, loaded by the run that saves the shared record.
    given: Option<PathBuf>,
    /// Where the record lives when the user did not name it: removed on drop.
    scratch: Option<TempDir>,
    /// Whether the record is written here (else it is the user's `--init`).
    saves: bool,
    /// The backend whose first run saved the record.
    saved_by: Option<String>,
}

impl SharedStart {
    /// The shared record for `w`'s `--init` and `--save-init`, or a new
    /// temporary one.
    pub fn new(w: &WorkloadArgs) -> anyhow::Result<SharedStart> {
        let (path, scratch) = match (&w.init, &w.save_init) {
            (Some(init), None) => (init.clone(), None),
            (_, Some(save)) => {
                if save.exists() {
                    bail!(
                        "--save-init {}: the file already exists; steptrace never overwrites a file (it was left as it is): choose another path",
                        save.display()
                    );
                }
                (save.clone(), None)
            }
            (None, None) => {
                let dir = tempfile::Builder::new()
                    .prefix("steptrace-compare-")
                    .tempdir()
                    .context("cannot create a private directory for the shared initial state")?;
                (dir.path().join("initial-state.mpk"), Some(dir))
            }
        };
        let saves = !path.exists();
        let given = w.init.clone().filter(|init| *init != path);
        Ok(SharedStart { path, given, scratch, saves, saved_by: None })
    }

    /// `w` for the next backend: it saves the shared record while none is
    /// there, else starts from it.
    pub fn workload(&self, w: &WorkloadArgs) -> WorkloadArgs {
        let mut w = w.clone();
        if self.path.exists() {
            w.init = Some(self.path.clone());
            w.save_init = None;
        } else {
            w.init = self.given.clone();
            w.save_init = Some(self.path.clone());
        }
        w
    }

    /// Notes that `backend` ran: the first one after which the record
    /// exists saved it.
    pub fn ran(&mut self, backend: &str) {
        if self.saves && self.saved_by.is_none() && self.path.exists() {
            self.saved_by = Some(backend.to_owned());
        }
    }

    /// What the comparison started from, for its output; `None` when no
    /// backend got as far as its initial state.
    pub fn describe(&self) -> Option<String> {
        let name = display(&self.path);
        let quality = "so final loss and held-out quality are compared from identical weights and the same data order";
        match (&self.saved_by, &self.scratch) {
            _ if !self.saves => Some(format!("starting state: every backend started from the record {name} (--init), {quality}")),
            (Some(backend), Some(_)) => Some(format!(
                "starting state: every backend started from one initial state, saved by {backend}'s first run into a temporary record \
                 (removed when compare ends; --save-init FILE keeps it), {quality}"
            )),
            (Some(backend), None) => {
                Some(format!("starting state: every backend started from one initial state, saved by {backend}'s first run to {name}, {quality}"))
            }
            (None, _) => None,
        }
    }
}

fn display(path: &Path) -> String {
    escape(&path.display().to_string()).into_owned()
}
