//! The least work a fused block must do: FLOPs from each operation's shapes, bytes from the
//! tensors the block reads from outside and leaves behind.
//!
//! The FLOP rules (a multiply-add counts two):
//! - matmul and linear: `2·m·n·k` (`2 × output elements × the reduced dimension`), plus one
//!   per output element for a bias;
//! - a convolution, forward or either of its backward passes: `2 × output elements × the
//!   weight's elements per output channel` (the backward passes do the forward's work, over
//!   the output's gradient); a transposed convolution the same over its input;
//! - attention: `4 × batch × heads × query length × key length × head size` (the two
//!   matmuls);
//! - a reduction, a bias gradient, a pooling: one per element read (of its largest input);
//! - a normalisation: eight per element (mean, variance, normalise, scale and shift);
//! - an elementwise operation: one per output element;
//! - layout, indexing, initialisation and drops: none (their bytes still count).
//!
//! An operation without a rule (a loss with its own kernel, a custom operation, a collective)
//! is named in [`BlockWork::unpriced`]: its bytes count, its FLOPs do not.
//!
//! Bytes: the block's operations are walked in order; a tensor read that no earlier operation
//! of the block wrote is read from memory once; a tensor written that no later operation of
//! the block reads is written once. Intermediates (written and then read inside the block)
//! move nothing, which is what fusion is for; a tensor both left behind and read inside the
//! block counts once, as written. This is a floor: a kernel that re-reads a tile, pads, or
//! keeps an intermediate that a later block needs moves more.

use std::collections::HashSet;

use burn_ir::{OperationIr, TensorIr};
use steptrace::format::device::BlockWork;

use super::ops::tensor_id;

/// A tensor an operation reads or writes: its id and bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Touch {
    pub(crate) id: u64,
    pub(crate) bytes: f64,
}

/// One operation's part of a block's cost.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct OpCost {
    /// Its FLOPs; `None` when no rule prices it.
    pub(crate) flops: Option<f64>,
    /// The dtype of its output (`f32`).
    pub(crate) dtype: Option<&'static str>,
    pub(crate) reads: Vec<Touch>,
    pub(crate) writes: Vec<Touch>,
}

fn elements(t: &TensorIr) -> f64 {
    t.shape.as_slice().iter().map(|d| *d as f64).product()
}

fn last(t: &TensorIr) -> f64 {
    t.shape.as_slice().last().map_or(1.0, |d| *d as f64)
}

fn touch(t: &TensorIr) -> Option<Touch> {
    Some(Touch { id: tensor_id(t)?, bytes: elements(t) * t.dtype.size() as f64 })
}

/// `f32`, `f16`, `bf16`, ... of a tensor.
fn dtype_name(t: &TensorIr) -> &'static str {
    use burn::tensor::DType;
    match t.dtype {
        DType::F64 => "f64",
        DType::F32 | DType::Flex32 => "f32",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::I64 => "i64",
        DType::I32 => "i32",
        DType::I16 => "i16",
        DType::I8 => "i8",
        DType::U64 => "u64",
        DType::U32 => "u32",
        DType::U16 => "u16",
        DType::U8 => "u8",
        DType::Bool(_) => "bool",
        _ => "other",
    }
}

impl OpCost {
    /// The cost of `op`, whose variant is `name` and op kind `kind` (see [`super::ops`]).
    pub(crate) fn of(op: &OperationIr, name: &str, kind: &str) -> OpCost {
        let inputs: Vec<&TensorIr> = op.inputs().collect();
        let outputs: Vec<&TensorIr> = op.outputs().collect();
        OpCost {
            flops: flops(name, kind, &inputs, &outputs),
            dtype: outputs.first().map(|t| dtype_name(t)),
            reads: inputs.iter().filter_map(|t| touch(t)).collect(),
            writes: outputs.iter().filter_map(|t| touch(t)).collect(),
        }
    }
}

