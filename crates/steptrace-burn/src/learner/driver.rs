//! The profiler, bound to the thread that installed it, and the state that
//! the wrappers share with it.
//!
//! A [`Profiler`] holds the entered `ProfilerStep#N` span, so it must stay
//! on the thread that steps it: it is not `Send`. burn-train, however,
//! wants a `Send + Clone` optimizer and a `Send + Sync` batcher. So the
//! profiler is kept in a thread-local slot of the installing thread, and
//! the wrappers hold an [`Arc<Driver>`]: plain atomics and a mutex, which
//! any thread may read. Only the installing thread reaches the profiler
//! itself; from any other thread [`Driver::with`] does nothing and says
//! so, rather than panic. burn-train's default single-device strategy runs
//! the whole loop on the thread that calls `launch`.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};

use burn::prelude::Device;
use steptrace::{Profiler, RankProfilers, SavedTrace};

use super::watch::{self, Watch};

thread_local! {
    /// The profilers this thread drives, by driver id.
    static BOUND: RefCell<Vec<Bound>> = const { RefCell::new(Vec::new()) };
}

/// A rank's outcomes: its files, or why one could not be written.
pub(crate) type Outcomes = Vec<Result<SavedTrace, steptrace::Error>>;

/// Where ranks hand their outcomes back: `(rank, outcomes)`.
type HandBack = Arc<Mutex<Vec<(u32, Outcomes)>>>;

/// A profiler in a thread's slot; a rank's hands its outcomes back when
/// the thread ends.
struct Bound {
    id: u64,
    profiler: Option<Profiler>,
    /// Where a rank's outcomes go: `(rank, outcomes)`.
    hand_back: Option<(u32, HandBack)>,
}

impl Drop for Bound {
    fn drop(&mut self) {
        if let (Some(profiler), Some((rank, back))) = (self.profiler.take(), &self.hand_back) {
            let outcomes = profiler.finish_all();
            back.lock().unwrap_or_else(|e| e.into_inner()).push((*rank, outcomes));
        }
    }
}

/// The ranks of a run of several, for [`Driver::bind_ranks`].
#[derive(Debug)]
struct Ranks {
    group: RankProfilers,
    /// Each rank's device, in rank order.
    devices: Vec<Device>,
    taken: Mutex<Vec<bool>>,
    outcomes: HandBack,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What the wrappers share: the current step, counts, and the steps that
/// held validation.
#[derive(Debug)]
pub(crate) struct Driver {
    id: u64,
    owner: ThreadId,
    /// The current step (the `N` of the open `ProfilerStep#N`).
    step: AtomicU64,
    started: AtomicBool,
    finished: AtomicBool,
    /// Optimizer updates that advanced the profiler.
    updates: AtomicU64,
    /// Updates that could not advance it: made on another thread, or after
    /// the profiler finished.
    missed: AtomicU64,
    /// Whether the first update has described the backend yet.
    described: AtomicBool,
    /// Steps during which a validation batch was built, in order.
    boundaries: Mutex<Vec<u64>>,
    /// One profiler per rank, when the run has several.
    ranks: Option<Ranks>,
    /// Whether kernels are tied to layers, so that the optimizer notes the parameters' places
    /// in the module tree.
    names_layers: AtomicBool,
    /// Memory by category and a failed step's facts, for a run from a session.
    watch: Mutex<Option<Watch>>,
}

impl Driver {
    fn new(step: u64, ranks: Option<Ranks>) -> Driver {
        Driver {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            owner: thread::current().id(),
            step: AtomicU64::new(step),
            started: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            updates: AtomicU64::new(0),
            missed: AtomicU64::new(0),
            described: AtomicBool::new(false),
            boundaries: Mutex::new(Vec::new()),
            ranks,
            names_layers: AtomicBool::new(false),
            watch: Mutex::new(None),
        }
    }

    /// Binds `profiler` to the current thread.
    pub(crate) fn bind(profiler: Profiler) -> Arc<Driver> {
        let driver = Arc::new(Driver::new(profiler.step_num(), None));
        // At thread exit the slot is dropped, and the profiler saves what it holds.
        let _ = BOUND.try_with(|bound| {
            bound.borrow_mut().push(Bound { id: driver.id, profiler: Some(profiler), hand_back: None })
        });
        driver
    }

    /// A driver for one profiler per rank: rank `r` runs on `devices[r]`.
    pub(crate) fn bind_ranks(group: RankProfilers, devices: Vec<Device>) -> Arc<Driver> {
        let taken = Mutex::new(vec![false; devices.len()]);
        let ranks = Ranks { group, devices, taken, outcomes: Arc::new(Mutex::new(Vec::new())) };
        Arc::new(Driver::new(0, Some(ranks)))
    }

