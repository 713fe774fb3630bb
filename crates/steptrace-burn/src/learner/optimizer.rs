//! [`Profiled`]: an optimizer whose every update ends a profiler step.
//!
//! burn 0.22 splits the optimizer in two: a per-tensor [`Optimizer`] (Adam,
//! SGD, ...) that updates one parameter at a time, and the one
//! [`ModuleOptimizer`](burn::optim::ModuleOptimizer) that walks a module's
//! parameters and calls it for each one that has a gradient. burn-train takes
//! only a `ModuleOptimizer`, a concrete type, so steptrace wraps the
//! per-tensor optimizer inside it. One update of the module is then several
//! calls, one per parameter, in the order of the module's parameters: the
//! first opens the `optimizer` span, and the one for the module's last
//! parameter closes it and ends the step. To know which call is the last,
//! [`Profiled`] holds the model's parameter list (a [`Plan`]), taken when the
//! optimizer is wrapped.

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use burn::module::{Module, Param};
use burn::optim::{LearningRate, Optimizer};
use burn::prelude::{Device, Tensor};
use steptrace::direct::OwnSpan;
use steptrace::format::names::OPTIMIZER;
use steptrace::Profiler;

use super::driver::Driver;
use crate::backend::backend_runtime_name;
use crate::modules::{span_path, walk, ParamVisitor};

/// A per-tensor optimizer that runs `O`'s updates in an `optimizer` span,
/// then ends the current `ProfilerStep#N` and opens the next one.
///
/// So `ProfilerStep#N` holds the `N`-th optimizer update (counting from 0)
/// and everything the training loop did since the previous one: loading
/// or waiting for the batch, the forward and backward passes, and, at an
/// [epoch boundary](super#epoch-boundaries), validation and checkpointing.
/// With gradient accumulation a step holds several forward and backward
/// passes and one update.
///
/// burn's `ModuleOptimizer` calls it once per parameter that has a gradient;
/// the `optimizer` span covers one update of the whole module, from its
/// first parameter to its last (see [which call ends an update](super#which-call-ends-an-update)).
///
/// `State<D> = O::State<D>`: the optimizer record (and so the checkpoints)
/// of a `ModuleOptimizer` built from it are those built from `O`, and load
/// into either. Clones share the profiler. Made by
/// [`LearnerProfiler::optimizer`](super::LearnerProfiler::optimizer), which
/// puts it in a `ModuleOptimizer`, or
/// [`LearnerProfiler::profiled`](super::LearnerProfiler::profiled).
#[derive(Clone)]
pub struct Profiled<O> {
    inner: O,
    driver: Arc<Driver>,
    plan: Arc<Plan>,
}

impl<O: fmt::Debug> fmt::Debug for Profiled<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Profiled")
            .field("inner", &self.inner)
            .field("parameters", &self.plan.shapes.len())
            .finish_non_exhaustive()
    }
}

impl<O> Profiled<O> {
    pub(crate) fn new(inner: O, driver: Arc<Driver>, plan: Arc<Plan>) -> Self {
        Self { inner, driver, plan }
    }

    /// The wrapped optimizer.
    pub fn inner(&self) -> &O {
        &self.inner
    }

    /// Unwraps the optimizer.
    pub fn into_inner(self) -> O {
        self.inner
    }
}

