//! What instrumentation costs: a span's enter+exit outside and inside the
//! recorded window, against tracing-chrome alone in the same run, and the
//! sink's sustained throughput.
//!
//! Run with `cargo bench -p steptrace --bench overhead`; figures are kept in
//! docs/benchmarks.md.
//!
//! Two densities are measured while recording:
//! - **back to back** (`span_enter_exit`): the emitting thread outruns
//!   tracing-chrome's writer thread, so the cost includes waiting for it;
//! - **paced** (`span_paced`): one span every [`PACE`], with a step every
//!   [`SPANS_PER_STEP`] spans, as in a training step, where the writer keeps
//!   up; only the span itself is timed (not the gap, not `step()`).
//!   tracing-chrome alone has no steps: its writer thread parks on its
//!   channel between spans, and each span pays to wake it.
//!
//! Each recorded measurement runs on a fresh thread: tracing-chrome binds a
//! thread to the first Chrome layer it sends to, so steptrace's layer and
//! the bare tracing-chrome layer each get threads of their own.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Bencher, Criterion, Throughput};
use steptrace::{Profiler, Schedule};
use tracing::Dispatch;
use tracing_subscriber::prelude::*;

/// The gap between paced spans (untimed).
const PACE: Duration = Duration::from_micros(20);
/// Spans per training step in the paced runs (about what a step of
/// steptrace's own spans holds).
const SPANS_PER_STEP: u64 = 12;
/// Bytes either writer keeps on disk before discarding the rest.
const CAP: u64 = 256 << 20;

/// The profiler as `try_install` sets it up: the gate filters globally.
fn dispatch_for(schedule: &str, dir: &std::path::Path, limit: u64) -> (Dispatch, Profiler) {
    let schedule: Schedule = schedule.parse().expect("schedule");
    let (layer, profiler) =
        Profiler::builder(schedule).out_dir(dir).max_file_bytes(limit).build_global().expect("profiler");
    (Dispatch::new(tracing_subscriber::registry().with(layer)), profiler)
}

/// The composable form: the gate as a per-layer filter.
fn per_layer_dispatch_for(schedule: &str, dir: &std::path::Path) -> (Dispatch, Profiler) {
    let schedule: Schedule = schedule.parse().expect("schedule");
    let (layer, profiler) = Profiler::builder(schedule).out_dir(dir).build().expect("profiler");
    (Dispatch::new(tracing_subscriber::registry().with(layer)), profiler)
}

