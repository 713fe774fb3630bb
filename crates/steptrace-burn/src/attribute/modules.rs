//! Layer names from the model's module tree, for kernels no `layer` span names.
//!
//! Each parameter of the model is a tensor with an id in burn-fusion's counter, and its path
//! in the module tree (`blocks.1.linear.weight`). A forward operation called in `forward`
//! itself (no layer span open) that reads a parameter belongs to the module holding it
//! (`blocks.1.linear`); one that reads no parameter belongs to the module that made its
//! inputs (an activation after a linear layer is that layer's). The operations so named give
//! their outputs the path `forward > blocks.1.linear`, as a layer span would have, so that
//! backward and optimizer operations are then named by the forward tensors they read
//! ([`Inference`](super::spans::Inference)) exactly as for spans.
//!
//! Explicit spans take precedence: an operation called inside a layer span keeps that span.
//!
//! The parameters' ids change at every update (the optimizer makes new tensors): the session
//! notes them when it is given the model ([`note_parameters`]), and a window keeps every id
//! it was told of.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use burn::module::{Module, Param};
use burn::prelude::Tensor;
use burn_dispatch::{BackendTensor, DispatchTensorKind};
use steptrace::format::names::FORWARD;

use super::ops::{id_number, OpNote};
use super::spans::SpanMap;
use crate::modules::{span_path as as_span_path, walk, ParamVisitor};

/// The parameters' ids and their modules' paths, as last noted.
pub(crate) type ParamPaths = Vec<(u64, Arc<str>)>;

/// The fusion id of a float tensor on a cubecl backend (autodiff or not).
pub(crate) fn fusion_id<const D: usize>(tensor: Tensor<D>) -> Option<u64> {
    kind_id(&tensor.into_dispatch().kind)
}

fn kind_id(kind: &DispatchTensorKind) -> Option<u64> {
    match kind {
        DispatchTensorKind::Cube(BackendTensor::Float(t)) => id_number(&t.id),
        DispatchTensorKind::Cube(BackendTensor::Autodiff(t)) => id_number(&t.primitive().id),
        DispatchTensorKind::Autodiff(inner) => kind_id(inner),
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// The paths the last visit gave, in visiting order: each module path as the visit spells it,
/// and its span path. A model's tree is the same at every step, so the next visit finds each
/// path here and makes no string.
static LAST_PATHS: Mutex<Vec<(String, Arc<str>)>> = Mutex::new(Vec::new());

/// Every float parameter of `model`: its fusion id and its module's path.
pub(crate) fn parameter_paths<M: Module>(model: &M) -> ParamPaths {
    struct Visit {
        found: ParamPaths,
        last: Vec<(String, Arc<str>)>,
        paths: Vec<(String, Arc<str>)>,
    }
    impl ParamVisitor for Visit {
        fn float<const D: usize>(&mut self, path: &str, param: &Param<Tensor<D>>) {
            // A lazy parameter not made yet is not made here (it would be, on this device).
            if !param.is_initialized() {
                return;
            }
            let Some(id) = fusion_id(param.val()) else { return };
            let entry = match self.last.get_mut(self.paths.len()) {
                Some((last, span_path)) if last.as_str() == path => (std::mem::take(last), Arc::clone(span_path)),
                _ => (path.to_owned(), Arc::from(as_span_path(path))),
            };
            self.found.push((id, Arc::clone(&entry.1)));
            self.paths.push(entry);
        }
    }
    let last = std::mem::take(&mut *super::lock(&LAST_PATHS));
    let mut visit = Visit { found: Vec::new(), last, paths: Vec::new() };
    walk(model, &mut visit);
    *super::lock(&LAST_PATHS) = visit.paths;
    visit.found
}

/// The modules two span paths share: `attn > query` and `attn > key` share `attn`.
fn common_module<'a>(a: &'a str, b: &str) -> &'a str {
    let mut end = 0;
    for ((at, x), y) in a
        .split(" > ")
        .scan(0, |pos, part| {
            let start = *pos;
            *pos += part.len() + 3;
            Some((start, part))
        })
        .zip(b.split(" > "))
    {
        if x != y {
            break;
        }
        end = at + x.len();
    }
    &a[..end]
}

