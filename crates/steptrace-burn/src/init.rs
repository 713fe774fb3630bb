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
use burn::tensor::{Bytes, DType};
use serde::{Deserialize, Serialize};
use steptrace_models::ModelKind;

use crate::config::RunConfig;

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
/// `record init.mpk` (the file name only: a record's directory is private).
///
/// # Examples
///
/// ```
/// use std::path::Path;
/// assert_eq!(steptrace_burn::init::label(None, 42), "seed 42");
/// assert_eq!(steptrace_burn::init::label(Some(Path::new("/home/me/runs/init.mpk")), 42), "record init.mpk");
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
}

impl<'a> Start<'a> {
    pub(crate) fn new(cfg: &'a RunConfig, backend: &str, data: String) -> Start<'a> {
        Start { cfg, origin: format!("{} on {backend}", label(cfg.init.as_deref(), cfg.seed)), data }
    }

    /// `model` as the run starts it: loaded from [`RunConfig::init`](crate::RunConfig::init)
    /// when set (after [the check](crate::init#the-check)), else as drawn; saved to
    /// [`RunConfig::save_init`](crate::RunConfig::save_init) when set.
    pub(crate) fn apply<M: Module>(&self, kind: ModelKind, config: &impl Serialize, model: M) -> Result<M, InitError> {
        let needs = InitHeader {
            format: RECORD_FORMAT.to_owned(),
            model: kind.name().to_owned(),
            config: serde_json::to_string(config).unwrap_or_default(),
            parameters: shapes(&model),
            origin: self.origin.clone(),
            data: self.data.clone(),
            burn_version: crate::run::BURN_VERSION.to_owned(),
        };
        let model = match &self.cfg.init {
            Some(path) => load(path, &needs, model)?,
            None => model,
        };
        if let Some(path) = &self.cfg.save_init {
            save(path, needs, &model)?;
        }
        Ok(model)
    }
}

/// Writes `model`'s weights with `header` to the new file `path`.
fn save<M: Module>(path: &Path, header: InitHeader, model: &M) -> Result<(), InitError> {
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
    let bytes = burn_pack::Writer::new(tensors)
        .with_metadata(HEADER_KEY, &header)
        .into_bytes()
        .map_err(|e| encode(e.to_string()))?;
    write_new(path, &bytes)
}

/// Creates `path` (never replacing a file) and writes `bytes`; on failure
/// removes what it created.
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), InitError> {
    let mut file = match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(InitError::Exists { path: path.to_owned() }),
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

/// `model` with the weights of the record at `path`, after checking that the
/// record holds what `needs` describes, tensor by tensor.
fn load<M: Module>(path: &Path, needs: &InitHeader, model: M) -> Result<M, InitError> {
    let meta = std::fs::metadata(path).map_err(|source| InitError::Read { path: path.to_owned(), source })?;
    if meta.is_dir() {
        return Err(InitError::NotARecord {
            path: path.to_owned(),
            reason: "it is a directory; give the record file that --save-init wrote".to_owned(),
        });
    }
    let bytes = std::fs::read(path).map_err(|source| InitError::Read { path: path.to_owned(), source })?;
    let not_a_record = |reason: String| InitError::NotARecord { path: path.to_owned(), reason };
    let reader = burn_pack::Reader::from_bytes(Bytes::from_bytes_vec(bytes.clone()))
        .map_err(|e| not_a_record(format!("it is not a burnpack record ({e})")))?;
    let header = reader.metadata().get(HEADER_KEY).ok_or_else(|| {
        not_a_record(format!(
            "it has no {HEADER_KEY} header; a plain burn record does not say which model and shapes it holds"
        ))
    })?;
    let holds: InitHeader =
        serde_json::from_str(header).map_err(|e| not_a_record(format!("its {HEADER_KEY} header cannot be read ({e})")))?;
    if holds.format != RECORD_FORMAT {
        return Err(not_a_record(format!(
            "its format is {} (this steptrace reads {RECORD_FORMAT}; written by burn {})",
            holds.format, holds.burn_version
        )));
    }
    check(path, &holds, needs)?;
    let tensors = reader
        .into_tensors()
        .map_err(|e| not_a_record(format!("its weights cannot be read ({e})")))?;
    check_tensors(&tensors, needs).map_err(not_a_record)?;
    let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(bytes))
        .map_err(|e| not_a_record(format!("its weights cannot be decoded: {e}")))?;
    let model = model
        .try_load_record(record)
        .map_err(|e| not_a_record(format!("burn refused its weights: {e}")))?;
    let loaded = InitHeader { parameters: shapes(&model), ..holds.clone() };
    check(path, &loaded, needs)?;
    Ok(model)
}

