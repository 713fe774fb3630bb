//! What NVTX ranges cost when no tool is attached (the normal case for a binary built with
//! the `nvtx` feature): a steptrace span's enter+exit outside the recorded window, where the
//! gate keeps steptrace's own spans for the NVTX layer, against the same span without it.
//!
//! Run with `cargo bench -p steptrace-burn --no-default-features --features cpu,nvtx --bench
//! nvtx`; figures are kept in docs/benchmarks.md.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use steptrace::{Profiler, Schedule};
use steptrace_burn::NvtxLayer;
use tracing::Dispatch;
use tracing_subscriber::prelude::*;

/// The wait phase: the schedule never reaches its first cycle.
const WAITING: &str = "skip_first=1000000000,active=1";

fn span() {
    drop(tracing::info_span!(target: "steptrace", "forward").entered());
}

fn layer() {
    steptrace::layer("encoder.layer2", || std::hint::black_box(1));
}

fn waiting(dir: &std::path::Path, own_spans: bool, nvtx: bool) -> (Dispatch, Profiler) {
    let schedule: Schedule = WAITING.parse().expect("schedule");
    let mut builder = Profiler::builder(schedule).out_dir(dir);
    if own_spans {
        builder = builder.own_spans_in_every_step();
    }
    let (layer, profiler) = builder.build_global().expect("profiler");
    let registry = tracing_subscriber::registry().with(layer);
    let dispatch = if nvtx { Dispatch::new(registry.with(NvtxLayer)) } else { Dispatch::new(registry) };
    (dispatch, profiler)
}

fn nvtx_cost(c: &mut Criterion) {
    assert!(std::env::var_os("NVTX_INJECTION64_PATH").is_none(), "measures NVTX with no tool attached");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut group = c.benchmark_group("nvtx_outside_window");
    group.measurement_time(Duration::from_secs(4));
    for (name, own, nvtx) in [("plain", false, false), ("own_spans", true, false), ("nvtx", true, true)] {
        let (dispatch, mut profiler) = waiting(dir.path(), own, nvtx);
        tracing::dispatcher::with_default(&dispatch, || {
            profiler.start();
            group.bench_function(format!("span_{name}"), |b| b.iter(span));
            group.bench_function(format!("layer_{name}"), |b| b.iter(layer));
        });
        drop(profiler);
    }
    group.finish();
}

criterion_group!(benches, nvtx_cost);
criterion_main!(benches);
