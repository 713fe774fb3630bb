//! Plain Rust records: what a [`Window`](crate::Window) holds. No CUPTI type appears here.
//!
//! Every timestamp (`*_ns`) is in nanoseconds on CUPTI's clock; map it to host time with
//! the window's [`ClockMap`](crate::ClockMap).

use std::sync::Arc;

/// A kernel execution on the device (`CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    /// Start on the device, CUPTI ns.
    pub start_ns: u64,
    /// End on the device, CUPTI ns.
    pub end_ns: u64,
    /// CUDA device ordinal.
    pub device_id: u32,
    /// CUPTI's context id.
    pub context_id: u32,
    /// CUPTI's stream id.
    pub stream_id: u32,
    /// Links the kernel to the host call that launched it ([`Launch::correlation_id`]).
    pub correlation_id: u32,
    /// The kernel's raw (possibly mangled) name, interned: the same name is one allocation.
    pub name: Arc<str>,
    /// Grid size in blocks (x, y, z).
    pub grid: [i32; 3],
    /// Block size in threads (x, y, z).
    pub block: [i32; 3],
    /// Registers per thread.
    pub registers_per_thread: u16,
    /// Static shared memory per block, bytes.
    pub static_shared_bytes: i32,
    /// Dynamic shared memory per block, bytes.
    pub dynamic_shared_bytes: i32,
}

/// Direction of a memory copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemcpyKind {
    /// Host to device.
    HtoD,
    /// Device to host.
    DtoH,
    /// Device to device, same device.
    DtoD,
    /// Host to host.
    HtoH,
    /// Peer to peer (between devices).
    PtoP,
    /// Anything else (array copies, unknown): CUPTI's `CUpti_ActivityMemcpyKind` value.
    Other(u8),
}

impl MemcpyKind {
    pub(crate) fn from_cupti(kind: u8) -> Self {
        match kind {
            1 => MemcpyKind::HtoD,
            2 => MemcpyKind::DtoH,
            8 => MemcpyKind::DtoD,
            9 => MemcpyKind::HtoH,
            10 => MemcpyKind::PtoP,
            other => MemcpyKind::Other(other),
        }
    }

    /// A short label as Kineto writes it (`HtoD`, ...).
    pub fn label(self) -> &'static str {
        match self {
            MemcpyKind::HtoD => "HtoD",
            MemcpyKind::DtoH => "DtoH",
            MemcpyKind::DtoD => "DtoD",
            MemcpyKind::HtoH => "HtoH",
            MemcpyKind::PtoP => "PtoP",
            MemcpyKind::Other(_) => "other",
        }
    }
}

/// A memory copy (`CUPTI_ACTIVITY_KIND_MEMCPY`, and peer copies from `MEMCPY2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memcpy {
    /// Start, CUPTI ns.
    pub start_ns: u64,
    /// End, CUPTI ns.
    pub end_ns: u64,
    /// Device ordinal.
    pub device_id: u32,
    /// CUPTI's context id.
    pub context_id: u32,
    /// CUPTI's stream id.
    pub stream_id: u32,
    /// Links the copy to its host API call.
    pub correlation_id: u32,
    /// Bytes copied.
    pub bytes: u64,
    /// Direction.
    pub kind: MemcpyKind,
}

/// A memset (`CUPTI_ACTIVITY_KIND_MEMSET`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memset {
    /// Start, CUPTI ns.
    pub start_ns: u64,
    /// End, CUPTI ns.
    pub end_ns: u64,
    /// Device ordinal.
    pub device_id: u32,
    /// CUPTI's context id.
    pub context_id: u32,
    /// CUPTI's stream id.
    pub stream_id: u32,
    /// Links the memset to its host API call.
    pub correlation_id: u32,
    /// Bytes set.
    pub bytes: u64,
    /// The value written.
    pub value: u32,
}

/// A host thread that made a driver call.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostThread {
    /// With [`LaunchRecords::Callback`](crate::LaunchRecords::Callback): steptrace's stable
    /// per-thread number (1, 2, ... in order of first launch). With
    /// [`LaunchRecords::DriverActivity`](crate::LaunchRecords::DriverActivity): the OS
    /// thread id (`gettid`) CUPTI recorded.
    pub id: u64,
    /// The thread's name: Rust's name with the callback API (cubecl's device thread is
    /// `DSU-…`/`DSD-…`), the OS name (`/proc/self/task/<tid>/comm`, at most 15 bytes) with
    /// the DRIVER activity kind; `None` when unnamed or gone.
    pub name: Option<Arc<str>>,
}

/// A host-side kernel launch call (`cuLaunchKernel`, `cuLaunchKernelEx`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// API entry, CUPTI ns.
    pub start_ns: u64,
    /// API exit, CUPTI ns.
    pub end_ns: u64,
    /// Equal to the launched kernel's [`Kernel::correlation_id`].
    pub correlation_id: u32,
    /// CUPTI's driver-API callback id (307 is `cuLaunchKernel`).
    pub cbid: u32,
    /// The driver function, e.g. `"cuLaunchKernel"`.
    pub name: &'static str,
    /// The calling thread.
    pub thread: HostThread,
}

