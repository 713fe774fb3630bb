//! End-to-end training runs on burn: each model for a few steps under a
//! schedule, on the CPU backend and on wgpu (lavapipe in CI), then the
//! traces are read back.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use steptrace::reader::{read_trace_file, validate, Trace};
use steptrace::Profiler;
use steptrace_burn::backend::{self, BackendChoice, BackendKind, CacheConfig};
use steptrace_models::ModelKind;
use steptrace_tests::expected_files;
use steptrace_workload::{BackendSetting, RunConfig, Trained as RunSummary};

const SCHEDULE: &str = "wait=1,warmup=1,active=2,repeat=2";

/// burn's CPU backend (burn-flex) keeps one process-wide seed: CPU runs in parallel
/// tests would reseed each other between `seed` and model init, so they take
/// turns.
static CPU_RUNS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn cpu_turn(choice: BackendChoice) -> Option<std::sync::MutexGuard<'static, ()>> {
    matches!(choice, BackendChoice::Cpu | BackendChoice::Auto)
        .then(|| CPU_RUNS.lock().unwrap_or_else(|e| e.into_inner()))
}

fn cache() -> CacheConfig {
    // cubecl's configuration can be set once per process: one directory for
    // every test in this binary.
    CacheConfig::at(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cubecl-cache"))
}

fn train(
    model: ModelKind,
    dataset: &str,
    choice: BackendChoice,
    steps: u64,
    out: &Path,
) -> Option<(RunSummary, Vec<Trace>)> {
    let selection = steptrace_tests::select_or_skip(choice)?;
    let mut cfg = RunConfig::new();
    cfg.model = model;
    cfg.dataset = dataset.to_owned();
    cfg.backend = BackendSetting::Selected(selection);
    cfg.steps = steps;
    cfg.batch_size = if model == ModelKind::Transformer { 16 } else { 64 };
    cfg.seq_len = 32;
    cfg.learning_rate = 3e-3;
    Some(run_with(&cfg, SCHEDULE, out))
}

fn steps_in(trace: &Trace) -> Vec<u64> {
    let set: BTreeSet<u64> = trace
        .events
        .iter()
        .filter(|e| steptrace_tests::opens_span(e))
        .filter_map(|e| e.name.strip_prefix("ProfilerStep#")?.parse().ok())
        .collect();
    set.into_iter().collect()
}

/// The span paths (`a>b>c`) on the thread that runs `ProfilerStep`s, step
/// numbers left out.
fn paths(trace: &Trace) -> BTreeSet<String> {
    let Some(anchor) = trace.events.iter().find(|e| e.name.starts_with("ProfilerStep#")) else {
        return BTreeSet::new();
    };
    steptrace_tests::nesting_paths(trace, &anchor.name)
        .into_iter()
        .map(|p| {
            p.split('>')
                .map(|n| if n.starts_with("ProfilerStep#") { "ProfilerStep" } else { n })
                .collect::<Vec<_>>()
                .join(">")
        })
        .collect()
}

fn check(model: ModelKind, dataset: &str, choice: BackendChoice) {
    let dir = tempfile::tempdir().unwrap();
    let steps = 40;
    let Some((summary, traces)) = train(model, dataset, choice, steps, dir.path()) else { return };
    let expected = expected_files(0, 1, 1, 2, 2, false, steps);
    assert_eq!(traces.len(), expected.len());
    for (trace, want) in traces.iter().zip(&expected) {
        assert_eq!(&steps_in(trace), want);
        assert!(validate(trace).is_empty(), "{:?}", validate(trace));
        let paths = paths(trace);
        for want in [
            "ProfilerStep>data.load",
            "ProfilerStep>transfer.h2d",
            "ProfilerStep>train.step>forward",
            "ProfilerStep>train.step>loss",
            "ProfilerStep>train.step>backward",
            "ProfilerStep>train.step>optimizer",
            "ProfilerStep>sync",
        ] {
            assert!(paths.contains(want), "{model} on {choice}: missing {want} in {paths:?}");
        }
        let manifest = &trace.metadata["metadata"]["manifest"];
        assert_eq!(manifest["model"], model.name());
        assert_eq!(manifest["dataset"], dataset);
        assert_eq!(manifest["sync_policy"], "step");
        assert_eq!(manifest["backend"], summary.backend.as_str());
        assert!(manifest["parameters"].as_u64().unwrap() > 0);
        assert!(manifest["input_shape"].is_array());
        let kind = manifest["backend_kind"].as_str().unwrap();
        assert_eq!(kind, if choice == BackendChoice::Cpu { "cpu" } else { "wgpu" });
        assert!(!summary.backend.starts_with("cuda"));
    }
    // Loss falls over a short run.
    let (first, last) = (summary.first_loss.unwrap(), summary.last_loss.unwrap());
    assert!(last < 0.85 * first, "{model} on {choice}: loss {first} -> {last}");
    assert!(summary.held_out.is_some());
    assert_eq!(summary.steps.len() as u64, steps);
    cold_start_checked(&summary, &traces[0], choice);
}

/// The cold start, itemised at the end of step 0: not applicable on the CPU (burn-flex); on wgpu its
/// phases add up, or (runs of this binary start in parallel, in one process) it says why
/// it was not measured.
fn cold_start_checked(summary: &RunSummary, trace: &Trace, choice: BackendChoice) {
    use steptrace::format::Figure;
    let cold = summary.cold_start.as_ref().expect("step 0 ended");
    let startup = &trace.metadata["metadata"]["manifest"]["startup"];
    // The trace holds the same breakdown (its floats may differ in the last digit).
    let written: Figure<steptrace::format::ColdStart> = serde_json::from_value(startup["cold_start"].clone()).unwrap();
    match (&written, cold) {
        (Figure::Known(w), Figure::Known(c)) => {
            assert_eq!((&w.cache, &w.first_step.compile.kernels), (&c.cache, &c.first_step.compile.kernels))
        }
        (w, c) => assert_eq!(w, c),
    }
    match (choice, cold) {
        (BackendChoice::Cpu, Figure::Absent(why)) => {
            assert_eq!(why, BackendKind::NOT_CUBECL);
            assert_eq!(startup["cubecl_cache"], BackendKind::NOT_CUBECL);
        }
        (BackendChoice::Wgpu, Figure::Known(c)) => {
            for phase in [&c.setup, &c.first_step] {
                let sum: f64 = phase.parts().iter().map(|(_, ms)| ms).sum();
                assert!((sum - phase.ms).abs() < 1e-6, "{phase:?}");
            }
            assert_eq!(c.first_step.ms, summary.first_step_ms);
            assert_eq!(startup["cubecl_cache"], c.cache.label.as_str());
            assert!(summary.cache.ends_with(&format!("({})", c.cache.label)), "{}", summary.cache);
        }
        (BackendChoice::Wgpu, Figure::Absent(why)) => assert!(why.contains("another run in this process"), "{why}"),
        (choice, cold) => panic!("{choice}: {cold:?}"),
    }
}

#[test]
fn mlp_on_cpu() {
    check(ModelKind::Mlp, "digits", BackendChoice::Cpu);
}

#[test]
fn convnet_on_cpu() {
    check(ModelKind::ConvNet, "digits", BackendChoice::Cpu);
}

#[test]
fn transformer_on_cpu() {
    check(ModelKind::Transformer, "shakespeare", BackendChoice::Cpu);
}

#[test]
fn mlp_on_wgpu() {
    check(ModelKind::Mlp, "digits", BackendChoice::Wgpu);
}

#[test]
fn convnet_on_wgpu() {
    check(ModelKind::ConvNet, "digits", BackendChoice::Wgpu);
}

#[test]
fn transformer_on_wgpu() {
    check(ModelKind::Transformer, "shakespeare", BackendChoice::Wgpu);
}

#[test]
fn auto_without_cuda_is_labelled_as_a_fallback() {
    if backend::probe(BackendKind::Cuda).available {
        eprintln!("CUDA is available here: nothing to fall back from");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (summary, traces) = train(ModelKind::Mlp, "digits", BackendChoice::Auto, 6, dir.path()).unwrap();
    assert!(summary.fallback);
    assert!(
        summary.backend.contains("FALLBACK") && summary.backend.contains("CUDA unavailable"),
        "{}",
        summary.backend
    );
    for trace in &traces {
        let manifest = &trace.metadata["metadata"]["manifest"];
        assert!(manifest["fallback_reason"].as_str().unwrap().contains("CUDA"), "{manifest}");
        assert_eq!(manifest["requested_backend"], "auto");
        assert!(manifest["backend"].as_str().unwrap().contains("FALLBACK"));
    }
}

#[test]
fn explicit_cuda_without_cuda_is_a_clear_error() {
    if backend::probe(BackendKind::Cuda).available {
        return;
    }
    let err = backend::select(BackendChoice::Cuda).unwrap_err().to_string();
    assert!(err.contains("CUDA") && err.contains("unavailable"), "{err}");
}

#[test]
fn the_same_seed_gives_the_same_first_loss() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let (x, _) = train(ModelKind::Mlp, "digits", BackendChoice::Cpu, 6, a.path()).unwrap();
    let (y, _) = train(ModelKind::Mlp, "digits", BackendChoice::Cpu, 6, b.path()).unwrap();
    assert_eq!(x.first_loss, y.first_loss);
}

#[test]
fn a_slow_loader_shows_in_data_load() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = RunConfig::new();
    cfg.backend = BackendSetting::Requested(BackendChoice::Cpu);
    cfg.steps = 6;
    cfg.loader_delay_ms = 20;
    let (summary, _) = run_cfg(&cfg, "wait=1,warmup=1,active=3,repeat=1", dir.path());
    let trace = read_trace_file(&summary.traces[0].path).unwrap();
    // Every recorded data.load lasts at least the planted delay.
    let spans = steptrace::analysis::Spans::from_trace(&trace);
    let loads: Vec<f64> = spans.spans.iter().filter(|s| s.name == "data.load").map(|s| s.dur()).collect();
    assert_eq!(loads.len(), 3);
    assert!(loads.iter().all(|us| *us >= 20_000.0), "{loads:?}");
    assert_eq!(trace.metadata["metadata"]["manifest"]["loader_delay_ms"], 20);
}

