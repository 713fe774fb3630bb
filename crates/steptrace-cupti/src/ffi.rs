//! The only place that calls cudarc's CUPTI bindings.
//!
//! cudarc loads `libcupti` lazily and panics when the library or a symbol is missing. Every
//! call here therefore goes through a [`Lib`] token, which exists only once
//! [`Lib::load`] has checked that the library loads, that every symbol this crate uses is
//! present, and that `cuptiGetVersion` answers. After that, cudarc's loader cannot panic.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use cudarc::cupti::sys;
use cudarc::driver::sys::CUcontext;

use crate::error::CuptiError;

/// The CUPTI functions this crate calls; all are checked before the first call.
const REQUIRED_SYMBOLS: &[&str] = &[
    "cuptiGetVersion",
    "cuptiGetTimestamp",
    "cuptiActivityEnable",
    "cuptiActivityDisable",
    "cuptiActivityFlushAll",
    "cuptiActivityGetNextRecord",
    "cuptiActivityGetNumDroppedRecords",
    "cuptiActivityRegisterCallbacks",
    "cuptiSubscribe",
    "cuptiUnsubscribe",
    "cuptiEnableCallback",
    "cuptiSetThreadIdType",
];

/// `CUPTI_ACTIVITY_FLAG_FLUSH_FORCED` (bindgen merged it with another flag of value 1).
const FLUSH_FORCED: u32 = 1;

/// Proof that libcupti is loaded with every symbol this crate needs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lib {
    version: u32,
}

static LOADED: OnceLock<Result<Lib, CuptiError>> = OnceLock::new();

impl Lib {
    /// Loads and checks libcupti once per process; later calls return the cached outcome.
    pub(crate) fn load() -> Result<Lib, CuptiError> {
        LOADED
            .get_or_init(|| {
                catch_unwind(load_checked)
                    .unwrap_or_else(|p| Err(CuptiError::from_panic("loading libcupti", p.as_ref())))
            })
            .clone()
    }

    /// The token, if [`Lib::load`] has already succeeded (cheap; for C callbacks).
    pub(crate) fn get() -> Option<Lib> {
        LOADED.get().and_then(|r| r.as_ref().ok().copied())
    }

    /// What `cuptiGetVersion` returned.
    pub(crate) fn version(self) -> u32 {
        self.version
    }

    /// `cuptiGetTimestamp`: nanoseconds on CUPTI's clock.
    pub(crate) fn timestamp(self) -> Result<u64, CuptiError> {
        let mut ts = 0u64;
        // SAFETY: the symbol is present (Lib exists); `ts` is a valid, writable u64.
        let r = unsafe { sys::cuptiGetTimestamp(&mut ts) };
        CuptiError::check("cuptiGetTimestamp", r).map(|()| ts)
    }

    pub(crate) fn activity_enable(self, kind: sys::CUpti_ActivityKind) -> Result<(), CuptiError> {
        // SAFETY: the symbol is present; the kind is a valid enum value.
        CuptiError::check("cuptiActivityEnable", unsafe { sys::cuptiActivityEnable(kind) })
    }

    pub(crate) fn activity_disable(self, kind: sys::CUpti_ActivityKind) -> Result<(), CuptiError> {
        // SAFETY: the symbol is present; the kind is a valid enum value.
        CuptiError::check("cuptiActivityDisable", unsafe { sys::cuptiActivityDisable(kind) })
    }

    /// `cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)`: hands every buffer, even
    /// partly filled ones, to the buffer-completed callback before returning.
    pub(crate) fn flush_all(self) -> Result<(), CuptiError> {
        // SAFETY: the symbol is present; the flag is a documented value.
        CuptiError::check("cuptiActivityFlushAll", unsafe { sys::cuptiActivityFlushAll(FLUSH_FORCED) })
    }

    /// `cuptiActivityGetNumDroppedRecords`; CUPTI resets the count it reports.
    pub(crate) fn dropped_records(self, ctx: CUcontext, stream_id: u32) -> Result<u64, CuptiError> {
        let mut dropped = 0usize;
        // SAFETY: the symbol is present; a null context is allowed (global queue) and any
        // context CUPTI passed to a callback is valid; `dropped` is writable.
        let r = unsafe { sys::cuptiActivityGetNumDroppedRecords(ctx, stream_id, &mut dropped) };
        CuptiError::check("cuptiActivityGetNumDroppedRecords", r).map(|()| dropped as u64)
    }

    pub(crate) fn register_callbacks(
        self,
        requested: sys::CUpti_BuffersCallbackRequestFunc,
        completed: sys::CUpti_BuffersCallbackCompleteFunc,
    ) -> Result<(), CuptiError> {
        // SAFETY: the symbol is present; the callbacks are `extern "C"` functions with the
        // signatures CUPTI expects and live for the whole program.
        let r = unsafe { sys::cuptiActivityRegisterCallbacks(requested, completed) };
        CuptiError::check("cuptiActivityRegisterCallbacks", r)
    }

