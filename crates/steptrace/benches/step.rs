//! What a training step's instrumentation costs the thread that runs it, span by span, as
//! steptrace's training loop makes it: the step boundary (`Profiler::step`), `data.load` and
//! `transfer.h2d` with their fields, `train.step`, `forward` with three layer spans, `loss`,
//! `backward`, `optimizer` and `sync`. Between spans the thread spins for [`WORK_US`] (untimed);
//! only the instrumentation is timed (each span's making and entering, its exit and drop, and
//! the step boundary), so one iteration's figure is what one step pays.
//!
//! Four conditions: `recorded` (inside an active window, written to a size-capped file, every
//! span through tracing's registry), `recorded_direct` (the same, with steptrace's own spans
//! kept around tracing as `steptrace train` keeps them: `Profiler::record_own_spans_directly`),
//! `wait` (the schedule's wait phase) and `registry_alone` (tracing's registry with no layer:
//! every span made, nothing kept, the floor under any recording made of `tracing` spans).
//! `recorded` less `wait` is what recording adds to a step;
//! the paired bench on a real model (`steptrace bench --profile interleaved`) is the figure
//! that counts, this one says where it goes.
//!
//! Run with `cargo bench -p steptrace --bench step`; figures are kept in docs/benchmarks.md.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use steptrace::format::names::{BACKWARD, DATA_LOAD, FORWARD, LOSS, OPTIMIZER, SYNC, TARGET, TRAIN_STEP, TRANSFER_H2D};
use steptrace::{own_span, Profiler, Schedule};
use tracing::Dispatch;
use tracing_subscriber::prelude::*;

/// The untimed work between two instrumentation points, in µs; `STEP_BENCH_WORK_US` changes it
/// (0 for a profile of the instrumentation alone). See also [`evict`].
const WORK_US: u64 = 10;
/// Bytes kept on disk before the rest is discarded.
const CAP: u64 = 256 << 20;

fn dispatch_for(schedule: &str, dir: &std::path::Path) -> (Dispatch, Profiler) {
    let schedule: Schedule = schedule.parse().expect("schedule");
    let (layer, profiler) =
        Profiler::builder(schedule).out_dir(dir).max_file_bytes(CAP).build_global().expect("profiler");
    (Dispatch::new(tracing_subscriber::registry().with(layer)), profiler)
}

/// `STEP_BENCH_EVICT_KB`: the work between points also writes a buffer of this many KiB, as a
/// model's work does to the caches between a real step's spans (0, the default: it only spins).
fn evict() -> Option<&'static std::sync::Mutex<Vec<u8>>> {
    static BUFFER: std::sync::OnceLock<Option<std::sync::Mutex<Vec<u8>>>> = std::sync::OnceLock::new();
    BUFFER
        .get_or_init(|| {
            let kb: usize = std::env::var("STEP_BENCH_EVICT_KB").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
            (kb > 0).then(|| std::sync::Mutex::new(vec![0u8; kb * 1024]))
        })
        .as_ref()
}

fn work() {
    static WORK: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    let work = *WORK.get_or_init(|| {
        let us = std::env::var("STEP_BENCH_WORK_US").ok().and_then(|v| v.parse().ok());
        Duration::from_micros(us.unwrap_or(WORK_US))
    });
    let start = Instant::now();
    if let Some(buffer) = evict() {
        let mut buffer = buffer.lock().expect("buffer");
        for line in buffer.chunks_mut(64) {
            line[0] = line[0].wrapping_add(1);
        }
        std::hint::black_box(&mut *buffer);
    }
    while start.elapsed() < work {
        std::hint::spin_loop();
    }
}

/// A step's instrumentation time, in total and by point (in the order of [`POINTS`]).
#[derive(Default)]
struct Times {
    total: Duration,
    by_point: Vec<Duration>,
    next: usize,
}