fn run_cfg(cfg: &RunConfig, schedule: &str, out: &Path) -> (RunSummary, Vec<Trace>) {
    run_with(cfg, schedule, out)
}

/// Runs `cfg` under a scoped subscriber with a profiler writing into `out`,
/// then reads the traces back.
fn run_with(cfg: &RunConfig, schedule: &str, out: &Path) -> (RunSummary, Vec<Trace>) {
    let state = backend::configure_cubecl_cache(&cache());
    let _turn = cpu_turn(cfg.backend.requested());
    let (layer, profiler) = Profiler::builder(schedule.parse().unwrap()).out_dir(out).worker("e2e").build().unwrap();
    let summary =
        steptrace_tests::with_layer(layer, || steptrace_workload::run(cfg, &state, Some(profiler), &mut |_| {}))
            .unwrap();
    let traces = summary.traces.iter().map(|t| read_trace_file(&t.path).unwrap()).collect();
    (summary, traces)
}

#[test]
fn inference_keeps_model_load_apart_from_requests() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = RunConfig::new();
    cfg.backend = BackendSetting::Requested(BackendChoice::Cpu);
    cfg.mode = steptrace_burn::Mode::Infer;
    cfg.steps = 5;
    let (summary, traces) = run_cfg(&cfg, "wait=1,warmup=1,active=2,repeat=1", dir.path());
    assert!(summary.model_load_ms.is_some());
    let paths = paths(&traces[0]);
    assert!(paths.contains("ProfilerStep>infer.request>forward"), "{paths:?}");
    assert!(!paths.iter().any(|p| p.contains("train.step") || p.contains("model.load")), "{paths:?}");
    let manifest = &traces[0].metadata["metadata"]["manifest"];
    assert_eq!(manifest["mode"], "eval (inference)");
    assert!(manifest["model_load_ms"].as_f64().is_some());
}

