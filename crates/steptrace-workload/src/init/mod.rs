//! The model's starting state: the seed's random draw, or a record that an
//! earlier run saved ([`RunConfig::save_init`], [`RunConfig::init`]).
//!
//! burn draws its random initial weights on the backend: the same seed gives
//! other weights on wgpu than on the CPU, so runs on two backends from one
//! seed do not start from the same state (on lavapipe, a held-out accuracy of
//! 0.12 on wgpu against 0.28 on the CPU). A record fixes the starting state:
//! save it once, start every backend from it. The seed still orders the data,
//! which is drawn on the host and is the same on every backend.
//!
//! # The record
//!
//! One file in burn 0.22's own format, burnpack (what `Module::save_file` and
//! `ModuleRecord::save` write): the model's parameters by module path, `f32` as they are,
//! so a round trip is exact. Its metadata holds the [`InitHeader`] as JSON under the key
//! [`HEADER_KEY`] (model name, model configuration, every parameter's path and shape, what
//! it was drawn from). In a burn program it loads with `ModuleRecord::load` (or
//! `ModuleRecord::from_bytes`) and `Module::load_record`; the header is ignored there.
//!
//! steptrace reads and writes the bytes itself: burn's writer adds its `.bpk` extension to a
//! path without one and replaces an existing file, whereas here the path given is the path
//! written and read, and a record is only ever written to a new file (created exclusively;
//! a failed write removes what it created).
//!
//! # The check
//!
//! A record is a file from outside: nothing of it reaches burn before it is checked. The
//! header is read alone first and compared with the run's model: the model's name, its
//! configuration (input features, image size, classes, vocabulary, sequence length, layer
//! sizes) and every parameter's path and shape. Any difference refuses the record with what
//! it holds against what the run needs ([`InitError::Mismatch`]), before training starts.
//! Then every tensor of the file is checked against the header and the model: its path is
//! one of the model's parameters, its element type is `f32` (what the models hold), its
//! shape is the parameter's, and its byte count is exactly its shape's element count times
//! four. A tensor that fails names the parameter and both sizes ([`InitError::NotARecord`]).
//! Only then are the bytes handed to burn, whose own load compares each shape once more;
//! after loading the loaded parameters' shapes are compared with the header again.
//!
//! [`RunConfig::save_init`]: crate::RunConfig::save_init
//! [`RunConfig::init`]: crate::RunConfig::init

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use burn::store::ModuleRecord;
use burn::tensor::{AllocationProperty, Bytes};
use serde::{Deserialize, Serialize};
use steptrace_burn::modules::{walk, ParamVisitor};
use steptrace_models::ModelKind;

use crate::config::RunConfig;

mod check;

pub use check::Hashes;
use check::{check, check_tensors, read_weights};

/// The header's format tag: a record of another format is refused, not guessed at
/// (`steptrace-init/1` was burn 0.21's named MessagePack record).
pub const RECORD_FORMAT: &str = "steptrace-init/2";

/// The burnpack metadata key under which the [`InitHeader`] is stored, as JSON.
pub const HEADER_KEY: &str = "steptrace_init";

/// What an initial-state record says of itself, written before the weights
/// ([the check](crate::init#the-check) compares it with the run).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct InitHeader {
    /// [`RECORD_FORMAT`].
    pub format: String,
    /// The model's name (`mlp`, `convnet`, `transformer`).
    pub model: String,
    /// The model's burn `Config`, as JSON (`{"d_input":64,"n_classes":10,...}`).
    pub config: String,
    /// Every parameter tensor, in burn's visiting order.
    pub parameters: Vec<ParamShape>,
    /// Where the weights came from: `seed 42 on cpu` (told, not checked).
    pub origin: String,
    /// The dataset and sample shape of the run that saved it (told, not checked:
    /// the model's configuration holds what the weights depend on).
    pub data: String,
    /// The burn version that wrote it.
    pub burn_version: String,
}

/// One parameter tensor of a model: its path (`hidden.0.weight`) and shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamShape {
    /// Field names from the model down, joined with `.`.
    pub path: String,
    /// The tensor's shape.
    pub shape: Vec<usize>,
}

/// A starting state that cannot be saved or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InitError {
    /// `--save-init` names a file that exists: it is left as it is.
    #[error(
        "--save-init {}: the file already exists; steptrace never overwrites a file (it was left as it is): choose another path",
        path.display()
    )]
    Exists {
        /// The path given.
        path: PathBuf,
    },
    /// The record could not be written (what was created is removed).
    #[error("cannot write the initial state to --save-init {} (nothing was kept): {source}", path.display())]
    Write {
        /// The path given.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// burn could not encode the model's record.
    #[error("cannot encode the initial state for --save-init {}: {reason}", path.display())]
    Encode {
        /// The path given.
        path: PathBuf,
        /// burn's message.
        reason: String,
    },
    /// The record could not be read.
    #[error("cannot read --init {}: {source}", path.display())]
    Read {
        /// The path given.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not an initial-state record steptrace can read.
    #[error("--init {} is not a steptrace initial-state record (written by --save-init): {reason}", path.display())]
    NotARecord {
        /// The path given.
        path: PathBuf,
        /// Why not.
        reason: String,
    },
    /// The record holds another model, or the same model with other shapes.
    #[error(
        "--init {} does not fit this run: the record holds {holds}; this run needs {needs} ({}). A record starts only the model and shapes it was saved from: save one for this run with --save-init",
        path.display(),
        differences.join("; ")
    )]
    Mismatch {
        /// The path given.
        path: PathBuf,
        /// What the record holds.
        holds: String,
        /// What the run needs.
        needs: String,
        /// Each difference, as `what: record X, run Y`.
        differences: Vec<String>,
    },
}