/// The points [`one_step`] times, in order.
const POINTS: &[&str] = &[
    "step boundary",
    "data.load begin",
    "data.load end",
    "transfer.h2d begin",
    "transfer.h2d end",
    "train.step begin",
    "forward begin",
    "hidden0 begin",
    "hidden0 end",
    "hidden1 begin",
    "hidden1 end",
    "output begin",
    "output end",
    "forward end",
    "loss begin",
    "loss end",
    "backward begin",
    "backward end",
    "optimizer begin",
    "optimizer end",
    "train.step end",
    "sync begin",
    "sync end",
];

/// Times `f` into `total` and into the next point.
fn timed<T>(times: &mut Times, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    times.total += took;
    if times.by_point.len() <= times.next {
        times.by_point.resize(times.next + 1, Duration::ZERO);
    }
    times.by_point[times.next] += took;
    times.next += 1;
    out
}

/// A span around `WORK`, timed apart from it.
fn around<G>(total: &mut Times, enter: impl FnOnce() -> G) {
    let span = timed(total, enter);
    work();
    timed(total, || drop(span));
}

/// One step; adds the time its instrumentation took to `t`.
fn one_step(profiler: &mut Profiler, batch: u64, t: &mut Times) {
    one_step_with(&mut || profiler.step(), batch, t);
}

/// One step whose boundary is `step`, its spans as steptrace's training loop makes them:
/// `own_span!` (with the integer fields of `data.load` and `transfer.h2d`) and
/// `steptrace::layer_span` (kept around tracing where the profiler allows it: the
/// `recorded_direct` condition); the step boundary's `ProfilerStep` goes through tracing.
fn one_step_with(step: &mut dyn FnMut(), batch: u64, t: &mut Times) {
    t.next = 0;
    let t = &mut *t;
    timed(t, step);
    work();
    around(t, || own_span!(DATA_LOAD, batch = batch));
    work();
    around(t, || own_span!(TRANSFER_H2D, batch = batch, input_bytes = 65_536, target_bytes = 1_024));
    let step = timed(t, || own_span!(TRAIN_STEP));
    let forward = timed(t, || own_span!(FORWARD));
    for name in ["hidden0", "hidden1", "output"] {
        work();
        let span = timed(t, || steptrace::layer_span(name));
        work();
        timed(t, || drop(span));
    }
    timed(t, || drop(forward));
    around(t, || own_span!(LOSS));
    around(t, || own_span!(BACKWARD));
    around(t, || own_span!(OPTIMIZER));
    timed(t, || drop(step));
    around(t, || own_span!(SYNC));
    work();
}

/// Where the step's time went, over every step run (warm-up included).
fn print_points(name: &str, times: &Times, steps: u64) {
    let per_step = |d: &Duration| d.as_nanos() as f64 / steps.max(1) as f64;
    let points: Vec<String> =
        POINTS.iter().zip(&times.by_point).map(|(p, d)| format!("{p} {:.0}", per_step(d))).collect();
    println!("training_step/{name}: ns a step by point: {}", points.join(", "));
}