impl<O: Optimizer> Optimizer for Profiled<O> {
    type State<const D: usize> = O::State<D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<D>,
        grad: Tensor<D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<D>, Option<Self::State<D>>) {
        let id = self.driver.id();
        let dims = tensor.dims();
        let (moved, late_span) = UPDATES.with(|cell| {
            let mut all = cell.borrow_mut();
            let update = Update::of(&mut all, id, &self.plan);
            let moved = update.cursor.advance(&self.plan, &dims);
            let late_span = if moved.close_previous { update.span.take() } else { None };
            (moved, late_span)
        });
        if moved.close_previous {
            // The previous update ended without reaching the model's last
            // parameter (it had no gradient): its step ends now, late.
            drop(late_span);
            let device = tensor.device();
            self.driver.after_update(|profiler| describe(profiler, self.plan.parameters, &device));
        }
        if moved.open {
            self.open(&tensor.device());
            let span = steptrace::own_span!(OPTIMIZER);
            UPDATES.with(|cell| {
                if let Some(update) = cell.borrow_mut().iter_mut().find(|u| u.driver == id) {
                    update.span = Some(span);
                }
            });
        }
        let device = moved.close.then(|| tensor.device());
        let out = self.inner.step(lr, tensor, grad, state);
        if self.driver.updates() == 0 {
            // The optimizer's state, for memory by category: the first update's states, read once.
            if let Some(state) = &out.1 {
                self.driver.watch(|w| {
                    if w.wants_state() {
                        w.add_state(super::watch::state_bytes(state));
                    }
                });
            }
        }
        #[cfg(feature = "attribution")]
        self.note_updated(id, moved.at, &out.0, moved.close);
        if let Some(device) = device {
            let span =
                UPDATES.with(|cell| cell.borrow_mut().iter_mut().find(|u| u.driver == id).and_then(|u| u.span.take()));
            drop(span);
            self.driver.after_update(|profiler| describe(profiler, self.plan.parameters, &device));
        }
        out
    }

    fn to_device<const D: usize>(state: Self::State<D>, device: &Device) -> Self::State<D> {
        O::to_device(state, device)
    }
}

impl<O> Profiled<O> {
    /// Notes the updated parameter's tensor id and module; at the update's end, hands them to
    /// kernel attribution for the next step's layer names.
    #[cfg(feature = "attribution")]
    fn note_updated<const D: usize>(&self, driver: u64, at: Option<usize>, updated: &Tensor<D>, close: bool) {
        if !self.driver.names_layers() {
            return;
        }
        let path = at.and_then(|at| self.plan.paths.get(at)).cloned();
        let id = path.as_ref().and_then(|_| crate::attribute::tensor_id(updated.clone()));
        let done = UPDATES.with(|cell| {
            let mut all = cell.borrow_mut();
            let update = all.iter_mut().find(|u| u.driver == driver)?;
            if let (Some(id), Some(path)) = (id, path) {
                update.updated.push((id, path));
            }
            close.then(|| std::mem::take(&mut update.updated))
        });
        if let Some(paths) = done {
            crate::attribute::set_parameter_paths(paths);
        }
    }

    /// An update begins on this thread: with ranks, the thread takes the
    /// profiler of its device's rank; step 0 opens if it is not open.
    fn open(&self, device: &Device) {
        if self.driver.is_ranked() {
            // Each rank's thread takes its rank's profiler at its first
            // update, by the device of the parameters; step 0 opens here.
            self.driver.attach(device);
            self.driver.start();
        } else if !self.driver.is_started() {
            // Without the launch hook, step 0 opens here and holds only this update.
            self.driver.start();
        }
    }
}

thread_local! {
    /// Where this thread is in the updates of each driver.
    static UPDATES: RefCell<Vec<Update>> = const { RefCell::new(Vec::new()) };
}

/// One thread's update in progress, for one driver.
struct Update {
    driver: u64,
    cursor: Cursor,
    /// The open update's `optimizer` span, entered.
    span: Option<OwnSpan<'static>>,
    /// The updated parameters' tensor ids and modules, for layer names in the next step.
    #[cfg_attr(not(feature = "attribution"), allow(dead_code))]
    updated: Vec<(u64, std::sync::Arc<str>)>,
}

impl Update {
    fn of<'a>(all: &'a mut Vec<Update>, driver: u64, plan: &Plan) -> &'a mut Update {
        let at = match all.iter().position(|u| u.driver == driver) {
            Some(at) => at,
            None => {
                all.push(Update { driver, cursor: Cursor::new(plan), span: None, updated: Vec::new() });
                all.len() - 1
            }
        };
        &mut all[at]
    }
}