/// What a synchronization record waited on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyncKind {
    /// `cuEventSynchronize`.
    EventSynchronize,
    /// `cuStreamWaitEvent`.
    StreamWaitEvent,
    /// `cuStreamSynchronize`.
    StreamSynchronize,
    /// `cuCtxSynchronize`.
    ContextSynchronize,
    /// Unknown or newer: CUPTI's `CUpti_ActivitySynchronizationType` value.
    Other(u32),
}

impl SyncKind {
    pub(crate) fn from_cupti(kind: u32) -> Self {
        match kind {
            1 => SyncKind::EventSynchronize,
            2 => SyncKind::StreamWaitEvent,
            3 => SyncKind::StreamSynchronize,
            4 => SyncKind::ContextSynchronize,
            other => SyncKind::Other(other),
        }
    }
}

/// A host wait on the device (`CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`). Named
/// `Synchronization` rather than `Sync` so as not to shadow the `Sync` trait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Synchronization {
    /// Start of the wait, CUPTI ns.
    pub start_ns: u64,
    /// End of the wait, CUPTI ns.
    pub end_ns: u64,
    /// CUPTI's context id.
    pub context_id: u32,
    /// CUPTI's stream id (`u32::MAX` when the wait is not on a stream).
    pub stream_id: u32,
    /// Links the wait to its API call.
    pub correlation_id: u32,
    /// What was waited on.
    pub kind: SyncKind,
}

/// Names of the launch callback ids this crate records.
pub(crate) fn launch_name(cbid: u32) -> &'static str {
    match cbid {
        307 => "cuLaunchKernel",
        442 => "cuLaunchKernel_ptsz",
        652 => "cuLaunchKernelEx",
        653 => "cuLaunchKernelEx_ptsz",
        477 => "cuLaunchCooperativeKernel",
        478 => "cuLaunchCooperativeKernel_ptsz",
        _ => "cuLaunch?",
    }
}

/// The driver-API callback ids of kernel launches (see [`launch_name`]).
pub(crate) const LAUNCH_CBIDS: [u32; 6] = [307, 442, 652, 653, 477, 478];

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::cupti::sys::CUpti_driver_api_trace_cbid as Cbid;

    #[test]
    fn launch_cbids_match_the_bindings() {
        let from_bindings = [
            Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel as u32,
            Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz as u32,
            Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx as u32,
            Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz as u32,
            Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel as u32,
            Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz as u32,
        ];
        assert_eq!(from_bindings, LAUNCH_CBIDS);
        assert_eq!(launch_name(307), "cuLaunchKernel");
        assert_eq!(launch_name(652), "cuLaunchKernelEx");
        assert_eq!(launch_name(1), "cuLaunch?");
    }

    #[test]
    fn memcpy_kinds_follow_cupti_values() {
        use cudarc::cupti::sys::CUpti_ActivityMemcpyKind as K;
        assert_eq!(MemcpyKind::from_cupti(K::CUPTI_ACTIVITY_MEMCPY_KIND_HTOD as u8), MemcpyKind::HtoD);
        assert_eq!(MemcpyKind::from_cupti(K::CUPTI_ACTIVITY_MEMCPY_KIND_DTOH as u8), MemcpyKind::DtoH);
        assert_eq!(MemcpyKind::from_cupti(K::CUPTI_ACTIVITY_MEMCPY_KIND_DTOD as u8), MemcpyKind::DtoD);
        assert_eq!(MemcpyKind::from_cupti(K::CUPTI_ACTIVITY_MEMCPY_KIND_HTOH as u8), MemcpyKind::HtoH);
        assert_eq!(MemcpyKind::from_cupti(K::CUPTI_ACTIVITY_MEMCPY_KIND_PTOP as u8), MemcpyKind::PtoP);
        assert_eq!(MemcpyKind::from_cupti(K::CUPTI_ACTIVITY_MEMCPY_KIND_ATOD as u8), MemcpyKind::Other(6));
        assert_eq!(MemcpyKind::Other(6).label(), "other");
    }

    #[test]
    fn sync_kinds_follow_cupti_values() {
        use cudarc::cupti::sys::CUpti_ActivitySynchronizationType as T;
        let stream = T::CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE as u32;
        let ctx = T::CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE as u32;
        let event = T::CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE as u32;
        let wait = T::CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT as u32;
        assert_eq!(SyncKind::from_cupti(stream), SyncKind::StreamSynchronize);
        assert_eq!(SyncKind::from_cupti(ctx), SyncKind::ContextSynchronize);
        assert_eq!(SyncKind::from_cupti(event), SyncKind::EventSynchronize);
        assert_eq!(SyncKind::from_cupti(wait), SyncKind::StreamWaitEvent);
        assert_eq!(SyncKind::from_cupti(77), SyncKind::Other(77));
    }
}
