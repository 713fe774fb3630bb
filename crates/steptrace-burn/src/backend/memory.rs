//! Memory-pool accounting, for the CUDA and wgpu backends.

use burn::prelude::Device;

#[cfg(any(feature = "cuda", feature = "wgpu"))]
use super::guard::catch_silently;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
use super::probe::known_usable;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
use super::BackendKind;

/// The memory pools' accounting for one device (see [`memory_usage`]).
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

/// Bytes in use on `device` according to its memory pools (burn's
/// `Device::memory_pool_usage`), for the CUDA and wgpu backends. `None` means "not observed"
/// (the CPU backend, a GPU backend that has not been probed or opened in this process, or a
/// query that failed), never 0.
///
/// See [`memory_usage`] for the caveats.
pub fn memory_in_use(device: &Device) -> Option<u64> {
    memory_usage(device).map(|m| m.bytes_in_use)
}

/// The full memory-pool accounting for `device` (CUDA and wgpu backends; `None` otherwise),
/// from burn 0.22's `Device::memory_pool_usage` (cubecl's `memory_report` of the device).
///
/// Caveats:
/// * It is a blocking round trip to the device server (it does not wait for the GPU to
///   finish): call it at step boundaries, not inside hot loops. With fusion, operations that
///   are still queued in the fusion stream are not allocated yet; [`sync`](crate::sync::sync)
///   first if that matters.
/// * It only queries a cubecl device once a probe passed for a GPU runtime, or
///   [`Selection::device`](super::Selection::device) opened one, in this process, so that it
///   can never be the call that initialises a missing GPU runtime.
pub fn memory_usage(device: &Device) -> Option<MemorySnapshot> {
    query(device, "memory_pool_usage", |device| {
        device.memory_pool_usage().map(|u| MemorySnapshot {
            bytes_in_use: u.bytes_in_use,
            bytes_padding: u.bytes_padding,
            bytes_reserved: u.bytes_reserved,
            allocations: u.number_allocs,
        })
    })
}

/// [`memory_usage`] for a device whose fusion queue is known to be empty (right after a
/// sync): cubecl's memory report of every stream, asked of the device's cubecl client
/// directly. burn's `Device::memory_pool_usage` first drains burn-fusion's queue through a
/// round trip of its own, which this skips: on the H200 the step-end query's median went
/// from 31 to 20 µs (MLP, batch 256; docs/benchmarks/archive-2026-12-03.md). Same guard
/// and caveats as [`memory_usage`]; called with work still queued in fusion, it misses it.
pub fn memory_usage_after_sync(device: &Device) -> Option<MemorySnapshot> {
    query(device, "memory_report", |device| {
        #[cfg(any(feature = "cuda", feature = "wgpu"))]
        {
            use burn::backend::DispatchDevice;
            match device.clone().without_autodiff().as_dispatch() {
                DispatchDevice::Cube(cube) => {
                    let u = cube.client().memory_report(cubecl::MemoryScope::Device).usage();
                    Some(MemorySnapshot {
                        bytes_in_use: u.bytes_in_use,
                        bytes_padding: u.bytes_padding,
                        bytes_reserved: u.bytes_reserved,
                        allocations: u.number_allocs,
                    })
                }
                _ => None,
            }
        }
        #[cfg(not(any(feature = "cuda", feature = "wgpu")))]
        {
            let _ = device;
            None
        }
    })
}

/// Asks cubecl's device thread for [`memory_usage_after_sync`]'s figures without waiting for the
/// answer ([`MemoryAsker::ask`]): the question is queued behind every task already queued for
/// the device thread, and answered there, so the answer holds what the device held once those
/// tasks ran, however late it is read. cubecl's client only asks and waits in one call (a
/// blocking round trip, whose wake-up on the H200 cost about 20 µs); this reaches the device's
/// queue through cubecl's `DeviceHandle` for the runtime's server type instead.
pub struct MemoryAsker {
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    submit: Box<dyn Fn(std::sync::mpsc::SyncSender<MemorySnapshot>) + Send>,
}