/// What the manifest says of a run's starting state: `seed 42`, or
/// `record init.bpk` (the file name only: a record's directory is private).
///
/// # Examples
///
/// ```
/// use std::path::Path;
/// assert_eq!(steptrace_workload::init::label(None, 42), "seed 42");
/// assert_eq!(steptrace_workload::init::label(Some(Path::new("/home/me/runs/init.bpk")), 42), "record init.bpk");
/// ```
pub fn label(init: Option<&Path>, seed: u64) -> String {
    match init {
        Some(path) => format!("record {}", file_name(path)),
        None => format!("seed {seed}"),
    }
}

/// A path's file name, for labels (never its directory).
pub fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| "(unnamed)".to_owned(), |n| n.to_string_lossy().into_owned())
}

/// The run's starting state: built once the backend is up, applied to the
/// freshly built (still lazily initialised) model.
pub(crate) struct Start<'a> {
    cfg: &'a RunConfig,
    origin: String,
    data: String,
    /// The record the run started from or saved its start to, once [`apply`](Self::apply) ran.
    pub(crate) hashes: Option<Hashes>,
    /// What the record's check noticed without refusing it (NaN or infinite weights).
    pub(crate) warnings: Vec<String>,
}

impl<'a> Start<'a> {
    pub(crate) fn new(cfg: &'a RunConfig, backend: &str, data: String) -> Start<'a> {
        Start {
            cfg,
            origin: format!("{} on {backend}", label(cfg.init.as_deref(), cfg.seed)),
            data,
            hashes: None,
            warnings: Vec::new(),
        }
    }

    /// `model` as the run starts it: loaded from [`RunConfig::init`](crate::RunConfig::init)
    /// when set (after [the check](crate::init#the-check)), else as drawn; saved to
    /// [`RunConfig::save_init`](crate::RunConfig::save_init) when set. Afterwards
    /// [`hashes`](Self::hashes) names the record that holds the start (the one loaded, else
    /// the one saved) and [`warnings`](Self::warnings) says what its check noticed.
    pub(crate) fn apply<M: Module>(
        &mut self,
        kind: ModelKind,
        config: &impl Serialize,
        model: M,
    ) -> Result<M, InitError> {
        let needs = InitHeader {
            format: RECORD_FORMAT.to_owned(),
            model: kind.name().to_owned(),
            config: serde_json::to_string(config).unwrap_or_default(),
            parameters: shapes(&model),
            origin: self.origin.clone(),
            data: self.data.clone(),
            burn_version: steptrace_burn::BURN_VERSION.to_owned(),
        };
        let model = match &self.cfg.init {
            Some(path) => {
                let loaded = load(path, &needs, model)?;
                self.hashes = Some(loaded.hashes);
                self.warnings = loaded
                    .non_finite
                    .iter()
                    .map(|what| format!("--init {}: {what}; the run starts from them as they are", file_name(path)))
                    .collect();
                loaded.model
            }
            None => model,
        };
        if let Some(path) = &self.cfg.save_init {
            let saved = save(path, needs, &model)?;
            self.hashes.get_or_insert(saved);
        }
        Ok(model)
    }
}

/// Writes `model`'s weights with `header` to the new file `path`.
fn save<M: Module>(path: &Path, header: InitHeader, model: &M) -> Result<Hashes, InitError> {
    // Draw every lazily initialised weight now, in burn's visiting order (the
    // order in which the run's first `num_params` would draw them), so that the
    // run trains from exactly the weights saved: a clone of an undrawn
    // parameter would draw its own.
    model.visit(&mut Materialise);
    let encode = |reason: String| InitError::Encode { path: path.to_owned(), reason };
    let header = serde_json::to_string(&header).map_err(|e| encode(e.to_string()))?;
    // burn's own record of the model, re-written with the header in its metadata.
    let plain = model.clone().into_record().into_bytes().map_err(|e| encode(e.to_string()))?;
    let tensors = burn_pack::Reader::from_bytes(plain)
        .and_then(burn_pack::Reader::into_tensors)
        .map_err(|e| encode(e.to_string()))?;
    let weights = read_weights(&tensors).map_err(encode)?.sha256;
    let bytes = burn_pack::Writer::new(tensors)
        .with_metadata(HEADER_KEY, &header)
        .into_bytes()
        .map_err(|e| encode(e.to_string()))?;
    write_new(path, &bytes)?;
    Ok(Hashes::new(&bytes, weights))
}

/// Creates `path` (never replacing a file) and writes `bytes`; on failure
/// removes what it created.
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), InitError> {
    let mut file = match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(InitError::Exists { path: path.to_owned() })
        }
        Err(source) => return Err(InitError::Write { path: path.to_owned(), source }),
    };
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    if let Err(source) = written {
        drop(file);
        let _ = std::fs::remove_file(path);
        return Err(InitError::Write { path: path.to_owned(), source });
    }
    Ok(())
}

