//! Command-line arguments, as close to the flags as possible.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Step-scoped profiling for burn training.
#[derive(Debug, Parser)]
#[command(name = "steptrace", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train (or serve inference requests) with profiling on, one trace per
    /// schedule cycle.
    Train(TrainArgs),
    /// Show which backends are available here and, for each one that is
    /// not, why.
    Backends,
    /// Read traces back: step timing, span summary, device view and
    /// hypotheses, each with its next experiment.
    Report(ReportArgs),
    /// List what a trace would reveal if shared, and flag secrets, private
    /// paths and input content (exit status 3 when something is flagged).
    Inspect(InspectArgs),
    /// Measure a workload outside the profiler (or with it, to measure its
    /// overhead; `--profile interleaved`: inside each process, wait steps
    /// against active steps): warm-up, then N steps, R runs; raw values and
    /// spread.
    Bench(BenchArgs),
    /// Compare two bench results that differ only in a declared variable
    /// (timing verdict, then kernels), two traces (kernels, steady ms/step
    /// and device busy; one run each, no verdict), or run one workload on
    /// several backends side by side.
    Compare(CompareArgs),
    /// Ask a running `train --schedule on-demand` (or a program whose
    /// profiler has an on-demand schedule) to record now: a warmup step,
    /// then N active steps, saved as one trace; waits until it is saved.
    Capture(CaptureArgs),
    /// The device's measured limits: memory bandwidth (read, write, copy),
    /// matmul throughput and the cost of an empty launch, measured with the
    /// backend's own kernels and kept in a cache that every run on the
    /// device then puts in its traces (so that kernels can be priced
    /// against them); printed from the cache when it holds them.
    Peaks(PeaksArgs),
}

#[derive(Debug, Args)]
pub struct PeaksArgs {
    /// The backend whose device is measured, chosen as for `train`.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
    /// Print the peaks as JSON (the cache file's content); the other lines
    /// go to stderr.
    #[arg(long)]
    pub json: bool,
    /// Measure again even when the cache holds this device's peaks, and
    /// replace them.
    #[arg(long)]
    pub remeasure: bool,
}

#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// The process to capture (its pid: `train` prints it when it starts).
    #[arg(value_parser = clap::value_parser!(u32).range(1..))]
    pub pid: u32,
    /// Active steps to record [default: the run's schedule's].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub steps: Option<u64>,
    /// The trace directory the process writes to (its --out) [default: found
    /// from the process: the capture folder it holds open (Linux)].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seconds to wait for the trace; a request not yet read by then (or
    /// when Ctrl-C stops the wait) is taken back.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: u64,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Trace files of one run (its cycles; gzip files too), or a directory:
    /// then the most recent run's `*.trace.json` files in it and in its
    /// folders one level down (a multi-rank run's cycle folders), with the
    /// `*.trace.json.partial` files a crash leaves (read as cut short).
    /// A file given twice, or a copy of one, is read once.
    #[arg(required = true)]
    pub traces: Vec<PathBuf>,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Write an SVG plot of step times to this new file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Write the report as one self-contained HTML page (inline SVG charts,
    /// no script, nothing loaded from the network) to this new file.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Samples per step, for traces that do not record it (torch.profiler).
    #[arg(long)]
    pub batch: Option<u64>,
    /// Price the kernels against these measured device limits (`steptrace
    /// peaks --json` saved to a file) instead of those the trace holds.
    #[arg(long, value_name = "FILE")]
    pub peaks: Option<PathBuf>,
    /// Rows of the span table (the JSON output has all of them).
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// With the traces of several ranks (a multi-device run), report rank
    /// N alone, in full; without it the ranks are compared step by step.
    #[arg(long, value_name = "N")]
    pub rank: Option<u32>,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The trace file.
    pub trace: PathBuf,
    /// Write a sanitised copy to this new file (never overwritten).
    #[arg(long)]
    pub redact: Option<PathBuf>,
    /// Print the inventory as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Detail {
    /// steptrace's own spans only (and device activity through CUPTI on CUDA).
    Steps,
    /// Also each kernel tied to the burn ops and the layer it ran for (on wgpu, kernels timed by timestamp queries): about +4 points of step time over the default while recording (MLP and ConvNet on the H200).
    Ops,
    /// Also burn's and cubecl's internal spans (669,488 bytes of trace per recorded step for the MLP on the H200); not ops: each level asks one question.
    Internals,
}

