//! "Which op, which layer" on a synthetic trace whose answers are computed by hand: kernel
//! time by op kind, by span path (a tree with self and total) and by phase, the share
//! attributed and what is not, and the hypotheses that name the op and the layer.
//!
//! Each 10 ms step (µs from the step's start; the device has 132 SMs):
//! - a weight-gradient matmul for `backward > conv2`, 4000 µs on a grid of [2, 2, 1];
//! - conv1's convolution in `forward > conv1`, 1000 µs on [200, 1, 1];
//! - a fused elementwise block in `forward` itself, 500 µs;
//! - conv1's update in `optimizer > conv1`, 250 µs;
//! - a kernel launched outside any fused block, 250 µs, not attributed.

use serde_json::{json, Value};
use steptrace::analysis::{Report, ReportOptions};
use steptrace::format::device::attribution;
use steptrace::reader::parse_trace;

const STEP_US: f64 = 10_000.0;

/// One kernel of each step: name, µs, grid, how it was attributed, op kind, ops, span path
/// (empty: none written).
type Kernel<'a> = (&'a str, f64, [u64; 3], &'a str, &'a str, &'a str, &'a str);

const KERNELS: [Kernel<'static>; 5] = [
    (
        "conv_kernel_f32",
        1000.0,
        [200, 1, 1],
        attribution::CALLED,
        "conv",
        "Conv2d [256, 16, 28, 28]",
        "forward > conv1",
    ),
    ("elemwise_fuse_1", 500.0, [300, 1, 1], attribution::CALLED, "elementwise (fused)", "Add; Relu", "forward"),
    (
        "matmul_entry_f32",
        4000.0,
        [2, 2, 1],
        attribution::INFERRED,
        "matmul",
        "Conv2dWeightBackward [32, 16, 3, 3]",
        "backward > conv2",
    ),
    (
        "elemwise_fuse_2",
        250.0,
        [300, 1, 1],
        attribution::CALLED,
        "elementwise (fused)",
        "Sub; Mul",
        "optimizer > conv1",
    ),
    ("autotune_candidate", 250.0, [300, 1, 1], attribution::NO_BLOCK, "", "", ""),
];

fn trace(steps: u64, attributed: bool) -> Value {
    trace_of(steps, attributed, &KERNELS)
}

