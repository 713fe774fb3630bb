//! Smoke test for a CUDA machine: start the collector before any CUDA context, launch an
//! NVRTC-compiled kernel many times with copies and memsets, and print what CUPTI saw.
//!
//! `cargo build --release -p steptrace-cupti --example smoke`, then run the binary where
//! CUDA, NVRTC and libcupti are on the loader path. Exit code 2: CUPTI not available.

use std::collections::BTreeMap;
use std::error::Error;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use steptrace_cupti::{probe, ClockPair, Collector, CollectorConfig, LaunchRecords, MemcpyKind, Window};

type Res<T> = Result<T, Box<dyn Error>>;

const SRC: &str = r#"
extern "C" __global__ void axpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void shared_scale(float* y, int n) {
    __shared__ float tile[64];
    extern __shared__ float extra[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x % 64] = (i < n) ? y[i] : 0.0f;
    __syncthreads();
    extra[threadIdx.x] = tile[(threadIdx.x + 1) % 64];
    __syncthreads();
    if (i < n) y[i] = 0.5f * extra[threadIdx.x];
}
"#;

const N: usize = 1 << 16;
const BLOCK: u32 = 256;
const DYNAMIC_SHARED: u32 = BLOCK * 4;

struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    axpy: CudaFunction,
    shared: CudaFunction,
    x: CudaSlice<f32>,
    y: CudaSlice<f32>,
    scratch: CudaSlice<u8>,
}

