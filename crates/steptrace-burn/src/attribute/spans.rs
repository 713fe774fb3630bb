//! From tensor ids to the host spans that made them.
//!
//! burn-fusion registers an operation on its device thread, not on the thread that called it,
//! so the caller's span cannot be read when the operation is seen. What survives is the id of
//! each output tensor: burn takes it from one process-wide counter at the call, on the
//! calling thread. At every boundary of a steptrace span the stamp layer takes an id from the
//! same counter ([`Boundary`]); the span path in effect between two stamps is then the path of
//! every operation whose output id falls between them ([`SpanMap::path_of`]).
//!
//! Backward operations are called while `backward` runs; burn's autodiff does not say which
//! forward operation each one differentiates. What it does show is the tensors each reads:
//! the activations and parameters that forward saved. A backward (or optimizer) operation is
//! tied to the forward span that produced or read most of the forward tensors it reads
//! ([`Inference`]); one that reads none is named by its phase alone.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::thread::ThreadId;

use steptrace::format::device::{attribution, KernelAttribution};
use steptrace::format::names::{BACKWARD, FORWARD, OPTIMIZER, STEP_SPAN, TRAIN_STEP};

use super::cost;
use super::ops::{block_kind, compact, OpNote};

/// A steptrace span `name` entered (`enter`) or left when the counter stood at `stamp`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Boundary {
    pub(crate) stamp: u64,
    pub(crate) thread: ThreadId,
    pub(crate) name: Arc<str>,
    pub(crate) enter: bool,
}

/// The span path in effect from each stamp on, for the threads that ran the model.
#[derive(Debug, Default)]
pub(crate) struct SpanMap {
    points: Vec<(u64, Option<Arc<str>>)>,
    /// Paths the module tree gives tensors made in `forward` outside every layer span
    /// ([`modules`](super::modules)), by id.
    by_module: HashMap<u64, Arc<str>>,
    /// Tensors of `by_module` named only through their inputs, not by a parameter.
    through_inputs: HashSet<u64>,
    /// The paths of `by_module`, and the paths of the spans themselves.
    module_paths: HashSet<Arc<str>>,
    span_paths: HashSet<Arc<str>>,
}

/// Spans above the user's: a path starts below them.
fn is_wrapper(name: &str) -> bool {
    name == TRAIN_STEP || name.starts_with(STEP_SPAN)
}

impl SpanMap {
    /// The map of the threads that entered `forward`, `backward` or `optimizer` (other threads,
    /// such as prefetch threads, make tensors that are not the model's).
    pub(crate) fn new(boundaries: &[Boundary]) -> SpanMap {
        let is_phase = |b: &Boundary| b.enter && [FORWARD, BACKWARD, OPTIMIZER].contains(&&*b.name);
        let mut threads: Vec<ThreadId> = boundaries.iter().filter(|b| is_phase(b)).map(|b| b.thread).collect();
        threads.dedup();
        let mut ordered: Vec<&Boundary> = boundaries.iter().filter(|b| threads.contains(&b.thread)).collect();
        ordered.sort_by_key(|b| b.stamp);
        let mut stacks: HashMap<ThreadId, Vec<Arc<str>>> = HashMap::new();
        let mut points = Vec::with_capacity(ordered.len());
        for b in ordered {
            let stack = stacks.entry(b.thread).or_default();
            if is_wrapper(&b.name) {
                // Wrappers are not part of a path: their enter pushed nothing.
            } else if b.enter {
                stack.push(Arc::clone(&b.name));
            } else if let Some(at) = stack.iter().rposition(|s| *s == b.name) {
                // Left: the span and anything still open inside it (an exit never seen).
                stack.truncate(at);
            }
            let path: Option<Arc<str>> = (!stack.is_empty()).then(|| Arc::from(stack.join(" > ")));
            points.push((b.stamp, path));
        }
        let span_paths = points.iter().filter_map(|(_, p)| p.clone()).collect();
        SpanMap { points, span_paths, ..SpanMap::default() }
    }

    /// Whether any span boundary was stamped: without any, nothing can be placed in a span.
    pub(crate) fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Adds the paths the module tree gives tensors made outside every layer span.
    pub(crate) fn name_by_module(&mut self, named: super::modules::Named) {
        self.module_paths = named.paths.values().cloned().collect();
        self.by_module = named.paths;
        self.through_inputs = named.through_inputs;
    }

    /// Whether an operation's reads say which layer read them: a span's, or a module's that
    /// read a parameter (an operation named only through its inputs, a residual sum say,
    /// would claim the stream it reads for the wrong layer).
    fn reads_for_its_layer(&self, op: &OpNote) -> bool {
        !op.outputs.first().is_some_and(|id| self.through_inputs.contains(id))
    }

