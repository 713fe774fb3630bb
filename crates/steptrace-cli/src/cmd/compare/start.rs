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
//!
//! Each run records the SHA-256 of the weights it started from (the bench fingerprint's
//! `init_weights_sha256`); [`same_weights`] refuses a comparison whose backends
//! did not all start from the same weights (a record changed on disk between two runs).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use steptrace::display::escape;
use tempfile::TempDir;

use steptrace::bench::BenchResult;

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
                (dir.path().join("initial-state.bpk"), Some(dir))
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

/// The weights every result started from, as `sha256 1a2b3c4d…`; an error naming each
/// backend's weights when they differ (or when one did not say), since then final loss and
/// held-out quality compare two starts, not two backends.
pub fn same_weights<'a>(
    results: impl IntoIterator<Item = (&'a str, &'a BenchResult)>,
) -> anyhow::Result<Option<String>> {
    let weights: Vec<(&str, Option<&str>)> = results
        .into_iter()
        .map(|(backend, r)| (backend, r.fingerprint.get("init_weights_sha256").and_then(|v| v.as_str())))
        .collect();
    if weights.iter().all(|(_, w)| w.is_none()) {
        return Ok(None);
    }
    if let Some((_, Some(first))) = weights.first() {
        if weights.iter().all(|(_, w)| *w == Some(*first)) {
            return Ok(Some(format!("sha256 of the weights {}…", &first[..first.len().min(16)])));
        }
    }
    let each: Vec<String> = weights
        .iter()
        .map(|(backend, w)| {
            format!("{backend}: {}", w.map_or("not recorded".to_owned(), |w| w[..w.len().min(16)].to_owned() + "…"))
        })
        .collect();
    bail!(
        "the backends did not start from the same weights ({}): the record changed between runs, so final loss and held-out \
         quality would compare two starting states; run the comparison again",
        each.join(", ")
    )
}

fn display(path: &Path) -> String {
    escape(&path.display().to_string()).into_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use steptrace::bench::{Fingerprint, RunRecord};

    use super::*;

    fn result(weights: Option<&str>) -> BenchResult {
        let mut fp = Fingerprint::new();
        fp.insert("model".into(), json!("mlp"));
        if let Some(w) = weights {
            fp.insert("init_weights_sha256".into(), json!(w));
        }
        let run = RunRecord {
            time_to_first_step_ms: 100.0,
            first_step_ms: 50.0,
            cache: "warm".into(),
            step_ms: vec![1.0, 1.0, 1.0],
            median_ms: 1.0,
            first_loss: Some(2.3),
            final_loss: Some(0.5),
            held_out: None,
        };
        BenchResult::new(fp, "cpu".into(), 1, 3, 64, vec![run]).unwrap()
    }

    #[test]
    fn backends_must_have_started_from_the_same_weights() {
        let a = "a".repeat(64);
        let b = "b".repeat(64);
        let (same, other, none) = (result(Some(&a)), result(Some(&b)), result(None));
        let said = same_weights([("cpu", &same), ("wgpu", &same)]).unwrap();
        assert_eq!(said.as_deref(), Some("sha256 of the weights aaaaaaaaaaaaaaaa…"));
        let err = same_weights([("cpu", &same), ("wgpu", &other)]).unwrap_err().to_string();
        assert!(
            err.contains("did not start from the same weights (cpu: aaaaaaaaaaaaaaaa…, wgpu: bbbbbbbbbbbbbbbb…)"),
            "{err}"
        );
        let err = same_weights([("cpu", &same), ("wgpu", &none)]).unwrap_err().to_string();
        assert!(err.contains("wgpu: not recorded"), "{err}");
        assert!(same_weights([("cpu", &none), ("wgpu", &same)]).is_err());
        // No backend got as far as its start: nothing to check.
        assert_eq!(same_weights([("cpu", &none)]).unwrap(), None);
    }
}
