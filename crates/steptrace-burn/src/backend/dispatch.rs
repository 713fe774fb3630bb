//! Running generic code on the selected backend, and backend-generic helpers.

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};

use burn::backend::cuda::CudaDevice;
use burn::backend::ndarray::NdArrayDevice;
use burn::backend::wgpu::WgpuDevice;
use burn::tensor::backend::{AutodiffBackend, Backend};
use cubecl::Runtime;

use super::guard::catch_silently;
use super::probe::{known_usable, note_usable};
use super::{BackendError, BackendKind, Selection};

/// The CUDA training backend: `Autodiff<Fusion<CubeBackend<CudaRuntime, f32, i32, u8>>>`.
pub type CudaAutodiff = burn::backend::Autodiff<burn::backend::Cuda>;
/// The wgpu training backend: `Autodiff<Fusion<CubeBackend<WgpuRuntime, f32, i32, u32>>>`.
pub type WgpuAutodiff = burn::backend::Autodiff<burn::backend::Wgpu>;
/// The CPU training backend: `Autodiff<NdArray<f32, i64, i8>>`.
pub type CpuAutodiff = burn::backend::Autodiff<burn::backend::NdArray>;

/// A job generic over the autodiff backend; [`run_on`] picks the backend at run time.
///
/// This is where monomorphisation happens: every implementation is compiled once for each
/// of [`CudaAutodiff`], [`WgpuAutodiff`] and [`CpuAutodiff`].
pub trait BackendRun {
    /// What the job returns.
    type Output;

    /// Runs the job on backend `B`, on `device`; `info` is the selection being run (for the
    /// manifest and for labelling output).
    fn run<B: AutodiffBackend>(self, device: B::Device, info: &Selection) -> Self::Output;
}

/// Runs `job` on the selected backend:
///
/// * [`BackendKind::Cuda`] → [`CudaAutodiff`] on `CudaDevice::new(0)`;
/// * [`BackendKind::Wgpu`] → [`WgpuAutodiff`] on the probed adapter
///   ([`Selection::wgpu_device`]; `WgpuDevice::DefaultDevice` if it is `None`);
/// * [`BackendKind::Cpu`] → [`CpuAutodiff`] on `NdArrayDevice::Cpu`.
///
/// Call [`configure_cubecl_cache`](super::configure_cubecl_cache) before this if the
/// persistent cubecl caches are wanted. A selection that did not come from
/// [`select`](super::select) may name a backend that cannot run here; the backend then
/// panics at its first operation, as burn does.
pub fn run_on<R: BackendRun>(selection: &Selection, job: R) -> R::Output {
    note_usable(selection.kind);
    match selection.kind {
        BackendKind::Cuda => job.run::<CudaAutodiff>(CudaDevice::new(0), selection),
        BackendKind::Wgpu => {
            let device = selection
                .wgpu_device
                .map_or(WgpuDevice::DefaultDevice, |t| t.device());
            job.run::<WgpuAutodiff>(device, selection)
        }
        BackendKind::Cpu => job.run::<CpuAutodiff>(NdArrayDevice::Cpu, selection),
    }
}

/// Waits until the device has finished all queued work (`B::sync`). Errors and panics are
/// logged (tracing `warn`) and swallowed: profiling must not stop training.
pub fn sync<B: Backend>(device: &B::Device) {
    if let Err(e) = try_sync::<B>(device) {
        tracing::warn!(target: "steptrace::backend", error = %e, "backend sync failed; continuing");
    }
}

/// Like [`sync`], but returns the failure ([`BackendError::Sync`]). Never panics.
pub fn try_sync<B: Backend>(device: &B::Device) -> Result<(), BackendError> {
    match panic::catch_unwind(AssertUnwindSafe(|| B::sync(device))) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(BackendError::Sync {
            message: e.to_string(),
        }),
        Err(payload) => Err(BackendError::Sync {
            message: format!("panicked: {}", super::guard::panic_message(payload.as_ref())),
        }),
    }
}

/// cubecl's memory accounting for one device (see [`memory_usage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct MemorySnapshot {
    /// Bytes in live allocations (what tensors actually occupy).
    pub bytes_in_use: u64,
    /// Bytes of padding inside live allocations.
    pub bytes_padding: u64,
    /// Bytes reserved from the device by cubecl's memory pools (≥ in use).
    pub bytes_reserved: u64,
    /// Number of live allocations.
    pub allocations: u64,
}

