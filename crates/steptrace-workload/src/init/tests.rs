//! The record's round trip and its checks, on the CPU backend.
use super::*;
use burn::tensor::DType;
use steptrace_models::{ConvNetConfig, MlpConfig};

fn start(cfg: &RunConfig) -> Start<'_> {
    Start::new(cfg, "cpu", "digits [1, 8, 8]".to_owned())
}

/// Saves `mlp`'s initial state, drawn on `device`, to the new file `path`.
fn save(path: &std::path::Path, mlp: &MlpConfig, device: &Device) {
    let mut cfg = RunConfig::new();
    cfg.save_init = Some(path.to_owned());
    start(&cfg).apply(ModelKind::Mlp, mlp, mlp.init(device)).unwrap();
}

/// Every weight of `model`, parameter by parameter in the order of their paths (the order
/// a record lists them in, whatever the order burn visits them).
pub(super) fn weights<M: Module>(model: &M) -> Vec<f32> {
    struct Collect<'a>(&'a mut Vec<(String, Vec<f32>)>, Vec<String>);
    impl ModuleVisitor for Collect<'_> {
        fn enter_module(&mut self, name: &str, _: &str) {
            self.1.push(name.to_owned());
        }
        fn exit_module(&mut self, _: &str, _: &str) {
            self.1.pop();
        }
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.push((self.1.join("."), param.val().into_data().iter::<f32>().collect()));
        }
    }
    let mut named = Vec::new();
    model.visit(&mut Collect(&mut named, Vec::new()));
    named.sort_by(|a, b| a.0.cmp(&b.0));
    named.into_iter().flat_map(|(_, values)| values).collect()
}

#[test]
fn parameter_paths_name_each_tensor_without_drawing_it() {
    let device = Device::flex();
    let model = MlpConfig::new(64, 10).init(&device);
    let shapes = shapes(&model);
    let paths: Vec<&str> = shapes.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        ["hidden.0.weight", "hidden.0.bias", "hidden.1.weight", "hidden.1.bias", "output.weight", "output.bias"]
    );
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
    save(&path, &mlp, &device);
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
    save(&good, &mlp, &device);
    let reader = burn_pack::Reader::from_bytes(Bytes::from_bytes_vec(std::fs::read(&good).unwrap())).unwrap();
    let header = reader.metadata().get(HEADER_KEY).unwrap().clone();
    let tensors = reader.into_tensors().unwrap();
    let craft = |name: &str, edit: &dyn Fn(burn_pack::Tensor) -> burn_pack::Tensor| {
        let edited: Vec<_> =
            tensors.iter().cloned().map(|t| if t.name == "hidden.0.weight" { edit(t) } else { t }).collect();
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
    assert!(
        reshaped.contains("parameter hidden.0.weight has shape [128, 64] in the file; the model needs [64, 128]"),
        "{reshaped}"
    );
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
    save(&good, &mlp, &device);
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

/// The record's hashes: the file's is `sha256sum`'s; the weights' is the same for a record
/// saved from a run that started from another record, whose file differs.
#[test]
fn the_start_is_named_by_its_file_and_weights_hashes() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("first.bpk"), dir.path().join("second.bpk"));
    let device = Device::flex();
    let mlp = MlpConfig::new(8, 3).with_hidden(vec![4]);
    let mut cfg = RunConfig::new();
    cfg.save_init = Some(first.clone());
    let mut saving = start(&cfg);
    saving.apply(ModelKind::Mlp, &mlp, mlp.init(&device)).unwrap();
    let saved = saving.hashes.clone().expect("a saved record is hashed");
    use sha2::Digest;
    let digest: String =
        sha2::Sha256::digest(std::fs::read(&first).unwrap()).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(saved.file, digest);
    assert_eq!(saved.weights.len(), 64);
    // Loaded from it and saved again: another file (its header says where it came from),
    // the same weights.
    let mut cfg = RunConfig::new();
    cfg.init = Some(first.clone());
    cfg.save_init = Some(second.clone());
    let mut loading = start(&cfg);
    loading.apply(ModelKind::Mlp, &mlp, mlp.init(&device)).unwrap();
    let loaded = loading.hashes.clone().unwrap();
    assert_eq!(loaded, saved, "the hashes of the record loaded, not of the one saved");
    assert!(loading.warnings.is_empty(), "{:?}", loading.warnings);
    let mut cfg = RunConfig::new();
    cfg.init = Some(second.clone());
    let mut again = start(&cfg);
    again.apply(ModelKind::Mlp, &mlp, mlp.init(&device)).unwrap();
    let again = again.hashes.unwrap();
    assert_ne!(again.file, saved.file);
    assert_eq!(again.weights, saved.weights);
    // Another draw: other weights.
    let mut cfg = RunConfig::new();
    cfg.seed = 7;
    cfg.save_init = Some(dir.path().join("other.bpk"));
    let mut other = start(&cfg);
    device.seed(7);
    other.apply(ModelKind::Mlp, &mlp, mlp.init(&device)).unwrap();
    assert_ne!(other.hashes.unwrap().weights, saved.weights);
}

/// NaN and infinite weights are loaded as they are, with a warning naming the parameter.
#[test]
fn non_finite_weights_are_named_in_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.bpk");
    let device = Device::flex();
    let mlp = MlpConfig::new(8, 3).with_hidden(vec![4]);
    save(&good, &mlp, &device);
    let reader = burn_pack::Reader::from_bytes(Bytes::from_bytes_vec(std::fs::read(&good).unwrap())).unwrap();
    let header = reader.metadata().get(HEADER_KEY).unwrap().clone();
    let tensors: Vec<_> = reader
        .into_tensors()
        .unwrap()
        .into_iter()
        .map(|t| {
            if t.name != "output.bias" {
                return t;
            }
            let (name, dtype, shape, id, _) = t.into_parts().unwrap();
            let values = [f32::NAN, f32::INFINITY, f32::NAN];
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            burn_pack::Tensor::new(name, dtype, shape, id, Bytes::from_bytes_vec(bytes))
        })
        .collect();
    let bad = dir.path().join("nan.bpk");
    std::fs::write(&bad, &burn_pack::Writer::new(tensors).with_metadata(HEADER_KEY, &header).into_bytes().unwrap()[..])
        .unwrap();
    let mut cfg = RunConfig::new();
    cfg.init = Some(bad);
    let mut loading = start(&cfg);
    let model = loading.apply(ModelKind::Mlp, &mlp, mlp.init(&device)).unwrap();
    assert_eq!(
        loading.warnings,
        ["--init nan.bpk: parameter output.bias holds 2 NaN and 1 infinite of its 3 weights; the run starts from them as they are"]
    );
    assert_eq!(weights(&model).iter().filter(|w| !w.is_finite()).count(), 3);
}
