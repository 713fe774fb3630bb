//! cubecl's memory accounting, for the CUDA and wgpu backends.

use burn::tensor::backend::Backend;

#[cfg(any(feature = "cuda", feature = "wgpu"))]
use super::guard::catch_silently;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
use super::probe::known_usable;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
use super::BackendKind;

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
///   are still queued in the fusion stream are not allocated yet; [`sync`](crate::sync::sync)
///   first if that matters.
/// * It only queries a runtime that a probe passed for, or that [`run_on`](super::run_on)
///   started, in this process, so that it can never be the call that initialises a missing
///   GPU runtime.
pub fn memory_usage<B: Backend>(device: &B::Device) -> Option<MemorySnapshot> {
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    let device: &dyn std::any::Any = device;
    #[cfg(feature = "cuda")]
    if let Some(d) = device.downcast_ref::<burn::backend::cuda::CudaDevice>() {
        return known_usable(BackendKind::Cuda)
            .then(|| query::<cubecl::cuda::CudaRuntime>(d))
            .flatten();
    }
    #[cfg(feature = "wgpu")]
    if let Some(d) = device.downcast_ref::<burn::backend::wgpu::WgpuDevice>() {
        return known_usable(BackendKind::Wgpu)
            .then(|| query::<cubecl::wgpu::WgpuRuntime>(d))
            .flatten();
    }
    let _ = device;
    None
}

#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn query<R: cubecl::Runtime>(device: &R::Device) -> Option<MemorySnapshot> {
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

#[cfg(all(test, feature = "cuda"))]
mod tests {
    use super::*;
    use crate::backend::CudaAutodiff;
    use burn::backend::cuda::CudaDevice;

    #[test]
    fn memory_of_an_unprobed_cuda_device_is_not_observed() {
        if !known_usable(BackendKind::Cuda) {
            assert_eq!(memory_in_use::<CudaAutodiff>(&CudaDevice::new(0)), None);
        }
    }
}