/// Bytes in use on `device` according to cubecl (`client.memory_usage().bytes_in_use`), for
/// the CUDA and wgpu backends. `None` means "not observed" (ndarray, a backend that has not
/// been probed or run in this process, or a query that failed), never 0.
///
/// See [`memory_usage`] for the caveats.
pub fn memory_in_use<B: Backend>(device: &B::Device) -> Option<u64> {
    memory_usage::<B>(device).map(|m| m.bytes_in_use)
}

/// cubecl's full memory accounting for `device` (CUDA and wgpu backends; `None` otherwise).
///
/// Works for every backend stack over cubecl (`Autodiff<Fusion<CubeBackend<..>>>` and any
/// sub-stack), because it dispatches on the device type. Caveats:
/// * cubecl keeps memory pools per stream, and a stream per thread: call it from the thread
///   that runs the training step.
/// * It is a blocking round trip to the device server (it does not wait for the GPU to
///   finish): call it at step boundaries, not inside hot loops. With fusion, operations that
///   are still queued in the fusion stream are not allocated yet; [`sync`] first if that
///   matters.
/// * It only queries a runtime that a probe passed for, or that [`run_on`] started, in this
///   process, so that it can never be the call that initialises a missing GPU runtime.
pub fn memory_usage<B: Backend>(device: &B::Device) -> Option<MemorySnapshot> {
    let device: &dyn Any = device;
    if let Some(d) = device.downcast_ref::<CudaDevice>() {
        return known_usable(BackendKind::Cuda)
            .then(|| query::<cubecl::cuda::CudaRuntime>(d))
            .flatten();
    }
    if let Some(d) = device.downcast_ref::<WgpuDevice>() {
        return known_usable(BackendKind::Wgpu)
            .then(|| query::<cubecl::wgpu::WgpuRuntime>(d))
            .flatten();
    }
    None
}

fn query<R: Runtime>(device: &R::Device) -> Option<MemorySnapshot> {
    match catch_silently(|| R::client(device).memory_usage()) {
        Ok(Ok(u)) => Some(MemorySnapshot {
            bytes_in_use: u.bytes_in_use,
            bytes_padding: u.bytes_padding,
            bytes_reserved: u.bytes_reserved,
            allocations: u.number_allocs,
        }),
        Ok(Err(e)) => {
            tracing::debug!(target: "steptrace::backend", error = ?e, "memory_usage failed");
            None
        }
        Err(panic) => {
            tracing::debug!(target: "steptrace::backend", panic = %panic, "memory_usage panicked");
            None
        }
    }
}

/// burn's own name for the backend stack on `device`, e.g. `autodiff<fusion<cubecl<cuda>>>`
/// or `autodiff<ndarray>` (`Backend::name`). For cubecl backends this creates the device
/// client if it does not exist yet, so call it inside [`BackendRun::run`]. Never panics
/// (a panic yields `"<unknown: ...>"`).
pub fn backend_runtime_name<B: Backend>(device: &B::Device) -> String {
    panic::catch_unwind(AssertUnwindSafe(|| B::name(device)))
        .unwrap_or_else(|p| format!("<unknown: {}>", super::guard::panic_message(p.as_ref())))
}

/// The concrete autodiff backend type [`run_on`] uses for `kind`, shortened with
/// [`short_type_name`], e.g.
/// `Autodiff<Fusion<CubeBackend<CudaRuntime, f32, i32, u8>>, NoCheckpointing>`.
pub fn backend_type_name(kind: BackendKind) -> String {
    short_type_name(match kind {
        BackendKind::Cuda => std::any::type_name::<CudaAutodiff>(),
        BackendKind::Wgpu => std::any::type_name::<WgpuAutodiff>(),
        BackendKind::Cpu => std::any::type_name::<CpuAutodiff>(),
    })
}

/// Drops the module paths from a `std::any::type_name`:
/// `burn_autodiff::backend::Autodiff<burn_ndarray::backend::NdArray>` →
/// `Autodiff<NdArray>`.
pub fn short_type_name(full: &str) -> String {
    let mut out = String::with_capacity(full.len());
    let mut segment_start = 0;
    for (i, c) in full.char_indices() {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            continue;
        }
        push_last_segment(&mut out, &full[segment_start..i]);
        out.push(c);
        segment_start = i + c.len_utf8();
    }
    push_last_segment(&mut out, &full[segment_start..]);
    out
}

