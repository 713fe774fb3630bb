//! What instrumentation costs: a span's enter+exit outside and inside the
//! recorded window, and the sink's sustained throughput.
//!
//! Run with `cargo bench -p steptrace --bench overhead`; figures are kept in
//! docs/benchmarks.md.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use steptrace::{Profiler, Schedule};
use tracing::Dispatch;
use tracing_subscriber::prelude::*;

/// The profiler as `try_install` sets it up: the gate filters globally.
fn dispatch_for(schedule: &str, dir: &std::path::Path, limit: u64) -> (Dispatch, Profiler) {
    let schedule: Schedule = schedule.parse().expect("schedule");
    let (layer, profiler) = Profiler::builder(schedule)
        .out_dir(dir)
        .max_file_bytes(limit)
        .build_global()
        .expect("profiler");
    (Dispatch::new(tracing_subscriber::registry().with(layer)), profiler)
}

/// The composable form: the gate as a per-layer filter.
fn per_layer_dispatch_for(schedule: &str, dir: &std::path::Path) -> (Dispatch, Profiler) {
    let schedule: Schedule = schedule.parse().expect("schedule");
    let (layer, profiler) = Profiler::builder(schedule).out_dir(dir).build().expect("profiler");
    (Dispatch::new(tracing_subscriber::registry().with(layer)), profiler)
}

fn span_cost(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut group = c.benchmark_group("span_enter_exit");
    group.measurement_time(Duration::from_secs(4));

    group.bench_function("no_subscriber", |b| {
        b.iter(|| drop(tracing::info_span!(target: "steptrace", "forward").entered()))
    });

    // Wait phase: the schedule never reaches its first cycle.
    let (dispatch, mut profiler) = dispatch_for("skip_first=1000000000,active=1", dir.path(), 1 << 20);
    tracing::dispatcher::with_default(&dispatch, || {
        profiler.start();
        group.bench_function("outside_window", |b| {
            b.iter(|| drop(tracing::info_span!(target: "steptrace", "forward").entered()))
        });
    });
    drop(profiler);

    let (dispatch, mut profiler) = per_layer_dispatch_for("skip_first=1000000000,active=1", dir.path());
    tracing::dispatcher::with_default(&dispatch, || {
        profiler.start();
        group.bench_function("outside_window_per_layer_filter", |b| {
            b.iter(|| drop(tracing::info_span!(target: "steptrace", "forward").entered()))
        });
    });
    drop(profiler);

    // Active window, written to disk until the cap, then serialised and
    // discarded by the writer thread (the training thread's cost is the same).
    let (dispatch, mut profiler) = dispatch_for("wait=0,warmup=1,active=1000000000", dir.path(), 256 << 20);
    tracing::dispatcher::with_default(&dispatch, || {
        profiler.start();
        profiler.step(); // past the warmup step
        group.bench_function("inside_window", |b| {
            b.iter(|| drop(tracing::info_span!(target: "steptrace", "forward").entered()))
        });
    });
    group.finish();
    drop(profiler);
}

fn writer_throughput(c: &mut Criterion) {
    const SPANS: u64 = 100_000;
    let mut group = c.benchmark_group("sink");
    group.sample_size(10);
    group.throughput(Throughput::Elements(2 * SPANS));
    group.bench_function("write_and_finalise_200k_events", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let dir = tempfile::tempdir().expect("tempdir");
                let (dispatch, mut profiler) = dispatch_for("wait=0,warmup=1,active=2,repeat=1", dir.path(), u64::MAX);
                let start = Instant::now();
                tracing::dispatcher::with_default(&dispatch, || {
                    profiler.start();
                    profiler.step(); // past the warmup step
                });
                // A fresh thread: tracing-chrome binds each thread to one sink.
                let d = dispatch.clone();
                std::thread::spawn(move || {
                    tracing::dispatcher::with_default(&d, || {
                        for _ in 0..SPANS {
                            drop(tracing::info_span!(target: "steptrace", "forward").entered());
                        }
                    })
                })
                .join()
                .expect("emitter");
                tracing::dispatcher::with_default(&dispatch, || {
                    profiler.step();
                    profiler.step();
                });
                let saved = profiler.finish().expect("saved");
                total += start.elapsed();
                assert!(saved[0].events as u64 >= 2 * SPANS);
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, span_cost, writer_throughput);
criterion_main!(benches);
