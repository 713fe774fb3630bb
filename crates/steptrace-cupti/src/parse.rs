//! Activity records, from CUPTI's C layout to [`crate::records`].
//!
//! A record starts with its `CUpti_ActivityKind`; the parser reads that `u32` first (as a
//! plain integer, so that a kind newer than the bindings is harmless) and only then views
//! the record as the struct for that kind. It reads fields one by one, unaligned, and only
//! fields of the leading part that every record version of the CUDA 13 line shares:
//! `CUpti_ActivityKernel10` (what CUPTI 13.0 writes; 11 to 13 only append fields),
//! `CUpti_ActivityMemcpy6`, `CUpti_ActivityMemcpyPtoP4`, `CUpti_ActivityMemset4`,
//! `CUpti_ActivityAPI` and `CUpti_ActivitySynchronization`.

use std::collections::HashSet;
use std::ffi::{c_char, CStr};
use std::sync::Arc;

use cudarc::cupti::sys;
use sys::CUpti_ActivityKind as K;

use crate::records::{
    launch_name, HostThread, Kernel, Launch, Memcpy, MemcpyKind, Memset, SyncKind, Synchronization, LAUNCH_CBIDS,
};

/// Reads one field of a (packed) C record through a raw pointer.
macro_rules! field {
    ($p:ident . $f:ident) => {
        (&raw const (*$p).$f).read_unaligned()
    };
}

/// Records of one window, by kind.
#[derive(Debug, Default, Clone)]
pub(crate) struct Records {
    pub(crate) kernels: Vec<Kernel>,
    pub(crate) memcpys: Vec<Memcpy>,
    pub(crate) memsets: Vec<Memset>,
    pub(crate) launches: Vec<Launch>,
    pub(crate) syncs: Vec<Synchronization>,
}

impl Records {
    /// Drops the records of work that started before `cupti_ns`; returns how many.
    pub(crate) fn discard_before(&mut self, cupti_ns: u64) -> u64 {
        let before =
            self.kernels.len() + self.memcpys.len() + self.memsets.len() + self.launches.len() + self.syncs.len();
        self.kernels.retain(|k| k.start_ns >= cupti_ns);
        self.memcpys.retain(|c| c.start_ns >= cupti_ns);
        self.memsets.retain(|m| m.start_ns >= cupti_ns);
        self.launches.retain(|l| l.start_ns >= cupti_ns);
        self.syncs.retain(|s| s.start_ns >= cupti_ns);
        let after =
            self.kernels.len() + self.memcpys.len() + self.memsets.len() + self.launches.len() + self.syncs.len();
        (before - after) as u64
    }

    fn reserve(&mut self, kernels: usize) {
        self.kernels.reserve(kernels);
        self.memcpys.reserve(kernels / 2);
        self.memsets.reserve(kernels / 8);
        self.syncs.reserve(kernels / 8);
    }
}

/// Counters kept beside the records.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SinkStats {
    /// Records with a zero or reversed timestamp (flushed before the work finished).
    pub(crate) incomplete: u64,
    /// CUPTI's dropped-record counts, summed.
    pub(crate) dropped: u64,
    /// Records of kinds not collected, and driver calls that are not launches.
    pub(crate) ignored: u64,
    /// Records that arrived while no window was open.
    pub(crate) outside_window: u64,
    /// Buffers whose walk stopped on an error.
    pub(crate) walk_errors: u64,
}

/// Where the buffer-completed callback puts what it parses. One per process (a static in
/// `buffers`), behind a mutex; tests make their own.
#[derive(Debug, Default)]
pub(crate) struct Sink {
    /// True while a window is open; records arriving otherwise are only counted.
    pub(crate) open: bool,
    /// Keep `DRIVER` activity records of launches (the `DriverActivity` launch source).
    pub(crate) driver_launches: bool,
    pub(crate) records: Records,
    pub(crate) stats: SinkStats,
    names: HashSet<Arc<str>>,
}

impl Sink {
    /// Clears records and counters for a new window and reserves room for `kernels`
    /// kernel records (and proportionally for the others). Interned names are kept.
    pub(crate) fn reset(&mut self, kernels: usize) {
        self.records = Records::default();
        self.records.reserve(kernels);
        self.stats = SinkStats::default();
    }