/// Whether device activity is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DeviceActivityArg {
    /// On CUDA, through CUPTI; "not observed" elsewhere.
    Auto,
    /// Never.
    Off,
}

/// A model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModelArg {
    /// The MLP.
    Mlp,
    /// The ConvNet (image datasets).
    Convnet,
    /// The character Transformer (shakespeare).
    Transformer,
}

/// A dataset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DatasetArg {
    /// UCI digits, embedded.
    Digits,
    /// Fashion-MNIST test split (t10k-*: embedded, or from --data-dir).
    FashionMnist,
    /// Fashion-MNIST training split (train-*, from --data-dir, else the Debian package's folder).
    FashionMnistTrain,
    /// Shakespeare characters, embedded.
    Shakespeare,
    /// Generated from the seed.
    Synthetic,
}

/// A backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// CUDA, else wgpu, else the CPU; every fallback is labelled.
    Auto,
    /// CUDA only.
    Cuda,
    /// wgpu only.
    Wgpu,
    /// The CPU (burn-flex).
    Cpu,
}

/// A sync policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SyncArg {
    /// Never sync: spans are host launch times.
    None,
    /// Sync at the end of each step: the true step time.
    Step,
    /// Sync after every phase: device time per phase (removes overlap).
    Phase,
}

/// Training or inference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Forward, loss, backward, optimizer.
    Train,
    /// model.load once, then one infer.request per step.
    Infer,
}

/// The name clap gives a value (what the user types).
pub fn value_name(value: &impl ValueEnum) -> String {
    value.to_possible_value().map(|v| v.get_name().to_owned()).unwrap_or_default()
}

/// What is run: shared by `train`, `bench` and `compare --backends`.
#[derive(Clone, Debug, Args)]
pub struct WorkloadArgs {
    /// Model.
    #[arg(long, value_enum, default_value = "mlp")]
    pub model: ModelArg,
    /// Dataset.
    #[arg(long, value_enum, default_value = "digits")]
    pub dataset: DatasetArg,
    /// Directory of Fashion-MNIST IDX files (gzipped or raw): fashion-mnist reads its
    /// t10k-* files, fashion-mnist-train its train-* files.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Backend (auto: CUDA, else wgpu, else CPU; fallbacks are labelled).
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
    /// Samples per batch.
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Sequence length (transformer).
    #[arg(long, default_value_t = 64)]
    pub seq_len: usize,
    /// The MLP's hidden layers' widths, comma-separated (default 128,128), named hidden0,
    /// hidden1, ... in the trace; `none` for no hidden layer (a linear classifier).
    #[arg(long, value_name = "WIDTHS")]
    pub hidden: Option<String>,
    /// Learning rate.
    #[arg(long, default_value_t = 1e-3)]
    pub lr: f64,
    /// Seed for weights and data order: the same seed is the same starting
    /// state.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Start from the initial weights in this record (written by
    /// --save-init) instead of the seed's random draw, which differs per
    /// backend: one record is one starting state on cpu, wgpu and cuda. It
    /// must hold this run's model and shapes (checked before training);
    /// the seed still orders the data.
    #[arg(long, value_name = "FILE")]
    pub init: Option<PathBuf>,
    /// Save the model's initial weights to this new file before step 0 (a
    /// burn record: burnpack, full precision, with the model, its
    /// configuration and parameter shapes); an existing file is never
    /// overwritten. The reproducing command then starts from it (--init).
    #[arg(long, value_name = "FILE")]
    pub save_init: Option<PathBuf>,
    /// Sync policy.
    #[arg(long, value_enum, default_value = "step")]
    pub sync: SyncArg,
    /// Training or inference.
    #[arg(long, value_enum, default_value = "train")]
    pub mode: ModeArg,
    /// Loader threads reading ahead (0: read on the training thread).
    #[arg(long, default_value_t = 0)]
    pub prefetch: usize,
    /// Added to every batch read, to plant an input bottleneck.
    #[arg(long, default_value_t = 0)]
    pub loader_delay_ms: u64,
    /// A deliberate inefficiency for testing the report: every training step
    /// re-uploads a constant of 1000 f32 ones from the host (one 4000-byte
    /// host-to-device copy) and multiplies the loss by its mean (1.0), so
    /// the training is bit-identical.
    #[arg(long)]
    pub plant_upload: bool,
    /// cubecl compilation/autotune cache directory.
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Do not enable cubecl's caches.
    #[arg(long)]
    pub no_cache: bool,
    /// cubecl's autotune level: how coarsely autotune keys round their sizes
    /// (minimal shares one tuning result among the most shapes: fewer
    /// autotune runs when shapes vary; it does not cut the candidates tuned
    /// per key). Default: cubecl's own (cubecl.toml, CUBECL_AUTOTUNE_LEVEL,
    /// else balanced).
    #[arg(long, value_enum)]
    pub autotune_level: Option<AutotuneLevelArg>,
    /// Synthetic dataset: number of samples.
    #[arg(long, default_value_t = 4096)]
    pub synthetic_samples: usize,
    /// Synthetic dataset: sample shape C,H,W.
    #[arg(long, default_value = "1,28,28")]
    pub synthetic_shape: String,
}

