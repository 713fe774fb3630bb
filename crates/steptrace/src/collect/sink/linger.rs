//! Keeping tracing-chrome's writer thread off its channel while a window
//! records.
//!
//! tracing-chrome sends every span begin and end over a channel to its writer
//! thread. When that thread is parked on the channel, each message must wake
//! it, and the waking is paid by the thread that emitted the span, inside the
//! training step: measured at about 12 µs per span on a 2-core VM, against
//! 0.65 µs when the writer is awake (`examples/sparse_spans.rs`,
//! docs/benchmarks.md). A training step's spans are sparse (a dozen in a few
//! milliseconds), so nearly every one paid it.
//!
//! The profiler asks for a flush as each recorded step begins; the writer
//! thread then runs [`Linger::serve`] inside the segment writer's `flush`.
//! It sleeps there (queued messages wait; nobody has to wake anyone) until
//! the next step's flush is requested, the deadline passes, or the window
//! closes. Files still receive every step as it begins, and with fast steps
//! the writer never falls behind: a flush that finds a newer one pending
//! returns at once. [`LINGER_ENV`] changes the poll period, or parks the writer instead, for
//! an experiment (every trace's `writer_linger` says which).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long the writer waits for the next step's flush request.
pub(crate) const LINGER: Duration = Duration::from_millis(50);
/// How often a lingering writer looks for a newer request, by default.
const POLL: Duration = Duration::from_micros(500);
/// An experiment's knob: how the writer waits between a window's steps. `off` parks it on its
/// channel (the step's first message then wakes it); a number is the poll period in µs (10 to
/// 50,000). Anything else keeps the default, and the trace's `writer_linger` says so.
pub(crate) const LINGER_ENV: &str = crate::settings::LINGER;

/// The deadline and the requests the profiler and the writer thread share.
#[derive(Debug)]
pub(crate) struct Linger {
    origin: Instant,
    /// µs since `origin` (0: do not linger).
    until_us: AtomicU64,
    requests: AtomicU64,
    served: AtomicU64,
    /// The poll period (`None`: the writer never lingers).
    poll: Option<Duration>,
    /// What the trace's metadata says of it.
    described: String,
}

impl Linger {
    /// The default, or what [`LINGER_ENV`] sets.
    pub(crate) fn new() -> Linger {
        Linger::with_setting(
            match crate::settings::linger() {
                crate::settings::Linger::Off => Some("off".to_owned()),
                crate::settings::Linger::Every(us) => Some(us.to_string()),
                _ => None,
            }
            .as_deref(),
        )
    }

    fn with_setting(setting: Option<&str>) -> Linger {
        let default = || (Some(POLL), format!("polls every {} µs", POLL.as_micros()));
        let (poll, described) = match setting.map(str::trim) {
            None | Some("") => default(),
            Some("off") => (None, format!("off ({LINGER_ENV}=off): parked on its channel between steps")),
            Some(text) => match text.parse::<u64>() {
                Ok(us @ 10..=50_000) => {
                    (Some(Duration::from_micros(us)), format!("polls every {us} µs ({LINGER_ENV})"))
                }
                _ => {
                    let (poll, described) = default();
                    (poll, format!("{described} ({LINGER_ENV}={text:?} not understood: off, or 10 to 50000 µs)"))
                }
            },
        };
        Linger {
            origin: Instant::now(),
            until_us: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            served: AtomicU64::new(0),
            poll,
            described,
        }
    }

    /// How the writer waits between steps, for the trace's metadata.
    pub(crate) fn describe(&self) -> &str {
        &self.described
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Called by the profiler right before it asks for a flush.
    pub(crate) fn request(&self, linger: Duration) {
        if self.poll.is_none() {
            return;
        }
        let until = self.now_us().saturating_add(u64::try_from(linger.as_micros()).unwrap_or(u64::MAX));
        self.until_us.store(until, Ordering::Release);
        self.requests.fetch_add(1, Ordering::AcqRel);
    }

    /// Ends any lingering at once (the window closes, or the profiler
    /// finishes).
    pub(crate) fn stop(&self) {
        self.until_us.store(0, Ordering::Release);
    }

    /// Called on the writer thread for each flush: sleeps until a newer
    /// request is pending, the deadline passes, [`stop`](Linger::stop), or
    /// `backed_up` says too many events are queued.
    pub(crate) fn serve(&self, backed_up: impl Fn() -> bool) {
        let served = self.served.fetch_add(1, Ordering::AcqRel) + 1;
        loop {
            if self.requests.load(Ordering::Acquire) > served || backed_up() {
                return;
            }
            let (now, until) = (self.now_us(), self.until_us.load(Ordering::Acquire));
            if now >= until {
                return;
            }
            std::thread::sleep(self.poll.unwrap_or(POLL).min(Duration::from_micros(until - now)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_newer_request_or_a_stop_ends_the_linger() {
        let linger = Arc::new(Linger::new());
        // No request pending beyond this one, deadline far: a stop ends it.
        linger.request(Duration::from_secs(60));
        let l = linger.clone();
        let writer = std::thread::spawn(move || l.serve(|| false));
        std::thread::sleep(Duration::from_millis(5));
        linger.stop();
        writer.join().unwrap();

        // A newer request ends it too.
        linger.request(Duration::from_secs(60));
        let l = linger.clone();
        let writer = std::thread::spawn(move || l.serve(|| false));
        std::thread::sleep(Duration::from_millis(5));
        linger.request(Duration::from_secs(60));
        writer.join().unwrap();
        // That newer request's own flush returns at once once stopped.
        linger.stop();
        linger.serve(|| false);
    }

    #[test]
    fn the_knob_parks_the_writer_or_sets_its_poll_and_says_what_it_did_not_understand() {
        let off = Linger::with_setting(Some("off"));
        off.request(Duration::from_secs(60));
        // Returns at once: no deadline was set.
        off.serve(|| false);
        assert!(off.describe().starts_with("off"), "{}", off.describe());
        assert_eq!(Linger::with_setting(Some("2000")).poll, Some(Duration::from_millis(2)));
        assert_eq!(Linger::with_setting(None).describe(), "polls every 500 µs");
        for bad in ["5", "fast", "-1"] {
            let linger = Linger::with_setting(Some(bad));
            assert_eq!(linger.poll, Some(POLL));
            assert!(linger.describe().contains("not understood"), "{}", linger.describe());
        }
    }

    #[test]
    fn a_backed_up_writer_stops_lingering() {
        let linger = Linger::new();
        linger.request(Duration::from_secs(60));
        // Returns at once, though no newer request or stop came.
        linger.serve(|| true);
    }

    #[test]
    fn flushes_that_queued_up_do_not_linger() {
        let linger = Linger::new();
        for _ in 0..3 {
            linger.request(Duration::from_secs(60));
        }
        // The first two see a newer request and return at once.
        linger.serve(|| false);
        linger.serve(|| false);
        linger.stop();
        linger.serve(|| false);
    }
}