    /// Takes the window's records and counters, leaving empty ones.
    pub(crate) fn take(&mut self) -> (Records, SinkStats) {
        (std::mem::take(&mut self.records), std::mem::take(&mut self.stats))
    }

    /// Parses one record into the sink.
    ///
    /// # Safety
    /// `record` must point to a complete CUPTI activity record (as handed out by
    /// `cuptiActivityGetNextRecord`), readable for the size of its kind's struct.
    pub(crate) unsafe fn push_record(&mut self, record: *const sys::CUpti_Activity) {
        if !self.open {
            self.stats.outside_window += 1;
            return;
        }
        // SAFETY: every record starts with its kind, a 4-byte enum, read as a plain u32.
        let kind = unsafe { record.cast::<u32>().read_unaligned() };
        let kernel = [K::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL as u32, K::CUPTI_ACTIVITY_KIND_KERNEL as u32];
        // SAFETY: the caller guarantees a complete record, and its kind says which struct
        // it is; each arm views it as that struct.
        unsafe {
            match kind {
                k if kernel.contains(&k) => self.kernel(record.cast()),
                k if k == K::CUPTI_ACTIVITY_KIND_MEMCPY as u32 => self.memcpy(record.cast()),
                k if k == K::CUPTI_ACTIVITY_KIND_MEMCPY2 as u32 => self.peer_copy(record.cast()),
                k if k == K::CUPTI_ACTIVITY_KIND_MEMSET as u32 => self.memset(record.cast()),
                k if k == K::CUPTI_ACTIVITY_KIND_DRIVER as u32 => self.driver_call(record.cast()),
                k if k == K::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION as u32 => self.sync(record.cast()),
                _ => self.stats.ignored += 1,
            }
        }
    }

    /// Counts and rejects records whose work had not finished when they were flushed.
    fn complete(&mut self, start: u64, end: u64) -> bool {
        let ok = start != 0 && end >= start;
        if !ok {
            self.stats.incomplete += 1;
        }
        ok
    }

    /// # Safety
    /// `p` points to a kernel record of at least `CUpti_ActivityKernel10`'s size.
    unsafe fn kernel(&mut self, p: *const sys::CUpti_ActivityKernel10) {
        // SAFETY: the caller guarantees the record; the fields read are all in the part
        // that is common to every kernel record version of CUDA 13.
        let (mut k, name) = unsafe {
            let k = Kernel {
                start_ns: field!(p.start),
                end_ns: field!(p.end),
                device_id: field!(p.deviceId),
                context_id: field!(p.contextId),
                stream_id: field!(p.streamId),
                correlation_id: field!(p.correlationId),
                name: Arc::from(""),
                grid: [field!(p.gridX), field!(p.gridY), field!(p.gridZ)],
                block: [field!(p.blockX), field!(p.blockY), field!(p.blockZ)],
                registers_per_thread: field!(p.registersPerThread),
                static_shared_bytes: field!(p.staticSharedMemory),
                dynamic_shared_bytes: field!(p.dynamicSharedMemory),
            };
            (k, field!(p.name))
        };
        if self.complete(k.start_ns, k.end_ns) {
            // SAFETY: CUPTI's name is null or a NUL-terminated string that lives at least
            // as long as the record.
            k.name = unsafe { self.intern_c(name) };
            self.records.kernels.push(k);
        }
    }

    /// # Safety
    /// `p` points to a `CUpti_ActivityMemcpy6`-shaped record (older versions share the
    /// fields read).
    unsafe fn memcpy(&mut self, p: *const sys::CUpti_ActivityMemcpy6) {
        // SAFETY: the caller guarantees the record; the fields are in the common prefix.
        let m = unsafe {
            Memcpy {
                start_ns: field!(p.start),
                end_ns: field!(p.end),
                device_id: field!(p.deviceId),
                context_id: field!(p.contextId),
                stream_id: field!(p.streamId),
                correlation_id: field!(p.correlationId),
                bytes: field!(p.bytes),
                kind: MemcpyKind::from_cupti(field!(p.copyKind)),
            }
        };
        if self.complete(m.start_ns, m.end_ns) {
            self.records.memcpys.push(m);
        }
    }

