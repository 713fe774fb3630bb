//! Which op, which layer: kernel device time per step by burn op kind, by the span path its
//! operations were called in (a tree, with self and total time), and by phase, from the
//! attribution steptrace writes into each kernel's arguments
//! ([`KernelAttribution`](crate::format::device::KernelAttribution)).
//!
//! A kernel is attributed when it is tied to a span path ([`is_tied_to_span`]): one whose
//! operations were called outside every span has an op (it counts by op kind) but no layer, and
//! is itemised with what is not attributed. The share of kernel time that is attributed is
//! given, and what is not is itemised by reason. Traces without attribution (torch.profiler's,
//! steptrace's before it) give `None`.

use std::collections::BTreeMap;

use serde::Serialize;

use super::events::WorkKind;
use crate::format::device::attribution::{
    is_attributed, is_inferred, is_named_by_module, is_tied_to_span, OUTSIDE_SPANS,
};
use crate::read::analysis::loaded::Loaded;
use crate::read::analysis::steps::StepRow;

/// The reason a kernel whose operations were called outside every span is not attributed.
const OUTSIDE_SPANS_REASON: &str = "called outside steptrace's spans: no span was open when its operations were called";

/// Kernel device time by op kind, span path and phase, per counted step.
#[derive(Clone, Debug, Serialize)]
pub struct AttributionView {
    /// Counted steps.
    pub steps: usize,
    /// Kernel time per step, ms (a sum of kernel durations).
    pub kernel_ms_per_step: f64,
    /// Attributed kernel time per step, ms: kernels tied to a span path (a phase, a layer).
    pub attributed_ms_per_step: f64,
    /// Attributed over all kernel time (0 to 1).
    pub attributed_share: f64,
    /// By op kind (`matmul`, `conv`, `elementwise (fused)`), heaviest first: every kernel tied
    /// to a burn op, those called outside every span included.
    pub by_op_kind: Vec<TimeRow>,
    /// By span path, as a tree in depth-first order (parents before children, heaviest
    /// sibling first); attributed kernels only.
    pub by_span: Vec<DeviceSpanRow>,
    /// By phase (`forward`, `backward`, `optimizer`, ...), heaviest first; attributed kernels
    /// only.
    pub by_phase: Vec<TimeRow>,
    /// Kernel time not attributed, by reason, heaviest first (kernels called outside every
    /// span among them).
    pub unattributed: Vec<TimeRow>,
    /// Kernel time of backward and optimizer kernels tied to a forward layer by the tensors
    /// they read (an inference, whether the layer is named by a span or by the module tree),
    /// per step, ms.
    pub inferred_ms_per_step: f64,
    /// Attributed kernel time whose layer is named by steptrace's spans, per step, ms.
    pub named_by_spans_ms_per_step: f64,
    /// Attributed kernel time whose layer is named from the model's module tree (the
    /// parameters its operations read, or the forward tensors so named), per step, ms. With
    /// [`named_by_spans_ms_per_step`](Self::named_by_spans_ms_per_step) it makes up
    /// [`attributed_ms_per_step`](Self::attributed_ms_per_step).
    pub named_by_module_ms_per_step: f64,
    /// How kernels were timed, when not by CUPTI (`timestamp queries`), with their time.
    pub timing: Vec<TimeRow>,
}

/// Device time of one group.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TimeRow {
    /// The group.
    pub name: String,
    /// Kernel time per step, ms.
    pub ms_per_step: f64,
    /// Over all kernel time.
    pub share: f64,
    /// Kernels per step.
    pub kernels_per_step: f64,
}

/// One span path of the tree.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DeviceSpanRow {
    /// The whole path: `backward > conv2`.
    pub path: String,
    /// Its last span: `conv2`.
    pub name: String,
    /// 0 for a phase.
    pub depth: usize,
    /// Kernel time attributed to this path itself, per step, ms.
    pub self_ms: f64,
    /// Self plus every path below it, per step, ms.
    pub total_ms: f64,
    /// Total over all kernel time.
    pub share: f64,
    /// Kernels per step, this path and below.
    pub kernels_per_step: f64,
}

#[derive(Default)]
struct Sum {
    us: f64,
    n: f64,
}