/// The output of a forward operation named by the module tree, and how firmly: `true` for a
/// parameter or a view of one, `false` for what an operation of several inputs made.
type Tag = (Arc<str>, bool);

/// What the module tree names: the span path of each output of a forward operation called
/// outside every layer span (`forward > blocks.1 > inner`), and which of them were named only
/// through their inputs (not by a parameter they read).
#[derive(Debug, Default)]
pub(crate) struct Named {
    pub(crate) paths: HashMap<u64, Arc<str>>,
    pub(crate) through_inputs: std::collections::HashSet<u64>,
}

/// The span paths the module tree gives forward operations called outside every layer span.
///
/// An operation that reads a parameter (or a view of one) is the parameter's module's. One
/// that reads none takes the module its named inputs share (attention's product of queries
/// and keys is the attention block's); where they share none, the module of its most
/// recently made input: an activation after a linear layer is that layer's, and the sum of a
/// residual connection belongs to the branch it closes, not to the layer that started the
/// stream.
pub(crate) fn name_by_module(map: &SpanMap, ops: &[OpNote], params: &HashMap<u64, Arc<str>>) -> Named {
    let mut tags: HashMap<u64, Tag> = params.iter().map(|(id, module)| (*id, (Arc::clone(module), true))).collect();
    let mut out = Named::default();
    if params.is_empty() {
        return out;
    }
    for op in ops {
        if op.kind == "drop" {
            continue;
        }
        let in_forward = op.outputs.first().and_then(|id| map.span_path_of(*id)).is_some_and(|p| &**p == FORWARD);
        if !in_forward {
            continue;
        }
        // A parameter (or a view of one) names the operation; else the first input that is
        // named passes its module on.
        let firm = op.inputs.iter().filter_map(|id| tags.get(id)).find(|(_, firm)| *firm).cloned();
        let by_parameter = firm.is_some();
        let latest = || {
            let named: Vec<(u64, &Arc<str>)> =
                op.inputs.iter().filter_map(|id| tags.get(id).map(|(m, _)| (*id, m))).collect();
            let shared = named.iter().map(|(_, m)| &***m).reduce(common_module).filter(|c| !c.is_empty());
            match shared {
                Some(shared) if named.len() > 1 => Some((Arc::from(shared), false)),
                _ => named.iter().max_by_key(|(id, _)| *id).map(|(_, m)| (Arc::clone(m), false)),
            }
        };
        let Some((module, firm)) = firm.or_else(latest) else { continue };
        let firm = firm && op.inputs.len() == 1;
        let path: Arc<str> = Arc::from(format!("{FORWARD} > {module}"));
        for id in &op.outputs {
            tags.insert(*id, (Arc::clone(&module), firm));
            out.paths.insert(*id, Arc::clone(&path));
            if !by_parameter {
                out.through_inputs.insert(*id);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribute::spans::Boundary;
    use steptrace::format::names::{BACKWARD, TRAIN_STEP};

    fn op(name: &str, kind: &'static str, inputs: &[u64], out: u64) -> OpNote {
        OpNote {
            name: name.into(),
            kind,
            shape: None,
            inputs: inputs.to_vec(),
            outputs: vec![out],
            cost: Default::default(),
        }
    }

    fn boundary(stamp: u64, name: &str, enter: bool) -> Boundary {
        Boundary { stamp, thread: std::thread::current().id(), name: Arc::from(name), enter }
    }

    #[test]
    fn parameters_name_their_operations_and_what_follows_them() {
        // forward from 10 to 30 without a layer span, backward from 40.
        let map = SpanMap::new(&[
            boundary(5, TRAIN_STEP, true),
            boundary(10, FORWARD, true),
            boundary(30, FORWARD, false),
            boundary(40, BACKWARD, true),
        ]);
        let params: HashMap<u64, Arc<str>> =
            [(1, Arc::from("blocks.0 > linear")), (2, Arc::from("blocks.1 > linear")), (3, Arc::from("head"))]
                .into_iter()
                .collect();
        let ops = [
            // The input batch (0) reshaped: no parameter, no module.
            op("Reshape", "layout", &[0], 11),
            op("Matmul", "matmul", &[11, 1], 12),
            op("Relu", "elementwise", &[12], 13),
            // A view of a weight, then the matmul that reads it: the weight's module.
            op("SwapDims", "layout", &[2], 14),
            op("Matmul", "matmul", &[13, 14], 15),
            op("Add", "elementwise", &[15, 13], 16),
            op("Matmul", "matmul", &[16, 3], 17),
            // Backward: not renamed here.
            op("Matmul", "matmul", &[16, 3], 45),
        ];
        let named = name_by_module(&map, &ops, &params);
        let at = |id: u64| named.paths.get(&id).map(|p| p.to_string());
        assert_eq!(at(11), None);
        assert_eq!(at(12).as_deref(), Some("forward > blocks.0 > linear"));
        assert_eq!(at(13).as_deref(), Some("forward > blocks.0 > linear"));
        assert_eq!(at(15).as_deref(), Some("forward > blocks.1 > linear"));
        // The residual sum reads the stream (13, from block 0) and the branch (15, block 1),
        // which share no module: the branch it closes, the one made last.
        assert_eq!(at(16).as_deref(), Some("forward > blocks.1 > linear"));
        assert_eq!(at(17).as_deref(), Some("forward > head"));
        assert_eq!(at(45), None);
        // Named by a parameter, or only through their inputs.
        assert!(!named.through_inputs.contains(&12) && !named.through_inputs.contains(&15));
        assert!(named.through_inputs.contains(&13) && named.through_inputs.contains(&16));
        assert!(name_by_module(&map, &ops, &HashMap::new()).paths.is_empty());
    }

    #[test]
    fn an_operation_of_several_inputs_takes_the_module_they_share() {
        let map =
            SpanMap::new(&[boundary(5, TRAIN_STEP, true), boundary(10, FORWARD, true), boundary(30, FORWARD, false)]);
        let params: HashMap<u64, Arc<str>> =
            [(1, Arc::from("attn > query")), (2, Arc::from("attn > key")), (3, Arc::from("mlp"))].into_iter().collect();
        let ops = [
            op("Matmul", "matmul", &[0, 1], 11),
            op("Matmul", "matmul", &[0, 2], 12),
            op("Matmul", "matmul", &[11, 12], 13),
            op("Softmax", "elementwise", &[13], 14),
            op("Matmul", "matmul", &[14, 3], 15),
        ];
        let named = name_by_module(&map, &ops, &params);
        let at = |id: u64| named.paths.get(&id).map(|p| p.to_string());
        assert_eq!(at(13).as_deref(), Some("forward > attn"));
        assert_eq!(at(14).as_deref(), Some("forward > attn"));
        assert_eq!(at(15).as_deref(), Some("forward > mlp"));
        assert_eq!(common_module("a > b > c", "a > b > d"), "a > b");
        assert_eq!(common_module("blocks.0 > out", "blocks.1 > out"), "");
        assert_eq!(common_module("head", "head"), "head");
    }

    #[test]
    fn a_parameter_belongs_to_the_module_that_holds_it() {
        assert_eq!(as_span_path("blocks.1.linear.weight"), "blocks.1 > linear");
        assert_eq!(as_span_path("encoder.layers.0.attention.query.bias"), "encoder > layers.0 > attention > query");
        assert_eq!(as_span_path("head.weight"), "head");
        assert_eq!(as_span_path("weight"), "weight");
    }
}