fn recorded_step(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut group = c.benchmark_group("training_step");
    group.measurement_time(Duration::from_secs(5));
    for (name, schedule) in
        [("wait", "skip_first=1000000000,active=1"), ("recorded", "wait=0,warmup=1,active=1000000000")]
    {
        // The profiler's steps run on the thread that built it (its sink binds that thread).
        let (dispatch, mut profiler) = dispatch_for(schedule, dir.path());
        tracing::dispatcher::with_default(&dispatch, || {
            profiler.start();
            profiler.step(); // past a warmup step, where there is one
            let mut batch = 0;
            let mut times = Times::default();
            let mut steps = 0u64;
            group.bench_function(name, |b| {
                b.iter_custom(|iters| {
                    let before = times.total;
                    for _ in 0..iters {
                        batch += 1;
                        one_step(&mut profiler, batch, &mut times);
                    }
                    steps += iters;
                    times.total - before
                })
            });
            print_points(name, &times, steps);
        });
        drop(profiler);
    }
    // The floor under any recording: tracing's registry alone, every span made, nothing kept.
    // A step boundary here is nothing but a `ProfilerStep` span's end and the next one's begin.
    let registry = Dispatch::new(tracing_subscriber::registry());
    tracing::dispatcher::with_default(&registry, || {
        let mut batch = 0;
        let mut times = Times::default();
        let mut steps = 0u64;
        let mut current = None;
        group.bench_function("registry_alone", |b| {
            b.iter_custom(|iters| {
                let before = times.total;
                for _ in 0..iters {
                    batch += 1;
                    let mut step = || {
                        current.take();
                        current = Some(tracing::info_span!(target: TARGET, "ProfilerStep", step = batch).entered());
                    };
                    one_step_with(&mut step, batch, &mut times);
                }
                steps += iters;
                times.total - before
            })
        });
        print_points("registry_alone", &times, steps);
    });
    // steptrace's own spans kept around tracing (`Profiler::record_own_spans_directly`), as
    // `steptrace train` keeps them: the gate installed as the global subscriber, which makes
    // this condition the process's last of its kind, on a thread of its own (tracing-chrome
    // binds a thread to the first sink it writes to). The thread times its steps as the others
    // do and hands criterion the total.
    let (ask, asked) = std::sync::mpsc::channel::<u64>();
    let (tell, told) = std::sync::mpsc::channel::<Duration>();
    let path = dir.path().to_owned();
    let worker = std::thread::spawn(move || {
        let schedule: Schedule = "wait=0,warmup=1,active=1000000000".parse().expect("schedule");
        let mut profiler =
            Profiler::builder(schedule).out_dir(&path).max_file_bytes(CAP).try_install().expect("install");
        profiler.start();
        profiler.step();
        let (mut batch, mut times, mut steps) = (0, Times::default(), 0u64);
        for iters in asked {
            let before = times.total;
            for _ in 0..iters {
                batch += 1;
                one_step(&mut profiler, batch, &mut times);
            }
            steps += iters;
            if tell.send(times.total - before).is_err() {
                break;
            }
        }
        print_points("recorded_direct", &times, steps);
    });
    group.bench_function("recorded_direct", |b| {
        b.iter_custom(|iters| {
            ask.send(iters).expect("worker");
            told.recv().expect("worker")
        })
    });
    drop(ask);
    worker.join().expect("worker");
    group.finish();
}

/// What opening a window costs the thread that steps: the `Profiler::step` that begins a
/// cycle's warmup step (its file is created, the writer told), against the one that begins an
/// active step of an open window. Each iteration runs one whole cycle (`wait=1,warmup=1,active=1`,
/// a few spans a step, a wait step of 5 ms) and times one boundary of it.
fn window_open(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut group = c.benchmark_group("window_boundary");
    group.measurement_time(Duration::from_secs(8));
    group.sample_size(20);
    let (dispatch, mut profiler) = dispatch_for("wait=1,warmup=1,active=1", dir.path());
    tracing::dispatcher::with_default(&dispatch, || {
        profiler.start();
        let spans = || {
            for _ in 0..4 {
                drop(tracing::info_span!(target: TARGET, FORWARD).entered());
            }
        };
        // Boundaries of one cycle, from its wait step: into warmup (0), into active (1), out.
        let mut cycle = |timed_boundary: usize| {
            let mut took = Duration::ZERO;
            // The wait step lasts long enough for the writer to finish the cycle before (it
            // syncs the file), as a real run's steps do: otherwise this measures its backlog.
            std::thread::sleep(Duration::from_millis(5));
            spans();
            for boundary in 0..3 {
                let start = Instant::now();
                profiler.step();
                if boundary == timed_boundary {
                    took = start.elapsed();
                }
                spans();
            }
            took
        };
        for (name, boundary) in [("into_warmup", 0), ("into_active", 1)] {
            group.bench_function(name, |b| b.iter_custom(|iters| (0..iters).map(|_| cycle(boundary)).sum()));
        }
    });
    drop(profiler);
    group.finish();
}

criterion_group!(benches, recorded_step, window_open);
criterion_main!(benches);
