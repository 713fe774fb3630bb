//! burn operations as the trace names them: a variant name (`Matmul`), an op kind for the
//! report (`matmul`), the first output's shape, and the tensor ids each reads and writes.
//!
//! Read from burn-ir's `OperationIr` on the thread that runs a fused block, so it must be
//! cheap: the variant name is read from the first characters of the operation's `Debug` form
//! (the formatter is stopped there), and a tensor id from its derived `Hash`
//! ([`id_number`]), burn-ir keeping the number private.

use std::fmt::{self, Write};
use std::hash::{Hash, Hasher};

use burn_ir::{OperationIr, TensorId, TensorIr};

use super::cost::OpCost;

/// The most operations of a block written into a kernel's `ops` argument.
pub(crate) const OPS_SHOWN: usize = 6;

/// One operation of a block that ran.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OpNote {
    /// The variant's name: `Matmul`, `Add`, `Conv2dWeightBackward`, `Reshape`.
    pub(crate) name: Box<str>,
    /// Its op kind ([`kind_of`]).
    pub(crate) kind: &'static str,
    /// The first output's shape, `[256, 128]`.
    pub(crate) shape: Option<Box<str>>,
    /// The ids of the tensors it reads.
    pub(crate) inputs: Vec<u64>,
    /// The ids of the tensors it writes.
    pub(crate) outputs: Vec<u64>,
    /// What it costs at least ([`super::cost`]).
    pub(crate) cost: OpCost,
}

impl OpNote {
    pub(crate) fn of(op: &OperationIr) -> OpNote {
        let name = variant_name(op);
        let kind = kind_of(&name);
        let shape = op.outputs().next().map(|t| shape_of(t).into_boxed_str());
        let cost = OpCost::of(op, &name, kind);
        OpNote {
            cost,
            name: name.into_boxed_str(),
            kind,
            shape,
            inputs: op.inputs().filter_map(tensor_id).collect(),
            outputs: op.outputs().filter_map(tensor_id).collect(),
        }
    }
}

/// Collects at most `N` bytes of a `Debug` form, then stops the formatter.
struct Prefix<const N: usize>(String);

impl<const N: usize> Write for Prefix<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = N.saturating_sub(self.0.len());
        if s.len() <= room {
            self.0.push_str(s);
            return Ok(());
        }
        let mut cut = room;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        self.0.push_str(&s[..cut]);
        Err(fmt::Error)
    }
}

/// The innermost variant name of an operation: `NumericFloat(F32, Add(BinaryOpIr { ..`
/// gives `Add`, `Module(Conv2d(..` gives `Conv2d`, `Drop(TensorIr { ..` gives `Drop`.
pub(crate) fn variant_name(op: &OperationIr) -> String {
    let mut prefix = Prefix::<96>(String::new());
    let _ = write!(prefix, "{op:?}");
    name_from_debug(&prefix.0)
}

fn name_from_debug(debug: &str) -> String {
    let mut name = "";
    for part in debug.split('(') {
        // `F32, Add`: the dtype comes before the variant.
        let word = part.rsplit(", ").next().unwrap_or(part).trim();
        let ident: &str = &word[..word.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(word.len())];
        let is_variant = ident.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            && !ident.ends_with("Ir")
            && !word.contains('{')
            && ident.len() == word.len();
        if !is_variant {
            break;
        }
        name = ident;
    }
    if name.is_empty() {
        "unknown".to_owned()
    } else {
        name.to_owned()
    }
}

/// The op kind of a variant, for the report's table by op kind.
pub(crate) fn kind_of(name: &str) -> &'static str {
    let has = |s: &str| name.contains(s);
    if name == "Matmul" || name.starts_with("Linear") {
        "matmul"
    } else if has("Conv") {
        "conv"
    } else if has("Pool") {
        "pool"
    } else if has("Embedding") {
        "embedding"
    } else if has("Norm") || has("Attention") || has("Softmax") {
        "normalisation/attention"
    } else if ["Sum", "Mean", "Prod", "Max", "Min", "Arg", "All", "Any", "Cum", "TopK", "Sort"]
        .iter()
        .any(|p| name.starts_with(p))
    {
        "reduce"
    } else if ["Select", "Gather", "Scatter", "Slice", "Mask", "Index"].iter().any(|p| name.starts_with(p)) {
        "index/select"
    } else if ["Reshape", "SwapDims", "Permute", "Flip", "Expand", "Unfold", "Cat", "RepeatDim", "Pad", "Cast"]
        .contains(&name)
    {
        "layout"
    } else if ["Empty", "Ones", "Zeros", "Full", "Random", "IntRandom", "FromData", "Init"]
        .iter()
        .any(|p| name.starts_with(p))
    {
        "init"
    } else if name == "Drop" {
        "drop"
    } else if has("AllReduce") || has("Broadcast") || has("Collective") {
        "collective"
    } else if name == "Custom" {
        "custom"
    } else {
        "elementwise"
    }
}

/// The op kind of a block: its heaviest kind, `(fused)` when it holds several operations.
pub(crate) fn block_kind(ops: &[OpNote]) -> String {
    const ORDER: [&str; 11] = [
        "matmul",
        "conv",
        "collective",
        "normalisation/attention",
        "pool",
        "embedding",
        "reduce",
        "index/select",
        "custom",
        "elementwise",
        "layout",
    ];
    let real: Vec<&OpNote> = ops.iter().filter(|o| o.kind != "drop").collect();
    let kind =
        ORDER.iter().find(|k| real.iter().any(|o| o.kind == **k)).copied().or_else(|| real.first().map(|o| o.kind));
    match (kind, real.len()) {
        (None, _) => "none".to_owned(),
        (Some(k), 0 | 1) => k.to_owned(),
        (Some(k), _) => format!("{k} (fused)"),
    }
}

