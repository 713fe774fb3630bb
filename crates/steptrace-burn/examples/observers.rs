//! A probe of burn 0.22's two observers, for kernel attribution: what they report for a few
//! training steps of the MLP on a cubecl backend (wgpu here, CUDA on a GPU machine).
//!
//! It answers, by observation rather than from the docs:
//! - on which thread operations are registered, fused blocks run and kernels launch
//!   (burn-fusion's `FusionObserver`, cubecl's `LaunchObserver`), against the thread that
//!   called the operations;
//! - whether a phase of the step (forward, backward, optimizer) can be told from an
//!   operation's output tensor ids, stamped on the calling thread at each phase boundary with
//!   the fusion client's id counter (`create_empty_handle`);
//! - which operations each block holds, and how many kernels each block launches;
//! - whether kernels can be timed without blocking (`TimingRequest::Deferred`) and by which
//!   method (device timestamps, or the host's clock around a blocking submit).
//!
//! ```sh
//! cargo run -p steptrace-burn --example observers --no-default-features --features wgpu,cpu
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use burn::optim::{AdamConfig, GradientsParams};
use burn::prelude::*;
use burn_cubecl::fusion::FusionCubeRuntime;
use burn_dispatch::DispatchDevice;
use burn_fusion::client::GlobalFusionClient;
use burn_fusion::observer::{BlockOperations, FusionObservation, FusionObserver};
use burn_ir::OperationIr;
use cubecl::logging::{LaunchObservation, LaunchObserver, TimingRequest};
use cubecl::profile::{Duration, ProfileDuration, TimingMethod};
use steptrace_models::{classification_loss, MlpConfig};

