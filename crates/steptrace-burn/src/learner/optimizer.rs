//! [`Profiled`]: an optimizer whose every update ends a profiler step.

use std::sync::Arc;

use burn::module::AutodiffModule;
use burn::optim::{GradientsParams, MultiGradientsParams, Optimizer};
use burn::tensor::backend::{AutodiffBackend, DeviceOps};
use steptrace::format::names::{OPTIMIZER, TARGET};
use steptrace::Profiler;

use super::driver::Driver;
use crate::backend::{backend_runtime_name, short_type_name};

/// An optimizer that runs `O`'s update in an `optimizer` span, then ends
/// the current `ProfilerStep#N` and opens the next one.
///
/// So `ProfilerStep#N` holds the `N`-th optimizer update (counting from 0)
/// and everything the training loop did since the previous one: loading
/// or waiting for the batch, the forward and backward passes, and, at an
/// [epoch boundary](super#epoch-boundaries), validation and checkpointing.
/// With gradient accumulation a step holds several forward and backward
/// passes and one update.
///
/// `Record = O::Record`: checkpoints are those of `O`, and load into either.
/// Clones share the profiler. Made by
/// [`LearnerProfiler::optimizer`](super::LearnerProfiler::optimizer).
#[derive(Clone, Debug)]
pub struct Profiled<O> {
    inner: O,
    driver: Arc<Driver>,
}

impl<O> Profiled<O> {
    pub(crate) fn new(inner: O, driver: Arc<Driver>) -> Self {
        Self { inner, driver }
    }

    /// The wrapped optimizer.
    pub fn inner(&self) -> &O {
        &self.inner
    }

    /// Unwraps the optimizer.
    pub fn into_inner(self) -> O {
        self.inner
    }

    /// Runs one update and ends the step.
    fn update<B, M>(&mut self, module: M, run: impl FnOnce(&mut O, M) -> M) -> M
    where
        B: AutodiffBackend,
        M: AutodiffModule<B>,
    {
        if self.driver.is_ranked() {
            // Each rank's thread takes its rank's profiler at its first
            // update, by the module's device; step 0 opens here.
            if let Some(device) = module.devices().first() {
                self.driver.attach(device.id());
            }
            self.driver.start();
        } else if !self.driver.is_started() {
            // Without the launch hook, step 0 opens here and holds only this update.
            self.driver.start();
        }
        let module = {
            let _optimizer = tracing::info_span!(target: TARGET, OPTIMIZER).entered();
            run(&mut self.inner, module)
        };
        self.driver.after_update(|profiler| describe::<B, M>(profiler, &module));
        module
    }
}

impl<M, B, O> Optimizer<M, B> for Profiled<O>
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
    O: Optimizer<M, B>,
{
    type Record = O::Record;

    fn step(&mut self, lr: f64, module: M, grads: GradientsParams) -> M {
        self.update::<B, M>(module, |inner, module| inner.step(lr, module, grads))
    }

    fn step_multi(&mut self, lr: f64, module: M, grads: MultiGradientsParams) -> M {
        self.update::<B, M>(module, |inner, module| inner.step_multi(lr, module, grads))
    }

    fn to_record(&self) -> Self::Record {
        self.inner.to_record()
    }

    fn load_record(self, record: Self::Record) -> Self {
        Self { inner: self.inner.load_record(record), driver: self.driver }
    }
}

/// What the first update knows of the run and the manifest may lack: the
/// backend as burn names it, its type, and the parameter count. Fields the
/// caller set are kept.
fn describe<B: AutodiffBackend, M: AutodiffModule<B>>(profiler: &mut Profiler, module: &M) {
    let backend = module.devices().first().map(backend_runtime_name::<B>);
    let parameters = module.num_params() as u64;
    profiler.update_manifest(|m| {
        if m.backend.is_none() {
            m.backend = backend;
        }
        m.parameters.get_or_insert(parameters);
        m.extra
            .entry("burn_type")
            .or_insert_with(|| short_type_name(std::any::type_name::<B>()).into());
    });
}