fn grid() -> LaunchConfig {
    LaunchConfig { grid_dim: ((N as u32).div_ceil(BLOCK), 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 }
}

fn launch_axpy(stream: &Arc<CudaStream>, f: &CudaFunction, y: &mut CudaSlice<f32>, x: &CudaSlice<f32>) -> Res<()> {
    let (a, n) = (1.0001f32, N as i32);
    let mut b = stream.launch_builder(f);
    b.arg(y).arg(x).arg(&a).arg(&n);
    // SAFETY: the arguments match `axpy`'s signature and both buffers hold N floats.
    unsafe { b.launch(grid()) }?;
    Ok(())
}

fn launch_shared(g: &mut Gpu) -> Res<()> {
    let n = N as i32;
    let cfg = LaunchConfig { shared_mem_bytes: DYNAMIC_SHARED, ..grid() };
    let mut b = g.stream.launch_builder(&g.shared);
    b.arg(&mut g.y).arg(&n);
    // SAFETY: the arguments match `shared_scale`; dynamic shared memory holds BLOCK floats.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

fn setup() -> Res<Gpu> {
    let ctx = CudaContext::new(0)?;
    println!("device: {} (compute capability {:?})", ctx.name()?, ctx.compute_capability()?);
    let ptx = cudarc::nvrtc::compile_ptx(SRC)?;
    let module = ctx.load_module(ptx)?;
    let stream = ctx.new_stream()?;
    let x = stream.clone_htod(&vec![1.0f32; N])?;
    let y = stream.alloc_zeros::<f32>(N)?;
    let scratch = stream.alloc_zeros::<u8>(1 << 20)?;
    let (axpy, shared) = (module.load_function("axpy")?, module.load_function("shared_scale")?);
    let mut gpu = Gpu { ctx, stream, axpy, shared, x, y, scratch };
    launch_axpy(&gpu.stream, &gpu.axpy, &mut gpu.y, &gpu.x)?; // first launch: outside windows
    launch_shared(&mut gpu)?;
    gpu.stream.synchronize()?;
    Ok(gpu)
}

/// 200 axpy + 4 shared_scale kernels, 10 HtoD and 1 DtoH copies, 2 memsets, on the main
/// thread; 20 axpy kernels on a thread named `DSU-smoke`, on its own stream.
fn workload(g: &mut Gpu) -> Res<Instant> {
    let side = {
        let (ctx, f) = (Arc::clone(&g.ctx), g.axpy.clone());
        std::thread::Builder::new().name("DSU-smoke".into()).spawn(move || -> Result<(), String> {
            let s = ctx.new_stream().map_err(|e| e.to_string())?;
            let x = s.clone_htod(&vec![2.0f32; N]).map_err(|e| e.to_string())?;
            let mut y = s.alloc_zeros::<f32>(N).map_err(|e| e.to_string())?;
            for _ in 0..20 {
                launch_axpy(&s, &f, &mut y, &x).map_err(|e| e.to_string())?;
            }
            s.synchronize().map_err(|e| e.to_string())
        })?
    };
    let host = vec![0.5f32; N];
    for i in 0..200 {
        if i % 20 == 0 {
            g.stream.memcpy_htod(&host, &mut g.x)?;
        }
        launch_axpy(&g.stream, &g.axpy, &mut g.y, &g.x)?;
        if i % 100 == 50 {
            g.stream.memset_zeros(&mut g.scratch)?;
        }
        if i % 50 == 0 {
            launch_shared(g)?;
        }
    }
    let mut out = vec![0.0f32; N];
    g.stream.memcpy_dtoh(&g.y, &mut out)?;
    g.stream.synchronize()?;
    side.join().map_err(|_| "side thread panicked")??;
    Ok(Instant::now())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn print_counts(label: &str, w: &Window) {
    let copies = |k: MemcpyKind| w.memcpys.iter().filter(|m| m.kind == k).count();
    println!(
        "[{label}] kernels={} memcpy={} (HtoD={} DtoH={}) memset={} launches={} sync={} \
         kernels_with_launch={}/{} dropped={} incomplete={} ignored={} outside={} distinct_kernel_names={}",
        w.kernels.len(),
        w.memcpys.len(),
        copies(MemcpyKind::HtoD),
        copies(MemcpyKind::DtoH),
        w.memsets.len(),
        w.launches.len(),
        w.synchronizations.len(),
        w.kernels_with_launch(),
        w.kernels.len(),
        w.dropped_records,
        w.incomplete_records,
        w.ignored_records,
        w.outside_records,
        w.distinct_kernel_names()
    );
    let (source, problems) = (&w.launch_source, &w.problems);
    println!("  launch_source={source:?} problems={problems:?}");
    let mut syncs: BTreeMap<String, usize> = BTreeMap::new();
    for s in &w.synchronizations {
        *syncs.entry(format!("{:?}", s.kind)).or_default() += 1;
    }
    println!("  sync kinds: {syncs:?}");
    let mut threads: BTreeMap<(u64, String), usize> = BTreeMap::new();
    for l in &w.launches {
        let name = l.thread.name.as_deref().unwrap_or("<unnamed>");
        *threads.entry((l.thread.id, format!("{name} {}", l.name))).or_default() += 1;
    }
    println!("  launch threads (id, name call): {threads:?}");
}

fn print_timing(w: &Window, opened: Instant, synced: Instant) {
    let map = w.clock_map();
    println!(
        "  clock: fitted={} drift={:+.3} ppm (± {:.3}) uncertainty={:?} brackets open={:?} close={:?} window={:?}",
        map.is_fitted(),
        map.drift_ppm(),
        map.drift_uncertainty_ppm(),
        map.uncertainty(),
        w.open.bracket,
        w.close.bracket,
        w.close.host - w.open.host
    );
    let by_corr = w.launches_by_correlation();
    let pairs: Vec<_> = w.kernels.iter().filter_map(|k| by_corr.get(&k.correlation_id).map(|l| (k, *l))).collect();
    let lat: Vec<f64> = pairs.iter().map(|(k, l)| (k.start_ns as f64 - l.start_ns as f64) / 1e3).collect();
    let ordered = pairs.iter().filter(|(k, l)| l.start_ns <= k.start_ns).count();
    let dur: Vec<f64> = w.launches.iter().map(|l| (l.end_ns as f64 - l.start_ns as f64) / 1e3).collect();
    println!(
        "  launch.start <= kernel.start for {ordered}/{} pairs; launch->kernel start median={:.2} us min={:.2} us; launch call median={:.2} us",
        pairs.len(),
        median(lat.clone()),
        lat.iter().copied().fold(f64::INFINITY, f64::min),
        median(dur)
    );
    let late = w.kernels.iter().filter(|k| map.to_instant(k.end_ns).is_some_and(|t| t > synced)).count();
    let early = w.kernels.iter().filter(|k| map.to_instant(k.start_ns).is_some_and(|t| t < opened)).count();
    let first = w.kernels.first().and_then(|k| map.since(opened, k.start_ns));
    println!(
        "  mapped to host: kernels ending after the host saw the sync={late}, starting before enable()={early}, first kernel at enable+{first:?}"
    );
}

fn print_samples(w: &Window) {
    for name in ["axpy", "shared_scale"] {
        if let Some(k) = w.kernels.iter().find(|k| &*k.name == name) {
            println!(
                "  kernel {name}: grid={:?} block={:?} regs={} static_smem={} dynamic_smem={} device={} context={} stream={} dur={} ns",
                k.grid, k.block, k.registers_per_thread, k.static_shared_bytes,
                k.dynamic_shared_bytes, k.device_id, k.context_id, k.stream_id, k.end_ns - k.start_ns
            );
        }
    }
    if let Some(m) = w.memsets.first() {
        println!("  memset: bytes={} value={} stream={}", m.bytes, m.value, m.stream_id);
    }
    if let Some(m) = w.memcpys.iter().find(|m| m.kind == MemcpyKind::HtoD) {
        println!("  memcpy HtoD: bytes={} stream={} dur={} ns", m.bytes, m.stream_id, m.end_ns - m.start_ns);
    }
}

/// One window over the workload, printed.
fn window(label: &str, c: &mut Collector, g: &mut Gpu) -> Res<()> {
    let opened = Instant::now();
    c.enable()?;
    let synced = workload(g)?;
    let w = c.disable_and_flush()?;
    print_counts(label, &w);
    print_timing(&w, opened, synced);
    print_samples(&w);
    Ok(())
}

/// Per-launch host time of `n` axpy launches plus a sync, in µs.
fn timed(g: &mut Gpu, n: usize) -> Res<f64> {
    let t = Instant::now();
    for _ in 0..n {
        launch_axpy(&g.stream, &g.axpy, &mut g.y, &g.x)?;
    }
    g.stream.synchronize()?;
    Ok(t.elapsed().as_secs_f64() * 1e6 / n as f64)
}

#[derive(Default)]
struct Bench {
    off: Vec<f64>,
    on: Vec<f64>,
    flush_ms: Vec<f64>,
    with_launch: usize,
    kernels: usize,
    dropped: u64,
}

/// One paired measurement: a fresh collector, `n` launches with no window, `n` with one.
fn bench_once(b: &mut Bench, g: &mut Gpu, config: &CollectorConfig, n: usize) -> Res<()> {
    let mut c = Collector::start(config.clone())?;
    timed(g, n / 4)?;
    b.off.push(timed(g, n)?);
    c.enable()?;
    b.on.push(timed(g, n)?);
    let t = Instant::now();
    let w = c.disable_and_flush()?;
    b.flush_ms.push(t.elapsed().as_secs_f64() * 1e3);
    b.with_launch = w.kernels_with_launch();
    b.kernels = w.kernels.len();
    b.dropped += w.dropped_records;
    Ok(())
}

/// Interleaves the configurations `reps` times, so that drift in the machine's speed
/// affects them alike.
fn bench(g: &mut Gpu, configs: &[(&str, CollectorConfig)], n: usize, reps: usize) -> Res<()> {
    let mut results: Vec<Bench> = configs.iter().map(|_| Bench::default()).collect();
    for _ in 0..reps {
        for ((_, config), b) in configs.iter().zip(results.iter_mut()) {
            bench_once(b, g, config, n)?;
        }
    }
    for ((label, _), b) in configs.iter().zip(results) {
        let ratios: Vec<f64> = b.on.iter().zip(&b.off).map(|(on, off)| on / off).collect();
        let deltas: Vec<f64> = b.on.iter().zip(&b.off).map(|(on, off)| on - off).collect();
        println!(
            "bench {label}: off {:.3} us/launch, on {:.3}, ratio median {:.3} (min {:.3} max {:.3}), delta median {:+.3} us/launch; disable+flush {:.3} ms; last window kernels={} with_launch={} dropped_total={}",
            median(b.off.clone()), median(b.on.clone()), median(ratios.clone()),
            ratios.iter().copied().fold(f64::INFINITY, f64::min),
            ratios.iter().copied().fold(0.0, f64::max), median(deltas), median(b.flush_ms),
            b.kernels, b.with_launch, b.dropped
        );
    }
    Ok(())
}

fn clock_costs() -> Res<()> {
    let brackets: Vec<f64> =
        (0..200).map(|_| ClockPair::sample().map(|p| p.bracket.as_nanos() as f64)).collect::<Result<_, _>>()?;
    let t = Instant::now();
    for _ in 0..2000 {
        ClockPair::sample()?;
    }
    let per = t.elapsed().as_nanos() as f64 / 2000.0 / 3.0;
    println!(
        "clock: best-of-3 bracket median={:.0} ns max={:.0} ns; one cuptiGetTimestamp + two Instant::now = {per:.0} ns",
        median(brackets.clone()),
        brackets.iter().copied().fold(0.0, f64::max)
    );
    Ok(())
}

fn run() -> Res<()> {
    let config = CollectorConfig { synchronization: true, ..CollectorConfig::default() };
    let t = Instant::now();
    let mut collector = Collector::start(config.clone())?;
    println!(
        "collector started before any CUDA context in {:?}; cupti version {}; launch source {:?}",
        t.elapsed(),
        collector.cupti_version(),
        collector.launch_source()
    );
    match Collector::start(config.clone()) {
        Err(e) => println!("second start: error as expected: {e}"),
        Ok(_) => println!("second start: UNEXPECTEDLY succeeded"),
    }
    println!("probe while running: {}", probe());
    let mut gpu = setup()?;
    println!(
        "expected per window: kernels=224 (204 main + 20 DSU-smoke) \
         HtoD=11 (10 + the side thread's upload) DtoH=1 memset=3 (2 + its alloc_zeros)"
    );
    window("A: callback launches", &mut collector, &mut gpu)?;
    window("A2: same collector, second window", &mut collector, &mut gpu)?;
    // Kinds kept on between windows: the second and third windows open without enabling
    // anything, and must have the same counts as A (launches included), with the workload run
    // between them discarded.
    collector.set_keep_enabled(true);
    window("K1: kinds kept on after this window", &mut collector, &mut gpu)?;
    workload(&mut gpu)?;
    window("K2: reopened, kept on again", &mut collector, &mut gpu)?;
    collector.set_keep_enabled(false);
    window("K3: reopened, turned off at its end", &mut collector, &mut gpu)?;
    drop(collector);
    let driver = CollectorConfig { launches: LaunchRecords::DriverActivity, ..config };
    let mut collector = Collector::start(driver)?;
    println!("restarted collector; launch source {:?}", collector.launch_source());
    window("B: DRIVER activity launches", &mut collector, &mut gpu)?;
    drop(collector);
    other_subscriber(&mut gpu)?;
    clock_costs()?;
    run_bench(&mut gpu)
}

/// Another CUPTI client holds the callback API: launches unavailable, the rest works.
fn other_subscriber(gpu: &mut Gpu) -> Res<()> {
    use cudarc::cupti::result::{subscribe, unsubscribe};
    let mut handle = std::ptr::null_mut();
    // SAFETY: `handle` is writable; no callback and no user data.
    unsafe { subscribe(&mut handle, None, std::ptr::null_mut()) }.map_err(|e| format!("{:?}", e.0))?;
    println!("probe with a foreign subscriber: {}", probe());
    let mut collector = Collector::start(CollectorConfig::default())?;
    window("D: foreign subscriber holds the callback API", &mut collector, gpu)?;
    drop(collector);
    // SAFETY: the handle came from the successful subscribe above.
    unsafe { unsubscribe(handle) }.map_err(|e| format!("{:?}", e.0))?;
    Ok(())
}

fn run_bench(gpu: &mut Gpu) -> Res<()> {
    let none = CollectorConfig {
        kernels: false,
        memcpy: false,
        memset: false,
        launches: LaunchRecords::Off,
        ..CollectorConfig::default()
    };
    let kmm = CollectorConfig { kernels: true, memcpy: true, memset: true, ..none.clone() };
    let with = |launches, base: &CollectorConfig| CollectorConfig { launches, ..base.clone() };
    let configs = [
        ("kernels only", CollectorConfig { kernels: true, ..none.clone() }),
        ("kernels+memcpy+memset", kmm.clone()),
        ("kmm + callback launches", with(LaunchRecords::Callback, &kmm)),
        ("kmm + DRIVER activity", with(LaunchRecords::DriverActivity, &kmm)),
        ("callback launches alone", with(LaunchRecords::Callback, &none)),
        ("DRIVER activity alone", with(LaunchRecords::DriverActivity, &none)),
    ];
    println!("bench: 2000 launches of axpy (cudarc safe API: ~11 other driver calls per launch), 9 interleaved reps");
    bench(gpu, &configs, 2000, 9)
}

fn main() -> ExitCode {
    let found = probe();
    println!("probe: {found}");
    if !found.is_available() {
        return ExitCode::from(2);
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("smoke failed: {e}");
            ExitCode::FAILURE
        }
    }
}
