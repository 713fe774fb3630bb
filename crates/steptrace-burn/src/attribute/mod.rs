//! Which op, which layer: every kernel tied to the burn operations of its fused block and to
//! the host span those operations were called in.
//!
//! Three sources, recorded while a window is open ([`open`], [`close`]):
//! - burn-fusion's [`FusionObserver`]: each fused block that runs, with its operations
//!   (kind, shape, the ids of the tensors each reads and writes); the block's kernels are
//!   launched between `block_starts` and `block_ran`;
//! - cubecl's [`LaunchObserver`]: each kernel launch, in order, inside its block or not; and,
//!   where asked ([`TimingRequest::Deferred`]), a device measurement of it that nothing waits
//!   for (timestamp queries on wgpu, events on CUDA);
//! - the stamp layer ([`StampLayer`]): at every boundary of a steptrace span on the calling
//!   thread, the next tensor id of burn-fusion's counter, which places each operation in the
//!   span it was called in ([`spans`]).
//!
//! On CUDA, CUPTI's kernels are paired with the observed launches in order ([`align()`]); on
//! other backends the measurements are the kernels.

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
mod align;
mod cost;
mod modules;
mod ops;
mod spans;
mod stamps;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use burn::prelude::Device;
use burn_cubecl::fusion::FusionCubeRuntime;
use burn_dispatch::DispatchDevice;
use burn_fusion::client::GlobalFusionClient;
use burn_fusion::observer::{BlockOperations, FusionObservation, FusionObserver};
use burn_ir::OperationIr;
use cubecl::logging::{LaunchObservation, LaunchObserver, TimingRequest};
use cubecl::profile::{Duration, ProfileDuration, TimingMethod};
use steptrace::format::device::{attribution, KernelAttribution};

#[cfg_attr(not(feature = "cuda"), allow(unused_imports))]
pub(crate) use align::{align, pair_uploads};
use burn_ir::TensorId;
use ops::OpNote;
use spans::{Boundary, Inference, SpanMap};
pub use stamps::StampLayer;
use std::thread::ThreadId;

/// `STEPTRACE_ATTRIBUTION=off` turns attribution off (to measure what it costs); kernels are
/// then recorded as before, and each window says why they are not attributed.
pub(crate) const OFF_VAR: &str = steptrace::settings::ATTRIBUTION;

/// What a kernel is when its window stamped no span boundary: the profiler was installed
/// without the stamp layer, so no operation can be placed in a span.
pub(crate) const NO_STAMPS: &str = "not attributed: no span boundary was stamped in this window (the profiler was \
    installed without steptrace_burn's StampLayer: use steptrace_burn::Session, or add StampLayer to your subscriber)";

/// The most operations, launches and span boundaries one window notes (a bound on its memory:
/// a clone of a million operations is a few hundred MB). Past them, kernels are "not
/// attributed" with that reason, and lost launches are counted.
const MAX_NOTES: usize = 1 << 20;

/// The most operations (or span boundaries) whose buffer is kept for the next window, emptied:
/// a few tens of MB of clones at most stay allocated between windows.
const KEPT_CAPACITY: usize = 1 << 16;

/// The block number of the launches made once the window's notes were full.
const FULL: u64 = u64::MAX;

/// One launch the observer saw.
pub(crate) struct LaunchNote {
    /// cubecl's kernel name (a type name).
    pub(crate) kernel: &'static str,
    /// When the launch was issued, on the host's clock (timed launches only).
    pub(crate) at: Option<Instant>,
    /// The block it was launched for, by number.
    pub(crate) block: Option<u64>,
    /// Its measurement, unread (`Deferred`).
    pub(crate) profile: Option<ProfileDuration>,
    /// Its length, read by cubecl (when its profiling logger is on too).
    pub(crate) timed: Option<(Duration, TimingMethod)>,
}