/// An answer on its way from [`MemoryAsker::ask`].
pub struct PendingUsage {
    answer: std::sync::mpsc::Receiver<MemorySnapshot>,
}

impl PendingUsage {
    /// The answer, waiting for it if need be: first by spinning and yielding for a while (the
    /// device thread answers within microseconds when it is awake), then by blocking. `None`:
    /// the device thread dropped the question (its task panicked).
    pub fn wait(self) -> Option<MemorySnapshot> {
        use std::sync::mpsc::TryRecvError;
        for round in 0u32..1_200 {
            match self.answer.try_recv() {
                Ok(m) => return Some(m),
                Err(TryRecvError::Disconnected) => return None,
                Err(TryRecvError::Empty) if round < 1_000 => std::hint::spin_loop(),
                Err(TryRecvError::Empty) => std::thread::yield_now(),
            }
        }
        self.answer.recv().ok()
    }
}

impl MemoryAsker {
    /// An asker for `device` (CUDA and wgpu, once opened in this process as for
    /// [`memory_usage`]); `None` otherwise, where the caller asks and waits.
    pub fn new(device: &Device) -> Option<MemoryAsker> {
        #[cfg(any(feature = "cuda", feature = "wgpu"))]
        {
            use burn::backend::DispatchDevice;
            let gpu_known = known_usable(BackendKind::Cuda) || known_usable(BackendKind::Wgpu);
            if !gpu_known || !is_cubecl(device) {
                return None;
            }
            let DispatchDevice::Cube(cube) = device.clone().without_autodiff().as_dispatch().clone() else {
                return None;
            };
            let service = catch_silently(|| cube.client().service_id()).ok()?;
            #[cfg(feature = "cuda")]
            if let Some(asker) =
                asker_for::<<cubecl::cuda::CudaRuntime as cubecl_runtime::runtime::Runtime>::Server>(service)
            {
                return Some(asker);
            }
            #[cfg(feature = "wgpu")]
            if let Some(asker) =
                asker_for::<<cubecl::wgpu::WgpuRuntime as cubecl_runtime::runtime::Runtime>::Server>(service)
            {
                return Some(asker);
            }
            None
        }
        #[cfg(not(any(feature = "cuda", feature = "wgpu")))]
        {
            let _ = device;
            None
        }
    }

    /// Queues the question; `None` when it could not be queued.
    pub fn ask(&self) -> Option<PendingUsage> {
        #[cfg(any(feature = "cuda", feature = "wgpu"))]
        {
            let (tx, answer) = std::sync::mpsc::sync_channel(1);
            catch_silently(|| (self.submit)(tx)).ok()?;
            Some(PendingUsage { answer })
        }
        #[cfg(not(any(feature = "cuda", feature = "wgpu")))]
        None
    }
}

/// An asker through the device queue of the server type `S`, when `service` is one of `S`.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn asker_for<S>(service: cubecl_common::device::ServiceId) -> Option<MemoryAsker>
where
    S: cubecl::server::Server + cubecl_common::device::DeviceService,
{
    if service.service != std::any::TypeId::of::<S>() {
        return None;
    }
    // The server is registered already (the client above reached it): this finds its queue.
    let handle = catch_silently(|| cubecl_common::device_handle::DeviceHandle::<S>::new(service.device)).ok()?;
    Some(MemoryAsker {
        submit: Box::new(move |tx| {
            handle.submit(move |server: &mut S| {
                let report = cubecl::MemoryReport {
                    streams: server.stream_ids().into_iter().filter_map(|id| server.memory_report(id)).collect(),
                };
                let u = report.usage();
                let _ = tx.send(MemorySnapshot {
                    bytes_in_use: u.bytes_in_use,
                    bytes_padding: u.bytes_padding,
                    bytes_reserved: u.bytes_reserved,
                    allocations: u.number_allocs,
                });
            });
            // A task is written to the queue's buffer; the server looks at it once flushed.
            handle.flush_queue();
        }),
    })
}

