//! What a session writes down about its run: the manifest's fields at its start, the startup
//! figures once step 0 has ended, and the summary at its end.

use std::time::Instant;

use serde::Serialize;
use steptrace::format::names::counters;
use steptrace::format::{ColdStart, Figure, StartupInfo};
use steptrace::SavedTrace;

use super::lifecycle::ms_between;
use super::Session;
use crate::backend::{self, BackendKind};
use crate::console as lines;
use crate::summary::{startup_steps, Mode, RunSummary, Stats};

/// What the manifest says of the run's cache state until step 0 has ended.
pub(crate) const CACHE_STATE_PENDING: &str = "not known until step 0 ends";

/// What the manifest says of burn itself (beside the generic fields).
#[derive(Serialize)]
struct BurnFields {
    burn_type: String,
    /// `true` on cubecl backends; on the CPU (burn-flex), a "not applicable" string.
    fusion: serde_json::Value,
    autotune: serde_json::Value,
    /// cubecl's autotune level and where it comes from (`--autotune-level`, ...).
    autotune_level: serde_json::Value,
    cubecl_cache: serde_json::Value,
    burn_version: &'static str,
    /// On CUDA, how cubecl compiles kernels (LLVM NVPTX or NVRTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel_compiler: Option<&'static str>,
}

/// cubecl's kernel caches.
#[derive(Serialize)]
struct CubeclCache {
    dir: String,
    compilation_cache: bool,
    autotune_cache: bool,
    /// Files in `dir` before the run (they may be another model's: no label by itself).
    files_before: usize,
    /// `cold`, `partly warm` or `warm`, told at the end of step 0 from what cubecl
    /// compiled and tuned (the startup's `cubecl_cache`).
    state: &'static str,
}

impl Session {
    /// The manifest fields the session knows at its start.
    pub(super) fn describe_run(&self) {
        let Some(profiler) = &self.profiler else { return };
        let selection = &self.selection;
        let cubecl = selection.kind.uses_cubecl();
        let applies = |on: serde_json::Value| if cubecl { on } else { BackendKind::NOT_CUBECL.into() };
        let cache = CubeclCache {
            dir: steptrace::settings::home_relative(&self.cache.dir),
            compilation_cache: self.cache.compilation_cache,
            autotune_cache: self.cache.autotune_cache,
            files_before: self.cache.files_before,
            state: CACHE_STATE_PENDING,
        };
        let level =
            serde_json::json!({ "level": self.cache.autotune_level, "source": self.cache.autotune_level_source });
        let burn = BurnFields {
            burn_type: selection.backend_type_name(),
            fusion: applies(true.into()),
            autotune: applies(true.into()),
            autotune_level: applies(level),
            cubecl_cache: applies(serde_json::to_value(&cache).unwrap_or_default()),
            burn_version: crate::BURN_VERSION,
            kernel_compiler: (selection.kind == BackendKind::Cuda).then(backend::cuda_kernel_compiler).flatten(),
        };
        let precision = format!("{:?}", burn::tensor::DType::from(self.device.settings().float_dtype)).to_lowercase();
        profiler.update_manifest(|m| {
            m.backend = Some(selection.label());
            m.backend_kind = Some(selection.kind.to_string());
            m.device = Some(selection.device.clone());
            m.fallback_reason = selection.fallback_reason.clone();
            m.requested_backend = Some(selection.requested.to_string());
            m.mode.get_or_insert_with(|| "train".into());
            m.precision.get_or_insert(precision);
            m.sync_policy = Some(self.sync.to_string());
            m.sync_meaning = Some(self.sync.meaning().to_owned());
            m.startup_steps = Some(self.clock.startup_steps);
            if self.clock.planned_steps.is_some() {
                m.steps = self.clock.planned_steps;
            }
            if let Some(batch) = self.clock.batch_size {
                m.batch_size = Some(batch as u64);
            }
            if self.memory.wanted {
                m.extra.insert("memory_description".into(), serde_json::json!(crate::memory::METHOD));
            }
            // A struct of plain fields always serialises to an object.
            let _ = m.extend_extra(&burn);
        });
    }

