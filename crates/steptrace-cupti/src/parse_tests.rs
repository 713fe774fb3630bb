//! Parser tests on synthetic, CUPTI-shaped buffers: the record structs come from cudarc's
//! bindings, zeroed, filled field by field, and laid back to back as CUPTI lays them.

use super::*;
use std::ffi::CString;
use std::mem::size_of;

use sys::CUpti_ActivityMemcpyKind as CopyKind;
use sys::CUpti_ActivitySynchronizationType as SyncType;

/// Writes one field of a (packed) C record through a raw pointer.
macro_rules! set {
    ($p:ident . $f:ident = $v:expr) => {
        (&raw mut (*$p).$f).write_unaligned($v)
    };
}

/// An activity buffer as the buffer-completed callback sees it: records back to back,
/// each starting on an 8-byte boundary, in memory that was zeroed first.
struct SyntheticBuffer {
    words: Box<[u64]>,
    len: usize,
    offsets: Vec<usize>,
}

impl SyntheticBuffer {
    fn new() -> Self {
        Self { words: vec![0u64; 8192].into_boxed_slice(), len: 0, offsets: Vec::new() }
    }

    /// Appends a zeroed record of type `T` and lets `fill` write its fields.
    fn push<T>(&mut self, fill: impl FnOnce(*mut T)) {
        let size = size_of::<T>().next_multiple_of(8);
        assert!(self.len + size <= self.words.len() * 8, "synthetic buffer full");
        // SAFETY: the offset is inside the allocation (asserted) and 8-aligned.
        let p = unsafe { self.words.as_mut_ptr().cast::<u8>().add(self.len) };
        fill(p.cast::<T>());
        self.offsets.push(self.len);
        self.len += size;
    }

    /// Parses every record in order, as the buffer-completed callback does.
    fn parse_into(&self, sink: &mut Sink) {
        let base = self.words.as_ptr().cast::<u8>();
        for &off in &self.offsets {
            // SAFETY: each offset starts a complete record written by `push`.
            unsafe { sink.push_record(base.add(off).cast()) };
        }
    }
}

fn open_sink() -> Sink {
    let mut sink = Sink::default();
    sink.reset(16);
    sink.open = true;
    sink
}