/// `Matmul [256, 128]; Add [256, 128]; Relu; +3 more`: at most [`OPS_SHOWN`] operations, each
/// with its first output's shape when it differs from the one before.
pub(crate) fn compact(ops: &[OpNote]) -> String {
    let real: Vec<&OpNote> = ops.iter().filter(|o| o.kind != "drop").collect();
    let mut out = String::new();
    let mut last_shape: Option<&str> = None;
    for op in real.iter().take(OPS_SHOWN) {
        if !out.is_empty() {
            out.push_str("; ");
        }
        out.push_str(&op.name);
        if let Some(shape) = op.shape.as_deref().filter(|s| Some(*s) != last_shape) {
            out.push(' ');
            out.push_str(shape);
            last_shape = Some(shape);
        }
    }
    if real.len() > OPS_SHOWN {
        let _ = write!(out, "; +{} more", real.len() - OPS_SHOWN);
    }
    out
}

pub(crate) fn shape_of(t: &TensorIr) -> String {
    format!("{:?}", t.shape.as_slice())
}

/// The number of a tensor's id.
pub(crate) fn tensor_id(t: &TensorIr) -> Option<u64> {
    id_number(&t.id)
}

/// The number of a tensor id. burn-ir keeps it private; its derived `Hash` writes exactly that
/// number, so a hasher that keeps what it is given reads it without formatting (this runs for
/// every tensor of every noted operation). Its `Display` form, `TensorId(42)`, is the fallback
/// should the hash ever write something else.
pub(crate) fn id_number(id: &TensorId) -> Option<u64> {
    let mut kept = KeptNumber::default();
    id.hash(&mut kept);
    match kept {
        KeptNumber { number: Some(n), other: false } => Some(n),
        _ => displayed_number(id),
    }
}

/// The number in an id's `Display` form, `TensorId(42)`.
fn displayed_number(id: &impl fmt::Display) -> Option<u64> {
    let mut prefix = Prefix::<40>(String::new());
    let _ = write!(prefix, "{id}");
    prefix.0.trim_start_matches("TensorId(").trim_end_matches(')').parse().ok()
}

/// A hasher that keeps the one `u64` written to it (and says if anything else was).
#[derive(Default)]
struct KeptNumber {
    number: Option<u64>,
    other: bool,
}

impl Hasher for KeptNumber {
    fn finish(&self) -> u64 {
        self.number.unwrap_or_default()
    }

    fn write(&mut self, _: &[u8]) {
        self.other = true;
    }

    fn write_u64(&mut self, n: u64) {
        self.other |= self.number.replace(n).is_some();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &str, kind: &'static str, shape: Option<&str>) -> OpNote {
        OpNote {
            name: name.into(),
            kind,
            shape: shape.map(Into::into),
            inputs: vec![],
            outputs: vec![],
            cost: OpCost::default(),
        }
    }

    #[test]
    fn variant_names_come_from_the_debug_form() {
        assert_eq!(name_from_debug("NumericFloat(F32, Add(BinaryOpIr { lhs: TensorIr"), "Add");
        assert_eq!(name_from_debug("Float(F32, Matmul(MatmulOpIr { lhs"), "Matmul");
        assert_eq!(name_from_debug("Module(Conv2dWeightBackward(Conv2dWeightBackwardOpIr {"), "Conv2dWeightBackward");
        assert_eq!(name_from_debug("Drop(TensorIr { id: TensorId(3)"), "Drop");
        assert_eq!(name_from_debug("BaseFloat(Reshape(ShapeOpIr { input"), "Reshape");
        assert_eq!(name_from_debug("{ weird"), "unknown");
    }

    #[test]
    fn kinds_and_blocks() {
        assert_eq!(kind_of("Matmul"), "matmul");
        assert_eq!(kind_of("Conv2dWeightBackward"), "conv");
        assert_eq!(kind_of("SumDim"), "reduce");
        assert_eq!(kind_of("SelectAssign"), "index/select");
        assert_eq!(kind_of("Exp"), "elementwise");
        let ops = [
            op("Matmul", "matmul", Some("[256, 10]")),
            op("Add", "elementwise", Some("[256, 10]")),
            op("Drop", "drop", None),
        ];
        assert_eq!(block_kind(&ops), "matmul (fused)");
        assert_eq!(block_kind(&ops[..1]), "matmul");
        assert_eq!(block_kind(&ops[2..]), "none");
        assert_eq!(compact(&ops), "Matmul [256, 10]; Add");
        let many: Vec<OpNote> = (0..9).map(|i| op(&format!("Op{i}"), "elementwise", Some("[4]"))).collect();
        assert_eq!(compact(&many), "Op0 [4]; Op1; Op2; Op3; Op4; Op5; +3 more");
        assert_eq!(block_kind(&many), "elementwise (fused)");
    }

    #[test]
    fn ids_are_read_from_the_hash_as_from_display() {
        for n in [0, 1, 42, 1 << 40, u64::MAX] {
            let id = TensorId::new(n);
            assert_eq!(id_number(&id), Some(n));
            assert_eq!(displayed_number(&id), Some(n));
        }
        struct Shown(&'static str);
        impl fmt::Display for Shown {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.0)
            }
        }
        assert_eq!(displayed_number(&Shown("TensorId(42)")), Some(42));
        assert_eq!(displayed_number(&Shown("something else")), None);
    }
}