/// Runs `ask` on a cubecl device that a probe or a selection opened in this process (`None`
/// otherwise, and for a panic, logged as `what` panicking).
fn query(device: &Device, what: &str, ask: impl FnOnce(&Device) -> Option<MemorySnapshot>) -> Option<MemorySnapshot> {
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    {
        let gpu_known = known_usable(BackendKind::Cuda) || known_usable(BackendKind::Wgpu);
        if !gpu_known || !is_cubecl(device) {
            return None;
        }
        catch_silently(|| ask(device)).unwrap_or_else(|panic| {
            tracing::debug!(target: "steptrace::backend", panic = %panic, "{what} panicked");
            None
        })
    }
    #[cfg(not(any(feature = "cuda", feature = "wgpu")))]
    {
        let _ = (device, what, ask);
        None
    }
}

/// What a device allows, as its cubecl runtime states it (see [`memory_limits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct MemoryLimits {
    /// How many bytes the device may be asked to hold, or `None` where the runtime states no
    /// figure (CUDA: `cuDeviceTotalMem`; wgpu: the memory heap, where Vulkan reports one).
    pub capacity: Option<u64>,
    /// The largest single allocation cubecl's memory pools accept (CUDA: a quarter of the
    /// capacity; wgpu: the adapter's largest buffer).
    pub max_allocation: u64,
}

/// The device's capacity and largest allocation (CUDA and wgpu; `None` otherwise, or where
/// the device was never opened in this process: the same guard as [`memory_usage`]).
pub fn memory_limits(device: &Device) -> Option<MemoryLimits> {
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    {
        use burn::backend::DispatchDevice;
        let gpu_known = known_usable(BackendKind::Cuda) || known_usable(BackendKind::Wgpu);
        if !gpu_known || !is_cubecl(device) {
            return None;
        }
        let plain = device.clone().without_autodiff();
        catch_silently(|| match plain.as_dispatch() {
            DispatchDevice::Cube(cube) => {
                let client = cube.client();
                let memory = &client.properties().memory;
                Some(MemoryLimits { capacity: memory.max_memory(), max_allocation: memory.max_page_size })
            }
            _ => None,
        })
        .ok()
        .flatten()
    }
    #[cfg(not(any(feature = "cuda", feature = "wgpu")))]
    {
        let _ = device;
        None
    }
}

/// For each of the device's memory pools, the largest allocation it has served since the
/// process started (requested bytes) and its page size, largest first; empty where the
/// backend does not report its pools. cubecl lists no individual live allocations: this is
/// the closest it comes.
pub fn pool_largest_allocations(device: &Device) -> Vec<(u64, u64)> {
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    {
        let gpu_known = known_usable(BackendKind::Cuda) || known_usable(BackendKind::Wgpu);
        if !gpu_known || !is_cubecl(device) {
            return Vec::new();
        }
        let mut pools: Vec<(u64, u64)> = catch_silently(|| device.memory_pool_report())
            .ok()
            .flatten()
            .unwrap_or_default()
            .iter()
            .filter(|p| p.largest_alloc > 0)
            .map(|p| (p.largest_alloc, p.page_size))
            .collect();
        pools.sort_unstable_by(|a, b| b.cmp(a));
        pools
    }
    #[cfg(not(any(feature = "cuda", feature = "wgpu")))]
    {
        let _ = device;
        Vec::new()
    }
}

/// Whether `device` (autodiff or not) runs on a cubecl runtime.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn is_cubecl(device: &Device) -> bool {
    use burn::backend::DispatchDevice;
    matches!(device.clone().without_autodiff().as_dispatch(), DispatchDevice::Cube(_))
}

#[cfg(all(test, feature = "cuda"))]
mod tests {
    use super::*;

    #[test]
    fn memory_of_an_unprobed_cuda_device_is_not_observed() {
        if !known_usable(BackendKind::Cuda) && !known_usable(BackendKind::Wgpu) {
            assert_eq!(memory_in_use(&Device::cuda(0)), None);
        }
    }
}