/// The FLOPs of one operation, by the rules of the module docs; `None` without a rule.
pub(crate) fn flops(name: &str, kind: &str, inputs: &[&TensorIr], outputs: &[&TensorIr]) -> Option<f64> {
    let out = outputs.first().map_or(0.0, |t| elements(t));
    let input = |i: usize| inputs.get(i).copied();
    let largest_input = inputs.iter().map(|t| elements(t)).fold(0.0, f64::max);
    // Elements of a weight per output channel (its first dimension).
    let per_channel = |w: &TensorIr| elements(w) / w.shape.as_slice().first().map_or(1.0, |d| (*d).max(1) as f64);
    let with_bias = |base: f64, has_bias: bool| base + if has_bias { out } else { 0.0 };
    let conv_pass = |i: usize| input(i).map(|w| 2.0 * out.max(0.0) * per_channel(w));
    match name {
        "Matmul" => input(0).map(|lhs| 2.0 * out * last(lhs)),
        "Linear" => input(0).map(|x| with_bias(2.0 * out * last(x), inputs.len() == 3)),
        // weight [in, out], output_grad [.., out] → x_grad [.., in]
        "LinearXBackward" => input(1).map(|grad| 2.0 * out * last(grad)),
        // x [.., in], output_grad [.., out] → weight_grad [in, out]: reduced over the rows.
        "LinearWeightBackward" => input(0).map(|x| 2.0 * out * (elements(x) / last(x).max(1.0))),
        "LinearBiasBackward" => Some(largest_input),
        "Conv1d" | "Conv2d" | "Conv3d" => conv_pass(1).map(|f| with_bias(f, inputs.len() == 3)),
        // [x, weight, output_grad]: the forward's multiply-adds, over the output's gradient.
        "Conv1dXBackward"
        | "Conv2dXBackward"
        | "Conv3dXBackward"
        | "Conv1dWeightBackward"
        | "Conv2dWeightBackward"
        | "Conv3dWeightBackward" => {
            let (w, grad) = (input(1)?, input(2)?);
            Some(2.0 * elements(grad) * per_channel(w))
        }
        "Conv1dBiasBackward" | "Conv2dBiasBackward" | "Conv3dBiasBackward" => Some(largest_input),
        // [x, weight [in, out/groups, k..]]: every input element meets a kernel's worth.
        "ConvTranspose1d" | "ConvTranspose2d" | "ConvTranspose3d" => {
            let (x, w) = (input(0)?, input(1)?);
            Some(with_bias(2.0 * elements(x) * per_channel(w), inputs.len() == 3))
        }
        // query [b, h, sq, d], key [b, h, sk, d].
        "Attention" => {
            let (q, k) = (input(0)?, input(1)?);
            let sk = k.shape.as_slice().iter().rev().nth(1).map_or(1.0, |d| *d as f64);
            Some(4.0 * elements(q) * sk)
        }
        _ => match kind {
            "reduce" | "pool" => Some(largest_input.max(out)),
            "normalisation/attention" if name.contains("Norm") => Some(8.0 * largest_input.max(out)),
            "layout" | "index/select" | "init" | "drop" | "embedding" => Some(0.0),
            "elementwise" if is_plain_elementwise(name) => Some(out),
            _ => None,
        },
    }
}

/// Whether an operation the op kinds call elementwise is one: the kinds' last resort takes
/// every name it does not know, and a few of those do far more than one FLOP per element.
fn is_plain_elementwise(name: &str) -> bool {
    const NOT: [&str; 8] = ["Loss", "Interpolate", "GridSample", "Deform", "Cross", "Fft", "Custom", "unknown"];
    !NOT.iter().any(|n| name.contains(n))
}

/// The block's minimum work, from its operations' costs in order; `names` are the
/// operations' variant names (for [`BlockWork::unpriced`]).
pub(crate) fn block_work<'a>(ops: impl Iterator<Item = (&'a str, &'a OpCost)>) -> BlockWork {
    let ops: Vec<(&str, &OpCost)> = ops.collect();
    let mut work = BlockWork::default();
    let mut heavy_dtype = None;
    let mut written_before: HashSet<u64> = HashSet::new();
    let mut read_from_outside: HashSet<u64> = HashSet::new();
    for (name, cost) in &ops {
        match cost.flops {
            Some(f) => work.flops += f,
            None if !work.unpriced.iter().any(|n| n == name) => work.unpriced.push((*name).to_owned()),
            None => {}
        }
        if heavy_dtype.is_none() && cost.flops.is_some_and(|f| f > 0.0) && is_heavy(name) {
            heavy_dtype = cost.dtype;
        }
        for r in &cost.reads {
            if !written_before.contains(&r.id) && read_from_outside.insert(r.id) {
                work.bytes += r.bytes;
            }
        }
        written_before.extend(cost.writes.iter().map(|w| w.id));
    }
    // A write counts when no later operation of the block reads it.
    let mut read_after: HashSet<u64> = HashSet::new();
    let mut counted: HashSet<u64> = HashSet::new();
    for (_, cost) in ops.iter().rev() {
        for w in &cost.writes {
            if !read_after.contains(&w.id) && counted.insert(w.id) {
                work.bytes += w.bytes;
            }
        }
        read_after.extend(cost.reads.iter().map(|r| r.id));
    }
    let first = ops.iter().find_map(|(_, c)| c.dtype);
    work.dtype = heavy_dtype.or(first).unwrap_or("f32").to_owned();
    work
}