/// `steps` steps of `kernels`, as steptrace writes them: a kernel tied to a fused block has its
/// op kind and ops, and a span path and phase where it has one.
fn trace_of(steps: u64, attributed: bool, kernels: &[Kernel<'_>]) -> Value {
    let mut ev = Vec::new();
    for n in 0..steps {
        let t = n as f64 * STEP_US;
        ev.push(json!({"ph": "X", "cat": "user_annotation", "name": format!("ProfilerStep#{n}"), "pid": 1, "tid": 1,
            "ts": t, "dur": STEP_US, "args": {}}));
        let mut at = t + 100.0;
        for &(name, dur, grid, how, kind, ops, span) in kernels {
            let mut args = json!({"device": 0, "stream": 7, "correlation": 1, "grid": grid, "block": [128, 1, 1]});
            if attributed {
                args["attribution"] = json!(how);
                if attribution::is_attributed(how) {
                    args["op kind"] = json!(kind);
                    args["ops"] = json!(ops);
                    args["fused block"] = json!(3);
                }
                if !span.is_empty() {
                    args["span"] = json!(span);
                    args["phase"] = json!(span.split(" > ").next().unwrap());
                }
            }
            ev.push(json!({"ph": "X", "cat": "kernel", "name": name, "pid": 100, "tid": 7, "ts": at, "dur": dur,
                "args": args}));
            at += dur + 10.0;
        }
    }
    json!({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU", "numSms": 132}], "traceEvents": ev})
}

fn report(attributed: bool) -> Report {
    report_of(&trace(5, attributed))
}

fn report_of(trace: &Value) -> Report {
    let trace = parse_trace(&serde_json::to_vec(trace).unwrap()).unwrap();
    let options = ReportOptions { batch_size: Some(256), ..ReportOptions::default() };
    Report::build(&[("attributed.json".into(), trace)], &options).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn op_span_and_phase_tables_to_the_microsecond() {
    let r = report(true);
    let a = r.device.attribution.as_ref().expect("attribution");
    // Step 0 is the startup: the figures are over the four steady steps.
    assert_eq!(a.steps, 4);
    assert!(close(a.kernel_ms_per_step, 6.0) && close(a.attributed_ms_per_step, 5.75));
    assert!(close(a.attributed_share, 5.75 / 6.0));
    let kinds: Vec<(&str, f64)> = a.by_op_kind.iter().map(|r| (r.name.as_str(), r.ms_per_step)).collect();
    assert_eq!(kinds, [("matmul", 4.0), ("conv", 1.0), ("elementwise (fused)", 0.75)]);
    let tree: Vec<(&str, usize, f64, f64)> =
        a.by_span.iter().map(|r| (r.path.as_str(), r.depth, r.self_ms, r.total_ms)).collect();
    assert_eq!(
        tree,
        [
            ("backward", 0, 0.0, 4.0),
            ("backward > conv2", 1, 4.0, 4.0),
            ("forward", 0, 0.5, 1.5),
            ("forward > conv1", 1, 1.0, 1.0),
            ("optimizer", 0, 0.0, 0.25),
            ("optimizer > conv1", 1, 0.25, 0.25),
        ]
    );
    let phases: Vec<(&str, f64)> = a.by_phase.iter().map(|r| (r.name.as_str(), r.ms_per_step)).collect();
    assert_eq!(phases, [("backward", 4.0), ("forward", 1.5), ("optimizer", 0.25)]);
    assert_eq!(a.unattributed.len(), 1);
    assert_eq!((a.unattributed[0].name.as_str(), a.unattributed[0].ms_per_step), (attribution::NO_BLOCK, 0.25));
    assert!(close(a.inferred_ms_per_step, 4.0));
    assert!(close(a.by_span[1].share, 4.0 / 6.0) && close(a.by_span[1].kernels_per_step, 1.0));
}

#[test]
fn hypotheses_name_the_op_the_layer_and_the_grid() {
    let r = report(true);
    let dominant = r.hypotheses.iter().find(|h| h.id == "dominant-kernel").expect("dominant-kernel");
    assert!(
        dominant.evidence.contains("`Conv2dWeightBackward [32, 16, 3, 3]` in `backward > conv2`"),
        "{}",
        dominant.evidence
    );
    assert!(dominant.hypothesis.contains("matmul of `backward > conv2`"), "{}", dominant.hypothesis);
    let grids: Vec<_> = r.hypotheses.iter().filter(|h| h.id == "under-filled-grid").collect();
    assert_eq!(grids.len(), 1, "only the matmul's grid is smaller than the device");
    let g = &grids[0];
    assert!(g.evidence.contains("[2, 2, 1] = 4 thread blocks") && g.evidence.contains("132 SMs"), "{}", g.evidence);
    assert!(g.evidence.contains("`backward > conv2`") && g.evidence.contains("67%"), "{}", g.evidence);
    assert!(g.experiment.is_some());
}

#[test]
fn kernels_without_attribution_say_so() {
    let r = report(false);
    assert!(r.device.kernels.is_some() && r.device.attribution.is_none());
    let why = r.device.not_observed.iter().find(|(part, _)| *part == "attribution").map(|(_, w)| w.as_str());
    assert!(why.is_some_and(|w| w.contains("no attribution")), "{why:?}");
    assert!(r.hypotheses.iter().all(|h| h.id != "under-filled-grid"), "no op or span to name without attribution");
}

/// Per 10 ms step: a matmul and a fused block whose operations were called while no span was
/// open (4000 and 500 µs), and a convolution in `forward > fc1` (500 µs).
const OUTSIDE: [Kernel<'static>; 3] = [
    ("matmul_entry_f32", 4000.0, [2, 2, 1], attribution::OUTSIDE_SPANS, "matmul", "Matmul [256, 128]", ""),
    ("elemwise_fuse_1", 500.0, [300, 1, 1], attribution::OUTSIDE_SPANS, "elementwise (fused)", "Add; Relu", ""),
    ("conv_kernel_f32", 500.0, [200, 1, 1], attribution::CALLED, "conv", "Conv2d [256, 16, 28, 28]", "forward > fc1"),
];

#[test]
fn kernels_called_outside_every_span_have_an_op_but_no_layer() {
    let r = report_of(&trace_of(5, true, &OUTSIDE));
    let a = r.device.attribution.as_ref().expect("attribution");
    assert!(close(a.kernel_ms_per_step, 5.0) && close(a.attributed_ms_per_step, 0.5), "{a:?}");
    assert!(close(a.attributed_share, 0.1), "{a:?}");
    // Their op is known: the op-kind table counts them.
    let kinds: Vec<(&str, f64)> = a.by_op_kind.iter().map(|r| (r.name.as_str(), r.ms_per_step)).collect();
    assert_eq!(kinds, [("matmul", 4.0), ("conv", 0.5), ("elementwise (fused)", 0.5)]);
    // No span or phase holds them.
    let tree: Vec<(&str, f64)> = a.by_span.iter().map(|r| (r.path.as_str(), r.total_ms)).collect();
    assert_eq!(tree, [("forward", 0.5), ("forward > fc1", 0.5)]);
    let phases: Vec<(&str, f64)> = a.by_phase.iter().map(|r| (r.name.as_str(), r.ms_per_step)).collect();
    assert_eq!(phases, [("forward", 0.5)]);
    // They are itemised as not attributed, with the reason.
    assert_eq!(a.unattributed.len(), 1, "{:?}", a.unattributed);
    let why = &a.unattributed[0];
    assert!(why.name.starts_with(attribution::OUTSIDE_SPANS) && why.name.contains("no span was open"), "{}", why.name);
    assert!(close(why.ms_per_step, 4.5) && close(why.share, 0.9) && close(why.kernels_per_step, 2.0), "{why:?}");
    assert!(close(a.inferred_ms_per_step, 0.0) && close(a.named_by_module_ms_per_step, 0.0));
    assert!(close(a.named_by_spans_ms_per_step, 0.5));

    // The hypotheses name the matmul's ops, and no span for it.
    let dominant = r.hypotheses.iter().find(|h| h.id == "dominant-kernel").expect("dominant-kernel");
    let said = format!("{} {}", dominant.evidence, dominant.hypothesis);
    assert!(said.contains("`Matmul [256, 128]` outside steptrace's spans"), "{said}");
    assert!(!said.contains("no span") && !said.contains("of `"), "{said}");
    let grid = r.hypotheses.iter().find(|h| h.id == "under-filled-grid").expect("under-filled-grid");
    let said = format!("{} {}", grid.evidence, grid.hypothesis);
    assert!(said.contains("`Matmul [256, 128]` outside steptrace's spans"), "{said}");
    assert!(!said.contains("no span") && !said.contains("in `"), "{said}");
}

#[test]
fn an_all_outside_trace_attributes_nothing() {
    let r = report_of(&trace_of(5, true, &OUTSIDE[..2]));
    let a = r.device.attribution.as_ref().expect("attribution");
    assert!(close(a.attributed_ms_per_step, 0.0) && close(a.attributed_share, 0.0), "{a:?}");
    assert!(a.by_span.is_empty() && a.by_phase.is_empty(), "{:?} {:?}", a.by_span, a.by_phase);
    assert_eq!(a.by_op_kind.len(), 2);
    assert_eq!(a.unattributed.len(), 1);
    assert!(close(a.unattributed[0].share, 1.0));
    // No span launches the kernels.
    assert!(r.hypotheses.iter().all(|h| !h.evidence.contains("the span launching most kernels")));
}

/// Per 10 ms step: a block's layer named by the parameters its operations read (1000 µs), its
/// backward inferred from the tensors so named (2000 µs), and a layer named by steptrace's spans
/// forward (500 µs) and, inferred, backward (250 µs).
const MODULE: [Kernel<'static>; 4] = [
    (
        "matmul_fwd",
        1000.0,
        [300, 1, 1],
        attribution::MODULE,
        "matmul",
        "Matmul [256, 512]",
        "forward > blocks.1.linear",
    ),
    (
        "matmul_bwd",
        2000.0,
        [300, 1, 1],
        attribution::MODULE_INFERRED,
        "matmul",
        "Matmul [512, 256]",
        "backward > blocks.1.linear",
    ),
    ("conv_fwd", 500.0, [300, 1, 1], attribution::CALLED, "conv", "Conv2d [256, 16, 28, 28]", "forward > conv1"),
    (
        "conv_bwd",
        250.0,
        [300, 1, 1],
        attribution::INFERRED,
        "conv",
        "Conv2dWeightBackward [16, 3, 3, 3]",
        "backward > conv1",
    ),
];

#[test]
fn layers_named_by_the_module_tree_are_attributed_and_counted_apart() {
    assert!([attribution::MODULE, attribution::MODULE_INFERRED].iter().all(|h| attribution::is_tied_to_span(h)));
    assert!(
        !attribution::is_tied_to_span(attribution::OUTSIDE_SPANS)
            && !attribution::is_tied_to_span(attribution::NO_BLOCK)
    );
    let r = report_of(&trace_of(5, true, &MODULE));
    let a = r.device.attribution.as_ref().expect("attribution");
    assert!(close(a.attributed_ms_per_step, 3.75) && close(a.attributed_share, 1.0), "{a:?}");
    assert!(a.unattributed.is_empty(), "{:?}", a.unattributed);
    assert!(close(a.named_by_module_ms_per_step, 3.0) && close(a.named_by_spans_ms_per_step, 0.75), "{a:?}");
    // Inferred: the backward of either naming.
    assert!(close(a.inferred_ms_per_step, 2.25), "{a:?}");
    let tree: Vec<(&str, f64)> = a.by_span.iter().map(|r| (r.path.as_str(), r.total_ms)).collect();
    assert_eq!(
        tree,
        [
            ("backward", 2.25),
            ("backward > blocks.1.linear", 2.0),
            ("backward > conv1", 0.25),
            ("forward", 1.5),
            ("forward > blocks.1.linear", 1.0),
            ("forward > conv1", 0.5),
        ]
    );
}

/// Each step uploads the batch (65,536 bytes, in `transfer.h2d`) and a 4,000-byte constant made
/// in `loss`; with `--detail ops` the copies say which span made what they upload.
fn uploads(steps: u64, attributed: bool) -> Value {
    let mut ev = Vec::new();
    for n in 0..steps {
        let t = n as f64 * STEP_US;
        ev.push(json!({"ph": "X", "cat": "user_annotation", "name": format!("ProfilerStep#{n}"), "pid": 1, "tid": 1,
            "ts": t, "dur": STEP_US, "args": {}}));
        for (at, bytes, span) in [(100.0, 65_536, "transfer.h2d"), (3000.0, 4000, "loss")] {
            let mut args = json!({"device": 0, "stream": 7, "correlation": 1, "bytes": bytes, "kind": "HtoD"});
            if attributed {
                args["attribution"] = json!(attribution::CALLED);
                args["op kind"] = json!("upload");
                args["span"] = json!(span);
                args["phase"] = json!(span);
            }
            ev.push(json!({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 100, "tid": 7,
                "ts": t + at, "dur": 20.0, "args": args}));
        }
    }
    json!({"schemaVersion": 1, "traceEvents": ev})
}

fn upload_report(attributed: bool) -> Report {
    let trace = parse_trace(&serde_json::to_vec(&uploads(5, attributed)).unwrap()).unwrap();
    let options = ReportOptions { batch_size: Some(256), ..ReportOptions::default() };
    Report::build(&[("uploads.json".into(), trace)], &options).unwrap()
}

#[test]
fn the_repeated_upload_names_the_span_that_made_the_tensor() {
    let r = upload_report(true);
    let copies = r.device.copies.as_ref().expect("copies");
    let constant = copies.sizes.iter().find(|s| s.bytes == Some(4000)).expect("the 4000-byte copies");
    assert_eq!(constant.spans, ["loss"]);
    assert!(!constant.batch);
    let h = r.hypotheses.iter().find(|h| h.id == "repeated-upload").expect("repeated-upload");
    assert!(h.evidence.contains("4000 B ×1 (made in `loss`)"), "{}", h.evidence);
    assert!(h.next.contains("made from host data in `loss`"), "{}", h.next);
    assert!(!h.evidence.contains("65536 B ×"), "the batch is left out: {}", h.evidence);

    // Without attribution the rule still fires, and says how to find the span.
    let plain = upload_report(false);
    let h = plain.hypotheses.iter().find(|h| h.id == "repeated-upload").expect("repeated-upload");
    assert!(!h.evidence.contains("made in"), "{}", h.evidence);
    assert!(h.next.contains("--detail ops"), "{}", h.next);
}