/// A block as seen: its operations' kinds and first output ids, and the kernels it launched.
type SeenBlock = (Vec<(String, Option<u64>)>, Vec<&'static str>);

/// What the observers saw, in order.
#[derive(Default)]
struct Seen {
    threads: BTreeMap<&'static str, Vec<ThreadId>>,
    /// Each registered operation: its kind and its first output id.
    registered: Vec<(String, Option<u64>)>,
    /// Each block: its operations' kinds and first output ids, and the kernels it launched.
    blocks: Vec<SeenBlock>,
    in_block: bool,
    /// Kernels launched outside any block.
    loose: Vec<&'static str>,
    /// Deferred measurements, unread.
    profiles: Vec<(&'static str, ProfileDuration)>,
    /// Measurements delivered already read.
    timed: Vec<(&'static str, Duration, String)>,
}

struct Probe(Mutex<Seen>);

impl Probe {
    fn note_thread(seen: &mut Seen, what: &'static str) {
        let id = std::thread::current().id();
        let list = seen.threads.entry(what).or_default();
        if !list.contains(&id) {
            list.push(id);
        }
    }
}

/// `NumericFloat(Add)`-like: the operation's variant path, without its fields.
fn kind(op: &OperationIr) -> (String, Option<u64>) {
    let debug = format!("{op:?}");
    let mut kind = String::new();
    for part in debug.split('(').take(3) {
        let name: String = part.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if name.is_empty() || name.chars().next().is_some_and(char::is_lowercase) {
            break;
        }
        if !kind.is_empty() {
            kind.push('/');
        }
        kind.push_str(&name);
    }
    let out = op.outputs().next().map(|t| tensor_id(&format!("{}", t.id)));
    (kind, out.flatten())
}

/// A kernel's type name without its generic arguments.
fn short(kernel: &str) -> &str {
    kernel.split('<').next().unwrap_or(kernel)
}

/// The number in `TensorId(42)`.
fn tensor_id(shown: &str) -> Option<u64> {
    shown.trim_start_matches("TensorId(").trim_end_matches(')').parse().ok()
}

impl FusionObserver for Probe {
    fn registered(&self, operation: &OperationIr) {
        let mut seen = self.0.lock().unwrap();
        Probe::note_thread(&mut seen, "registered");
        seen.registered.push(kind(operation));
    }
    fn block_starts(&self, block: BlockOperations<'_>) {
        let mut seen = self.0.lock().unwrap();
        Probe::note_thread(&mut seen, "block_starts");
        seen.blocks.push((block.iter().map(kind).collect(), Vec::new()));
        seen.in_block = true;
    }
    fn block_ran(&self) {
        if let Ok(mut seen) = self.0.lock() {
            seen.in_block = false;
        }
    }
}

impl LaunchObserver for Probe {
    fn launched(&self, kernel: &'static str) {
        let mut seen = self.0.lock().unwrap();
        Probe::note_thread(&mut seen, "launched");
        if seen.in_block {
            if let Some(block) = seen.blocks.last_mut() {
                block.1.push(kernel);
            }
        } else {
            seen.loose.push(kernel);
        }
    }
    fn timing(&self) -> TimingRequest {
        TimingRequest::Deferred
    }
    fn profiled(&self, kernel: &'static str, profile: ProfileDuration) {
        self.0.lock().unwrap().profiles.push((kernel, profile));
    }
    fn timed(&self, kernel: &'static str, duration: Duration, method: TimingMethod) {
        self.0.lock().unwrap().timed.push((kernel, duration, format!("{method:?}")));
    }
}

fn main() {
    let plain = Device::wgpu(burn::prelude::DeviceKind::DefaultDevice);
    plain.sync().expect("a wgpu adapter (lavapipe: apt-get install mesa-vulkan-drivers)");
    let DispatchDevice::Cube(cube) = plain.as_dispatch().clone() else {
        panic!("not a cubecl device");
    };
    let ids = GlobalFusionClient::<FusionCubeRuntime>::load(&cube);
    let stamp = || tensor_id(&format!("{}", ids.create_empty_handle())).unwrap_or(0);
    let device = plain.autodiff();
    let mut model = MlpConfig::new(64, 10).init(&device);
    let mut optim = AdamConfig::new().init();
    let input = Tensor::<2>::random([32, 64], burn::tensor::Distribution::Default, &device);
    let target =
        Tensor::<1, Int>::from_data(TensorData::new((0..32).map(|i| i % 10).collect::<Vec<i64>>(), [32]), &device);

    // Two unobserved steps first: autotune and compilation out of the way.
    for _ in 0..2 {
        let loss = classification_loss(model.forward(input.clone()), target.clone());
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(1e-3, model, grads);
    }
    device.sync().unwrap();

    let probe = Arc::new(Probe(Mutex::new(Seen::default())));
    let fusion = FusionObservation::new(probe.clone());
    let launches = LaunchObservation::new(probe.clone());
    let caller = std::thread::current().id();
    let mut phases = Vec::new();
    phases.push(("forward", stamp()));
    let loss = classification_loss(model.forward(input.clone()), target.clone());
    phases.push(("backward", stamp()));
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    phases.push(("optimizer", stamp()));
    model = optim.step(1e-3, model, grads);
    phases.push(("end", stamp()));
    device.sync().unwrap();
    drop(launches);
    drop(fusion);
    drop(model);

    let seen = probe.0.lock().unwrap();
    println!("calling thread: {caller:?}");
    for (what, threads) in &seen.threads {
        println!("{what}: on {threads:?}");
    }
    println!("phase stamps (next tensor id at each boundary): {phases:?}");
    let phase_of = |id: Option<u64>| {
        id.map_or("no output", |id| {
            phases.windows(2).find(|w| w[0].1 <= id && id < w[1].1).map_or("outside", |w| w[0].0)
        })
    };
    let mut by_phase: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, id) in &seen.registered {
        *by_phase.entry(phase_of(*id)).or_default() += 1;
    }
    println!("registered operations: {} by phase of their output id: {by_phase:?}", seen.registered.len());
    let kernels: usize = seen.blocks.iter().map(|b| b.1.len()).sum();
    println!(
        "blocks: {}, kernels launched in blocks: {kernels}, outside any block: {} {:?}",
        seen.blocks.len(),
        seen.loose.len(),
        seen.loose
    );
    for (ops, launched) in seen.blocks.iter().filter(|b| !b.1.is_empty()).take(12) {
        let phases: Vec<&str> = ops.iter().map(|(_, id)| phase_of(*id)).collect();
        let kinds: Vec<&str> = ops.iter().map(|(k, _)| k.as_str()).collect();
        let launched: Vec<&str> = launched.iter().map(|k| short(k)).collect();
        println!("  block of {} op(s) {kinds:?} phases {phases:?} -> kernels {launched:?}", ops.len());
    }
    println!("deferred measurements: {}, read ones delivered: {}", seen.profiles.len(), seen.timed.len());
    let mut methods: BTreeMap<String, usize> = BTreeMap::new();
    for (_, profile) in &seen.profiles {
        *methods.entry(format!("{:?}", profile.timing_method())).or_default() += 1;
    }
    println!("deferred methods: {methods:?}");
    drop(seen);
    let profiles = std::mem::take(&mut probe.0.lock().unwrap().profiles);
    let mut total = Duration::ZERO;
    let mut resolved = 0;
    let mut first = None;
    for (kernel, profile) in profiles {
        if let Some(ticks) = cubecl_environment::future::block_on(profile.resolve()) {
            total += ticks.duration();
            resolved += 1;
            first.get_or_insert((short(kernel), ticks.duration()));
        }
    }
    println!("resolved {resolved}: device time {total:?}; first {first:?}");
    for (kernel, d, method) in probe.0.lock().unwrap().timed.iter().take(5) {
        println!("  timed {}: {d:?} by {method}", short(kernel));
    }
}