/// Matmuls, linears, convolutions and attention: the operations whose dtype decides the
/// throughput a block is priced against.
fn is_heavy(name: &str) -> bool {
    name == "Matmul" || name.starts_with("Linear") || name.contains("Conv") || name == "Attention"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(flops: Option<f64>, reads: &[(u64, f64)], writes: &[(u64, f64)]) -> OpCost {
        let t = |v: &[(u64, f64)]| v.iter().map(|&(id, bytes)| Touch { id, bytes }).collect();
        OpCost { flops, dtype: Some("f32"), reads: t(reads), writes: t(writes) }
    }

    #[test]
    fn intermediates_move_nothing_and_each_tensor_counts_once() {
        // x(1) @ w(2) -> 3; 3 + b(4) -> 5; relu(5) -> 6; 6 is left behind.
        let ops = [
            ("Matmul", cost(Some(100.0), &[(1, 400.0), (2, 800.0)], &[(3, 200.0)])),
            ("Add", cost(Some(50.0), &[(3, 200.0), (4, 8.0)], &[(5, 200.0)])),
            ("Relu", cost(Some(50.0), &[(5, 200.0)], &[(6, 200.0)])),
        ];
        let w = block_work(ops.iter().map(|(n, c)| (*n, c)));
        assert_eq!(w.flops, 200.0);
        assert_eq!(w.bytes, 400.0 + 800.0 + 8.0 + 200.0);
        assert!(w.priced());
        // A tensor read twice from outside is read once.
        let ops = [
            ("Mul", cost(Some(10.0), &[(1, 40.0), (1, 40.0)], &[(2, 40.0)])),
            ("Add", cost(Some(10.0), &[(1, 40.0), (2, 40.0)], &[(3, 40.0)])),
        ];
        assert_eq!(block_work(ops.iter().map(|(n, c)| (*n, c))).bytes, 80.0);
    }

    #[test]
    fn operations_without_a_rule_are_named_and_their_bytes_still_count() {
        let ops =
            [("CtcLoss", cost(None, &[(1, 64.0)], &[(2, 4.0)])), ("CtcLoss", cost(None, &[(2, 4.0)], &[(3, 4.0)]))];
        let w = block_work(ops.iter().map(|(n, c)| (*n, c)));
        assert_eq!(w.unpriced, ["CtcLoss"]);
        assert_eq!((w.flops, w.bytes), (0.0, 68.0));
    }

    #[test]
    fn flop_rules_follow_the_shapes() {
        use burn::tensor::{DType, Shape};
        use burn_ir::{TensorId, TensorStatus};
        let t = |id: u64, dims: &[usize]| TensorIr {
            id: TensorId::new(id),
            shape: Shape::from(dims.to_vec()),
            status: TensorStatus::ReadOnly,
            dtype: DType::F32,
        };
        // [256, 784] @ [784, 128] -> [256, 128]
        let (x, w, out) = (t(1, &[256, 784]), t(2, &[784, 128]), t(3, &[256, 128]));
        assert_eq!(flops("Matmul", "matmul", &[&x, &w], &[&out]), Some(2.0 * 256.0 * 128.0 * 784.0));
        // The weight's gradient reduces over the 256 rows: the forward's FLOPs again.
        let (grad, wg) = (t(4, &[256, 128]), t(5, &[784, 128]));
        assert_eq!(flops("LinearWeightBackward", "matmul", &[&x, &grad], &[&wg]), Some(2.0 * 256.0 * 128.0 * 784.0));
        // conv2d: x [8, 3, 32, 32], weight [16, 3, 3, 3], out [8, 16, 30, 30].
        let (cx, cw, co) = (t(6, &[8, 3, 32, 32]), t(7, &[16, 3, 3, 3]), t(8, &[8, 16, 30, 30]));
        let conv = 2.0 * (8.0 * 16.0 * 30.0 * 30.0) * 27.0;
        assert_eq!(flops("Conv2d", "conv", &[&cx, &cw], &[&co]), Some(conv));
        let cg = t(9, &[8, 16, 30, 30]);
        assert_eq!(flops("Conv2dWeightBackward", "conv", &[&cx, &cw, &cg], &[&t(10, &[16, 3, 3, 3])]), Some(conv));
        assert_eq!(flops("Conv2dXBackward", "conv", &[&cx, &cw, &cg], &[&cx]), Some(conv));
        assert_eq!(flops("Exp", "elementwise", &[&out], &[&out]), Some(256.0 * 128.0));
        assert_eq!(flops("SumDim", "reduce", &[&x], &[&t(11, &[256, 1])]), Some(256.0 * 784.0));
        assert_eq!(flops("Reshape", "layout", &[&x], &[&t(12, &[784, 256])]), Some(0.0));
        assert_eq!(flops("CtcLoss", "elementwise", &[&x], &[&out]), None);
        assert_eq!(flops("Custom", "custom", &[&x], &[&out]), None);
        // The bytes of a tensor: its elements times its dtype's size.
        assert_eq!(touch(&x).map(|t| t.bytes), Some(256.0 * 784.0 * 4.0));
    }
}
