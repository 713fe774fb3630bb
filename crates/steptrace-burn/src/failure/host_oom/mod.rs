//! A host allocation that fails on the CPU backend, reported as a device's out-of-memory is.
//!
//! On the CPU backend the device's memory is the process's heap, and a failed allocation does
//! not come back as an error that a step could return: Rust's allocator aborts the process.
//! A program whose global allocator is [`Allocator`] (the system's, which calls
//! [`allocation_failed`] before it gives up; `steptrace train` has it) ends instead with the
//! out-of-memory report the GPU backends give, the cycle in progress kept, and whatever the
//! program registered with [`on_failure`] (the `--json` of `steptrace train`):
//!
//! ```
//! #[global_allocator]
//! static ALLOCATOR: steptrace_burn::failure::host_oom::Allocator = steptrace_burn::failure::host_oom::Allocator;
//! # fn main() {}
//! ```
//!
//! The report is made from what a [`Session`](crate::Session) on the CPU backend notes as it
//! goes (the step, its samples, the last phase that returned, the model's parameters): the
//! failing allocation's stack is left alone, so the report never touches the session it
//! interrupts. What that costs: the cycle in progress stays the `NAME.partial` file the
//! profiler streamed it to (every step up to the last one that ended), which `report` and
//! `inspect` read, rather than a finalised file.

mod allocator;

pub use allocator::Allocator;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use super::{StepError, StepFailure};
use crate::backend::MemoryLimits;
use crate::failure::oom::{Facts, Shortage};
use crate::memory::Parameters;

/// The smallest failed allocation reported: a smaller one is left to Rust's own message
/// (the report itself needs a little memory).
pub const MIN_REPORTED: u64 = 1 << 20;

/// The exit status of a run ended by a failed host allocation (a failed step's).
pub const EXIT_STATUS: i32 = 1;

/// What a session on the CPU backend has noted of the run so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct Watch {
    pub(crate) step: u64,
    pub(crate) samples: Option<u64>,
    pub(crate) batch_bytes: u64,
    pub(crate) reached: Option<&'static str>,
    pub(crate) parameters: Parameters,
    pub(crate) optimizer_state: Option<u64>,
    /// The final name of the cycle being recorded, if one is.
    pub(crate) recording: Option<PathBuf>,
    /// Whether a step is under way (between its first call and the end of `Session::step`).
    pub(crate) in_step: bool,
}

static WATCH: Mutex<Option<Watch>> = Mutex::new(None);
static REPORTED: AtomicBool = AtomicBool::new(false);
type LastWords = Box<dyn Fn(&StepFailure) + Send + Sync>;
static LAST_WORDS: OnceLock<LastWords> = OnceLock::new();

/// Registers what the program does with the failure before it exits (print it, write a
/// result file). Without it, the report is printed ([`StepFailure::print`](crate::StepFailure::print)). The first
/// registration holds: `false` when one was already made.
pub fn on_failure(last_words: impl Fn(&StepFailure) + Send + Sync + 'static) -> bool {
    LAST_WORDS.set(Box::new(last_words)).is_ok()
}

/// Changes what the session noted (a session on the CPU backend calls it as it goes).
pub(crate) fn note(change: impl FnOnce(&mut Watch)) {
    if let Ok(mut watch) = WATCH.lock() {
        change(watch.get_or_insert_with(Watch::default));
    }
}

/// Forgets the session (it ended): a failure after it is not a step's.
pub(crate) fn forget() {
    if let Ok(mut watch) = WATCH.lock() {
        *watch = None;
    }
}

/// Called by a global allocator when the system allocator returned no memory for `bytes`.
///
/// While a step of a session on the CPU backend runs, and for an allocation of at least
/// [`MIN_REPORTED`], it reports the failure as a step's out-of-memory (the report, the kept
/// cycle, the program's [`on_failure`]) and ends the process with [`EXIT_STATUS`]. Otherwise
/// (no step under way, a small allocation, a second failure while reporting the first, or
/// the session's notes being written at that moment) it returns, and the allocator fails as it
/// would have. Safe to call from any thread.
pub fn allocation_failed(bytes: u64) {
    if bytes < MIN_REPORTED || REPORTED.swap(true, Ordering::SeqCst) {
        return;
    }
    let Some(watch) = WATCH.try_lock().ok().and_then(|w| w.clone()).filter(|w| w.in_step) else {
        REPORTED.store(false, Ordering::SeqCst);
        return;
    };
    let failure = failure(&watch, bytes);
    match LAST_WORDS.get() {
        Some(last_words) => last_words(&failure),
        None => failure.print(),
    }
    std::process::exit(EXIT_STATUS);
}

