//! A record's checks: its header against the run's model ([`check`]), its tensors against
//! the header before any byte reaches burn ([`check_tensors`]), and in one read of the
//! weights ([`read_weights`]) the hash that says which starting state a run had and what a
//! valid record may still hold that a run should hear of (NaN or infinite weights).

use std::path::Path;

use burn::tensor::DType;
use sha2::{Digest, Sha256};

use super::{InitError, InitHeader};

/// Checks every tensor of a record against the run's parameters before any of its bytes
/// reaches burn: each is one of the model's parameters, once, of element type `f32`, of the
/// parameter's shape, and exactly as many bytes as that shape holds; every parameter is
/// present.
pub(super) fn check_tensors(tensors: &[burn_pack::Tensor], needs: &InitHeader) -> Result<(), String> {
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
            let expected =
                expected.map_or_else(|| "more than this machine can address".to_owned(), |b| format!("{b} bytes"));
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
pub(super) fn check(path: &Path, holds: &InitHeader, needs: &InitHeader) -> Result<(), InitError> {
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
        Ok(serde_json::Value::Object(map)) => {
            map.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
        }
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
    let by_path = |h: &InitHeader| {
        h.parameters.iter().map(|p| (p.path.clone(), p.shape.clone())).collect::<std::collections::BTreeMap<_, _>>()
    };
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

/// What a record's (already checked) weights hold, read in one pass over each tensor's bytes.
pub(super) struct Weights {
    /// [`Hashes::weights`].
    pub(super) sha256: String,
    /// Parameters holding NaN or infinite weights, as `parameter hidden.0.weight holds 3 NaN
    /// and 1 infinite of its 8192 weights`.
    pub(super) non_finite: Vec<String>,
}

/// Reads every tensor once (tensors already checked: f32, of the byte count their shape
/// needs): the weights' digest ([`Hashes::weights`]) and the parameters that hold NaN or
/// infinite values.
pub(super) fn read_weights(tensors: &[burn_pack::Tensor]) -> Result<Weights, String> {
    let mut sorted: Vec<&burn_pack::Tensor> = tensors.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut digest = Sha256::new();
    let mut non_finite = Vec::new();
    for tensor in sorted {
        let bytes = tensor.to_bytes().map_err(|e| format!("parameter {} cannot be read ({e})", tensor.name))?;
        // Lengths first, so that no two different lists hash alike.
        digest.update((tensor.name.len() as u64).to_le_bytes());
        digest.update(tensor.name.as_bytes());
        digest.update(format!("{:?}", tensor.dtype).as_bytes());
        digest.update((tensor.shape.len() as u64).to_le_bytes());
        for &d in tensor.shape.iter() {
            digest.update((d as u64).to_le_bytes());
        }
        digest.update((bytes.len() as u64).to_le_bytes());
        digest.update(&bytes[..]);
        if tensor.dtype == burn::tensor::DType::F32 {
            if let Some(line) = count_non_finite(&tensor.name, &bytes) {
                non_finite.push(line);
            }
        }
    }
    Ok(Weights { sha256: hex(&digest.finalize()), non_finite })
}

/// `parameter NAME holds 3 NaN and 1 infinite of its 8192 weights`, or `None` if every
/// f32 in `bytes` is finite.
fn count_non_finite(name: &str, bytes: &[u8]) -> Option<String> {
    let (mut nan, mut infinite, mut total) = (0usize, 0usize, 0usize);
    for chunk in bytes.chunks_exact(4) {
        let value = f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        total += 1;
        if value.is_nan() {
            nan += 1;
        } else if value.is_infinite() {
            infinite += 1;
        }
    }
    if nan + infinite == 0 {
        return None;
    }
    let mut what = Vec::new();
    if nan > 0 {
        what.push(format!("{nan} NaN"));
    }
    if infinite > 0 {
        what.push(format!("{infinite} infinite"));
    }
    Some(format!("parameter {name} holds {} of its {total} weights", what.join(" and ")))
}

/// Which starting state a record holds, as two SHA-256 digests (lowercase hex).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Hashes {
    /// The file's bytes: what `sha256sum FILE` prints.
    pub file: String,
    /// The weights alone: every tensor's name, element type, shape and bytes, in name
    /// order. Two records of the same weights agree on it whatever their header says (a
    /// record saved by a run that started from another holds the other's weights).
    pub weights: String,
}

impl Hashes {
    /// The digests of a record: its `file` bytes, and `weights` from [`read_weights`].
    pub(super) fn new(file: &[u8], weights: String) -> Hashes {
        Hashes { file: Self::file_sha256(file), weights }
    }

    /// [`Hashes::file`] of a record's bytes.
    pub(super) fn file_sha256(file: &[u8]) -> String {
        hex(&Sha256::digest(file))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