fn push_kernel(buf: &mut SyntheticBuffer, name: &CString, corr: u32, start: u64, end: u64) {
    buf.push::<sys::CUpti_ActivityKernel10>(|p| {
        // SAFETY: `p` is a zeroed, in-bounds Kernel10; fields are written unaligned.
        unsafe {
            set!(p.kind = K::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
            set!(p.registersPerThread = 40);
            set!(p.start = start);
            set!(p.end = end);
            set!(p.deviceId = 0);
            set!(p.contextId = 1);
            set!(p.streamId = 13);
            set!(p.gridX = 128);
            set!(p.gridY = 2);
            set!(p.gridZ = 1);
            set!(p.blockX = 256);
            set!(p.blockY = 1);
            set!(p.blockZ = 1);
            set!(p.staticSharedMemory = 1024);
            set!(p.dynamicSharedMemory = 4096);
            set!(p.correlationId = corr);
            set!(p.name = name.as_ptr());
        }
    });
}

fn push_memcpy(buf: &mut SyntheticBuffer, kind: CopyKind, bytes: u64, corr: u32) {
    buf.push::<sys::CUpti_ActivityMemcpy6>(|p| {
        // SAFETY: `p` is a zeroed, in-bounds Memcpy6.
        unsafe {
            set!(p.kind = K::CUPTI_ACTIVITY_KIND_MEMCPY);
            set!(p.copyKind = kind as u8);
            set!(p.bytes = bytes);
            set!(p.start = 5_000);
            set!(p.end = 5_400);
            set!(p.deviceId = 0);
            set!(p.contextId = 1);
            set!(p.streamId = 13);
            set!(p.correlationId = corr);
        }
    });
}

fn push_driver_call(buf: &mut SyntheticBuffer, cbid: u32, corr: u32, tid: u32) {
    buf.push::<sys::CUpti_ActivityAPI>(|p| {
        // SAFETY: `p` is a zeroed, in-bounds ActivityAPI record.
        unsafe {
            set!(p.kind = K::CUPTI_ACTIVITY_KIND_DRIVER);
            set!(p.cbid = cbid);
            set!(p.start = 900);
            set!(p.end = 950);
            set!(p.processId = 4242);
            set!(p.threadId = tid);
            set!(p.correlationId = corr);
        }
    });
}

#[test]
fn kernel_record_fields_round_trip() {
    let name = CString::new("matmul_entry_lhs_f32").unwrap();
    let mut buf = SyntheticBuffer::new();
    push_kernel(&mut buf, &name, 77, 1_000, 3_500);
    let mut sink = open_sink();
    buf.parse_into(&mut sink);

    let (records, stats) = sink.take();
    assert_eq!(stats, SinkStats::default());
    let expected = Kernel {
        start_ns: 1_000,
        end_ns: 3_500,
        device_id: 0,
        context_id: 1,
        stream_id: 13,
        correlation_id: 77,
        name: Arc::from("matmul_entry_lhs_f32"),
        grid: [128, 2, 1],
        block: [256, 1, 1],
        registers_per_thread: 40,
        static_shared_bytes: 1024,
        dynamic_shared_bytes: 4096,
    };
    assert_eq!(records.kernels, vec![expected]);
}

#[test]
fn recurring_kernel_names_share_one_allocation() {
    let a = CString::new("elemwise_fuse").unwrap();
    let a_again = CString::new("elemwise_fuse").unwrap();
    let b = CString::new("reduce_kernel").unwrap();
    let mut buf = SyntheticBuffer::new();
    push_kernel(&mut buf, &a, 1, 10, 20);
    push_kernel(&mut buf, &b, 2, 30, 40);
    push_kernel(&mut buf, &a_again, 3, 50, 60);
    let mut sink = open_sink();
    buf.parse_into(&mut sink);
    assert_eq!(sink.distinct_names(), 2);
    let k = &sink.records.kernels;
    assert!(Arc::ptr_eq(&k[0].name, &k[2].name));
    assert!(!Arc::ptr_eq(&k[0].name, &k[1].name));

    // A new window keeps the interned names: the next step's kernels allocate nothing.
    sink.reset(4);
    buf.parse_into(&mut sink);
    assert_eq!(sink.distinct_names(), 2);
}

#[test]
fn null_kernel_name_is_labelled() {
    let mut buf = SyntheticBuffer::new();
    buf.push::<sys::CUpti_ActivityKernel10>(|p| {
        // SAFETY: `p` is a zeroed, in-bounds Kernel10; `name` stays null.
        unsafe {
            set!(p.kind = K::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
            set!(p.start = 1);
            set!(p.end = 2);
        }
    });
    let mut sink = open_sink();
    buf.parse_into(&mut sink);
    assert_eq!(&*sink.records.kernels[0].name, "<unnamed>");
}

#[test]
fn copies_are_typed() {
    let mut buf = SyntheticBuffer::new();
    push_memcpy(&mut buf, CopyKind::CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 65_536, 10);
    push_memcpy(&mut buf, CopyKind::CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 40, 11);
    push_memcpy(&mut buf, CopyKind::CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, 8, 12);
    buf.push::<sys::CUpti_ActivityMemcpyPtoP4>(|p| {
        // SAFETY: `p` is a zeroed, in-bounds PtoP4 record.
        unsafe {
            set!(p.kind = K::CUPTI_ACTIVITY_KIND_MEMCPY2);
            set!(p.copyKind = CopyKind::CUPTI_ACTIVITY_MEMCPY_KIND_PTOP as u8);
            set!(p.bytes = 1 << 20);
            set!(p.start = 100);
            set!(p.end = 200);
            set!(p.deviceId = 1);
            set!(p.srcDeviceId = 0);
            set!(p.correlationId = 13);
        }
    });
    let mut sink = open_sink();
    buf.parse_into(&mut sink);
    let (r, stats) = sink.take();
    assert_eq!(stats, SinkStats::default());

    let kinds: Vec<_> = r.memcpys.iter().map(|m| (m.kind, m.bytes, m.correlation_id)).collect();
    assert_eq!(
        kinds,
        [
            (MemcpyKind::HtoD, 65_536, 10),
            (MemcpyKind::DtoH, 40, 11),
            (MemcpyKind::DtoD, 8, 12),
            (MemcpyKind::PtoP, 1 << 20, 13)
        ]
    );
    assert_eq!((r.memcpys[0].start_ns, r.memcpys[0].end_ns, r.memcpys[0].stream_id), (5_000, 5_400, 13));
    assert_eq!(r.memcpys[3].device_id, 1);
}

#[test]
fn memsets_and_syncs_are_typed() {
    let mut buf = SyntheticBuffer::new();
    buf.push::<sys::CUpti_ActivityMemset4>(|p| {
        // SAFETY: `p` is a zeroed, in-bounds Memset4 record.
        unsafe {
            set!(p.kind = K::CUPTI_ACTIVITY_KIND_MEMSET);
            set!(p.value = 0xAB);
            set!(p.bytes = 4096);
            set!(p.start = 7_000);
            set!(p.end = 7_100);
            set!(p.streamId = 13);
            set!(p.correlationId = 14);
        }
    });
    // CUPTI 13 writes version 2 of the synchronization record; the parser reads the
    // version-1 prefix.
    buf.push::<sys::CUpti_ActivitySynchronization2>(|p| {
        // SAFETY: `p` is a zeroed, in-bounds Synchronization2 record.
        unsafe {
            set!(p.kind = K::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
            set!(p.type_ = SyncType::CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE);
            set!(p.start = 8_000);
            set!(p.end = 9_000);
            set!(p.correlationId = 15);
            set!(p.contextId = 1);
            set!(p.streamId = 13);
            set!(p.cudaEventSyncId = 99);
        }
    });
    let mut sink = open_sink();
    buf.parse_into(&mut sink);
    let (r, stats) = sink.take();
    assert_eq!(stats, SinkStats::default());

    assert_eq!(
        r.memsets,
        [Memset {
            start_ns: 7_000,
            end_ns: 7_100,
            device_id: 0,
            context_id: 0,
            stream_id: 13,
            correlation_id: 14,
            bytes: 4096,
            value: 0xAB
        }]
    );
    assert_eq!(
        r.syncs,
        [Synchronization {
            start_ns: 8_000,
            end_ns: 9_000,
            context_id: 1,
            stream_id: 13,
            correlation_id: 15,
            kind: SyncKind::StreamSynchronize
        }]
    );
}

#[test]
fn incomplete_records_are_counted_not_kept() {
    let name = CString::new("k").unwrap();
    let mut buf = SyntheticBuffer::new();
    push_kernel(&mut buf, &name, 1, 1_000, 0); // still running when flushed
    push_kernel(&mut buf, &name, 2, 0, 0); // never started
    push_kernel(&mut buf, &name, 3, 2_000, 1_999); // reversed
    push_kernel(&mut buf, &name, 4, 2_000, 2_000); // zero length is fine
    let mut sink = open_sink();
    buf.parse_into(&mut sink);
    let (r, stats) = sink.take();
    assert_eq!(stats.incomplete, 3);
    assert_eq!(r.kernels.iter().map(|k| k.correlation_id).collect::<Vec<_>>(), [4]);
}

#[test]
fn driver_records_keep_only_launches_when_asked() {
    let mem_alloc = sys::CUpti_driver_api_trace_cbid::CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2 as u32;
    let mut buf = SyntheticBuffer::new();
    push_driver_call(&mut buf, 307, 500, 31_337);
    push_driver_call(&mut buf, mem_alloc, 501, 31_337);
    push_driver_call(&mut buf, 652, 502, 7);

    let mut sink = open_sink();
    sink.driver_launches = true;
    buf.parse_into(&mut sink);
    let (r, stats) = sink.take();
    assert_eq!(stats.ignored, 1);
    let got: Vec<_> = r.launches.iter().map(|l| (l.name, l.correlation_id, l.thread.id)).collect();
    assert_eq!(got, [("cuLaunchKernel", 500, 31_337), ("cuLaunchKernelEx", 502, 7)]);
    assert_eq!((r.launches[0].start_ns, r.launches[0].end_ns), (900, 950));

    // With the callback API as the launch source, DRIVER records are not expected: ignore.
    let mut sink = open_sink();
    buf.parse_into(&mut sink);
    assert!(sink.records.launches.is_empty());
    assert_eq!(sink.stats.ignored, 3);
}

#[test]
fn unknown_kinds_and_closed_windows_are_only_counted() {
    let mut buf = SyntheticBuffer::new();
    buf.push::<[u32; 4]>(|p| {
        // SAFETY: `p` is an in-bounds, zeroed 16-byte slot; 9999 is no CUPTI kind.
        unsafe { p.cast::<u32>().write(9999) };
    });
    push_memcpy(&mut buf, CopyKind::CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 8, 1);
    let mut sink = open_sink();
    buf.parse_into(&mut sink);
    assert_eq!(sink.stats.ignored, 1);
    assert_eq!(sink.records.memcpys.len(), 1);

    sink.open = false;
    buf.parse_into(&mut sink);
    assert_eq!(sink.stats.outside_window, 2);
    assert_eq!(sink.records.memcpys.len(), 1);
}

#[test]
fn reset_clears_records_and_counters() {
    let mut buf = SyntheticBuffer::new();
    push_memcpy(&mut buf, CopyKind::CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 8, 1);
    let mut sink = open_sink();
    buf.parse_into(&mut sink);
    sink.stats.dropped = 5;
    sink.reset(8);
    assert!(sink.records.memcpys.is_empty());
    assert_eq!(sink.stats, SinkStats::default());
    assert!(sink.records.kernels.capacity() >= 8);
}

#[test]
fn kernel_fields_read_sit_where_every_cuda13_version_has_them() {
    use std::mem::offset_of;
    macro_rules! same {
        ($($f:ident),*) => {$(
            assert_eq!(
                offset_of!(sys::CUpti_ActivityKernel9, $f),
                offset_of!(sys::CUpti_ActivityKernel10, $f),
                stringify!($f)
            );
        )*};
    }
    same!(
        kind,
        registersPerThread,
        start,
        end,
        deviceId,
        contextId,
        streamId,
        gridX,
        gridY,
        gridZ,
        blockX,
        blockY,
        blockZ,
        staticSharedMemory,
        dynamicSharedMemory,
        correlationId,
        name
    );
    assert_eq!(offset_of!(sys::CUpti_ActivityKernel10, start), 16);
    assert_eq!(offset_of!(sys::CUpti_ActivitySynchronization2, streamId), 32);
    assert_eq!(
        offset_of!(sys::CUpti_ActivitySynchronization, streamId),
        offset_of!(sys::CUpti_ActivitySynchronization2, streamId)
    );
}
