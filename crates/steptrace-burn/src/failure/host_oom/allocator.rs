//! The system's allocator, which tells [`allocation_failed`] before it fails.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};

use super::allocation_failed;

/// [`System`], with [`allocation_failed`] called before a failure is returned: a program's
/// global allocator for a failed host allocation of a CPU-backend step to end as an
/// out-of-memory report rather than Rust's abort.
///
/// ```
/// #[global_allocator]
/// static ALLOCATOR: steptrace_burn::failure::host_oom::Allocator = steptrace_burn::failure::host_oom::Allocator;
/// # fn main() {}
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Allocator;

// SAFETY: every method forwards its arguments unchanged to `System`, which upholds
// `GlobalAlloc`'s contract; the failure hook runs only where `System` returned null, never
// unwinds (it returns or ends the process) and allocates through this allocator again,
// which its own guard keeps from reporting twice.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's guarantees for `layout` are `System.alloc`'s.
        let ptr = unsafe { System.alloc(layout) };
        if ptr.is_null() {
            failed(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if ptr.is_null() {
            failed(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` (through this allocator) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` and `layout` come from this allocator, which is `System`'s.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if new.is_null() {
            failed(new_size);
        }
        new
    }
}

/// Never unwinds: a panic inside an allocator would be undefined behaviour.
fn failed(bytes: usize) {
    let _ = std::panic::catch_unwind(|| allocation_failed(bytes as u64));
}