#[test]
fn sync_policies_are_visible_and_named() {
    for (policy, want, unwanted) in [
        (steptrace_burn::SyncPolicy::None, None, Some("ProfilerStep>sync")),
        (steptrace_burn::SyncPolicy::Step, Some("ProfilerStep>sync"), Some("ProfilerStep>train.step>forward>sync")),
        (steptrace_burn::SyncPolicy::Phase, Some("ProfilerStep>train.step>backward>sync"), None),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = RunConfig::new();
        cfg.backend = BackendSetting::Requested(BackendChoice::Cpu);
        cfg.sync = policy;
        cfg.steps = 5;
        let (_, traces) = run_cfg(&cfg, "wait=1,warmup=1,active=2,repeat=1", dir.path());
        let paths = paths(&traces[0]);
        if let Some(want) = want {
            assert!(paths.contains(want), "{policy}: {paths:?}");
        }
        if let Some(unwanted) = unwanted {
            assert!(!paths.contains(unwanted), "{policy}: {paths:?}");
        }
        let manifest = &traces[0].metadata["metadata"]["manifest"];
        assert_eq!(manifest["sync_policy"], policy.to_string());
        assert!(manifest["sync_meaning"].as_str().unwrap().len() > 20);
    }
}

#[test]
fn prefetch_threads_read_batches_in_their_own_spans() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = RunConfig::new();
    cfg.backend = BackendSetting::Requested(BackendChoice::Cpu);
    cfg.prefetch = 2;
    // Reads slower than a CPU step, one batch queued a worker: the steps wait for batches read
    // while they run, so a loaded machine cannot have read the window's batches before it.
    cfg.prefetch_depth = 1;
    cfg.loader_delay_ms = 10;
    cfg.steps = 8;
    let (summary, traces) = run_cfg(&cfg, "wait=1,warmup=1,active=3,repeat=1", dir.path());
    let trace = &traces[0];
    let paths = paths(trace);
    assert!(paths.contains("ProfilerStep>data.wait"), "{paths:?}");
    assert!(!paths.contains("ProfilerStep>data.load"), "{paths:?}");
    let threads = steptrace_tests::thread_names(trace);
    assert!(threads.iter().any(|t| t.starts_with("loader-")), "{threads:?}");
    // Same batches as without prefetch: the same seed gives the same losses.
    let mut plain = cfg.clone();
    plain.prefetch = 0;
    let other = tempfile::tempdir().unwrap();
    let (again, _) = run_cfg(&plain, "wait=1,warmup=1,active=3,repeat=1", other.path());
    assert_eq!(summary.first_loss, again.first_loss);
    assert_eq!(summary.last_loss, again.last_loss);
}