    /// The path in which the tensor with id `id` was made: its span's, or the module tree's
    /// where no layer span was open.
    pub(crate) fn path_of(&self, id: u64) -> Option<&Arc<str>> {
        self.by_module.get(&id).or_else(|| self.span_path_of(id))
    }

    /// The span path in effect when the tensor with id `id` was made, if inside a span.
    pub(crate) fn span_path_of(&self, id: u64) -> Option<&Arc<str>> {
        let i = self.points.partition_point(|(stamp, _)| *stamp <= id);
        i.checked_sub(1).and_then(|i| self.points[i].1.as_ref())
    }

    /// Whether the tensor's path came from the module tree.
    fn named_by_module(&self, id: u64) -> bool {
        self.by_module.contains_key(&id)
    }

    /// Whether `path` is one the module tree gave, and no span's.
    fn is_module_path(&self, path: &Arc<str>) -> bool {
        self.module_paths.contains(path) && !self.span_paths.contains(path)
    }

    /// The path of an operation: that of its first output.
    fn op_path(&self, op: &OpNote) -> Option<&Arc<str>> {
        op.outputs.first().and_then(|id| self.path_of(*id))
    }
}

/// The phase of a path: its first span.
pub(crate) fn phase_of(path: &str) -> &str {
    path.split(" > ").next().unwrap_or(path)
}

/// The deepest path two paths share.
fn common(a: &str, b: &str) -> Option<String> {
    let shared: Vec<&str> = a.split(" > ").zip(b.split(" > ")).take_while(|(x, y)| x == y).map(|(x, _)| x).collect();
    (!shared.is_empty()).then(|| shared.join(" > "))
}

/// Which forward span made, or read, each forward tensor.
#[derive(Debug, Default)]
pub(crate) struct Inference {
    /// Forward tensors by id: the spans of the forward operations that read them.
    readers: HashMap<u64, Vec<Arc<str>>>,
    /// Tensors made after the forward (backward, optimizer) by id: the forward span their
    /// making was named by, and how strongly (a view of one tensor keeps its source's
    /// strength; an operation of several inputs passes on the weakest, 1).
    lineage: HashMap<u64, (Arc<str>, u32)>,
}

impl Inference {
    /// From every operation of the window's blocks.
    pub(crate) fn new<'a>(map: &SpanMap, ops: impl Iterator<Item = &'a OpNote>) -> Inference {
        let ops: Vec<&OpNote> = ops.collect();
        let mut readers: HashMap<u64, Vec<Arc<str>>> = HashMap::new();
        for &op in &ops {
            let Some(path) = map
                .op_path(op)
                .filter(|p| phase_of(p) == FORWARD && p.contains(" > "))
                .filter(|_| map.reads_for_its_layer(op))
            else {
                continue;
            };
            for id in &op.inputs {
                let spans = readers.entry(*id).or_default();
                if !spans.contains(path) {
                    spans.push(Arc::clone(path));
                }
            }
        }
        let mut inference = Inference { readers, lineage: HashMap::new() };
        // In order: what a later operation is named by passes on to the tensors it makes, so
        // that a weight gradient that reads a transposed forward input (a view made during
        // backward) is still named by the layer that read that input.
        for &op in &ops {
            let later = map.op_path(op).is_some_and(|p| matches!(phase_of(p), BACKWARD | OPTIMIZER));
            if !later {
                continue;
            }
            if let Some((span, strength)) = inference.vote(map, op) {
                let strength = if op.inputs.len() == 1 { strength } else { 1 };
                for id in &op.outputs {
                    inference.lineage.insert(*id, (Arc::clone(&span), strength));
                }
            }
        }
        inference
    }

    /// The forward span (below `forward`) a later operation most likely differentiates or
    /// updates: the one its forward inputs name most, made there or read there; on a tie the
    /// one that read them (a weight's gradient reads the layer's input, made one layer up).
    fn forward_span(&self, map: &SpanMap, op: &OpNote) -> Option<Arc<str>> {
        self.vote(map, op).map(|(span, _)| span)
    }

    /// The winning span and its score: forward tensors made there count 2, read there 3;
    /// tensors made after the forward count what their lineage carries.
    fn vote(&self, map: &SpanMap, op: &OpNote) -> Option<(Arc<str>, u32)> {
        let mut votes: Vec<(Arc<str>, u32)> = Vec::new();
        let mut vote = |span: &Arc<str>, weight: u32| match votes.iter_mut().find(|(s, _)| s == span) {
            Some((_, n)) => *n += weight,
            None => votes.push((Arc::clone(span), weight)),
        };
        for id in &op.inputs {
            if let Some(made) = map.path_of(*id).filter(|p| phase_of(p) == FORWARD && p.contains(" > ")) {
                vote(made, 2);
            }
            for read in self.readers.get(id).into_iter().flatten() {
                vote(read, 3);
            }
            if let Some((span, strength)) = self.lineage.get(id) {
                vote(span, *strength);
            }
        }
        // On a tie, the first input's (a matmul's left side: a weight gradient's input).
        let best = votes.iter().map(|(_, n)| *n).max()?;
        votes.into_iter().find(|(_, n)| *n == best)
    }
}

