//! The allocator asked on a helper thread, so that the training thread does not wait for the
//! round trip to cubecl's device thread (on the H200 about 20 µs, most of it waking that
//! thread).
//!
//! The training thread asks at a step's start and goes on reading the batch, which touches no
//! device; it takes the answer before it copies the batch, its first device operation, so the
//! answer is what the device held at the step boundary. Its share is one wake of the helper
//! and, when reading the batch took less than the round trip, the rest of the wait.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use burn::prelude::Device;

use crate::backend::{self, MemorySnapshot};

/// Where the helper is.
enum State {
    /// Nothing asked.
    Idle,
    /// Asked: the helper is querying (or about to).
    Asked,
    /// Answered: the snapshot (`None`: not observed) and how long the query took, ns.
    Answered(Option<MemorySnapshot>, u64),
    /// The sampler is gone: the helper returns.
    Stop,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A helper thread that asks cubecl for a device's memory report (after a sync: see
/// [`backend::memory_usage_after_sync`]).
pub(super) struct Asker {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Asker {
    /// Starts the helper for `device`; `None` when the thread cannot be started (the sampler
    /// then asks on the training thread).
    pub(super) fn start(device: Device) -> Option<Asker> {
        let shared = Arc::new(Shared { state: Mutex::new(State::Idle), changed: Condvar::new() });
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("steptrace-memory".into())
            .spawn(move || serve(&theirs, &device))
            .map_err(|e| tracing::debug!(target: "steptrace::backend", "--memory: no helper thread ({e}): the training thread asks"))
            .ok()?;
        Some(Asker { shared, thread: Some(thread) })
    }

    /// Asks for a report unless one is asked for already.
    pub(super) fn ask(&self) {
        let mut state = self.shared.lock();
        if matches!(*state, State::Idle | State::Answered(..)) {
            *state = State::Asked;
            self.shared.changed.notify_all();
        }
    }

    /// The answer to the last [`ask`](Self::ask), waiting for it if need be: the snapshot
    /// (`None`: not observed, or nothing was asked) and the query's time, ns.
    pub(super) fn answer(&self) -> (Option<MemorySnapshot>, u64) {
        let mut state = self.shared.lock();
        while matches!(*state, State::Asked) {
            state = self.shared.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        match std::mem::replace(&mut *state, State::Idle) {
            State::Answered(snapshot, ns) => (snapshot, ns),
            State::Stop => {
                *state = State::Stop;
                (None, 0)
            }
            _ => (None, 0),
        }
    }
}

impl Drop for Asker {
    fn drop(&mut self) {
        *self.shared.lock() = State::Stop;
        self.shared.changed.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The helper's loop: wait for a question, ask, answer.
fn serve(shared: &Shared, device: &Device) {
    loop {
        {
            let mut state = shared.lock();
            loop {
                match *state {
                    State::Asked => break,
                    State::Stop => return,
                    _ => state = shared.changed.wait(state).unwrap_or_else(PoisonError::into_inner),
                }
            }
        }
        let asked = Instant::now();
        // A panic is caught inside the query (and answered as "not observed"); this one
        // guards the timing and the hand-back too, so that the training thread never waits
        // on a helper that died.
        let snapshot = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| backend::memory_usage_after_sync(device)))
            .ok()
            .flatten();
        let ns = u64::try_from(asked.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mut state = shared.lock();
        if matches!(*state, State::Stop) {
            return;
        }
        *state = State::Answered(snapshot, ns);
        shared.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_comes_back_for_each_question_and_the_helper_stops_with_the_asker() {
        // The CPU device has no allocator report: each answer is "not observed", never a wait
        // that does not end.
        let asker = Asker::start(Device::flex()).expect("a helper thread");
        for _ in 0..3 {
            asker.ask();
            asker.ask(); // a second question before the answer is the same question
            assert_eq!(asker.answer().0, None);
        }
        assert_eq!(asker.answer(), (None, 0), "nothing asked: nothing to wait for");
        let thread = asker.thread.as_ref().map(|t| t.thread().id());
        drop(asker);
        assert!(thread.is_some());
    }
}