/// `plant_upload` adds one 4000-byte upload per step and changes nothing
/// else: the losses of every step are bit-identical, and the manifest
/// records the plant.
#[test]
fn a_planted_upload_leaves_the_loss_trajectory_identical() {
    let mut cfg = RunConfig::new();
    cfg.backend = BackendSetting::Requested(BackendChoice::Cpu);
    cfg.steps = 6;
    cfg.loss_every = 1;
    let schedule = "wait=1,warmup=1,active=3,repeat=1";
    let plain_dir = tempfile::tempdir().unwrap();
    let (plain, plain_traces) = run_cfg(&cfg, schedule, plain_dir.path());
    cfg.plant_upload = true;
    let planted_dir = tempfile::tempdir().unwrap();
    let (planted, planted_traces) = run_cfg(&cfg, schedule, planted_dir.path());
    let losses = |s: &RunSummary| s.steps.iter().map(|r| r.loss.map(f64::to_bits)).collect::<Vec<_>>();
    assert_eq!(losses(&plain).len(), 6);
    assert!(losses(&plain).iter().all(Option::is_some));
    assert_eq!(losses(&plain), losses(&planted));
    assert_eq!(plain.held_out, planted.held_out);
    assert_eq!(plain_traces[0].metadata["metadata"]["manifest"]["plant_upload"], false);
    assert_eq!(planted_traces[0].metadata["metadata"]["manifest"]["plant_upload"], true);
}
