//! Keeping tracing-chrome's channel bounded.
//!
//! tracing-chrome sends each event over an unbounded channel to its writer
//! thread, which turns it into JSON more slowly than a busy thread can emit
//! spans (about 1 M events/s against 2–5 M). Under a sustained active window
//! the channel would grow without limit. The gate counts what it forwards,
//! the segment writer counts the event lines it receives, and an emitting
//! thread that finds more than [`CAP`] events in flight waits for the writer
//! (at most [`MAX_WAIT`] per event, so that a stalled disk slows the step
//! but never hangs it). The waits are counted and written into the trace's
//! metadata: a trace whose threads waited says so.
//!
//! In a training step, spans are sparse and the writer keeps up: nothing
//! waits, and the cost is one atomic add per event.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::format::WriterWaits;

/// Most events in flight between the emitting threads and the writer
/// (about 200 bytes each in the channel: some 13 MB).
pub(crate) const CAP: u64 = 1 << 16;
/// Longest wait for one event.
pub(crate) const MAX_WAIT: Duration = Duration::from_millis(100);

/// Counts shared by the gate (sender side) and the segment writer.
#[derive(Debug, Default)]
pub(crate) struct Backlog {
    sent: AtomicU64,
    written: AtomicU64,
    waits: AtomicU64,
    waited_ns: AtomicU64,
}

impl Backlog {
    /// Events forwarded but not yet received by the writer.
    pub(crate) fn pending(&self) -> u64 {
        self.sent.load(Ordering::Relaxed).saturating_sub(self.written.load(Ordering::Relaxed))
    }

    /// Called by the gate for each event it forwards, before it forwards
    /// it: waits while the writer is more than [`CAP`] events behind.
    #[inline]
    pub(crate) fn send_one(&self) {
        let sent = self.sent.fetch_add(1, Ordering::Relaxed) + 1;
        if sent.saturating_sub(self.written.load(Ordering::Relaxed)) > CAP {
            self.wait_while(|| self.pending() > CAP);
        }
    }

    /// Waits, as [`send_one`](Self::send_one) does, while `behind` says the writer is too far
    /// behind (for the stepping thread's batches: see `batch`).
    #[cold]
    pub(crate) fn wait_while(&self, behind: impl Fn() -> bool) {
        let start = Instant::now();
        let mut spins = 0u32;
        while behind() && start.elapsed() < MAX_WAIT {
            if spins < 64 {
                spins += 1;
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        self.waits.fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.waited_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Called by the segment writer with each chunk tracing-chrome writes:
    /// every event line after the first starts on a new line.
    pub(crate) fn received(&self, chunk: &[u8]) {
        let lines = memchr::memchr_iter(b'\n', chunk).count() as u64;
        self.written.fetch_add(lines, Ordering::Relaxed);
    }

    /// The waits so far (a segment subtracts the figure at its start).
    pub(crate) fn waits(&self) -> WriterWaits {
        WriterWaits {
            waits: self.waits.load(Ordering::Relaxed),
            waited_us: self.waited_ns.load(Ordering::Relaxed) / 1000,
            cap: CAP,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_sender_ahead_by_the_cap_waits_until_the_writer_catches_up() {
        let backlog = Arc::new(Backlog::default());
        for _ in 0..CAP {
            backlog.send_one();
        }
        assert_eq!(backlog.waits().waits, 0);
        assert_eq!(backlog.pending(), CAP);
        let b = backlog.clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            b.received(&b",\n".repeat(10));
        });
        backlog.send_one(); // CAP + 1 in flight: waits for the writer
        writer.join().unwrap();
        let waits = backlog.waits();
        assert_eq!(waits.waits, 1);
        assert!(waits.waited_us >= 15_000, "{waits:?}");
        assert_eq!(backlog.pending(), CAP + 1 - 10);
    }

    #[test]
    fn a_stalled_writer_delays_a_sender_by_at_most_the_longest_wait() {
        let backlog = Backlog::default();
        for _ in 0..CAP {
            backlog.send_one();
        }
        let start = Instant::now();
        backlog.send_one();
        assert!(start.elapsed() >= MAX_WAIT);
        assert!(start.elapsed() < MAX_WAIT * 20, "{:?}", start.elapsed());
        assert_eq!(backlog.waits().since(WriterWaits::default()).waits, 1);
    }
}