    /// # Safety
    /// `p` points to a `CUpti_ActivityMemcpyPtoP4`-shaped record.
    unsafe fn peer_copy(&mut self, p: *const sys::CUpti_ActivityMemcpyPtoP4) {
        // SAFETY: the caller guarantees the record; the fields are in the common prefix.
        let m = unsafe {
            Memcpy {
                start_ns: field!(p.start),
                end_ns: field!(p.end),
                device_id: field!(p.deviceId),
                context_id: field!(p.contextId),
                stream_id: field!(p.streamId),
                correlation_id: field!(p.correlationId),
                bytes: field!(p.bytes),
                kind: MemcpyKind::PtoP,
            }
        };
        if self.complete(m.start_ns, m.end_ns) {
            self.records.memcpys.push(m);
        }
    }

    /// # Safety
    /// `p` points to a `CUpti_ActivityMemset4`-shaped record.
    unsafe fn memset(&mut self, p: *const sys::CUpti_ActivityMemset4) {
        // SAFETY: the caller guarantees the record; the fields are in the common prefix.
        let m = unsafe {
            Memset {
                start_ns: field!(p.start),
                end_ns: field!(p.end),
                device_id: field!(p.deviceId),
                context_id: field!(p.contextId),
                stream_id: field!(p.streamId),
                correlation_id: field!(p.correlationId),
                bytes: field!(p.bytes),
                value: field!(p.value),
            }
        };
        if self.complete(m.start_ns, m.end_ns) {
            self.records.memsets.push(m);
        }
    }

    /// # Safety
    /// `p` points to a `CUpti_ActivityAPI` record.
    unsafe fn driver_call(&mut self, p: *const sys::CUpti_ActivityAPI) {
        // SAFETY: the caller guarantees the record.
        let (cbid, start, end, tid, corr) =
            unsafe { (field!(p.cbid), field!(p.start), field!(p.end), field!(p.threadId), field!(p.correlationId)) };
        if !self.driver_launches || !LAUNCH_CBIDS.contains(&cbid) {
            self.stats.ignored += 1;
            return;
        }
        if self.complete(start, end) {
            self.records.launches.push(Launch {
                start_ns: start,
                end_ns: end,
                correlation_id: corr,
                cbid,
                name: launch_name(cbid),
                thread: HostThread { id: u64::from(tid), name: None },
            });
        }
    }

    /// # Safety
    /// `p` points to a `CUpti_ActivitySynchronization`-shaped record (version 2 appends).
    unsafe fn sync(&mut self, p: *const sys::CUpti_ActivitySynchronization) {
        // SAFETY: the caller guarantees the record; `type_` is a 4-byte enum read as u32.
        let s = unsafe {
            Synchronization {
                start_ns: field!(p.start),
                end_ns: field!(p.end),
                context_id: field!(p.contextId),
                stream_id: field!(p.streamId),
                correlation_id: field!(p.correlationId),
                kind: SyncKind::from_cupti((&raw const (*p).type_).cast::<u32>().read_unaligned()),
            }
        };
        if self.complete(s.start_ns, s.end_ns) {
            self.records.syncs.push(s);
        }
    }

    /// Interns a C string.
    ///
    /// # Safety
    /// `name` is null or a valid NUL-terminated string.
    unsafe fn intern_c(&mut self, name: *const c_char) -> Arc<str> {
        if name.is_null() {
            return self.intern("<unnamed>");
        }
        // SAFETY: guaranteed by the caller.
        let bytes = unsafe { CStr::from_ptr(name) }.to_bytes();
        match std::str::from_utf8(bytes) {
            Ok(s) => self.intern(s),
            Err(_) => self.intern(&String::from_utf8_lossy(bytes)),
        }
    }

    /// One `Arc<str>` per distinct name: a hit allocates nothing.
    pub(crate) fn intern(&mut self, name: &str) -> Arc<str> {
        if let Some(existing) = self.names.get(name) {
            return Arc::clone(existing);
        }
        let fresh: Arc<str> = Arc::from(name);
        self.names.insert(Arc::clone(&fresh));
        fresh
    }

    /// Number of distinct interned names.
    #[cfg(test)]
    pub(crate) fn distinct_names(&self) -> usize {
        self.names.len()
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