    /// This driver's id, unique in the process.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// How many ranks, with one profiler per rank.
    pub(crate) fn world_size(&self) -> Option<u32> {
        self.ranks.as_ref().map(|r| r.group.world_size())
    }

    /// Whether the run has one profiler per rank.
    /// Whether the optimizer notes the parameters for layer names.
    #[cfg_attr(not(feature = "attribution"), allow(dead_code))]
    pub(crate) fn names_layers(&self) -> bool {
        self.names_layers.load(Ordering::Relaxed)
    }

    /// Has the optimizer note the parameters for layer names.
    pub(crate) fn set_names_layers(&self, on: bool) {
        self.names_layers.store(on, Ordering::Relaxed);
    }

    pub(crate) fn is_ranked(&self) -> bool {
        self.ranks.is_some()
    }

    /// The rank of `device` (the first rank on it, for a device listed
    /// twice), for a batch built on a thread of no rank. Devices compare as
    /// burn compares them: the hardware, with or without autodiff.
    pub(crate) fn rank_of(&self, device: &Device) -> Option<u32> {
        let ranks = self.ranks.as_ref()?;
        ranks.devices.iter().position(|d| d == device).map(|r| r as u32)
    }

    /// Gives the calling thread the profiler of the rank whose device is
    /// `device`, unless it has one: the first rank on that device whose
    /// profiler no thread took. False when every such rank is taken.
    pub(crate) fn attach(&self, device: &Device) -> bool {
        let Some(ranks) = &self.ranks else { return true };
        if self.with(|_| ()).is_some() {
            return true;
        }
        let rank = {
            let mut taken = ranks.taken.lock().unwrap_or_else(|e| e.into_inner());
            let Some(rank) = (0..ranks.devices.len()).find(|&r| ranks.devices[r] == *device && !taken[r]) else {
                return false;
            };
            taken[rank] = true;
            rank as u32
        };
        let Ok(profiler) = ranks.group.take(rank) else { return false };
        let hand_back = Some((rank, ranks.outcomes.clone()));
        BOUND
            .try_with(|bound| bound.borrow_mut().push(Bound { id: self.id, profiler: Some(profiler), hand_back }))
            .is_ok()
    }

    /// Runs `f` on the profiler this thread drives: `None` off the
    /// installing thread (or, with ranks, on a thread of no rank), after
    /// [`take`](Driver::take), or when re-entered.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Profiler) -> R) -> Option<R> {
        if self.ranks.is_none() && thread::current().id() != self.owner {
            return None;
        }
        BOUND
            .try_with(|bound| {
                let mut bound = bound.try_borrow_mut().ok()?;
                let profiler = bound.iter_mut().find(|b| b.id == self.id)?.profiler.as_mut()?;
                Some(f(profiler))
            })
            .ok()
            .flatten()
    }

    /// Ends every rank's profiling: the calling thread's rank (if any)
    /// and the ranks no thread took are finished now; the others were
    /// when their threads ended. Returns each rank's outcomes in rank
    /// order, and the ranks whose threads still run (their files are saved
    /// when those threads end).
    pub(crate) fn finish_ranks(&self) -> (Vec<(u32, Outcomes)>, Vec<u32>) {
        let Some(ranks) = &self.ranks else { return (Vec::new(), Vec::new()) };
        // Dropping this thread's slot hands its rank's outcomes back.
        let _ = BOUND.try_with(|bound| {
            let mut bound = bound.borrow_mut();
            let mine: Vec<usize> = (0..bound.len()).filter(|&i| bound[i].id == self.id).collect();
            for i in mine.into_iter().rev() {
                drop(bound.remove(i));
            }
        });
        self.finished.store(true, Ordering::Release);
        let untaken = ranks.group.untaken();
        let mut outcomes = std::mem::take(&mut *ranks.outcomes.lock().unwrap_or_else(|e| e.into_inner()));
        outcomes.sort_by_key(|(rank, _)| *rank);
        let taken = ranks.taken.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let running = (0..taken.len() as u32)
            .filter(|r| taken[*r as usize] && !untaken.contains(r) && !outcomes.iter().any(|(o, _)| o == r))
            .collect();
        (outcomes, running)
    }

    /// Opens `ProfilerStep#0` unless it is open. False when the profiler is
    /// out of reach (another thread, or finished).
    pub(crate) fn start(&self) -> bool {
        let recorded = self.with(|profiler| {
            let first = profiler.step_num() == 0 && !self.is_started();
            profiler.start();
            first.then(|| profiler.action().records())
        });
        let Some(first) = recorded else { return false };
        self.started.store(true, Ordering::Release);
        if let Some(recorded) = first {
            watch::reset_reached();
            self.watch(|w| w.step_start(0, recorded));
        }
        true
    }