fn push_last_segment(out: &mut String, path: &str) {
    out.push_str(path.rsplit("::").next().unwrap_or(path));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{select, BackendChoice};
    use burn::tensor::{Tensor, TensorData};

    /// Adds two tensors, reads the sum back, and reports the backend's name and memory.
    struct AddJob;

    impl BackendRun for AddJob {
        type Output = (Vec<f32>, String, Option<u64>);

        fn run<B: AutodiffBackend>(self, device: B::Device, _info: &Selection) -> Self::Output {
            let a = Tensor::<B, 1>::from_data(TensorData::from([1.0f32, 2.0, 3.0]), &device);
            let b = Tensor::<B, 1>::from_data(TensorData::from([10.0f32, 20.0, 30.0]), &device);
            let sum = a + b;
            // Something alive on the device while memory is read.
            let live = sum.clone().mul_scalar(2.0);
            sync::<B>(&device);
            let mem = memory_in_use::<B>(&device);
            let values = sum.into_data().to_vec::<f32>().unwrap_or_default();
            let doubled = live.into_data().to_vec::<f32>().unwrap_or_default();
            assert_eq!(doubled, vec![22.0, 44.0, 66.0]);
            (values, backend_runtime_name::<B>(&device), mem)
        }
    }

    /// Keeps cubecl's caches of the test runs out of the source tree.
    fn test_cache() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let dir = std::env::temp_dir().join("steptrace-tests").join("cubecl");
            let state = crate::backend::configure_cubecl_cache(&crate::backend::CacheConfig::at(dir));
            eprintln!("cubecl cache: {state:?}");
        });
    }

    #[test]
    fn add_on_cpu() {
        let s = select(BackendChoice::Cpu).expect("cpu");
        let (values, name, mem) = run_on(&s, AddJob);
        assert_eq!(values, vec![11.0, 22.0, 33.0]);
        assert!(name.contains("ndarray"), "{name}");
        assert_eq!(mem, None, "ndarray memory is not observed");
    }

    /// On lavapipe (or any adapter) the same job runs through cubecl's wgpu runtime.
    #[test]
    fn add_on_wgpu() {
        let s = match select(BackendChoice::Wgpu) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("no wgpu adapter here, skipping: {e}");
                return;
            }
        };
        test_cache();
        eprintln!("running on {}", s.label());
        let (values, name, mem) = run_on(&s, AddJob);
        eprintln!("wgpu: name={name} memory_in_use={mem:?}");
        assert_eq!(values, vec![11.0, 22.0, 33.0]);
        assert!(name.contains("wgpu"), "{name}");
        assert!(mem.is_some_and(|m| m > 0), "wgpu memory should be observable: {mem:?}");
    }

    /// Where CUDA works (skipped elsewhere): the same job through cubecl's CUDA runtime.
    #[test]
    fn add_on_cuda() {
        let s = match select(BackendChoice::Cuda) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("no CUDA here, skipping: {e}");
                return;
            }
        };
        test_cache();
        eprintln!("running on {} ({:#?})", s.label(), s.probes);
        let (values, name, mem) = run_on(&s, AddJob);
        eprintln!("cuda: name={name} memory_in_use={mem:?}");
        assert_eq!(values, vec![11.0, 22.0, 33.0]);
        assert!(name.contains("cuda"), "{name}");
        assert!(mem.is_some_and(|m| m > 0), "CUDA memory should be observable: {mem:?}");
        let auto = select(BackendChoice::Auto).expect("auto");
        assert_eq!(auto.kind, BackendKind::Cuda);
        assert!(!auto.is_fallback());
        assert_eq!(auto.label(), s.label());
    }

    #[test]
    fn type_names_are_short_and_concrete() {
        assert_eq!(
            short_type_name("a::b::Autodiff<c::NdArray<f32, i64>, d::e::NoCheckpointing>"),
            "Autodiff<NdArray<f32, i64>, NoCheckpointing>"
        );
        let cuda = backend_type_name(BackendKind::Cuda);
        assert!(cuda.starts_with("Autodiff<Fusion<CubeBackend<CudaRuntime"), "{cuda}");
        let wgpu = backend_type_name(BackendKind::Wgpu);
        assert!(wgpu.contains("WgpuRuntime"), "{wgpu}");
        let cpu = backend_type_name(BackendKind::Cpu);
        assert!(cpu.starts_with("Autodiff<NdArray"), "{cpu}");
    }

    #[test]
    fn memory_of_an_unprobed_cuda_device_is_not_observed() {
        if !known_usable(BackendKind::Cuda) {
            assert_eq!(memory_in_use::<CudaAutodiff>(&CudaDevice::new(0)), None);
        }
    }
}