    /// The startup figures, now that step 0 has ended at `end`.
    pub(super) fn end_startup(&mut self, end: Instant) {
        if let Some(live) = &mut self.output.live {
            live.stop();
        }
        let setup_end = self.clock.setup_end.unwrap_or(self.clock.started);
        let cold =
            self.clock.startup.take().map(|c| c.finish((self.clock.started, setup_end), (self.clock.step_start, end)));
        self.clock.cold_start = cold.clone();
        if self.output.console.full() {
            lines::cold_start_lines(cold.as_ref());
        }
        let Some(profiler) = &self.profiler else { return };
        let label = self.cache_label();
        let setup_ms = ms_between(self.clock.started, setup_end);
        let first_step_ms = ms_between(self.clock.step_start, end);
        profiler.update_manifest(|m| {
            let mut startup = StartupInfo::default();
            startup.setup_ms = Some(setup_ms);
            startup.first_step_ms = Some(first_step_ms);
            startup.cubecl_cache = Some(label.clone());
            startup.cold_start = cold;
            m.startup = Some(startup);
            if let Some(serde_json::Value::Object(c)) = m.extra.get_mut("cubecl_cache") {
                c.insert("state".to_owned(), label.into());
            }
        });
    }

    /// `cold`, `partly warm` or `warm` from what cubecl compiled and tuned in this run's
    /// start, or why that is not known.
    pub(super) fn cache_label(&self) -> String {
        if !self.selection.kind.uses_cubecl() {
            return BackendKind::NOT_CUBECL.to_owned();
        }
        match &self.clock.cold_start {
            Some(Figure::Known(ColdStart { cache, .. })) => cache.label.clone(),
            Some(Figure::Absent(why)) => why.clone(),
            None => CACHE_STATE_PENDING.to_owned(),
        }
    }

    /// The run's result so far.
    pub(super) fn summary(&mut self, traces: Vec<SavedTrace>, trace_errors: Vec<String>) -> RunSummary {
        let records = std::mem::take(&mut self.clock.records);
        let ran = records.len() as u64;
        let startup = self.startup_of(ran);
        let steady: Vec<f64> = records.iter().skip(startup as usize).map(|r| r.ms).collect();
        let steady_ms = Stats::of(&steady);
        let losses: Vec<f64> = records.iter().filter_map(|r| r.loss).collect();
        let batch = self.clock.batch_size.or(records.first().map(|r| r.samples)).unwrap_or(0);
        let cache_state = self.cache_label();
        let setup_ms = ms_between(self.clock.started, self.clock.setup_end.unwrap_or(self.clock.started));
        RunSummary {
            backend: self.selection.label(),
            backend_kind: self.selection.kind,
            device: self.selection.device.clone(),
            parameters: self.memory.parameters.as_ref().map_or(0, |(_, n)| *n),
            input_shape: self.clock.first_shape.clone().unwrap_or_default(),
            fallback: self.selection.is_fallback(),
            sync: self.sync,
            mode: if self.clock.inferred { Mode::Infer } else { Mode::Train },
            setup_ms,
            model_load_ms: self.clock.model_load_ms,
            first_step_ms: records.first().map_or(0.0, |r| r.ms),
            startup_steps: startup,
            steady_samples_per_s: steady_ms.as_ref().filter(|_| batch > 0).map(|s| batch as f64 / (s.median / 1000.0)),
            steady_ms,
            batch_size: batch,
            first_loss: losses.first().copied(),
            last_loss: losses.last().copied(),
            steps: records,
            held_out: None,
            anomalies: std::mem::take(&mut self.clock.anomalies),
            traces,
            trace_errors,
            cache: if self.selection.kind.uses_cubecl() {
                format!("{} ({cache_state})", steptrace::settings::home_relative(&self.cache.dir))
            } else {
                BackendKind::NOT_CUBECL.to_owned()
            },
            memory: self.memory.wanted.then(|| self.memory_summary()),
            interrupted: self.failure.interrupted.clone(),
            cold_start: self.clock.cold_start.clone(),
        }
    }

    /// What the summary says of device memory.
    pub(super) fn memory_summary(&self) -> String {
        match (&self.memory.note, self.memory.sampler.as_ref().is_some_and(|m| m.last.is_some())) {
            (Some(note), _) => note.clone(),
            (None, true) => format!(
                "observed in recorded steps: counter tracks `{}` and `{}`{}",
                counters::DEVICE_MEMORY,
                counters::MEMORY_CATEGORIES,
                self.memory.sampler.as_ref().and_then(|m| m.query_times()).map_or(String::new(), |t| format!("; {t}"))
            ),
            (None, false) if self.memory.sampler.is_none() => {
                "not observed: the model's parameters were not given (Session::watch)".to_owned()
            }
            (None, false) => {
                "not observed: no recorded step was sampled (memory is sampled in recorded steps only)".to_owned()
            }
        }
    }

    /// Startup steps for a run in which `ran` steps ran: the fifth of the run when it was
    /// declared so (by its length), else what was declared, at most `ran`.
    pub(super) fn startup_of(&self, ran: u64) -> u64 {
        match (self.clock.fixed_startup, self.clock.planned_steps) {
            (false, Some(planned)) => startup_steps(planned.min(ran).max(1)),
            _ => self.clock.startup_steps.min(ran.max(1)),
        }
    }
}
