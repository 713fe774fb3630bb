//! [`ProfiledBatcher`]: the user's batcher, in `data.load` spans.

use std::sync::Arc;

use burn::data::dataloader::batcher::Batcher;
use burn::prelude::Device;
use steptrace::format::names::{DATA_LOAD, TARGET};

use super::driver::Driver;
use super::EPOCH_BOUNDARY;

/// A [`Batcher`] that runs the user's `batch` in a `data.load` span, on
/// whichever thread the data loader calls it: the loader's
/// `dataloader-{i}` threads with `num_workers`, the training thread without.
///
/// The span has two fields: `items`, the number of items batched, and
/// `split`, `"train"` for a batch built for an autodiff device and
/// `"valid"` otherwise. burn-train's `SupervisedTraining` builds its
/// validation batches for the training device without autodiff
/// (`Device::inner`), so one wrapped batcher, cloned into both data
/// loaders, tells them apart by `Device::is_autodiff`. A validation batch
/// also marks its step as an [epoch boundary](super#epoch-boundaries).
///
/// The span covers all of the user's `batch`, which with burn also creates
/// the batch's tensors on the device: the host-to-device copy is inside
/// `data.load`, and no `transfer.h2d` span is written.
///
/// Made by [`LearnerProfiler::batcher`](super::LearnerProfiler::batcher).
#[derive(Clone, Debug)]
pub struct ProfiledBatcher<Bt> {
    inner: Bt,
    driver: Arc<Driver>,
}

impl<Bt> ProfiledBatcher<Bt> {
    pub(crate) fn new(inner: Bt, driver: Arc<Driver>) -> Self {
        Self { inner, driver }
    }

    /// The wrapped batcher.
    pub fn inner(&self) -> &Bt {
        &self.inner
    }

    /// Unwraps the batcher.
    pub fn into_inner(self) -> Bt {
        self.inner
    }
}

impl<I, O, Bt> Batcher<I, O> for ProfiledBatcher<Bt>
where
    Bt: Batcher<I, O>,
{
    fn batch(&self, items: Vec<I>, device: &Device) -> O {
        let train = device.is_autodiff();
        if !train {
            if let Some(step) = self.driver.note_validation() {
                tracing::info!(target: TARGET, step, "{EPOCH_BOUNDARY}");
            }
        }
        let split = if train { "train" } else { "valid" };
        // With ranks, a loader thread records for the rank of the device it feeds.
        let _rank = (self.driver.is_ranked() && steptrace::ranks::current().is_none())
            .then(|| self.driver.rank_of(device))
            .flatten()
            .map(steptrace::ranks::enter);
        let _load = tracing::info_span!(target: TARGET, DATA_LOAD, items = items.len(), split = %split).entered();
        self.inner.batch(items, device)
    }
}