    /// Hands the run's memory bookkeeping to the driver.
    pub(crate) fn set_watch(&self, watch: Watch) {
        *self.watch.lock().unwrap_or_else(|e| e.into_inner()) = Some(watch);
    }

    /// Runs `f` on the memory bookkeeping, when the run has it.
    pub(crate) fn watch<R>(&self, f: impl FnOnce(&mut Watch) -> R) -> Option<R> {
        self.watch.lock().unwrap_or_else(|e| e.into_inner()).as_mut().map(f)
    }

    /// The step open now (`ProfilerStep#N`).
    pub(crate) fn step_now(&self) -> u64 {
        self.step.load(Ordering::Acquire)
    }

    /// Whether step 0 has been opened.
    pub(crate) fn is_started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    /// Ends the current step after an optimizer update; `describe` runs on
    /// the first update only, to complete the manifest before any trace is
    /// saved.
    pub(crate) fn after_update(&self, describe: impl FnOnce(&mut Profiler)) {
        let stepped = self.with(|profiler| {
            // With ranks, each rank's first update describes its own files.
            let first = match self.ranks {
                Some(_) => profiler.step_num() == 0,
                None => !self.described.swap(true, Ordering::AcqRel),
            };
            if first {
                describe(profiler);
            }
            profiler.step();
            (profiler.step_num(), profiler.action().records())
        });
        match stepped {
            Some((step, recorded)) => {
                if self.updates.fetch_add(1, Ordering::AcqRel) == 0 {
                    self.watch(Watch::first_update_ended);
                }
                self.step.store(step, Ordering::Release);
                watch::reset_reached();
                self.watch(|w| w.step_start(step, recorded));
            }
            None => {
                self.missed.fetch_add(1, Ordering::AcqRel);
            }
        }
    }

    /// Notes that a validation batch is being built now: the first time in
    /// a step, returns that step (to be flagged), otherwise `None`.
    pub(crate) fn note_validation(&self) -> Option<u64> {
        if !self.is_started() || self.finished.load(Ordering::Acquire) {
            return None;
        }
        let step = self.step.load(Ordering::Acquire);
        let mut steps = self.boundaries.lock().unwrap_or_else(|e| e.into_inner());
        if steps.last() == Some(&step) {
            return None;
        }
        steps.push(step);
        Some(step)
    }

    /// Removes the profiler from the thread's slot, ending the wrappers'
    /// access to it; `None` off the installing thread or if already taken.
    pub(crate) fn take(&self) -> Option<Profiler> {
        if self.ranks.is_some() || thread::current().id() != self.owner {
            return None;
        }
        let profiler = BOUND
            .try_with(|bound| {
                let mut bound = bound.try_borrow_mut().ok()?;
                let at = bound.iter().position(|b| b.id == self.id)?;
                bound.remove(at).profiler.take()
            })
            .ok()
            .flatten()?;
        self.finished.store(true, Ordering::Release);
        Some(profiler)
    }

    /// Optimizer updates that advanced the profiler.
    pub(crate) fn updates(&self) -> u64 {
        self.updates.load(Ordering::Acquire)
    }

    /// Updates that could not advance it.
    pub(crate) fn missed(&self) -> u64 {
        self.missed.load(Ordering::Acquire)
    }

    /// Steps that held validation, in order.
    pub(crate) fn boundaries(&self) -> Vec<u64> {
        self.boundaries.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profiler(dir: &std::path::Path) -> Profiler {
        let schedule = "warmup=1,active=1,repeat=1".parse().expect("schedule");
        // Built, not installed: the spans go nowhere, the stepping is real.
        let (_layer, profiler) =
            Profiler::builder(schedule).out_dir(dir).build::<tracing_subscriber::Registry>().expect("profiler");
        profiler
    }

    #[test]
    fn updates_advance_the_bound_profiler_and_other_threads_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let driver = Driver::bind(profiler(dir.path()));
        assert_eq!(driver.note_validation(), None, "not started yet");
        assert!(driver.start());
        driver.after_update(|_| {});
        assert_eq!(driver.updates(), 1);
        assert_eq!(driver.note_validation(), Some(1));
        assert_eq!(driver.note_validation(), None, "flagged once per step");

        let shared = driver.clone();
        std::thread::spawn(move || {
            assert!(!shared.start());
            shared.after_update(|_| panic!("never described off the owner thread"));
            assert!(shared.take().is_none());
        })
        .join()
        .expect("other thread");
        assert_eq!((driver.updates(), driver.missed()), (1, 1));
        assert_eq!(driver.boundaries(), vec![1]);

        let profiler = driver.take().expect("owner thread");
        assert!(driver.take().is_none());
        driver.after_update(|_| {});
        assert_eq!(driver.missed(), 2);
        assert_eq!(profiler.step_num(), 1);
    }
}
