//! Panic containment for probes that call into dependencies known to panic.
//!
//! cudarc panics when `libcuda`/`libnvrtc` cannot be loaded, cubecl panics when no adapter
//! exists, and so on. Probes must never take the process down and must not spray panic
//! messages over the user's terminal, so every risky call runs either on a dedicated,
//! named probe thread (see [`on_probe_thread`]) or under [`catch_silently`]. A process-wide
//! panic hook, installed once and chained to the previous hook, drops the messages of
//! those panics only; every other panic is reported exactly as before.

// A build with only the `cpu` backend calls into neither cudarc nor cubecl: nothing here is
// used then, and nothing needs containing.
#![cfg_attr(not(any(feature = "cuda", feature = "wgpu")), allow(dead_code))]

use std::any::Any;
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

/// Name prefix of the threads whose panics are contained and silenced.
const PROBE_THREAD_PREFIX: &str = "steptrace-probe";

thread_local! {
    /// Set while [`catch_silently`] runs on this thread.
    static SILENCED: Cell<bool> = const { Cell::new(false) };
}

static HOOK: Once = Once::new();

/// Installs (once per process) a panic hook that swallows the messages of contained panics
/// and forwards every other panic to the hook that was in place before.
fn install_hook() {
    HOOK.call_once(|| {
        // `take_hook`/`set_hook` panic when called from a panicking thread; we are not.
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let silenced = SILENCED.with(Cell::get)
                || std::thread::current().name().is_some_and(|name| name.starts_with(PROBE_THREAD_PREFIX));
            if !silenced {
                previous(info);
            }
        }));
    });
}

/// Extracts the human-readable message of a panic payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

/// Runs `f` on a fresh thread named `steptrace-probe-<name>` and returns its result, or the
/// panic message (`Err`) if it panicked or the thread could not be spawned.
///
/// A separate thread keeps thread-local state of the probed libraries (CUDA's current
/// context, cubecl stream ids) away from the caller's thread.
pub(crate) fn on_probe_thread<T, F>(name: &str, f: F) -> Result<T, String>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    install_hook();
    let handle = std::thread::Builder::new()
        .name(format!("{PROBE_THREAD_PREFIX}-{name}"))
        .spawn(f)
        .map_err(|e| format!("could not spawn the probe thread: {e}"))?;
    handle.join().map_err(|payload| panic_message(payload.as_ref()))
}

/// Runs `f` on the current thread, converting a panic into `Err(message)` without printing
/// the panic message.
///
/// Use only for calls that must run on the caller's thread (cubecl clients are bound to the
/// calling thread's stream).
pub fn catch_silently<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    install_hook();
    let was = SILENCED.with(|s| s.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    SILENCED.with(|s| s.set(was));
    result.map_err(|payload| panic_message(payload.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_thread_contains_panics() {
        let r: Result<u32, String> = on_probe_thread("test", || panic!("boom {}", 42));
        assert_eq!(r, Err("boom 42".to_string()));
        assert_eq!(on_probe_thread("test", || 7), Ok(7));
    }

    #[test]
    fn catch_silently_contains_panics() {
        let r: Result<(), String> = catch_silently(|| panic!("static boom"));
        assert_eq!(r, Err("static boom".to_string()));
        assert_eq!(catch_silently(|| 3), Ok(3));
        assert!(!SILENCED.with(Cell::get));
    }
}