/// Checks every tensor of a record against the run's parameters before any of its bytes
/// reaches burn: each is one of the model's parameters, once, of element type `f32`, of the
/// parameter's shape, and exactly as many bytes as that shape holds; every parameter is
/// present.
fn check_tensors(tensors: &[burn_pack::Tensor], needs: &InitHeader) -> Result<(), String> {
    let mut wanted: std::collections::BTreeMap<&str, &[usize]> =
        needs.parameters.iter().map(|p| (p.path.as_str(), p.shape.as_slice())).collect();
    for tensor in tensors {
        let name = tensor.name.as_str();
        let Some(shape) = wanted.remove(name) else {
            return Err(format!("it holds a tensor `{name}` that is not a parameter of this model, or holds it twice"));
        };
        if tensor.dtype != DType::F32 {
            return Err(format!("parameter {name} is stored as {:?}; the model's parameters are f32", tensor.dtype));
        }
        let stored: Vec<usize> = tensor.shape.iter().copied().collect();
        if stored != shape {
            return Err(format!("parameter {name} has shape {stored:?} in the file; the model needs {shape:?}"));
        }
        let elements = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        let expected = elements.and_then(|n| n.checked_mul(DType::F32.size()));
        let bytes = tensor.byte_len();
        if expected != Some(bytes) {
            let expected = expected.map_or_else(|| "more than this machine can address".to_owned(), |b| format!("{b} bytes"));
            return Err(format!(
                "parameter {name} holds {bytes} bytes, but its shape {shape:?} of f32 needs {expected}"
            ));
        }
    }
    if let Some((missing, _)) = wanted.into_iter().next() {
        return Err(format!("parameter {missing} is missing from the file"));
    }
    Ok(())
}

/// Refuses a record whose model, configuration or parameter shapes differ from the run's.
fn check(path: &Path, holds: &InitHeader, needs: &InitHeader) -> Result<(), InitError> {
    let differences = differences(holds, needs);
    if differences.is_empty() {
        return Ok(());
    }
    Err(InitError::Mismatch {
        path: path.to_owned(),
        holds: format!("{} (saved from {}, {})", describe(holds), holds.data, holds.origin),
        needs: describe(needs),
        differences,
    })
}

/// `mlp with d_input 64, n_classes 10, ...: 6 parameter tensors, 25418 weights`.
fn describe(h: &InitHeader) -> String {
    let config = match serde_json::from_str::<serde_json::Value>(&h.config) {
        Ok(serde_json::Value::Object(map)) => map.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "),
        _ => h.config.clone(),
    };
    let weights: usize = h.parameters.iter().map(|p| p.shape.iter().product::<usize>()).sum();
    format!("{} with {config}: {} parameter tensors, {weights} weights", h.model, h.parameters.len())
}

/// What differs between the record (`holds`) and the run (`needs`): the model,
/// each configuration field, each parameter's shape.
fn differences(holds: &InitHeader, needs: &InitHeader) -> Vec<String> {
    let mut out = Vec::new();
    if holds.model != needs.model {
        out.push(format!("model: record {}, run {}", holds.model, needs.model));
        return out;
    }
    let parse = |text: &str| match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    let (a, b) = (parse(&holds.config), parse(&needs.config));
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let shown = |v: Option<&serde_json::Value>| v.map_or_else(|| "absent".to_owned(), ToString::to_string);
    for key in keys {
        if a.get(key) != b.get(key) {
            out.push(format!("{key}: record {}, run {}", shown(a.get(key)), shown(b.get(key))));
        }
    }
    if a.is_empty() && holds.config != needs.config {
        out.push(format!("configuration: record {}, run {}", holds.config, needs.config));
    }
    let by_path = |h: &InitHeader| h.parameters.iter().map(|p| (p.path.clone(), p.shape.clone())).collect::<std::collections::BTreeMap<_, _>>();
    let (pa, pb) = (by_path(holds), by_path(needs));
    let paths: std::collections::BTreeSet<&String> = pa.keys().chain(pb.keys()).collect();
    for path in paths {
        match (pa.get(path), pb.get(path)) {
            (Some(x), Some(y)) if x == y => {}
            (x, y) => out.push(format!(
                "parameter {path}: record {}, run {}",
                x.map_or_else(|| "absent".to_owned(), |s| format!("{s:?}")),
                y.map_or_else(|| "absent".to_owned(), |s| format!("{s:?}"))
            )),
        }
    }
    out
}

/// Every parameter's path and shape, without drawing any lazy weight.
pub(crate) fn shapes<M: Module>(model: &M) -> Vec<ParamShape> {
    let mut visitor = Shapes { path: Vec::new(), out: Vec::new() };
    model.visit(&mut visitor);
    visitor.out
}

// === impl Shapes ===