/// The name of a stamped span: a steptrace span's static name, or a layer's.
#[derive(Clone, Debug)]
pub(crate) enum Label {
    Static(&'static str),
    Named(Arc<str>),
}

impl Label {
    fn to_arc(&self) -> Arc<str> {
        match self {
            Label::Static(s) => Arc::from(*s),
            Label::Named(s) => Arc::clone(s),
        }
    }
}

/// What the observers note while a window records, on the device thread: the least that can be
/// kept on the launch path (clones, counters); reading it waits for [`close`]. The span
/// boundaries and the parameters, noted on the threads that call the model, have locks of their
/// own ([`Recorder`]), so that neither side waits on the other while a block is noted.
#[derive(Default)]
struct Notes {
    /// The operations of the blocks that ran, cloned on the device thread.
    ops: Vec<OperationIr>,
    /// Where each block's operations start in `ops`.
    block_starts: Vec<usize>,
    launches: Vec<LaunchNote>,
    in_block: Option<u64>,
    /// Launches not noted: the notes were full.
    dropped_launches: u64,
    /// Tensors made from host data (`Init` operations), in the order they were registered: the
    /// tensor and its bytes. Each is one host-to-device copy.
    uploads: Vec<(TensorId, u64, Box<str>)>,
}

/// A span boundary as stamped: the counter's next id, the thread, the span, entered or left.
type Stamp = (TensorId, ThreadId, Label, bool);

/// The process's recorder: the observers are process-wide, so is what they write into.
struct Recorder {
    notes: Mutex<Notes>,
    /// The span boundaries stamped while the window records.
    boundaries: Mutex<Vec<Stamp>>,
    /// The model's parameters by id: their modules' paths, as noted while the window was open
    /// (and before it, the last noted).
    window_params: Mutex<HashMap<u64, Arc<str>>>,
    /// The parameters last noted ([`note_parameters`]).
    params: Mutex<modules::ParamPaths>,
    recording: AtomicBool,
    /// Gives the next id of burn-fusion's tensor counter.
    stamp: OnceLock<GlobalFusionClient<FusionCubeRuntime>>,
}

static RECORDER: LazyLock<Recorder> = LazyLock::new(|| Recorder {
    notes: Mutex::new(Notes::default()),
    boundaries: Mutex::new(Vec::new()),
    window_params: Mutex::new(HashMap::new()),
    params: Mutex::new(Vec::new()),
    recording: AtomicBool::new(false),
    stamp: OnceLock::new(),
});

fn notes() -> MutexGuard<'static, Notes> {
    lock(&RECORDER.notes)
}

/// A lock of the recorder's, whatever a panic left in it (each holds plain notes).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn recording() -> bool {
    RECORDER.recording.load(Ordering::Relaxed)
}

/// The fusion id of a float tensor on a cubecl backend.
pub(crate) fn tensor_id<const D: usize>(tensor: burn::prelude::Tensor<D>) -> Option<u64> {
    modules::fusion_id(tensor)
}

/// Sets the ids of the parameters `paths` names (as span paths), as an optimizer that made
/// them knows them ([`note_parameters`] reads them from a model). The parameters it does not
/// name (frozen ones, which no update remakes) keep their ids.
pub(crate) fn set_parameter_paths(paths: modules::ParamPaths) {
    if recording() {
        let mut window = lock(&RECORDER.window_params);
        for (id, path) in &paths {
            if window.len() < MAX_NOTES {
                window.insert(*id, Arc::clone(path));
            }
        }
    }
    let mut current = lock(&RECORDER.params);
    let renewed: std::collections::HashSet<&Arc<str>> = paths.iter().map(|(_, p)| p).collect();
    current.retain(|(_, p)| !renewed.contains(p));
    current.extend(paths.iter().cloned());
}

/// Notes where each of `model`'s parameters sits in the module tree, by its tensor id, for the
/// layer names of kernels no layer span names ([`modules`]). Their ids change at each update:
/// call it with the model each step uses.
pub(crate) fn note_parameters<M: burn::module::Module>(model: &M) {
    set_parameter_paths(modules::parameter_paths(model));
}

/// Notes a span boundary, when recording (the stamp layer).
fn boundary(label: Label, enter: bool) {
    if !recording() {
        return;
    }
    if let Some(client) = RECORDER.stamp.get() {
        let b = (client.create_empty_handle(), std::thread::current().id(), label, enter);
        let mut boundaries = lock(&RECORDER.boundaries);
        if boundaries.len() < MAX_NOTES {
            boundaries.push(b);
        }
    }
}

