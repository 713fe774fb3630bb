//! The run manifest: how the run that wrote a trace was made.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::cold_start::{ColdStart, Figure};

/// How a run was made, written into every trace's metadata (and into the
/// header of a partial file).
///
/// Known fields are typed; anything else (a user's own fields, a backend
/// crate's details) lives in [`extra`](Manifest::extra) and is written
/// beside them. Every field is optional, so that traces of other writers
/// and of older versions read.
///
/// ```
/// use steptrace::format::Manifest;
/// let mut m = Manifest::default();
/// m.model = Some("mlp".into());
/// m.set("batch_size", 64.into())?;          // a known field, typed
/// m.set("team", "vision".into())?;          // a user's own field
/// assert_eq!(m.batch_size, Some(64));
/// assert_eq!(m.extra["team"], "vision");
/// assert!(m.set("batch_size", "many".into()).is_err());
/// # Ok::<(), steptrace::format::ManifestError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Manifest {
    /// Model name (`mlp`, `convnet`, `transformer`, or a user's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Trainable parameters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<u64>,
    /// Samples per step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<u64>,
    /// Numeric precision of the weights (`f32`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precision: Option<String>,
    /// `train` or `eval (inference)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The backend label, with FALLBACK and its reason when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// `cuda`, `wgpu` or `cpu`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_kind: Option<String>,
    /// The device or adapter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Why the requested backend was not used; `None` when it was.
    pub fallback_reason: Option<String>,
    /// The backend that was asked for (`auto`, `cuda`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_backend: Option<String>,
    /// Dataset name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dataset: Option<String>,
    /// Where the data came from (never a private path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_source: Option<String>,
    /// Whether the data is generated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub synthetic: Option<bool>,
    /// The data's licence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_licence: Option<String>,
    /// The random seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Where the initial weights came from: `seed 42` (burn's random draw,
    /// which differs per backend) or `record init.bpk` (a saved initial
    /// state, the file name only: the same on every backend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init: Option<String>,
    /// The SHA-256 (hex) of the record file that holds the run's starting state: the
    /// `--init` record it loaded, else the `--save-init` record it wrote (what
    /// `sha256sum FILE` prints). Absent when no record was read or written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_sha256: Option<String>,
    /// The SHA-256 (hex) of that record's weights alone (every tensor's name, type, shape
    /// and bytes): equal for two runs that started from the same weights, whatever file
    /// held them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_weights_sha256: Option<String>,
    /// `none`, `step` or `phase`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync_policy: Option<String>,
    /// What the sync policy means for the numbers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync_meaning: Option<String>,
    /// Prefetch threads (0: batches are read on the training thread).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefetch_workers: Option<u64>,
    /// A delay planted in the loader, ms (an experiment's knob).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loader_delay_ms: Option<u64>,
    /// Whether a repeated upload was planted in every training step (a
    /// deliberate inefficiency, an experiment's knob: one constant re-created
    /// on the device from host data each step).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plant_upload: Option<bool>,
    /// Whether the backend's internal spans were opted in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub internals: Option<bool>,
    /// Steps the run was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<u64>,
    /// Steps `0..startup_steps` are startup, kept apart from steady state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_steps: Option<u64>,
    /// Free-form notes given by the user.
    pub notes: Vec<String>,
    /// Inference mode: time to load the model, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_load_ms: Option<f64>,
    /// The first batch's input shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_shape: Option<Vec<u64>>,
    /// Startup figures measured before any window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup: Option<StartupInfo>,
    /// The command that reproduces the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The device-activity mode asked for: `auto` or `off` (what was
    /// recorded, or why not, is the metadata's `device_activity`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_activity: Option<String>,
    /// Every other field.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Startup figures: what the run measured before the first window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct StartupInfo {
    /// From process start to step 0, ms (data, model, loader set-up).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub setup_ms: Option<f64>,
    /// Step 0's wall time, ms (compilation, autotune, first shapes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_step_ms: Option<f64>,
    /// What cubecl's persistent caches gave this run: `cold`, `partly
    /// warm` or `warm`, told from what cubecl compiled and autotuned (older
    /// traces: from whether the cache directory held files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cubecl_cache: Option<String>,
    /// The set-up and the first step itemised (device client, compilation,
    /// autotune, rest), or why not (`not applicable: burn-flex does not use
    /// cubecl`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cold_start: Option<Figure<ColdStart>>,
    /// Every other field.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A manifest field that could not be set.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("manifest field `{key}` cannot take the value {value}: {reason}")]
pub struct ManifestError {
    /// The field.
    pub key: String,
    /// The value, as JSON.
    pub value: String,
    /// Why it does not fit (serde's explanation).
    pub reason: String,
}