fn failure(w: &Watch, bytes: u64) -> StepFailure {
    let limit = host_limit();
    let mut oom = crate::failure::oom::explain(&Facts {
        step: w.step,
        shortage: Shortage::DeviceFull,
        requested: Some(bytes),
        batch_size: w.samples.unwrap_or(0),
        batch_bytes: w.batch_bytes,
        reached: w.reached,
        surfaced_at: "a host allocation inside the step (the CPU backend runs each operation as it is called)",
        parameters: &w.parameters,
        optimizer_state: w.optimizer_state,
        limits: limit.map(|(bytes, _)| MemoryLimits { capacity: Some(bytes), max_allocation: bytes }),
        at_failure: None,
        pools: &[],
        highest: None,
    });
    oom.not_observed.retain(|n| !n.starts_with("the device's capacity"));
    match limit {
        Some((_, source)) => oom.not_observed.push(format!("the device is the host: its capacity above is {source}")),
        None => oom
            .not_observed
            .push("the host's memory: neither /proc/meminfo nor an address-space limit says it".to_owned()),
    }
    let (kept, trace_errors) = match &w.recording {
        Some(final_path) => {
            let partial = partial_path(final_path);
            if partial.is_file() {
                (vec![partial], Vec::new())
            } else {
                let missing =
                    std::io::Error::new(std::io::ErrorKind::NotFound, "the cycle left no partial file to keep");
                (Vec::new(), vec![steptrace::Error::Write { path: final_path.clone(), kept: None, source: missing }])
            }
        }
        None => (Vec::new(), Vec::new()),
    };
    let cause = StepError::HostAllocation { bytes };
    StepFailure { step: w.step, cause, traces: Vec::new(), kept, trace_errors, out_of_memory: Some(oom) }
}

/// Where the profiler streams a cycle before finalising it to `final_path`.
fn partial_path(final_path: &std::path::Path) -> PathBuf {
    let mut name = final_path.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

/// What the process may hold, bytes, and what that figure is: the address-space limit
/// (`ulimit -v`) where one is set, else the machine's memory.
fn host_limit() -> Option<(u64, &'static str)> {
    if let Some(limit) = rustix::process::getrlimit(rustix::process::Resource::As).current {
        return Some((limit, "the process's address-space limit (ulimit -v)"));
    }
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    Some((parse_meminfo(&text, "MemTotal:")?, "the machine's memory (MemTotal)"))
}

/// What the process may still allocate on the host, bytes: the machine's available memory
/// (`MemAvailable`), and no more than its address-space limit (`ulimit -v`) leaves; `None`
/// where neither can be read.
pub fn available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let available = parse_meminfo(&text, "MemAvailable:")?;
    Some(address_space_left().map_or(available, |left| left.min(available)))
}

/// What the address-space limit leaves beyond what the process maps already.
fn address_space_left() -> Option<u64> {
    let limit = rustix::process::getrlimit(rustix::process::Resource::As).current?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmSize:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(limit.saturating_sub(kb.saturating_mul(1024)))
}

/// A `/proc/meminfo` figure (`field` with its colon, `MemAvailable:`), bytes.
fn parse_meminfo(text: &str, field: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_is_read_in_bytes() {
        let text = "MemTotal:       16318480 kB\nMemFree:         1000 kB\nMemAvailable:    2048 kB\n";
        assert_eq!(parse_meminfo(text, "MemAvailable:"), Some(2048 * 1024));
        assert_eq!(parse_meminfo("MemTotal: 1 kB\n", "MemAvailable:"), None);
        assert_eq!(parse_meminfo("MemTotal: 1 kB\n", "MemTotal:"), Some(1024));
    }

    #[test]
    fn a_failure_is_reported_as_an_out_of_memory_of_the_noted_step() {
        let dir = tempfile::tempdir().unwrap();
        let final_path = dir.path().join("run.trace.json");
        std::fs::write(partial_path(&final_path), "[\n").unwrap();
        let watch = Watch {
            step: 4,
            samples: Some(1000),
            batch_bytes: 1000 * 260,
            reached: Some("forward"),
            recording: Some(final_path.clone()),
            in_step: true,
            ..Watch::default()
        };
        let f = failure(&watch, 16_400_000_000);
        assert_eq!(f.step, 4);
        assert_eq!(f.kept, vec![partial_path(&final_path)]);
        let oom = f.out_of_memory.as_ref().unwrap();
        assert_eq!(oom.requested_bytes, Some(16_400_000_000));
        assert_eq!(oom.reached_phase, Some("forward"));
        assert_eq!(oom.batch_size, 1000);
        // The cause says it by its kind, with the size.
        assert_eq!(f.cause, StepError::HostAllocation { bytes: 16_400_000_000 });
        assert_eq!(f.cause.out_of_memory(), Some((Shortage::DeviceFull, Some(16_400_000_000))));
        // Never below the input's own bytes per sample.
        match &oom.per_sample {
            crate::failure::oom::Estimate::Known(b) => assert!(b.value >= 260, "{b:?}"),
            other => panic!("per sample not known: {other:?}"),
        }
    }

    #[test]
    fn without_a_partial_file_the_failure_says_what_was_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let watch = Watch { recording: Some(dir.path().join("gone.json")), ..Watch::default() };
        let f = failure(&watch, 1 << 30);
        assert!(f.kept.is_empty());
        assert_eq!(f.trace_errors.len(), 1, "{:?}", f.trace_errors);
        assert!(f.trace_errors[0].to_string().contains("gone.json"), "{}", f.trace_errors[0]);
    }
}