/// The model's float parameters, in the order burn's `ModuleOptimizer`
/// visits them (the module's own order), by shape; and its parameter count
/// for the manifest.
#[derive(Debug)]
pub(crate) struct Plan {
    shapes: Vec<Vec<usize>>,
    /// Each parameter's module, as a span path (`blocks.1 > inner`), for layer names.
    paths: Vec<std::sync::Arc<str>>,
    parameters: u64,
}

impl Plan {
    /// Reads `model`'s parameters without initialising lazy ones.
    pub(crate) fn of<M: Module>(model: &M) -> Plan {
        struct Shapes {
            shapes: Vec<Vec<usize>>,
            paths: Vec<std::sync::Arc<str>>,
        }
        impl ParamVisitor for Shapes {
            fn float<const D: usize>(&mut self, path: &str, param: &Param<Tensor<D>>) {
                self.shapes.push(param.lazy_shape().to_vec());
                self.paths.push(std::sync::Arc::from(span_path(path)));
            }
        }
        let mut shapes = Shapes { shapes: Vec::new(), paths: Vec::new() };
        walk(model, &mut shapes);
        Plan { shapes: shapes.shapes, paths: shapes.paths, parameters: model.num_params() as u64 }
    }

    /// The first parameter at or after `from` with this shape.
    fn find(&self, from: usize, dims: &[usize]) -> Option<usize> {
        let rest = self.shapes.get(from..)?;
        rest.iter().position(|s| s.as_slice() == dims).map(|at| at + from)
    }

    #[cfg(test)]
    fn from_shapes(shapes: Vec<Vec<usize>>) -> Plan {
        Plan { shapes, paths: Vec::new(), parameters: 0 }
    }
}

/// Where one thread is in the model's parameters, update after update.
///
/// burn's `ModuleOptimizer` updates the parameters that have a gradient, in
/// the module's order, one call each. A call whose parameter comes after
/// the previous one's belongs to the same update; the model's last
/// parameter ends it. A parameter without a gradient is skipped, so a call
/// is matched to the next parameter of its shape. If the update's last
/// parameters got no gradient, the update is seen to end only when the next
/// one starts (a call that matches no parameter ahead); from then on the
/// last parameter updated is taken as the end.
#[derive(Debug)]
struct Cursor {
    /// The first parameter the next call of this update may be.
    next: usize,
    /// The parameter whose update ends an update.
    last: usize,
    /// The latest parameter of the open update.
    latest: Option<usize>,
    /// Whether an update is open.
    open: bool,
}

/// What a call does to the updates.
#[derive(Debug, Default, PartialEq, Eq)]
struct Moved {
    /// The open update ended before this call (late).
    close_previous: bool,
    /// This call opens an update.
    open: bool,
    /// This call ends the update.
    close: bool,
    /// The parameter it updates, when the model has one of its shape there.
    at: Option<usize>,
}

impl Cursor {
    fn new(plan: &Plan) -> Cursor {
        Cursor { next: 0, last: plan.shapes.len().saturating_sub(1), latest: None, open: false }
    }

    /// A call updates a parameter of shape `dims`.
    fn advance(&mut self, plan: &Plan, dims: &[usize]) -> Moved {
        let mut moved = Moved::default();
        let at = if self.open {
            match plan.find(self.next, dims) {
                Some(at) => Some(at),
                None => match plan.find(0, dims) {
                    // Not ahead: the open update is over, and a new one begins.
                    Some(at) => {
                        moved.close_previous = true;
                        if let Some(latest) = self.latest {
                            self.last = self.last.min(latest);
                        }
                        self.open = false;
                        Some(at)
                    }
                    // A parameter the model did not have: part of this update.
                    None => None,
                },
            }
        } else {
            plan.find(0, dims)
        };
        if !self.open {
            moved.open = true;
            self.open = true;
            self.latest = None;
        }
        moved.at = at;
        if let Some(at) = at {
            self.next = at + 1;
            self.latest = Some(at);
            if at >= self.last {
                moved.close = true;
                self.open = false;
                self.next = 0;
            }
        }
        moved
    }
}