struct Observer {
    timing: TimingRequest,
}

impl FusionObserver for Observer {
    /// Notes the tensors made from host data: each is uploaded, and its id places the upload in
    /// the span that asked for it.
    fn registered(&self, operation: &OperationIr) {
        let OperationIr::Init(init) = operation else { return };
        if !recording() {
            return;
        }
        let t = &init.out;
        let bytes = (t.shape.num_elements() as u64).saturating_mul(t.dtype.size() as u64);
        let mut n = notes();
        if n.uploads.len() < MAX_NOTES {
            n.uploads.push((t.id, bytes, ops::shape_of(t).into_boxed_str()));
        }
    }

    fn block_starts(&self, block: BlockOperations<'_>) {
        if !recording() {
            return;
        }
        let mut n = notes();
        if n.ops.len() + block.iter().len() > MAX_NOTES {
            n.in_block = Some(FULL);
            return;
        }
        n.in_block = Some(n.block_starts.len() as u64);
        let start = n.ops.len();
        n.block_starts.push(start);
        n.ops.extend(block.iter().cloned());
    }

    fn block_ran(&self) {
        if recording() {
            notes().in_block = None;
        }
    }
}

impl LaunchObserver for Observer {
    fn launched(&self, kernel: &'static str) {
        if !recording() {
            return;
        }
        // The launch's time places a timed kernel on the host clock; CUPTI needs none.
        let at = (self.timing != TimingRequest::None).then(Instant::now);
        let mut n = notes();
        if n.launches.len() >= MAX_NOTES {
            n.dropped_launches += 1;
            return;
        }
        let block = n.in_block;
        n.launches.push(LaunchNote { kernel, at, block, profile: None, timed: None });
    }

    fn timing(&self) -> TimingRequest {
        self.timing
    }

    fn profiled(&self, kernel: &'static str, profile: ProfileDuration) {
        let mut n = notes();
        if let Some(last) = n.launches.last_mut().filter(|l| l.kernel == kernel && l.profile.is_none()) {
            last.profile = Some(profile);
        }
    }

    fn timed(&self, kernel: &'static str, duration: Duration, method: TimingMethod) {
        let mut n = notes();
        if let Some(last) = n.launches.last_mut().filter(|l| l.kernel == kernel && l.timed.is_none()) {
            last.timed = Some((duration, method));
        }
    }
}

/// The observers, installed for one window.
pub(crate) struct Recording {
    _launch: LaunchObservation,
    _fusion: FusionObservation,
}

impl Drop for Recording {
    /// A window that ends without [`close`] (its collector dropped) stops recording too, so
    /// that nothing goes on noting span boundaries.
    fn drop(&mut self) {
        RECORDER.recording.store(false, Ordering::Release);
    }
}

/// Starts recording for a window on `device`'s backend, with `timing` asked of each launch.
///
/// # Errors
///
/// When attribution is turned off ([`OFF_VAR`]), `device` is not a cubecl device, or another
/// window is recording (the observers have one slot per process).
pub(crate) fn open(device: &Device, timing: TimingRequest) -> Result<Recording, String> {
    if steptrace::settings::attribution_off() {
        return Err(format!("turned off ({OFF_VAR}=off)"));
    }
    if RECORDER.stamp.get().is_none() {
        let DispatchDevice::Cube(cube) = device.as_dispatch().clone() else {
            return Err("the device is not a cubecl device: burn-fusion's observers do not see it".into());
        };
        let _ = RECORDER.stamp.set(GlobalFusionClient::<FusionCubeRuntime>::load(&cube));
    }
    if RECORDER.recording.swap(true, Ordering::AcqRel) {
        return Err("another window is recording kernel attribution (the observers have one slot per process)".into());
    }
    {
        // Emptied, keeping their capacity: the next window notes as much again.
        let mut n = notes();
        n.ops.clear();
        n.block_starts.clear();
        n.launches.clear();
        n.uploads.clear();
        n.in_block = None;
        n.dropped_launches = 0;
    }
    lock(&RECORDER.boundaries).clear();
    *lock(&RECORDER.window_params) = lock(&RECORDER.params).iter().cloned().collect();
    let observer = Arc::new(Observer { timing });
    Ok(Recording { _launch: LaunchObservation::new(observer.clone()), _fusion: FusionObservation::new(observer) })
}