/// cubecl's autotune level (`--autotune-level`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AutotuneLevelArg {
    /// Sizes rounded to powers of 2.5: the fewest autotune runs.
    Minimal,
    /// Powers of 2 (cubecl's default).
    Balanced,
    /// Powers of 1.5.
    Extensive,
    /// Exact sizes: one autotune run per shape.
    Full,
}

#[derive(Debug, Args)]
pub struct TrainArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Number of steps.
    #[arg(long, default_value_t = 40)]
    pub steps: u64,
    /// Profiling schedule, torch.profiler style. The default skips the
    /// first 10 steps (startup: compilation, autotune) before recording.
    /// `on-demand` records nothing until `steptrace capture PID` asks
    /// (`on-demand,warmup=1,active=3` by default).
    #[arg(long, default_value = "skip_first=10,wait=1,warmup=1,active=3,repeat=2")]
    pub schedule: String,
    /// What to record.
    #[arg(long, value_enum, default_value = "steps")]
    pub detail: Detail,
    /// Record device activity (kernels, copies, launches) through CUPTI:
    /// auto records it on CUDA and says "not observed", with the reason,
    /// elsewhere.
    #[arg(long, value_enum, default_value = "auto")]
    pub device_activity: DeviceActivityArg,
    /// Sample device memory at the start of each recorded step, before its batch is copied
    /// (in use, reserved, and what holds it: parameters, optimizer state, gradients, input
    /// batch, the rest).
    #[arg(long)]
    pub memory: bool,
    /// With --memory, also sample after each phase (forward, loss, backward, optimizer): each
    /// such sample flushes burn's fusion queue and waits for cubecl's device thread, which
    /// slows recorded steps and cuts fusion at the phase boundaries (docs/benchmarks.md).
    #[arg(long, requires = "memory")]
    pub memory_phases: bool,
    /// Directory for trace files (never overwritten).
    #[arg(long, default_value = "traces")]
    pub out: PathBuf,
    /// Worker name in file names (default: MODEL-BACKEND).
    #[arg(long)]
    pub worker: Option<String>,
    /// Run without the profiler (no traces).
    #[arg(long)]
    pub no_profile: bool,
    /// Also write the run summary as JSON to this new file (a failed step: its failure report).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// A note copied into the manifest (repeatable).
    #[arg(long = "note")]
    pub notes: Vec<String>,
    /// Read the loss back every N steps (it waits for the device); 0: at
    /// the first and last step only.
    #[arg(long, default_value_t = 10)]
    pub loss_every: u64,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// What `bench --profile` installs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProfileMode {
    /// No subscriber at all.
    Off,
    /// The profiler installed, every step in its wait phase (spans gated).
    Wait,
    /// The profiler recording every measured step.
    Active,
    /// Wait and active steps interleaved in every run by a schedule of
    /// short cycles: the profiler's cost measured inside each process.
    Interleaved,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Steps run before measuring (startup, warm-up) in each run [default:
    /// 10; 20 with --profile interleaved].
    #[arg(long)]
    pub warmup: Option<u64>,
    /// Measured steps per run [default: 50; 300 with --profile interleaved].
    #[arg(long)]
    pub steps: Option<u64>,
    /// Runs, each a fresh process from the same starting state (seed).
    #[arg(long, default_value_t = 5)]
    pub runs: u64,
    /// Profiler during the runs: off, wait (installed, gated), active
    /// (recording; each run's kernels are then read from its traces into
    /// the result, or "not observed" with the reason), or interleaved: wait
    /// and active steps alternate inside every run, so each process is its
    /// own control (processes differ by more than the profiler costs). Per
    /// process and phase: median, IQR, active/wait and warmup/wait with a
    /// bootstrap interval; over the runs: the spread of those ratios and
    /// compare's verdict. Every step is kept in --json with its phase.
    #[arg(long, value_enum, default_value = "off")]
    pub profile: ProfileMode,
    /// With --profile interleaved: the cycle, repeated to the step count
    /// (skip_first comes from --warmup); it needs wait and active steps
    /// [default: wait=7,warmup=1,active=2].
    #[arg(long)]
    pub schedule: Option<String>,
    /// With --profile interleaved: auto runs with device activity recorded
    /// where the backend records it (CUDA) and then also as many runs with
    /// it off, so host spans' cost and device activity's are told apart;
    /// off: host spans only [default: auto].
    #[arg(long, value_enum)]
    pub device_activity: Option<DeviceActivityArg>,
    /// With --profile interleaved: what the profiled runs record (as train's --detail), so that
    /// `--detail ops` measures what kernel attribution costs [default: steps].
    #[arg(long, value_enum)]
    pub detail: Option<Detail>,
    /// With --profile interleaved: the profiled runs also sample device memory (as train's
    /// --memory, in recorded steps), so that the pairing measures what the samples cost.
    #[arg(long)]
    pub memory: bool,
    /// With --memory: after each phase too (as train's --memory-phases).
    #[arg(long, requires = "memory")]
    pub memory_phases: bool,
    /// With --profile interleaved: as many runs again with no profiler at
    /// all, reported apart: a comparison across processes, which cannot
    /// resolve a 1% effect.
    #[arg(long)]
    pub baseline: bool,
    /// With --profile interleaved: the smallest relative difference worth
    /// claiming [default: 0.01].
    #[arg(long)]
    pub threshold: Option<f64>,
    /// Write the result as JSON to this new file (never overwritten).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Where `--profile active` writes its traces.
    #[arg(long, default_value = "bench-traces")]
    pub trace_dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// A then B: two bench results (`steptrace bench --json`), or two
    /// traces (steptrace or torch.profiler files, `.json.gz` too, or
    /// directories: their most recent run). Bench results get a timing
    /// verdict, then their kernels when both were benched with `--profile
    /// active`: ranked by the change in device ms/step, matched by exact
    /// name, or by kernel class (matmul/gemm, convolution,
    /// elementwise/fused, reduction/softmax/norm, copy/fill/memset, other)
    /// when the names do not match. Traces get their kernels, steady
    /// ms/step and device busy side by side, without a verdict (one run
    /// each). A bench result and a trace together are refused.
    pub results: Vec<PathBuf>,
    /// The fingerprint keys allowed to differ (backend, batch, fusion,
    /// prefetch, sync, profile, ...); comma-separated or repeated.
    #[arg(long, value_delimiter = ',')]
    pub vary: Vec<String>,
    /// Run the same workload on each of these backends back to back
    /// (e.g. cuda,wgpu,cpu) instead of reading results.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub backends: Vec<BackendArg>,
    /// Smallest relative difference worth claiming.
    #[arg(long, default_value_t = 0.01)]
    pub threshold: f64,
    /// Print JSON (with the kernel comparison under `kernels`).
    #[arg(long)]
    pub json: bool,
    /// With traces of several ranks (a multi-device run): compare rank N's
    /// files of each side. Without it, such traces are refused: their ranks
    /// would be read as one run.
    #[arg(long, value_name = "N")]
    pub rank: Option<u32>,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// With --backends: warm-up steps per run.
    #[arg(long, default_value_t = 10)]
    pub warmup: u64,
    /// With --backends: measured steps per run.
    #[arg(long, default_value_t = 30)]
    pub steps: u64,
    /// With --backends: runs per backend.
    #[arg(long, default_value_t = 3)]
    pub runs: u64,
}