/// A model started from a record.
struct Loaded<M> {
    model: M,
    hashes: Hashes,
    /// Parameters with NaN or infinite weights, and how many ([`check::read_weights`]).
    non_finite: Vec<String>,
}

/// `model` with the weights of the record at `path`, after checking that the
/// record holds what `needs` describes, tensor by tensor.
fn load<M: Module>(path: &Path, needs: &InitHeader, model: M) -> Result<Loaded<M>, InitError> {
    let meta = std::fs::metadata(path).map_err(|source| InitError::Read { path: path.to_owned(), source })?;
    if meta.is_dir() {
        return Err(InitError::NotARecord {
            path: path.to_owned(),
            reason: "it is a directory; give the record file that --save-init wrote".to_owned(),
        });
    }
    let bytes = std::fs::read(path).map_err(|source| InitError::Read { path: path.to_owned(), source })?;
    let file_sha256 = Hashes::file_sha256(&bytes);
    // One buffer, shared by the checking read below and burn's own decode (no copy).
    let bytes = Bytes::from_shared(bytes::Bytes::from(bytes), AllocationProperty::Native);
    let not_a_record = |reason: String| InitError::NotARecord { path: path.to_owned(), reason };
    let reader = burn_pack::Reader::from_bytes(bytes.clone())
        .map_err(|e| not_a_record(format!("it is not a burnpack record ({e})")))?;
    let header = reader.metadata().get(HEADER_KEY).ok_or_else(|| {
        not_a_record(format!(
            "it has no {HEADER_KEY} header; a plain burn record does not say which model and shapes it holds"
        ))
    })?;
    let holds: InitHeader = serde_json::from_str(header)
        .map_err(|e| not_a_record(format!("its {HEADER_KEY} header cannot be read ({e})")))?;
    if holds.format != RECORD_FORMAT {
        return Err(not_a_record(format!(
            "its format is {} (this steptrace reads {RECORD_FORMAT}; written by burn {})",
            holds.format, holds.burn_version
        )));
    }
    check(path, &holds, needs)?;
    let tensors = reader.into_tensors().map_err(|e| not_a_record(format!("its weights cannot be read ({e})")))?;
    check_tensors(&tensors, needs).map_err(not_a_record)?;
    let weights = read_weights(&tensors).map_err(not_a_record)?;
    let hashes = Hashes { file: file_sha256, weights: weights.sha256 };
    let non_finite = weights.non_finite;
    drop(tensors);
    let record =
        ModuleRecord::from_bytes(bytes).map_err(|e| not_a_record(format!("its weights cannot be decoded: {e}")))?;
    let model = model.try_load_record(record).map_err(|e| not_a_record(format!("burn refused its weights: {e}")))?;
    let loaded = InitHeader { parameters: shapes(&model), ..holds.clone() };
    check(path, &loaded, needs)?;
    Ok(Loaded { model, hashes, non_finite })
}

/// Every parameter's path and shape, without drawing any lazy weight.
pub(crate) fn shapes<M: Module>(model: &M) -> Vec<ParamShape> {
    let mut visitor = Shapes(Vec::new());
    walk(model, &mut visitor);
    visitor.0
}

// === impl Shapes ===

struct Shapes(Vec<ParamShape>);

impl Shapes {
    fn push(&mut self, path: &str, shape: Shape) {
        self.0.push(ParamShape { path: path.to_owned(), shape: shape.iter().copied().collect() });
    }
}

impl ParamVisitor for Shapes {
    fn float<const D: usize>(&mut self, path: &str, param: &Param<Tensor<D>>) {
        self.push(path, param.lazy_shape());
    }

    fn int<const D: usize>(&mut self, path: &str, param: &Param<Tensor<D, Int>>) {
        self.push(path, param.lazy_shape());
    }

    fn bool<const D: usize>(&mut self, path: &str, param: &Param<Tensor<D, Bool>>) {
        self.push(path, param.lazy_shape());
    }
}

// === impl Materialise ===

/// Draws each lazily initialised parameter (`Param::val`).
struct Materialise;

impl ModuleVisitor for Materialise {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let _ = param.val();
    }

    fn visit_int<const D: usize>(&mut self, param: &Param<Tensor<D, Int>>) {
        let _ = param.val();
    }

    fn visit_bool<const D: usize>(&mut self, param: &Param<Tensor<D, Bool>>) {
        let _ = param.val();
    }
}

#[cfg(all(test, feature = "cpu"))]
mod fuzz_tests;
#[cfg(all(test, feature = "cpu"))]
mod tests;