/// What a block's kernels are attributed to.
/// What a tensor made from host data (its id, its shape) is attributed to: the span its id
/// falls in. Its op kind is `upload`.
pub(crate) fn attribute_upload(map: &SpanMap, id: Option<u64>, shape: &str) -> KernelAttribution {
    let mut out = KernelAttribution::default();
    out.op_kind = Some(UPLOAD_KIND.to_owned());
    out.ops = Some(format!("FromData {shape}"));
    match id.and_then(|id| map.path_of(id)) {
        Some(path) => {
            out.phase = Some(phase_of(path).to_owned());
            out.span = Some(path.to_string());
            out.attribution = attribution::CALLED.to_owned();
        }
        None => out.attribution = attribution::OUTSIDE_SPANS.to_owned(),
    }
    out
}

/// The op kind of a host-to-device copy of a tensor made from host data.
pub(crate) const UPLOAD_KIND: &str = "upload";

pub(crate) fn attribute_block(map: &SpanMap, inference: &Inference, block: u64, ops: &[OpNote]) -> KernelAttribution {
    let mut out = KernelAttribution::default();
    out.block = Some(block);
    out.op_kind = Some(block_kind(ops));
    out.ops = Some(compact(ops));
    out.work = Some(cost::block_work(ops.iter().filter(|o| o.kind != "drop").map(|o| (&*o.name, &o.cost))));
    let mut path: Option<String> = None;
    let mut by_spans = false;
    for op in ops.iter().filter(|o| o.kind != "drop") {
        if let Some(p) = map.op_path(op) {
            by_spans |= !op.outputs.first().is_some_and(|id| map.named_by_module(*id));
            path = Some(match path {
                None => p.to_string(),
                Some(so_far) => common(&so_far, p).unwrap_or_default(),
            });
        }
    }
    let Some(path) = path.filter(|p| !p.is_empty()) else {
        // Operations of different phases in one block, or of none.
        let mut phases: Vec<&str> = Vec::new();
        for p in ops.iter().filter_map(|o| map.op_path(o)) {
            if !phases.contains(&phase_of(p)) {
                phases.push(phase_of(p));
            }
        }
        if phases.is_empty() {
            out.attribution = attribution::OUTSIDE_SPANS.to_owned();
        } else {
            out.span = Some(phases.join(" + "));
            out.phase = Some(phases.join(" + "));
            out.attribution = attribution::ACROSS.to_owned();
        }
        return out;
    };
    let phase = phase_of(&path).to_owned();
    out.attribution = attribution::CALLED.to_owned();
    if (phase == BACKWARD || phase == OPTIMIZER) && !path.contains(" > ") {
        let mut inferred: Option<Arc<str>> = None;
        for op in ops.iter().filter(|o| o.kind != "drop") {
            if let Some(span) = inference.forward_span(map, op) {
                inferred = Some(match inferred {
                    None => span,
                    Some(so_far) => Arc::from(common(&so_far, &span).unwrap_or_else(|| FORWARD.to_owned())),
                });
            }
        }
        let from_modules = inferred.as_ref().is_some_and(|s| map.is_module_path(s));
        match inferred.as_deref().and_then(|s| s.strip_prefix("forward > ")) {
            Some(below) => {
                out.span = Some(format!("{phase} > {below}"));
                out.attribution =
                    if from_modules { attribution::MODULE_INFERRED } else { attribution::INFERRED }.to_owned();
            }
            None => {
                out.span = Some(path.clone());
                out.attribution = attribution::PHASE_ONLY.to_owned();
            }
        }
    } else {
        if !by_spans && path.contains(" > ") {
            out.attribution = attribution::MODULE.to_owned();
        }
        out.span = Some(path);
    }
    out.phase = Some(phase);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enter(stamp: u64, name: &str) -> Boundary {
        Boundary { stamp, thread: std::thread::current().id(), name: Arc::from(name), enter: true }
    }
    fn exit(stamp: u64, name: &str) -> Boundary {
        Boundary { stamp, thread: std::thread::current().id(), name: Arc::from(name), enter: false }
    }
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

    /// A step: forward with conv1 (ids 10..20) and conv2 (20..30), backward (40..60),
    /// optimizer (60..70).
    fn step() -> SpanMap {
        SpanMap::new(&[
            enter(5, TRAIN_STEP),
            enter(9, FORWARD),
            enter(10, "conv1"),
            exit(20, "conv1"),
            enter(20, "conv2"),
            exit(30, "conv2"),
            exit(31, FORWARD),
            enter(40, BACKWARD),
            exit(60, BACKWARD),
            enter(60, OPTIMIZER),
            // An exit never seen (`inner`): leaving `optimizer` closes it too.
            enter(66, "inner"),
            exit(70, OPTIMIZER),
            exit(71, TRAIN_STEP),
        ])
    }

    #[test]
    fn ids_fall_in_the_spans_they_were_made_in() {
        let map = step();
        assert_eq!(map.path_of(12).map(|p| &**p), Some("forward > conv1"));
        assert_eq!(map.path_of(25).map(|p| &**p), Some("forward > conv2"));
        assert_eq!(map.path_of(30).map(|p| &**p), Some("forward"));
        assert_eq!(map.path_of(50).map(|p| &**p), Some("backward"));
        assert_eq!(map.path_of(67).map(|p| &**p), Some("optimizer > inner"));
        assert_eq!(map.path_of(3), None);
        assert_eq!(map.path_of(35), None);
        assert_eq!(map.path_of(80), None);
    }

    #[test]
    fn blocks_take_their_common_span_and_backward_names_the_forward_layer() {
        let map = step();
        // Forward: conv1 reads the batch (1) and its weight (2), makes 11; conv2 reads 11 and
        // its weight (3), makes 21.
        let forward = [op("Conv2d", "conv", &[1, 2], 11), op("Conv2d", "conv", &[11, 3], 21)];
        // conv2's weight gradient reads 11 (made by conv1, read by conv2) and a gradient.
        let grad = op("Matmul", "matmul", &[11, 45], 46);
        let all: Vec<OpNote> = forward.iter().cloned().chain([grad.clone()]).collect();
        let inference = Inference::new(&map, all.iter());
        let a = attribute_block(&map, &inference, 0, &forward[..1]);
        assert_eq!((a.span.as_deref(), a.phase.as_deref()), (Some("forward > conv1"), Some("forward")));
        assert_eq!(a.attribution, attribution::CALLED);
        let both = attribute_block(&map, &inference, 1, &forward);
        assert_eq!(both.span.as_deref(), Some("forward"));
        let b = attribute_block(&map, &inference, 2, std::slice::from_ref(&grad));
        assert_eq!((b.span.as_deref(), b.attribution.as_str()), (Some("backward > conv2"), attribution::INFERRED));
        assert_eq!(b.op_kind.as_deref(), Some("matmul"));
        // conv1's weight gradient reads the batch, read in forward by conv1 only.
        let g1 = op("Matmul", "matmul", &[1, 47], 48);
        assert_eq!(attribute_block(&map, &inference, 3, &[g1]).span.as_deref(), Some("backward > conv1"));
        // The optimizer's update of conv2's weight reads it.
        let update = op("Sub", "elementwise", &[3, 46], 65);
        assert_eq!(attribute_block(&map, &inference, 4, &[update]).span.as_deref(), Some("optimizer > conv2"));
        // A weight gradient that reads a view made during backward (conv2's input, transposed)
        // is named through the view; what the gradient makes passes the name on, weakly.
        let view = op("SwapDims", "reshape", &[11], 52);
        let through = op("Matmul", "matmul", &[52, 45], 53);
        let chained = op("Mul", "elementwise", &[53, 45], 54);
        let ops: Vec<OpNote> = forward.iter().cloned().chain([view, through.clone(), chained.clone()]).collect();
        let lineage = Inference::new(&map, ops.iter());
        let t = attribute_block(&map, &lineage, 8, std::slice::from_ref(&through));
        assert_eq!((t.span.as_deref(), t.attribution.as_str()), (Some("backward > conv2"), attribution::INFERRED));
        let c = attribute_block(&map, &lineage, 9, std::slice::from_ref(&chained));
        assert_eq!(c.span.as_deref(), Some("backward > conv2"));
        // Reading only gradients: the phase alone.
        let pure = op("Mul", "elementwise", &[45], 50);
        let p = attribute_block(&map, &inference, 5, &[pure]);
        assert_eq!((p.span.as_deref(), p.attribution.as_str()), (Some("backward"), attribution::PHASE_ONLY));
        // Fused across two phases.
        let across = [op("Mul", "elementwise", &[], 30), op("Add", "elementwise", &[], 50)];
        let x = attribute_block(&map, &inference, 7, &across);
        assert_eq!((x.span.as_deref(), x.attribution.as_str()), (Some("forward + backward"), attribution::ACROSS));
        // Made outside every span.
        let loose = op("Ones", "init", &[], 80);
        assert_eq!(attribute_block(&map, &inference, 6, &[loose]).attribution, attribution::OUTSIDE_SPANS);
    }
}