impl Manifest {
    /// Sets a field by name: a known field gets the value typed, any other
    /// name goes to [`extra`](Manifest::extra).
    ///
    /// # Errors
    ///
    /// When `value` does not fit a known field's type; the manifest is
    /// unchanged then.
    pub fn set(&mut self, key: &str, value: Value) -> Result<(), ManifestError> {
        let fail = |e: serde_json::Error| ManifestError {
            key: key.to_owned(),
            value: value.to_string(),
            reason: e.to_string(),
        };
        let mut map = match serde_json::to_value(&*self).map_err(fail)? {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        map.insert(key.to_owned(), value.clone());
        *self = serde_json::from_value(Value::Object(map)).map_err(fail)?;
        Ok(())
    }

    /// Adds every field of `fields` (a struct that serialises to a JSON
    /// object, such as a backend crate's details) to
    /// [`extra`](Manifest::extra).
    ///
    /// # Errors
    ///
    /// When `fields` does not serialise to an object.
    pub fn extend_extra(&mut self, fields: &impl Serialize) -> Result<(), serde_json::Error> {
        match serde_json::to_value(fields)? {
            Value::Object(map) => {
                self.extra.extend(map);
                Ok(())
            }
            other => Err(serde::ser::Error::custom(format!("expected an object of fields, got {other}"))),
        }
    }

    /// Sets every field that `other` sets (non-null, non-empty), keeping
    /// the fields it leaves unset: a run loop's manifest added to what the
    /// caller already put there (the command, a user's own fields).
    pub fn absorb(&mut self, other: Manifest) {
        let (Ok(Value::Object(mut mine)), Ok(Value::Object(theirs))) =
            (serde_json::to_value(&*self), serde_json::to_value(&other))
        else {
            return;
        };
        for (key, value) in theirs {
            let unset = value.is_null() || value.as_array().is_some_and(Vec::is_empty);
            if !unset || !mine.contains_key(&key) {
                mine.insert(key, value);
            }
        }
        if let Ok(merged) = serde_json::from_value(Value::Object(mine)) {
            *self = merged;
        }
    }

    /// The manifest without the fields a run fills in as it goes (startup
    /// figures, the first input shape): two cycles of one run have the same
    /// identity.
    #[must_use]
    pub fn identity(&self) -> Manifest {
        Manifest { startup: None, input_shape: None, model_load_ms: None, ..self.clone() }
    }

    /// How many fields are set: later cycles of a run know more.
    #[must_use]
    pub fn known_fields(&self) -> usize {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map.values().filter(|v| !v.is_null()).count(),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_manifest_of_the_first_round_reads_with_every_field_in_place() {
        let old = json!({
            "model": "mlp", "parameters": 25418, "batch_size": 64, "precision": "f32", "mode": "train",
            "backend": "cpu (ndarray)", "backend_kind": "cpu", "device": "cpu", "fallback_reason": null,
            "requested_backend": "cpu", "burn_type": "Autodiff<NdArray>", "fusion": true,
            "cubecl_cache": {"dir": "~/.cache/steptrace/cubecl", "state": "cold"},
            "dataset": "digits", "seed": 7, "sync_policy": "step", "prefetch_workers": 0, "steps": 40,
            "startup_steps": 8, "notes": [], "input_shape": [64, 64],
            "startup": {"setup_ms": 12.5, "first_step_ms": 40.0, "cubecl_cache": "cold"},
            "command": "steptrace train --backend cpu"
        });
        let m: Manifest = serde_json::from_value(old.clone()).unwrap();
        assert_eq!(m.batch_size, Some(64));
        assert_eq!(m.startup.as_ref().and_then(|s| s.first_step_ms), Some(40.0));
        assert_eq!(m.extra["burn_type"], "Autodiff<NdArray>");
        assert_eq!(m.extra["cubecl_cache"]["state"], "cold");
        // Written back, nothing is lost or renamed.
        let back = serde_json::to_value(&m).unwrap();
        for (key, value) in old.as_object().unwrap() {
            assert_eq!(&back[key], value, "{key}");
        }
    }

    #[test]
    fn absorbing_keeps_what_the_other_leaves_unset() {
        let mut caller = Manifest { command: Some("steptrace train".into()), ..Manifest::default() };
        caller.extra.insert("team".into(), json!("vision"));
        caller.notes = vec!["first".into()];
        let run = Manifest { model: Some("mlp".into()), batch_size: Some(64), ..Manifest::default() };
        caller.absorb(run);
        assert_eq!(caller.command.as_deref(), Some("steptrace train"));
        assert_eq!((caller.model.as_deref(), caller.batch_size), (Some("mlp"), Some(64)));
        assert_eq!(caller.extra["team"], "vision");
        assert_eq!(caller.notes, ["first"]);
    }

    #[test]
    fn identity_ignores_what_a_run_fills_in_later() {
        let mut a = Manifest { model: Some("mlp".into()), ..Manifest::default() };
        let b = a.clone();
        a.startup = Some(StartupInfo { setup_ms: Some(1.0), ..StartupInfo::default() });
        a.input_shape = Some(vec![1, 2]);
        assert_ne!(a, b);
        assert_eq!(a.identity(), b.identity());
        assert!(a.known_fields() > b.known_fields());
    }

    #[test]
    fn extras_extend_and_a_bad_value_leaves_the_manifest_alone() {
        #[derive(Serialize)]
        struct Backend {
            burn_version: &'static str,
        }
        let mut m = Manifest::default();
        m.extend_extra(&Backend { burn_version: "0.21.0" }).unwrap();
        assert_eq!(m.extra["burn_version"], "0.21.0");
        assert!(m.extend_extra(&3).is_err());
        let before = m.clone();
        let err = m.set("steps", json!(-1)).unwrap_err();
        assert!(err.to_string().contains("steps"), "{err}");
        assert_eq!(m, before);
    }
}
