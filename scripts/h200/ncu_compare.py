#!/usr/bin/env python3
"""Priced work against Nsight Compute's counters, kernel by kernel.

    python3 scripts/h200/ncu_compare.py RESULTS_DIR [--markdown]

RESULTS_DIR is the `results` folder of `scripts/h200/run roofline` (unpacked from
h200-roofline.tgz): its `ncu.csv` (ncu --csv --page raw --print-units base) and the traces of
the same process in `traces/ncu/`. ncu profiles a run of consecutive launches; their names,
in launch order, are found in the trace's recorded kernels (in launch order), so that each
profiled launch is paired with the very kernel of the trace at the same place in a step, and
with its priced `min bytes` and `min flops` (of its fused block). Every place the sequence
occurs is checked to price the kernels alike (steady steps repeat). The ratio of ncu's DRAM
bytes (read + written) to the priced bytes, and of its FP32 FLOPs (fadd + fmul + 2 x ffma, per
thread) to the priced FLOPs, is printed per kernel, with the op kind and operations. A kernel
whose fused block launched several kernels carries the whole block's figures and is marked as
not comparable alone (compare single-kernel blocks: a matmul, a direct convolution, a fused
elementwise block, a reduction, the optimizer's fused update). Where the sequence is not found,
a kernel is matched by name alone only when the trace prices that name one way, else it is
left unmatched (never to the nearest figure: that would pick agreement). Names are matched as
recorded: CUPTI records the entry point ncu shows; cubecl's launch observer (CUDA events)
records the kernel type, whose snake-case form begins the entry point. Tensor-core
instructions are counted apart (`sm__inst_executed_pipe_tensor.sum`): a matmul that runs on
them has few FP32 instructions.
"""

import csv
import glob
import json
import sys
from collections import defaultdict


def number(text):
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return None


def ncu_rows(path):
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    rows = list(csv.DictReader(lines))
    # The raw page's second line holds units.
    return [r for r in rows if number(r.get("dram__bytes_read.sum")) is not None]


def priced_kernels(folder):
    """The recorded kernels of every trace in `folder`, in launch order, each as (name, args)
    with the number of kernels its block launched; `None` for a kernel priced not at all."""
    seq = []
    for path in sorted(glob.glob(f"{folder}/*.trace.json")):
        with open(path) as f:
            doc = json.load(f)
        kernels = [e for e in doc.get("traceEvents", []) if e.get("cat") == "kernel"]
        kernels.sort(key=lambda e: (e.get("args") or {}).get("correlation", e.get("ts", 0)))
        per_block = defaultdict(int)
        for e in kernels:
            block = (e.get("args") or {}).get("fused block")
            if block is not None:
                per_block[block] += 1
        for e in kernels:
            a = dict(e.get("args") or {})
            if "min bytes" in a and not a.get("unpriced ops"):
                a["kernels in block"] = per_block.get(a.get("fused block"), 1)
                seq.append((e["name"], a))
            else:
                seq.append((e["name"], None))
    return seq


def figures(a):
    return None if a is None else (a["min bytes"], a["min flops"], a["kernels in block"])


def align(wanted, seq):
    """Every offset of `seq` (names) where the names `wanted` occur in order."""
    names = [n for n, _ in seq]
    n = len(wanted)
    return [i for i in range(len(names) - n + 1) if names[i:i + n] == wanted]


def snake(name):
    """`SliceAssignKernel` -> `slice_assign_kernel`: cubecl's kernel type name as its PTX entry
    point begins."""
    out = []
    for i, c in enumerate(name):
        if c.isupper() and i > 0 and not name[i - 1].isupper():
            out.append("_")
        out.append(c.lower())
    return "".join(out)