/// What the first update knows of the run and the manifest may lack: the
/// backend as burn names it (for the autodiff device it trains on) and the
/// model's parameter count. Fields the caller set are kept.
fn describe(profiler: &mut Profiler, parameters: u64, device: &Device) {
    let backend = backend_runtime_name(&device.clone().autodiff());
    profiler.update_manifest(|m| {
        if m.backend.is_none() {
            m.backend = Some(backend.clone());
        }
        m.parameters.get_or_insert(parameters);
        m.extra.entry("burn_type").or_insert_with(|| backend.into());
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moved(close_previous: bool, open: bool, close: bool) -> Moved {
        Moved { close_previous, open, close, at: None }
    }

    /// What a call did, without the parameter it matched.
    trait Flags {
        fn flags(self) -> Moved;
    }

    impl Flags for Moved {
        fn flags(self) -> Moved {
            Moved { at: None, ..self }
        }
    }

    #[test]
    fn the_last_parameter_ends_each_update() {
        // Two linear layers: weight, bias, weight, bias (two alike).
        let plan = Plan::from_shapes(vec![vec![4, 4], vec![4], vec![4, 4], vec![4]]);
        let mut cursor = Cursor::new(&plan);
        for _update in 0..3 {
            assert_eq!(cursor.advance(&plan, &[4, 4]).flags(), moved(false, true, false));
            assert_eq!(cursor.advance(&plan, &[4]).flags(), moved(false, false, false));
            assert_eq!(cursor.advance(&plan, &[4, 4]).flags(), moved(false, false, false));
            assert_eq!(cursor.advance(&plan, &[4]).flags(), moved(false, false, true));
        }
    }

    #[test]
    fn parameters_without_a_gradient_are_skipped() {
        // A frozen first layer, then a trained one.
        let plan = Plan::from_shapes(vec![vec![8, 4], vec![4], vec![4, 2], vec![2]]);
        let mut cursor = Cursor::new(&plan);
        for _update in 0..2 {
            assert_eq!(cursor.advance(&plan, &[4, 2]).flags(), moved(false, true, false));
            assert_eq!(cursor.advance(&plan, &[2]).flags(), moved(false, false, true));
        }
    }

    #[test]
    fn an_update_short_of_the_last_parameter_ends_late_then_on_time() {
        // The last layer gets no gradient: the first update is seen to end
        // when the second begins; from then on its last parameter ends it.
        let plan = Plan::from_shapes(vec![vec![8, 4], vec![4], vec![4, 2], vec![2]]);
        let mut cursor = Cursor::new(&plan);
        assert_eq!(cursor.advance(&plan, &[8, 4]).flags(), moved(false, true, false));
        assert_eq!(cursor.advance(&plan, &[4]).flags(), moved(false, false, false));
        assert_eq!(cursor.advance(&plan, &[8, 4]).flags(), moved(true, true, false));
        assert_eq!(cursor.advance(&plan, &[4]).flags(), moved(false, false, true));
        assert_eq!(cursor.advance(&plan, &[8, 4]).flags(), moved(false, true, false));
        assert_eq!(cursor.advance(&plan, &[4]).flags(), moved(false, false, true));
    }

    #[test]
    fn a_parameter_the_model_lacks_stays_in_its_update() {
        let plan = Plan::from_shapes(vec![vec![3], vec![5]]);
        let mut cursor = Cursor::new(&plan);
        assert_eq!(cursor.advance(&plan, &[3]).flags(), moved(false, true, false));
        assert_eq!(cursor.advance(&plan, &[7]).flags(), moved(false, false, false));
        assert_eq!(cursor.advance(&plan, &[5]).flags(), moved(false, false, true));
    }
}