/// What a window recorded: each launch with what it is attributed to.
pub(crate) struct Recorded {
    pub(crate) launches: Vec<(LaunchNote, KernelAttribution)>,
    /// Each tensor made from host data, in order: its bytes, and the span that made it.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) uploads: Vec<(u64, KernelAttribution)>,
    /// Launches not noted because the window's notes were full ([`MAX_NOTES`]).
    pub(crate) dropped_launches: u64,
}

/// Stops recording and attributes each launch.
pub(crate) fn close(recording: Recording) -> Recorded {
    // Dropping it uninstalls the observers and stops recording.
    drop(recording);
    let (mut ops, mut block_starts, launches, dropped_launches, uploads) = {
        let mut n = notes();
        (
            std::mem::take(&mut n.ops),
            std::mem::take(&mut n.block_starts),
            std::mem::take(&mut n.launches),
            n.dropped_launches,
            std::mem::take(&mut n.uploads),
        )
    };
    let mut stamped = std::mem::take(&mut *lock(&RECORDER.boundaries));
    let params = std::mem::take(&mut *lock(&RECORDER.window_params));
    let notes: Vec<OpNote> = ops.iter().map(OpNote::of).collect();
    let blocks: Vec<&[OpNote]> = block_starts
        .iter()
        .enumerate()
        .map(|(i, &start)| &notes[start..block_starts.get(i + 1).copied().unwrap_or(notes.len())])
        .collect();
    let boundaries: Vec<Boundary> = stamped
        .iter()
        .filter_map(|(id, thread, label, enter)| {
            Some(Boundary { stamp: ops::id_number(id)?, thread: *thread, name: label.to_arc(), enter: *enter })
        })
        .collect();
    let mut map = SpanMap::new(&boundaries);
    let named = modules::name_by_module(&map, &notes, &params);
    map.name_by_module(named);
    let inference = Inference::new(&map, notes.iter());
    let any_stamped = !map.is_empty();
    let by_block: Vec<KernelAttribution> = blocks
        .iter()
        .enumerate()
        .map(|(i, ops)| {
            let mut a = spans::attribute_block(&map, &inference, i as u64, ops);
            if !any_stamped && a.attribution == attribution::OUTSIDE_SPANS {
                a.attribution = NO_STAMPS.to_owned();
            }
            a
        })
        .collect();
    let launches = launches
        .into_iter()
        .map(|l| {
            let a = match l.block {
                Some(FULL) => KernelAttribution::not_attributed(attribution::NOTES_FULL),
                block => block
                    .and_then(|b| by_block.get(b as usize))
                    .cloned()
                    .unwrap_or_else(|| KernelAttribution::not_attributed(attribution::NO_BLOCK)),
            };
            (l, a)
        })
        .collect();
    let uploads = uploads
        .into_iter()
        .map(|(id, bytes, shape)| (bytes, spans::attribute_upload(&map, ops::id_number(&id), &shape)))
        .collect();
    // The buffers go back, emptied, with their capacity (up to a bound): the next window
    // notes into memory already mapped instead of growing new buffers on the device thread.
    ops.clear();
    block_starts.clear();
    stamped.clear();
    if ops.capacity() <= KEPT_CAPACITY {
        let mut n = lock(&RECORDER.notes);
        if n.ops.capacity() < ops.capacity() {
            n.ops = ops;
            n.block_starts = block_starts;
        }
    }
    if stamped.capacity() <= KEPT_CAPACITY {
        let mut kept = lock(&RECORDER.boundaries);
        if kept.capacity() < stamped.capacity() {
            *kept = stamped;
        }
    }
    Recorded { launches, dropped_launches, uploads }
}

/// The attribution of a kernel no observed launch explains.
#[cfg(feature = "cuda")]
pub(crate) fn not_observed() -> KernelAttribution {
    KernelAttribution::not_attributed(attribution::NO_LAUNCH)
}
