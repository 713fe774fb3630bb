#!/usr/bin/env python3
"""Priced work against Nsight Compute's counters, kernel by kernel.

    python3 scripts/h200/ncu_compare.py RESULTS_DIR [--markdown]

RESULTS_DIR is the `results` folder of `scripts/h200/run roofline` (unpacked from
h200-roofline.tgz): its `ncu.csv` (ncu --csv --page raw --print-units base) and the traces of
the same process in `traces/ncu/`. For each kernel ncu profiled, the kernels of the same name
in the trace's recorded steps give the priced `min bytes` and `min flops` of their fused block;
the ratio of ncu's DRAM bytes (read + written) to the priced bytes, and of its FP32 FLOPs
(fadd + fmul + 2 x ffma, per thread) to the priced FLOPs, is printed per kernel, with the op
kind and operations. A name priced with several different figures in the trace is matched to
the nearest by bytes and marked ambiguous; a kernel whose fused block launched several kernels
carries the whole block's figures and is marked as not comparable alone (compare single-kernel
blocks: a matmul, a direct convolution, a fused elementwise block, a reduction, the optimizer's
fused update). Tensor-core instructions are counted apart
(`sm__inst_executed_pipe_tensor.sum`): a matmul that runs on them has few FP32 instructions.
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
    """Priced kernels by name, each with the number of kernels its block launched."""
    by_name = defaultdict(list)
    for path in sorted(glob.glob(f"{folder}/*.trace.json")):
        with open(path) as f:
            doc = json.load(f)
        kernels = [e for e in doc.get("traceEvents", []) if e.get("cat") == "kernel"]
        per_block = defaultdict(int)
        for e in kernels:
            block = (e.get("args") or {}).get("fused block")
            if block is not None:
                per_block[block] += 1
        for e in kernels:
            a = dict(e.get("args") or {})
            if "min bytes" in a and not a.get("unpriced ops"):
                a["kernels in block"] = per_block.get(a.get("fused block"), 1)
                by_name[e["name"]].append(a)
    return by_name


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    folder = sys.argv[1]
    markdown = "--markdown" in sys.argv
    rows = ncu_rows(f"{folder}/ncu.csv")
    priced = priced_kernels(f"{folder}/traces/ncu")
    out = []
    for r in rows:
        name = r.get("Kernel Name", "")
        dram = number(r["dram__bytes_read.sum"]) + number(r["dram__bytes_write.sum"])
        fp32 = sum(number(r.get(k)) or 0.0 for k in (
            "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
            "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
        )) + 2 * (number(r.get("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum")) or 0.0)
        tensor = number(r.get("sm__inst_executed_pipe_tensor.sum")) or 0.0
        candidates = priced.get(name, [])
        if not candidates:
            out.append((name, None, dram, fp32, tensor, "not in the trace's recorded steps"))
            continue
        variants = {(c["min bytes"], c["min flops"]) for c in candidates}
        best = min(candidates, key=lambda c: abs(c["min bytes"] - dram))
        notes = []
        if len(variants) > 1:
            notes.append(f"ambiguous: {len(variants)} priced variants")
        if best["kernels in block"] > 1:
            notes.append(f"its block ran {best['kernels in block']} kernels, priced together: not comparable alone")
        note = "; ".join(notes)
        out.append((name, best, dram, fp32, tensor, note))
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