    /// `cuptiSubscribe`; the handle is returned as an address so that it is `Send`.
    pub(crate) fn subscribe(self, callback: sys::CUpti_CallbackFunc) -> Result<usize, CuptiError> {
        let mut handle: sys::CUpti_SubscriberHandle = std::ptr::null_mut();
        // SAFETY: the symbol is present; `handle` is writable; the callback (or None) is an
        // `extern "C"` function that lives for the whole program; no user data is passed.
        let r = unsafe { sys::cuptiSubscribe(&mut handle, callback, std::ptr::null_mut()) };
        CuptiError::check("cuptiSubscribe", r).map(|()| handle as usize)
    }

    pub(crate) fn unsubscribe(self, handle: usize) -> Result<(), CuptiError> {
        // SAFETY: the symbol is present; `handle` came from a successful `subscribe` and is
        // unsubscribed at most once by its owner.
        let r = unsafe { sys::cuptiUnsubscribe(handle as sys::CUpti_SubscriberHandle) };
        CuptiError::check("cuptiUnsubscribe", r)
    }

    /// `cuptiEnableCallback` for one driver-API callback id.
    pub(crate) fn enable_driver_callback(self, handle: usize, cbid: u32, enable: bool) -> Result<(), CuptiError> {
        let domain = sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API;
        // SAFETY: the symbol is present; `handle` is a live subscriber owned by the caller.
        let r = unsafe { sys::cuptiEnableCallback(enable.into(), handle as sys::CUpti_SubscriberHandle, domain, cbid) };
        CuptiError::check("cuptiEnableCallback", r)
    }

    /// Makes activity records carry the OS thread id (`gettid`), not `pthread_self`.
    pub(crate) fn use_system_thread_ids(self) -> Result<(), CuptiError> {
        let kind = sys::CUpti_ActivityThreadIdType::CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM;
        // SAFETY: the symbol is present; the value is a documented enum value.
        CuptiError::check("cuptiSetThreadIdType", unsafe { sys::cuptiSetThreadIdType(kind) })
    }

    /// Calls `each` with every record of a completed buffer, through
    /// `cuptiActivityGetNextRecord`. Returns the error that stopped the walk, if it was not
    /// the normal end of the buffer.
    ///
    /// # Safety
    /// `buffer` must be a buffer CUPTI handed to the buffer-completed callback, with
    /// `valid` its valid size, not yet freed.
    pub(crate) unsafe fn for_each_record(
        self,
        buffer: *mut u8,
        valid: usize,
        mut each: impl FnMut(*const sys::CUpti_Activity),
    ) -> Result<(), CuptiError> {
        let mut record: *mut sys::CUpti_Activity = std::ptr::null_mut();
        loop {
            // SAFETY: the caller guarantees the buffer; `record` starts null and is then the
            // previous record, as the API requires.
            let r = unsafe { sys::cuptiActivityGetNextRecord(buffer, valid, &mut record) };
            match r {
                sys::CUptiResult::CUPTI_SUCCESS => each(record),
                sys::CUptiResult::CUPTI_ERROR_MAX_LIMIT_REACHED => return Ok(()),
                other => return CuptiError::check("cuptiActivityGetNextRecord", other),
            }
        }
    }
}

/// The library search and symbol check behind [`Lib::load`]. May panic inside cudarc; the
/// caller catches it.
fn load_checked() -> Result<Lib, CuptiError> {
    // SAFETY: `is_culib_present` only tries to dlopen the candidate names.
    if !unsafe { sys::is_culib_present() } {
        let tried = cudarc::get_lib_name_candidates("cupti").join(", ");
        return Err(CuptiError::LibraryNotFound { tried });
    }
    // SAFETY: the library was just found, so `culib` loads it instead of panicking.
    let lib = unsafe { sys::culib() };
    for &symbol in REQUIRED_SYMBOLS {
        // SAFETY: looking a symbol up does not call it; the type is only a placeholder.
        let found = unsafe { lib.get::<unsafe extern "C" fn()>(symbol.as_bytes()) }.is_ok();
        if !found {
            return Err(CuptiError::MissingSymbol { symbol });
        }
    }
    let mut version = 0u32;
    // SAFETY: the symbol is present; `version` is writable.
    let r = unsafe { sys::cuptiGetVersion(&mut version) };
    CuptiError::check("cuptiGetVersion", r)?;
    Ok(Lib { version })
}

/// Runs `f`, turning a panic into [`CuptiError::Panicked`].
pub(crate) fn guarded<T>(call: &'static str, f: impl FnOnce() -> Result<T, CuptiError>) -> Result<T, CuptiError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(CuptiError::from_panic(call, p.as_ref())))
}
