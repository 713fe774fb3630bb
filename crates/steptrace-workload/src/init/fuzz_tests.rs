//! Mutated records: every one is refused with a clear error or starts the model from exactly
//! what the file holds; none panics, reads out of bounds or corrupts memory (a crash fails the
//! test binary). Bounded: a fixed set of systematic mutations (every cut, the header's length
//! field, the metadata's bytes overwritten with extreme values) and a fixed number of random
//! ones, on a small model, in a few seconds.

use proptest::prelude::*;
use steptrace_models::MlpConfig;

use super::*;

fn mlp() -> MlpConfig {
    MlpConfig::new(8, 3).with_hidden(vec![4])
}

/// A record of [`mlp`], as `--save-init` writes it.
fn good_record() -> Vec<u8> {
    static RECORD: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    RECORD
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("good.bpk");
            let mut cfg = RunConfig::new();
            cfg.save_init = Some(path.clone());
            let config = mlp();
            Start::new(&cfg, "cpu", String::new())
                .apply(ModelKind::Mlp, &config, config.init(&Device::flex()))
                .unwrap();
            std::fs::read(path).unwrap()
        })
        .clone()
}

/// Loads `bytes` as `--init`: `Ok(weights)` when the model started from them.
fn try_start(bytes: &[u8]) -> Result<Vec<f32>, String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mutated.bpk");
    std::fs::write(&path, bytes).unwrap();
    let mut cfg = RunConfig::new();
    cfg.init = Some(path);
    let config = mlp();
    let model = Start::new(&cfg, "cpu", String::new())
        .apply(ModelKind::Mlp, &config, config.init(&Device::flex()))
        .map_err(|e| e.to_string())?;
    Ok(super::tests::weights(&model))
}

/// What a mutated file that loads must have started the model from: its tensors as burnpack
/// reads them, in name order.
fn file_weights(bytes: &[u8]) -> Vec<f32> {
    let reader = burn_pack::Reader::from_bytes(Bytes::from_bytes_vec(bytes.to_vec())).expect("it loaded");
    let mut tensors = reader.into_tensors().expect("it loaded");
    tensors.sort_by(|a, b| a.name.cmp(&b.name));
    tensors
        .iter()
        .flat_map(|t| {
            t.to_bytes()
                .unwrap()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The rule every mutation is held to.
fn holds(bytes: &[u8]) -> Result<(), String> {
    match try_start(bytes) {
        Ok(started) => {
            let expected = file_weights(bytes);
            let same = started.len() == expected.len()
                && started.iter().zip(&expected).all(|(a, b)| a.to_bits() == b.to_bits());
            if same {
                Ok(())
            } else {
                Err("the model started from other weights than the file holds".into())
            }
        }
        Err(message) if message.starts_with("--init ") && !message.contains("panicked") => Ok(()),
        Err(message) => Err(format!("unclear error: {message}")),
    }
}

#[test]
fn the_unmutated_record_starts_the_model() {
    holds(&good_record()).unwrap();
    assert!(try_start(&good_record()).is_ok());
}

#[test]
fn every_cut_and_extension_is_refused_or_exact() {
    let good = good_record();
    for len in 0..good.len() {
        let err = try_start(&good[..len]).expect_err("a cut record is refused");
        assert!(err.starts_with("--init "), "{len}: {err}");
    }
    let mut longer = good.clone();
    longer.extend_from_slice(&[0xAB; 300]);
    holds(&longer).unwrap();
}

/// The header's metadata length (bytes 6..10, little-endian) and every 1, 2, 4 and 8-byte
/// window of the metadata (where the tensors' offsets, shapes and lengths are encoded) set to
/// extreme values.
#[test]
fn overwritten_length_fields_are_refused_or_exact() {
    let good = good_record();
    let metadata_len = u32::from_le_bytes([good[6], good[7], good[8], good[9]]) as usize;
    for value in [0u32, 1, 9, metadata_len as u32 - 1, metadata_len as u32 + 1, 1 << 20, u32::MAX - 1, u32::MAX] {
        let mut bytes = good.clone();
        bytes[6..10].copy_from_slice(&value.to_le_bytes());
        holds(&bytes).map_err(|e| format!("metadata length {value}: {e}")).unwrap();
    }
    for width in [1usize, 2, 4, 8] {
        for at in (10..10 + metadata_len).step_by(width.max(3)) {
            for fill in [0x00u8, 0xFF, 0x7F, 0x1B] {
                let mut bytes = good.clone();
                let end = (at + width).min(bytes.len());
                bytes[at..end].fill(fill);
                holds(&bytes).map_err(|e| format!("bytes {at}..{end} set to {fill:#04x}: {e}")).unwrap();
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn flipped_bits_are_refused_or_exact(flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..6)) {
        let mut bytes = good_record();
        for (at, bit) in flips {
            let at = at.index(bytes.len());
            bytes[at] ^= 1 << bit;
        }
        prop_assert!(holds(&bytes).is_ok(), "{:?}", holds(&bytes));
    }

    #[test]
    fn overwritten_runs_are_refused_or_exact(at in any::<prop::sample::Index>(), run in prop::collection::vec(any::<u8>(), 1..16)) {
        let mut bytes = good_record();
        let at = at.index(bytes.len());
        let end = (at + run.len()).min(bytes.len());
        bytes[at..end].copy_from_slice(&run[..end - at]);
        prop_assert!(holds(&bytes).is_ok(), "{:?}", holds(&bytes));
    }
}