/// A file that keeps the first [`CAP`] bytes and discards the rest, as the
/// profiler's size limit does.
struct Capped(std::fs::File, u64);

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.1 + buf.len() as u64 <= CAP {
            self.0.write_all(buf)?;
            self.1 += buf.len() as u64;
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// tracing-chrome alone, configured as steptrace configures it (args on, no
/// locations), writing to a file. Built on a thread of its own, since
/// building a Chrome layer binds the building thread to it.
fn chrome_alone(dir: &std::path::Path) -> (Dispatch, tracing_chrome::FlushGuard) {
    let file = std::fs::File::create(dir.join("alone.json")).expect("file");
    std::thread::spawn(move || {
        let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new()
            .writer(Capped(file, 0))
            .include_args(true)
            .include_locations(false)
            .build();
        (Dispatch::new(tracing_subscriber::registry().with(layer)), guard)
    })
    .join()
    .expect("builder")
}

fn span() {
    drop(tracing::info_span!(target: "steptrace", "forward").entered());
}

/// `iters` spans back to back on a fresh thread, timed as a whole.
fn back_to_back(b: &mut Bencher<'_>, dispatch: &Dispatch) {
    b.iter_custom(|iters| {
        let d = dispatch.clone();
        std::thread::spawn(move || {
            tracing::dispatcher::with_default(&d, || {
                span(); // binds the thread to this dispatch's sink
                let start = Instant::now();
                for _ in 0..iters {
                    span();
                }
                start.elapsed()
            })
        })
        .join()
        .expect("emitter")
    })
}

/// `iters` spans [`PACE`] apart, each timed alone, on this thread; `step`
/// runs every [`SPANS_PER_STEP`] spans, untimed.
fn paced_here(iters: u64, mut step: impl FnMut()) -> Duration {
    span();
    let mut total = Duration::ZERO;
    for i in 0..iters {
        if i % SPANS_PER_STEP == 0 {
            step();
        }
        let gap = Instant::now();
        while gap.elapsed() < PACE {
            std::hint::spin_loop();
        }
        let start = Instant::now();
        span();
        total += start.elapsed();
    }
    total
}

fn span_cost(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut group = c.benchmark_group("span_enter_exit");
    group.measurement_time(Duration::from_secs(4));

    group.bench_function("no_subscriber", |b| b.iter(span));

    // Wait phase: the schedule never reaches its first cycle.
    let (dispatch, mut profiler) = dispatch_for("skip_first=1000000000,active=1", dir.path(), 1 << 20);
    tracing::dispatcher::with_default(&dispatch, || {
        profiler.start();
        group.bench_function("outside_window", |b| b.iter(span));
        // `steptrace::layer` around a trivial closure: what a layer span costs a model that
        // is not being recorded.
        group.bench_function("layer_outside_window", |b| {
            b.iter(|| steptrace::layer("encoder.layer2", || std::hint::black_box(1)))
        });
    });
    drop(profiler);

    // On demand, between captures (issue 26): a span costs what it costs in the wait phase.
    let (dispatch, mut profiler) = dispatch_for("on-demand", dir.path(), 1 << 20);
    tracing::dispatcher::with_default(&dispatch, || {
        profiler.start();
        group.bench_function("on_demand_idle", |b| b.iter(span));
    });
    drop(profiler);

    let (dispatch, mut profiler) = per_layer_dispatch_for("skip_first=1000000000,active=1", dir.path());
    tracing::dispatcher::with_default(&dispatch, || {
        profiler.start();
        group.bench_function("outside_window_per_layer_filter", |b| b.iter(span));
    });
    drop(profiler);

    // Active window, written to disk until the cap, then serialised and
    // discarded by the writer thread (the emitting thread's cost is the same).
    let (recording, mut profiler) = dispatch_for("wait=0,warmup=1,active=1000000000", dir.path(), CAP);
    tracing::dispatcher::with_default(&recording, || {
        profiler.start();
        profiler.step(); // past the warmup step
    });
    let (alone, guard) = chrome_alone(dir.path());
    // Alternated so that both see the same machine state.
    group.bench_function("inside_window", |b| back_to_back(b, &recording));
    group.bench_function("tracing_chrome_alone", |b| back_to_back(b, &alone));
    group.finish();

    let mut group = c.benchmark_group("span_paced");
    group.measurement_time(Duration::from_secs(4));
    // steptrace's steps must run on the thread that holds the profiler (its
    // step span is entered there): this one, bound to its sink when it was
    // built. tracing-chrome alone gets fresh threads.
    tracing::dispatcher::with_default(&recording, || {
        group.bench_function("inside_window", |b| b.iter_custom(|iters| paced_here(iters, || profiler.step())));
    });
    group.bench_function("tracing_chrome_alone", |b| {
        b.iter_custom(|iters| {
            let d = alone.clone();
            std::thread::spawn(move || tracing::dispatcher::with_default(&d, || paced_here(iters, || ())))
                .join()
                .expect("emitter")
        })
    });
    group.finish();
    drop(guard);
    drop(profiler);
}

/// `n` spans back to back on a fresh thread (tracing-chrome binds each
/// thread to one sink).
fn emit_on_fresh_thread(dispatch: &Dispatch, n: u64) {
    let d = dispatch.clone();
    std::thread::spawn(move || {
        tracing::dispatcher::with_default(&d, || {
            for _ in 0..n {
                span();
            }
        })
    })
    .join()
    .expect("emitter");
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
                emit_on_fresh_thread(&dispatch, SPANS);
                tracing::dispatcher::with_default(&dispatch, || {
                    profiler.step();
                    profiler.step();
                });
                let saved = profiler.finish().expect("saved");
                total += start.elapsed();
                // Each begin/end pair is written as one complete (`X`) event.
                assert!(saved[0].events as u64 >= SPANS, "{} events", saved[0].events);
            }
            total
        })
    });
    // The same spans on the thread that runs the steps, whose spans reach the writer in
    // batches (collect/batch.rs): built, run and finished on a fresh thread, which the
    // profiler's sink binds.
    group.bench_function("write_and_finalise_200k_events_stepping_thread", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                total += std::thread::spawn(|| {
                    let dir = tempfile::tempdir().expect("tempdir");
                    let (dispatch, mut profiler) =
                        dispatch_for("wait=0,warmup=1,active=2,repeat=1", dir.path(), u64::MAX);
                    let start = Instant::now();
                    tracing::dispatcher::with_default(&dispatch, || {
                        profiler.start();
                        profiler.step(); // past the warmup step
                        for _ in 0..SPANS {
                            span();
                        }
                        profiler.step();
                        profiler.step();
                    });
                    let saved = profiler.finish().expect("saved");
                    let elapsed = start.elapsed();
                    assert!(saved[0].events as u64 >= SPANS, "{} events", saved[0].events);
                    elapsed
                })
                .join()
                .expect("stepping thread");
            }
            total
        })
    });
    // tracing-chrome alone: the same spans, written and its thread joined.
    group.bench_function("tracing_chrome_alone_200k_events", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let dir = tempfile::tempdir().expect("tempdir");
                let start = Instant::now();
                let (dispatch, guard) = chrome_alone(dir.path());
                emit_on_fresh_thread(&dispatch, SPANS);
                drop(guard); // flushes and joins the writer thread
                total += start.elapsed();
            }
            total
        })
    });
    group.finish();
}

/// One step boundary (`Profiler::step`) outside any window: a wait step's,
/// and an on-demand run's between captures (one atomic load more).
fn step_cost(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut group = c.benchmark_group("step_boundary");
    group.measurement_time(Duration::from_secs(4));
    for (name, schedule) in [("wait", "skip_first=1000000000,active=1"), ("on_demand_idle", "on-demand")] {
        let (dispatch, mut profiler) = dispatch_for(schedule, dir.path(), 1 << 20);
        tracing::dispatcher::with_default(&dispatch, || {
            profiler.start();
            group.bench_function(name, |b| b.iter(|| profiler.step()));
        });
        drop(profiler);
    }
    group.finish();
}

criterion_group!(benches, span_cost, step_cost, writer_throughput);
criterion_main!(benches);