pub(crate) fn attribution_view(loaded: &[Loaded], steps: &[(usize, &StepRow)]) -> Option<AttributionView> {
    let (mut kinds, mut spans, mut phases, mut missing, mut timing) =
        (BTreeMap::new(), BTreeMap::new(), BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    let (mut total, mut attributed, mut inferred, mut by_module, mut any) = (0.0, 0.0, 0.0, 0.0, false);
    let add = |map: &mut BTreeMap<String, Sum>, key: &str, us: f64| {
        let s = map.entry(key.to_owned()).or_default();
        s.us += us;
        s.n += 1.0;
    };
    for (i, step) in steps {
        for w in loaded[*i].device.starting_in(step.start, step.end).filter(|w| w.kind == WorkKind::Kernel) {
            let us = w.end - w.start;
            total += us;
            let Some(a) = &w.attributed else {
                add(&mut missing, "not attributed: the trace carries no attribution for it", us);
                continue;
            };
            any = true;
            if let Some(t) = &a.timing {
                add(&mut timing, t, us);
            }
            if !is_attributed(&a.how) {
                add(&mut missing, &a.how, us);
                continue;
            }
            add(&mut kinds, a.op_kind.as_deref().unwrap_or("unknown"), us);
            let Some(span) = a.span.as_deref().filter(|_| is_tied_to_span(&a.how)) else {
                if a.how == OUTSIDE_SPANS {
                    add(&mut missing, OUTSIDE_SPANS_REASON, us);
                } else {
                    add(&mut missing, &format!("{}: the trace names no span path for it", a.how), us);
                }
                continue;
            };
            attributed += us;
            if is_inferred(&a.how) {
                inferred += us;
            }
            if is_named_by_module(&a.how) {
                by_module += us;
            }
            add(&mut phases, a.phase.as_deref().unwrap_or_else(|| phase_of(span)), us);
            add(&mut spans, span, us);
        }
    }
    if !any || steps.is_empty() {
        return None;
    }
    let n_steps = steps.len() as f64;
    let rows = |map: BTreeMap<String, Sum>| -> Vec<TimeRow> {
        let mut rows: Vec<TimeRow> = map
            .into_iter()
            .map(|(name, s)| TimeRow {
                name,
                ms_per_step: s.us / 1000.0 / n_steps,
                share: if total > 0.0 { s.us / total } else { 0.0 },
                kernels_per_step: s.n / n_steps,
            })
            .collect();
        rows.sort_by(|a, b| b.ms_per_step.total_cmp(&a.ms_per_step).then_with(|| a.name.cmp(&b.name)));
        rows
    };
    Some(AttributionView {
        steps: steps.len(),
        kernel_ms_per_step: total / 1000.0 / n_steps,
        attributed_ms_per_step: attributed / 1000.0 / n_steps,
        attributed_share: if total > 0.0 { attributed / total } else { 0.0 },
        by_op_kind: rows(kinds),
        by_span: span_tree(&spans, total, n_steps),
        by_phase: rows(phases),
        unattributed: rows(missing),
        inferred_ms_per_step: inferred / 1000.0 / n_steps,
        named_by_spans_ms_per_step: (attributed - by_module) / 1000.0 / n_steps,
        named_by_module_ms_per_step: by_module / 1000.0 / n_steps,
        timing: rows(timing),
    })
}

/// The phase of a span path: its first span (`backward` of `backward > conv2`).
fn phase_of(path: &str) -> &str {
    path.split(" > ").next().unwrap_or(path)
}

/// The span paths as a tree: every prefix of a path is a node, its self time what was
/// attributed to it exactly, its total what was attributed to it or below.
fn span_tree(paths: &BTreeMap<String, Sum>, total_us: f64, n_steps: f64) -> Vec<DeviceSpanRow> {
    #[derive(Default)]
    struct Node {
        self_us: f64,
        total_us: f64,
        n: f64,
        children: BTreeMap<String, Node>,
    }
    let mut root = Node::default();
    for (path, s) in paths {
        let mut node = &mut root;
        for part in path.split(" > ") {
            node = node.children.entry(part.to_owned()).or_default();
            node.total_us += s.us;
            node.n += s.n;
        }
        node.self_us += s.us;
    }
    fn walk(node: &Node, prefix: &str, depth: usize, total_us: f64, n_steps: f64, out: &mut Vec<DeviceSpanRow>) {
        let mut children: Vec<(&String, &Node)> = node.children.iter().collect();
        children.sort_by(|a, b| b.1.total_us.total_cmp(&a.1.total_us).then_with(|| a.0.cmp(b.0)));
        for (name, child) in children {
            let path = if prefix.is_empty() { name.clone() } else { format!("{prefix} > {name}") };
            out.push(DeviceSpanRow {
                path: path.clone(),
                name: name.clone(),
                depth,
                self_ms: child.self_us / 1000.0 / n_steps,
                total_ms: child.total_us / 1000.0 / n_steps,
                share: if total_us > 0.0 { child.total_us / total_us } else { 0.0 },
                kernels_per_step: child.n / n_steps,
            });
            walk(child, &path, depth + 1, total_us, n_steps, out);
        }
    }
    let mut out = Vec::new();
    walk(&root, "", 0, total_us, n_steps, &mut out);
    out
}

/// What one kernel name's calls ran for: its calls in the counted steps grouped by span path
/// and operations, heaviest first.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct KernelOrigin {
    pub(crate) name: String,
    /// The span path its operations were called in; `None` when they were called outside
    /// every span (the kernel has an op but no layer).
    pub(crate) span: Option<String>,
    pub(crate) ops: Option<String>,
    pub(crate) op_kind: Option<String>,
    /// Kernel time, µs, over the counted steps.
    pub(crate) us: f64,
    pub(crate) calls: usize,
    /// The most frequent grid.
    pub(crate) grid: Option<[u64; 3]>,
}