def trace_name(ncu_name, names):
    """The trace's kernel name for ncu's: the same name (CUPTI records the entry point), or
    the kernel type whose snake-case form begins the entry point followed by its generic
    arguments (cubecl's launch observer records the type: `SliceKernel` for
    `slice_kernel_e_f32_d9bb81a4`), the longest such."""
    if ncu_name in names:
        return ncu_name
    fits = [n for n in names if ncu_name.startswith(snake(n) + "_")]
    return max(fits, key=len) if fits else None


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    folder = sys.argv[1]
    markdown = "--markdown" in sys.argv
    rows = ncu_rows(f"{folder}/ncu.csv")
    seq = priced_kernels(f"{folder}/traces/ncu")
    known = sorted({n for n, _ in seq})
    wanted = [trace_name(r.get("Kernel Name", ""), known) for r in rows]
    offsets = align(wanted, seq) if None not in wanted else []
    by_name = defaultdict(set)
    for n, a in seq:
        by_name[n].add(figures(a))
    out = []
    for j, r in enumerate(rows):
        name = r.get("Kernel Name", "")
        dram = number(r["dram__bytes_read.sum"]) + number(r["dram__bytes_write.sum"])
        fp32 = sum(number(r.get(k)) or 0.0 for k in (
            "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
            "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
        )) + 2 * (number(r.get("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum")) or 0.0)
        tensor = number(r.get("sm__inst_executed_pipe_tensor.sum")) or 0.0
        notes = []
        l2 = [number(r.get(f"lts__t_sectors_srcunit_tex_op_{d}.sum")) for d in ("read", "write")]
        if None not in l2:
            notes.append(f"L2 traffic {32 * sum(l2):.0f} B")
        if offsets:
            placed = {figures(seq[i + j][1]) for i in offsets}
            best = seq[offsets[0] + j][1]
            if len(placed) > 1:
                notes.append(f"priced {len(placed)} ways at the {len(offsets)} places the sequence occurs")
        else:
            variants = by_name.get(wanted[j], set())
            if len(variants) != 1:
                why = "not in the trace's recorded steps" if not variants else f"{len(variants)} priced variants of its name"
                out.append((name, None, dram, fp32, tensor, f"unmatched: {why}"))
                continue
            best = next(a for n, a in seq if n == wanted[j])
            notes.append("matched by name alone")
        if best is None:
            out.append((name, None, dram, fp32, tensor, "not priced in the trace"))
            continue
        if best["kernels in block"] > 1:
            notes.append(f"its block ran {best['kernels in block']} kernels, priced together: not comparable alone")
        out.append((name, best, dram, fp32, tensor, "; ".join(notes)))
    if offsets:
        print(f"the {len(rows)} profiled launches occur in the trace's recorded kernels at {len(offsets)} places "
              f"(first at kernel {offsets[0]})", file=sys.stderr)
    else:
        print("the profiled launches' sequence is not in the trace's recorded kernels: matched by name alone",
              file=sys.stderr)
    seen = set()
    header = ["kernel", "op kind", "ops", "priced bytes", "ncu DRAM bytes", "ratio", "priced FLOPs", "ncu FP32 FLOPs",
              "ratio", "tensor insts", "note"]
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
    for name, best, dram, fp32, tensor, note in out:
        key = (name, dram, fp32)
        if key in seen:
            continue
        seen.add(key)
        if best is None:
            cells = [name[:60], "-", "-", "-", f"{dram:.0f}", "-", "-", f"{fp32:.0f}", "-", f"{tensor:.0f}", note]
        else:
            pb, pf = best["min bytes"], best["min flops"]
            cells = [name[:60], best.get("op kind", "-"), (best.get("ops") or "-")[:60], f"{pb:.0f}", f"{dram:.0f}",
                     f"{dram / pb:.2f}" if pb else "-", f"{pf:.0f}", f"{fp32:.0f}", f"{fp32 / pf:.2f}" if pf else "-",
                     f"{tensor:.0f}", note]
        print(("| " + " | ".join(cells) + " |") if markdown else "\t".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
