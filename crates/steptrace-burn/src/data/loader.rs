//! The instrumented loader: the CPU batch read in a `data.load` span, on the
//! training thread or on named prefetch threads.

use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;
use steptrace::format::names::{DATA_LOAD, DATA_WAIT};

use super::{BatchSource, HostBatch, SourceError};

/// Why the [`Loader`] gave no batch.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoaderError {
    /// A loader thread could not be started.
    #[error("cannot start loader thread: {0}")]
    Spawn(#[source] std::io::Error),
    /// A loader thread stopped before it sent the batch.
    #[error("loader thread stopped before batch {index}")]
    Stopped {
        /// The batch that was waited for.
        index: u64,
    },
    /// The source could not read the batch.
    #[error("batch {index}: {source}")]
    Read {
        /// The batch.
        index: u64,
        /// The source's error.
        #[source]
        source: SourceError,
    },
}

type Result<T, E = LoaderError> = std::result::Result<T, E>;

/// Reads batches 0, 1, 2, ... in order.
///
/// Without prefetch, each [`next_batch`](Loader::next_batch) reads the batch on the
/// calling thread inside a `data.load` span. With `workers > 0`, threads
/// named `loader-0`, `loader-1`, ... read ahead (worker `i` reads batches
/// `i, i + workers, ...`, each in its own `data.load` span) into bounded
/// queues, and `next` waits for the batch in a `data.wait` span. Either way
/// the order and content of batches are the same.
///
/// Create the loader before the profiling window opens, so that starting
/// its threads is not part of a recorded step.
pub struct Loader {
    source: Arc<dyn BatchSource>,
    next: u64,
    delay: Duration,
    workers: Vec<Worker>,
}

struct Worker {
    rx: Receiver<Result<HostBatch>>,
    handle: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Loader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loader")
            .field("next", &self.next)
            .field("workers", &self.workers.len())
            .field("delay", &self.delay)
            .finish()
    }
}

impl Loader {
    /// A loader over `source`. `delay` is added to every read (to plant an
    /// input bottleneck in experiments); `depth` bounds each worker's queue.
    pub fn new(source: Arc<dyn BatchSource>, workers: usize, depth: usize, delay: Duration) -> Result<Loader> {
        let dispatch = tracing::dispatcher::get_default(|d| d.clone());
        let mut list = Vec::with_capacity(workers);
        for i in 0..workers {
            let (tx, rx) = sync_channel(depth.max(1));
            let (source, dispatch) = (source.clone(), dispatch.clone());
            let handle = thread::Builder::new()
                .name(format!("loader-{i}"))
                .spawn(move || {
                    tracing::dispatcher::with_default(&dispatch, || {
                        let mut index = i as u64;
                        loop {
                            let batch = read(source.as_ref(), index, delay);
                            let failed = batch.is_err();
                            if tx.send(batch).is_err() || failed {
                                break;
                            }
                            index += workers as u64;
                        }
                    })
                })
                .map_err(LoaderError::Spawn)?;
            list.push(Worker { rx, handle: Some(handle) });
        }
        Ok(Loader { source, next: 0, delay, workers: list })
    }

    /// The next batch.
    pub fn next_batch(&mut self) -> Result<HostBatch> {
        let index = self.next;
        self.next += 1;
        if self.workers.is_empty() {
            return read(self.source.as_ref(), index, self.delay);
        }
        let worker = &self.workers[(index % self.workers.len() as u64) as usize];
        let _wait = steptrace::own_span!(DATA_WAIT, batch = index);
        worker.rx.recv().map_err(|_| LoaderError::Stopped { index })?
    }

    /// The source's batch size.
    pub fn batch_size(&self) -> usize {
        self.source.batch_size()
    }
}

fn read(source: &dyn BatchSource, index: u64, delay: Duration) -> Result<HostBatch> {
    let _load = steptrace::own_span!(DATA_LOAD, batch = index);
    if !delay.is_zero() {
        thread::sleep(delay);
    }
    source.batch(index).map_err(|source| LoaderError::Read { index, source })
}

impl Drop for Loader {
    fn drop(&mut self) {
        // Dropping the receivers makes each worker's next send fail.
        let handles: Vec<_> = self.workers.iter_mut().filter_map(|w| w.handle.take()).collect();
        self.workers.clear();
        for handle in handles {
            let _ = handle.join();
        }
    }
}