impl KernelOrigin {
    /// Where its operations were called: ``in `backward > conv2` `` or `outside steptrace's
    /// spans`.
    pub(crate) fn place(&self) -> String {
        self.span.as_deref().map_or_else(
            || "outside steptrace's spans".to_owned(),
            |span| format!("in `{}`", crate::display::label(span, crate::display::LABEL_CHARS)),
        )
    }
}

/// The kernels of the counted steps grouped by name, span path and operations (`name` alone
/// when given), heaviest first: every kernel tied to a burn op, with a span path only where it
/// is tied to one ([`is_tied_to_span`]). Empty when no kernel carries an attribution.
pub(crate) fn origins(loaded: &[Loaded], steps: &[(usize, &StepRow)], name: Option<&str>) -> Vec<KernelOrigin> {
    /// Name, span path and operations.
    type Key = (String, Option<String>, Option<String>);
    /// Op kind, kernel time (µs) and the grid of each call.
    type Group = (Option<String>, f64, Vec<Option<[u64; 3]>>);
    let mut groups: BTreeMap<Key, Group> = BTreeMap::new();
    for (i, step) in steps {
        for w in loaded[*i].device.starting_in(step.start, step.end).filter(|w| w.kind == WorkKind::Kernel) {
            let Some(a) = w.attributed.as_ref().filter(|a| is_attributed(&a.how)) else { continue };
            if name.is_some_and(|n| n != w.name) {
                continue;
            }
            let span = a.span.clone().filter(|_| is_tied_to_span(&a.how));
            let g =
                groups.entry((w.name.to_string(), span, a.ops.clone())).or_insert((a.op_kind.clone(), 0.0, Vec::new()));
            g.1 += w.end - w.start;
            g.2.push(w.grid);
        }
    }
    let mut out: Vec<KernelOrigin> = groups
        .into_iter()
        .map(|((name, span, ops), (op_kind, us, grids))| {
            let mut count: BTreeMap<[u64; 3], usize> = BTreeMap::new();
            for g in grids.iter().flatten() {
                *count.entry(*g).or_default() += 1;
            }
            let grid = count.into_iter().max_by_key(|(_, n)| *n).map(|(g, _)| g);
            KernelOrigin { name, span, ops, op_kind, us, calls: grids.len(), grid }
        })
        .collect();
    out.sort_by(|a, b| b.us.total_cmp(&a.us));
    out
}

#[cfg(test)]
mod tests {
    use super::KernelOrigin;

    #[test]
    fn a_place_from_the_trace_is_one_escaped_bounded_line() {
        let origin = |span: Option<String>| KernelOrigin {
            name: "k".into(),
            span,
            ops: None,
            op_kind: None,
            us: 1.0,
            calls: 1,
            grid: None,
        };
        assert_eq!(origin(Some("forward > fc1".into())).place(), "in `forward > fc1`");
        let forged = origin(Some(format!("fc1`\n== Hypotheses\n{}", "x".repeat(100_000)))).place();
        assert!(forged.starts_with("in `fc1`\\n== Hypotheses\\n") && !forged.contains('\n'), "{forged}");
        assert!(forged.ends_with(" bytes)`") && forged.len() < 300, "{}", forged.len());
        assert_eq!(origin(None).place(), "outside steptrace's spans");
    }
}
