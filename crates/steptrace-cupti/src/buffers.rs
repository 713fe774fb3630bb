//! The Activity API's two C callbacks and the process-wide state they share.
//!
//! CUPTI asks for empty buffers (`buffer_requested`) and hands full ones back
//! (`buffer_completed`), on whatever thread it likes, including its own worker thread and
//! the thread inside `cuptiActivityFlushAll`. Buffers come from a small pool, so that a
//! window in steady state allocates none; records are parsed into the global [`SINK`].

use std::alloc::{alloc, dealloc, Layout};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{LazyLock, Mutex, MutexGuard};

use cudarc::driver::sys::CUcontext;

use crate::ffi::Lib;
use crate::parse::Sink;

/// Activity buffers are 8-byte aligned, as CUPTI requires.
const ALIGN: usize = 8;
/// At most this many empty buffers are kept for reuse.
const MAX_FREE: usize = 8;

/// Where parsed records go.
pub(crate) static SINK: LazyLock<Mutex<Sink>> = LazyLock::new(|| Mutex::new(Sink::default()));

static POOL: Mutex<Pool> = Mutex::new(Pool { size: 0, free: Vec::new() });

/// Empty buffers of the current size, stored as addresses (raw pointers are not `Send`).
struct Pool {
    size: usize,
    free: Vec<usize>,
}

/// Locks a mutex, ignoring poisoning: the data are plain records and counters.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size, ALIGN).ok().filter(|l| l.size() > 0)
}

/// Sets the buffer size and fills the pool with `count` buffers (allocated now, not while
/// CUPTI waits). Buffers of another size are freed.
pub(crate) fn configure_pool(size: usize, count: usize) {
    let mut pool = lock(&POOL);
    if pool.size != size {
        let old = pool.size;
        let freed: Vec<usize> = pool.free.drain(..).collect();
        if let Some(l) = layout(old) {
            for addr in freed {
                // SAFETY: every pooled address was allocated by `alloc` with `layout(old)`.
                unsafe { dealloc(addr as *mut u8, l) };
            }
        }
        pool.size = size;
    }
    let Some(layout) = layout(size) else { return };
    while pool.free.len() < count.min(MAX_FREE) {
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc(layout) };
        if ptr.is_null() {
            break;
        }
        pool.free.push(ptr as usize);
    }
}

/// CUPTI wants an empty buffer.
///
/// # Safety
/// Called by CUPTI with valid out-pointers.
pub(crate) unsafe extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max_num_records: *mut usize) {
    let (ptr, len) = catch_unwind(take_buffer).unwrap_or((std::ptr::null_mut(), 0));
    // SAFETY: CUPTI passes valid, writable out-pointers. A null buffer with size 0 tells
    // CUPTI to drop records (it counts them as dropped).
    unsafe {
        *buffer = ptr;
        *size = len;
        *max_num_records = 0; // as many records as fit
    }
}

fn take_buffer() -> (*mut u8, usize) {
    let mut pool = lock(&POOL);
    let size = pool.size;
    if let Some(addr) = pool.free.pop() {
        return (addr as *mut u8, size);
    }
    drop(pool);
    match layout(size) {
        // SAFETY: the layout has a non-zero size.
        Some(l) => (unsafe { alloc(l) }, size),
        None => (std::ptr::null_mut(), 0),
    }
}

/// CUPTI hands back a buffer: parse it, note CUPTI's dropped count, recycle the buffer.
///
/// # Safety
/// Called by CUPTI with a buffer from [`buffer_requested`] and its valid size.
pub(crate) unsafe extern "C" fn buffer_completed(
    ctx: CUcontext,
    stream_id: u32,
    buffer: *mut u8,
    size: usize,
    valid_size: usize,
) {
    if buffer.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let Some(lib) = Lib::get() else { return };
        let mut sink = lock(&SINK);
        if valid_size > 0 {
            // SAFETY: CUPTI hands over a buffer it filled, with its valid size; records
            // stay valid until the buffer is recycled below.
            let walked = unsafe { lib.for_each_record(buffer, valid_size, |r| sink.push_record(r)) };
            if walked.is_err() {
                sink.stats.walk_errors += 1;
            }
        }
        if let Ok(n) = lib.dropped_records(ctx, stream_id) {
            sink.stats.dropped += n;
        }
    }));
    recycle(buffer, size);
}

fn recycle(buffer: *mut u8, size: usize) {
    let mut pool = lock(&POOL);
    if size == pool.size && pool.free.len() < MAX_FREE {
        pool.free.push(buffer as usize);
        return;
    }
    drop(pool);
    if let Some(l) = layout(size) {
        // SAFETY: CUPTI returns the pointer and size that `take_buffer` gave it, and every
        // buffer was allocated with `layout(size)`.
        unsafe { dealloc(buffer, l) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pool is process-wide; this is the only test that touches it.
    #[test]
    fn pool_hands_out_recycles_and_resizes() {
        configure_pool(4096, 2);
        assert_eq!(lock(&POOL).free.len(), 2);
        let (a, size_a) = take_buffer();
        assert_eq!(size_a, 4096);
        assert!(!a.is_null());
        assert_eq!(a as usize % ALIGN, 0);
        assert_eq!(lock(&POOL).free.len(), 1);
        recycle(a, size_a);
        assert_eq!(lock(&POOL).free.len(), 2);

        // What CUPTI sees: a pooled buffer and its size through the out-pointers.
        let mut buffer = std::ptr::null_mut();
        let (mut size, mut max) = (0usize, 99usize);
        // SAFETY: valid out-pointers, as CUPTI passes.
        unsafe { buffer_requested(&mut buffer, &mut size, &mut max) };
        assert_eq!((size, max), (4096, 0));
        assert!(!buffer.is_null());
        assert_eq!(lock(&POOL).free.len(), 1);

        // After a resize, a late buffer of the old size is freed, not pooled.
        configure_pool(8192, 1);
        recycle(buffer, size);
        let pool = lock(&POOL);
        assert_eq!(pool.size, 8192);
        assert_eq!(pool.free.len(), 1);
    }
}