struct Shapes {
    path: Vec<String>,
    out: Vec<ParamShape>,
}

impl Shapes {
    fn push(&mut self, shape: Shape) {
        self.out.push(ParamShape { path: self.path.join("."), shape: shape.iter().copied().collect() });
    }
}

impl ModuleVisitor for Shapes {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_owned());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.push(param.lazy_shape());
    }

    fn visit_int<const D: usize>(&mut self, param: &Param<Tensor<D, Int>>) {
        self.push(param.lazy_shape());
    }

    fn visit_bool<const D: usize>(&mut self, param: &Param<Tensor<D, Bool>>) {
        self.push(param.lazy_shape());
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
mod tests {
    use super::*;
    use steptrace_models::{ConvNetConfig, MlpConfig};

    fn start(cfg: &RunConfig) -> Start<'_> {
        Start::new(cfg, "cpu", "digits [1, 8, 8]".to_owned())
    }

    fn weights<M: Module>(model: &M) -> Vec<f32> {
        let mut out = Vec::new();
        struct Collect<'a>(&'a mut Vec<f32>);
        impl ModuleVisitor for Collect<'_> {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
                self.0.extend(param.val().into_data().iter::<f32>());
            }
        }
        model.visit(&mut Collect(&mut out));
        out
    }

    #[test]
    fn parameter_paths_name_each_tensor_without_drawing_it() {
        let device = Device::flex();
        let model = MlpConfig::new(64, 10).init(&device);
        let shapes = shapes(&model);
        let paths: Vec<&str> = shapes.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, ["hidden.0.weight", "hidden.0.bias", "hidden.1.weight", "hidden.1.bias", "output.weight", "output.bias"]);
        assert_eq!(shapes[0].shape, [64, 128]);
        assert_eq!(shapes[5].shape, [10]);
    }

    /// Saved, then loaded into a fresh model of another draw: the same weights, bit for bit.
    #[test]
    fn a_record_round_trips_exactly_to_the_path_given() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("start.bin");
        let device = Device::flex();
        let config = MlpConfig::new(64, 10);
        let mut cfg = RunConfig::new();
        cfg.save_init = Some(path.clone());
        let saved = start(&cfg).apply(ModelKind::Mlp, &config, config.init(&device)).unwrap();
        assert!(path.is_file(), "written under the name given, no extension added");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let mut cfg = RunConfig::new();
        cfg.init = Some(path.clone());
        let loaded = start(&cfg).apply(ModelKind::Mlp, &config, config.init(&device)).unwrap();
        let (a, b) = (weights(&saved), weights(&loaded));
        assert_eq!(a.len(), 64 * 128 + 128 + 128 * 128 + 128 + 128 * 10 + 10);
        assert_eq!(a.len(), b.len());
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
        // burn reads it as its own record too.
        let record = ModuleRecord::load(&path).expect("a burnpack file");
        assert_eq!(record.len(), 6);
        // Saving again onto it is refused, and the file is left as it was.
        let before = std::fs::read(&path).unwrap();
        let mut cfg = RunConfig::new();
        cfg.save_init = Some(path.clone());
        let err = start(&cfg).apply(ModelKind::Mlp, &config, config.init(&device)).unwrap_err();
        assert!(matches!(err, InitError::Exists { .. }), "{err}");
        assert!(err.to_string().contains(&path.display().to_string()), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn a_record_of_another_model_or_shape_is_refused_with_what_differs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mlp64.bpk");
        let device = Device::flex();
        let mlp = MlpConfig::new(64, 10);
        let mut cfg = RunConfig::new();
        cfg.save_init = Some(path.clone());
        start(&cfg).apply(ModelKind::Mlp, &mlp, mlp.init(&device)).unwrap();
        let mut cfg = RunConfig::new();
        cfg.init = Some(path.clone());
        let wide = MlpConfig::new(784, 10);
        let err = start(&cfg).apply(ModelKind::Mlp, &wide, wide.init(&device)).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, InitError::Mismatch { .. }), "{text}");
        assert!(text.contains("d_input: record 64, run 784"), "{text}");
        assert!(text.contains("parameter hidden.0.weight: record [64, 128], run [784, 128]"), "{text}");
        let conv = ConvNetConfig::new(1, 8, 8, 10);
        let err = start(&cfg).apply(ModelKind::ConvNet, &conv, conv.init(&device)).unwrap_err();
        assert!(err.to_string().contains("model: record mlp, run convnet"), "{err}");
        // Not a record at all.
        let junk = dir.path().join("junk");
        std::fs::write(&junk, b"not a record").unwrap();
        cfg.init = Some(junk);
        let err = start(&cfg).apply(ModelKind::Mlp, &mlp, mlp.init(&device)).unwrap_err();
        assert!(matches!(err, InitError::NotARecord { .. }), "{err}");
        // A directory.
        cfg.init = Some(dir.path().to_owned());
        let err = start(&cfg).apply(ModelKind::Mlp, &mlp, mlp.init(&device)).unwrap_err();
        assert!(err.to_string().contains("it is a directory"), "{err}");
    }

    /// A plain burn record of the same model (no header) is refused, not loaded blind.
    #[test]
    fn a_plain_burn_record_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain.bpk");
        let mlp = MlpConfig::new(64, 10);
        let bytes = mlp.init(&Device::flex()).into_record().into_bytes().unwrap();
        std::fs::write(&path, &bytes[..]).unwrap();
        let mut cfg = RunConfig::new();
        cfg.init = Some(path);
        let err = start(&cfg).apply(ModelKind::Mlp, &mlp, mlp.init(&Device::flex())).unwrap_err();
        assert!(err.to_string().contains("no steptrace_init header"), "{err}");
    }

    /// A record whose header is right but whose tensors are not: cut bytes, another element
    /// type, another shape. Each is refused with the parameter's name before burn sees it.
    #[test]
    fn a_crafted_tensor_is_refused_before_it_reaches_burn() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.bpk");
        let device = Device::flex();
        let mlp = MlpConfig::new(64, 10);
        let mut cfg = RunConfig::new();
        cfg.save_init = Some(good.clone());
        start(&cfg).apply(ModelKind::Mlp, &mlp, mlp.init(&device)).unwrap();
        let reader = burn_pack::Reader::from_bytes(Bytes::from_bytes_vec(std::fs::read(&good).unwrap())).unwrap();
        let header = reader.metadata().get(HEADER_KEY).unwrap().clone();
        let tensors = reader.into_tensors().unwrap();
        let craft = |name: &str, edit: &dyn Fn(burn_pack::Tensor) -> burn_pack::Tensor| {
            let edited: Vec<_> = tensors.iter().cloned().map(|t| if t.name == "hidden.0.weight" { edit(t) } else { t }).collect();
            let bytes = burn_pack::Writer::new(edited).with_metadata(HEADER_KEY, &header).into_bytes().unwrap();
            let path = dir.path().join(name);
            std::fs::write(&path, &bytes[..]).unwrap();
            let mut cfg = RunConfig::new();
            cfg.init = Some(path);
            start(&cfg).apply(ModelKind::Mlp, &mlp, mlp.init(&device)).unwrap_err().to_string()
        };
        let parts = |t: burn_pack::Tensor| t.into_parts().unwrap();
        let cut = craft("cut.bpk", &|t| {
            let (name, _, _, id, bytes) = parts(t);
            // 100 bytes where the shape [64, 128] of f32 says 32768. Written as raw U8 data
            // of that length (burnpack itself checks F32 lengths): the element type is refused.
            burn_pack::Tensor::new(name, DType::U8, [100], id, Bytes::from_bytes_vec(bytes[..100].to_vec()))
        });
        assert!(cut.contains("parameter hidden.0.weight is stored as U8"), "{cut}");
        let reshaped = craft("reshaped.bpk", &|t| {
            let (name, dtype, _, id, bytes) = parts(t);
            burn_pack::Tensor::new(name, dtype, [128, 64], id, bytes)
        });
        assert!(reshaped.contains("parameter hidden.0.weight has shape [128, 64] in the file; the model needs [64, 128]"), "{reshaped}");
        let renamed = craft("renamed.bpk", &|t| {
            let (_, dtype, shape, id, bytes) = parts(t);
            burn_pack::Tensor::new("hidden.9.weight".to_owned(), dtype, shape, id, bytes)
        });
        assert!(renamed.contains("hidden.9.weight"), "{renamed}");
    }

    /// Truncated files are refused, never read past their end.
    #[test]
    fn every_truncation_of_a_record_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.bpk");
        let device = Device::flex();
        let mlp = MlpConfig::new(8, 3).with_hidden(vec![4]);
        let mut cfg = RunConfig::new();
        cfg.save_init = Some(good.clone());
        start(&cfg).apply(ModelKind::Mlp, &mlp, mlp.init(&device)).unwrap();
        let bytes = std::fs::read(&good).unwrap();
        let cut = dir.path().join("cut.bpk");
        for len in (0..bytes.len()).step_by(7) {
            std::fs::write(&cut, &bytes[..len]).unwrap();
            let mut cfg = RunConfig::new();
            cfg.init = Some(cut.clone());
            let err = start(&cfg).apply(ModelKind::Mlp, &mlp, mlp.init(&device)).unwrap_err();
            assert!(matches!(err, InitError::NotARecord { .. }), "{len}: {err}");
        }
    }
}
