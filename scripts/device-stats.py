#!/usr/bin/env python3
"""Device activity per step, from steptrace Chrome trace files.

    scripts/device-stats.py --traces DIR [--traces DIR ...] [--json OUT.json]

For every `*.trace.json` (or `.json.gz`) under each DIR, it reads the
`ProfilerStep#N` X events on pid 1 and the device events (`cat` `kernel`,
`gpu_memcpy`, `gpu_memset`) and reports:

- per step: kernels (by start time inside the step), copies, memsets, and
  device busy time: the union of kernel + memcpy + memset intervals clipped
  to the step;
- launch matching: kernels whose `args.correlation` equals that of a host
  launch event (`cuda_driver`/`cuda_runtime`, name containing
  `LaunchKernel`) in the same file, and the `ac2g` flows;
- checks: every kernel inside the file's `metadata.window_us`; kernel
  intervals on one stream (pid, tid) never overlap; per-step kernel counts
  (min/max across steps); `metadata.device_activity` (status, written,
  outside_window, dropped_by_collector, orphan_kernels, clock).

Files that do not parse are listed, not skipped silently. Standard library
only.
"""

import argparse
import gzip
import json
import os
import statistics
import sys
from collections import Counter, defaultdict

DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_driver", "cuda_runtime")
EPS_US = 0.002  # float rounding of µs timestamps with ns resolution


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    if isinstance(data, list):
        return {"traceEvents": data}
    return data


def union_length(intervals, lo, hi):
    clipped = sorted((max(a, lo), min(b, hi)) for a, b in intervals if b > lo and a < hi)
    total, cur_a, cur_b = 0.0, None, None
    for a, b in clipped:
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None:
        total += cur_b - cur_a
    return total


def file_stats(path):
    d = load(path)
    md = d.get("metadata") or {}
    evs = d.get("traceEvents") or []
    steps, work, launches, flows = [], [], [], Counter()
    for e in evs:
        ph, cat, name = e.get("ph"), e.get("cat"), e.get("name", "")
        if ph == "X" and e.get("pid") == 1 and name.startswith("ProfilerStep#"):
            steps.append((int(name.split("#", 1)[1]), float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))))
        elif ph == "X" and cat in DEVICE_WORK:
            work.append(e)
        elif ph == "X" and cat in LAUNCH_CATS and "LaunchKernel" in name:
            launches.append(e)
        elif cat == "ac2g":
            flows[ph] += 1
    steps.sort()
    kernels = [e for e in work if e["cat"] == "kernel"]
    launch_ts = {(e.get("args") or {}).get("correlation"): float(e["ts"]) for e in launches}
    matched = sum(1 for k in kernels if (k.get("args") or {}).get("correlation") in launch_ts)
    # Kernel start minus its launch call's start: negative means the clocks are mapped wrong.
    latency = [float(k["ts"]) - launch_ts[c] for k in kernels
               if (c := (k.get("args") or {}).get("correlation")) in launch_ts]

    win = md.get("window_us") or {}
    w0, w1 = win.get("start"), win.get("end")
    outside, max_excess = 0, 0.0
    if w0 is not None and w1 is not None:
        for k in kernels:
            a, b = float(k["ts"]), float(k["ts"]) + float(k.get("dur", 0))
            ex = max(w0 - a, b - w1, 0.0)
            if ex > EPS_US:
                outside += 1
                max_excess = max(max_excess, ex)

    per_stream = defaultdict(list)
    for k in kernels:
        per_stream[(k.get("pid"), k.get("tid"))].append((float(k["ts"]), float(k["ts"]) + float(k.get("dur", 0))))
    overlaps, max_overlap = 0, 0.0
    for ivs in per_stream.values():
        ivs.sort()
        prev_end = None
        for a, b in ivs:
            if prev_end is not None and a < prev_end - EPS_US:
                overlaps += 1
                max_overlap = max(max_overlap, prev_end - a)
            prev_end = b if prev_end is None else max(prev_end, b)

    intervals = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in work]
    per_step = []
    in_step = 0
    for n, a, b in steps:
        ks = [k for k in kernels if a <= float(k["ts"]) < b]
        in_step += len(ks)
        cp = sum(1 for e in work if e["cat"] == "gpu_memcpy" and a <= float(e["ts"]) < b)
        ms = sum(1 for e in work if e["cat"] == "gpu_memset" and a <= float(e["ts"]) < b)
        busy = union_length(intervals, a, b)
        per_step.append({"step": n, "step_ms": (b - a) / 1000.0, "kernels": len(ks), "memcpy": cp, "memset": ms,
                         "kernel_us": sum(float(k.get("dur", 0)) for k in ks),
                         "busy_ms": busy / 1000.0, "busy_frac": busy / (b - a) if b > a else None})
    by_name = defaultdict(float)
    for k in kernels:
        by_name[k.get("name", "?")] += float(k.get("dur", 0))
    da = md.get("device_activity") or {}
    return {
        "file": path, "bytes": os.path.getsize(path), "events": len(evs), "window_us": win,
        "steps": per_step, "kernels": len(kernels), "memcpy": sum(1 for e in work if e["cat"] == "gpu_memcpy"),
        "memset": sum(1 for e in work if e["cat"] == "gpu_memset"), "launches": len(launches),
        "kernels_matched": matched, "launch_to_kernel_us": latency, "kernels_outside_steps": len(kernels) - in_step,
        "flows": dict(flows), "kernels_outside_window": outside, "max_excess_us": max_excess,
        "streams": len(per_stream), "stream_overlaps": overlaps, "max_overlap_us": max_overlap,
        "device_activity": da, "manifest_device_activity": (md.get("manifest") or {}).get("device_activity"),
        "kernel_names": dict(by_name),
    }


def summarise(files, errors):
    steps = [s for f in files for s in f["steps"]]
    def rng(xs):
        return {"n": len(xs), "min": min(xs), "median": statistics.median(xs), "max": max(xs)} if xs else {"n": 0}
    written = Counter()
    for f in files:
        for k, v in (f["device_activity"].get("written") or {}).items():
            if isinstance(v, (int, float)):
                written[k] += v
    names = Counter()
    for f in files:
        for k, v in f["kernel_names"].items():
            names[k] += v
    clocks = [f["device_activity"].get("clock") for f in files if f["device_activity"].get("clock")]
    total_k = sum(f["kernels"] for f in files)
    return {
        "files": len(files), "load_errors": errors,
        "status": dict(Counter(str(f["device_activity"].get("status")) for f in files)),
        "source": sorted({str(f["device_activity"].get("source")) for f in files}),
        "steps": len(steps),
        "kernels_per_step": rng([s["kernels"] for s in steps]),
        "kernels_per_step_counts": dict(sorted(Counter(s["kernels"] for s in steps).items())),
        "memcpy_per_step": rng([s["memcpy"] for s in steps]),
        "memset_per_step": rng([s["memset"] for s in steps]),
        "busy_ms_per_step": rng([s["busy_ms"] for s in steps]),
        "busy_frac_per_step": rng([s["busy_frac"] for s in steps if s["busy_frac"] is not None]),
        "step_ms": rng([s["step_ms"] for s in steps]),
        "kernel_us_per_step": rng([s["kernel_us"] for s in steps]),
        "kernels": total_k, "kernels_matched": sum(f["kernels_matched"] for f in files),
        "launch_to_kernel_us": rng([x for f in files for x in f["launch_to_kernel_us"]]),
        "kernels_starting_before_launch": sum(1 for f in files for x in f["launch_to_kernel_us"] if x < 0),
        "window_ms": rng([(f["window_us"]["end"] - f["window_us"]["start"]) / 1000.0 for f in files
                          if f["window_us"].get("start") is not None]),
        "kernels_outside_steps": sum(f["kernels_outside_steps"] for f in files),
        "launches": sum(f["launches"] for f in files),
        "flows": dict(sum((Counter(f["flows"]) for f in files), Counter())),
        "kernels_outside_window": sum(f["kernels_outside_window"] for f in files),
        "max_excess_us": max((f["max_excess_us"] for f in files), default=0.0),
        "stream_overlaps": sum(f["stream_overlaps"] for f in files),
        "max_overlap_us": max((f["max_overlap_us"] for f in files), default=0.0),
        "streams_per_file": rng([f["streams"] for f in files]),
        "written": dict(written),
        "outside_window": sum(int(f["device_activity"].get("outside_window") or 0) for f in files),
        "dropped_by_collector": sum(int(f["device_activity"].get("dropped_by_collector") or 0) for f in files),
        "orphan_kernels": sum(int(f["device_activity"].get("orphan_kernels") or 0) for f in files),
        "problems": sorted({p for f in files for p in (f["device_activity"].get("problems") or [])}),
        "clock_offset_ns": rng([c.get("offset_ns") for c in clocks if c.get("offset_ns") is not None]),
        "clock_drift_ppm": rng([c.get("drift_ppm") for c in clocks if c.get("drift_ppm") is not None]),
        "clock_uncertainty_ns": rng([c.get("uncertainty_ns") for c in clocks if c.get("uncertainty_ns") is not None]),
        "file_bytes": rng([f["bytes"] for f in files]),
        "distinct_kernel_names": len(names),
        "top_kernels_by_time_us": [[k, v] for k, v in names.most_common(5)],
    }


def fmt_rng(r, unit="", digits=3):
    if not r.get("n"):
        return "n/a"
    f = f"{{:.{digits}f}}"
    return f"min {f.format(r['min'])}, median {f.format(r['median'])}, max {f.format(r['max'])}{unit} (n = {r['n']})"


def render(d, s):
    out = [f"{d}: {s['files']} files, {s['steps']} steps; status {s['status']}; source {s['source']}"]
    if s["load_errors"]:
        out.append(f"  LOAD ERRORS: {s['load_errors']}")
    out.append(f"  kernels/step: {fmt_rng(s['kernels_per_step'], digits=0)}; counts {s['kernels_per_step_counts']}")
    out.append(f"  memcpy/step: {fmt_rng(s['memcpy_per_step'], digits=0)}; memset/step: {fmt_rng(s['memset_per_step'], digits=0)}")
    out.append(f"  device busy/step: {fmt_rng(s['busy_ms_per_step'], ' ms', 4)}")
    out.append(f"  busy fraction/step: {fmt_rng(s['busy_frac_per_step'], '', 4)}")
    out.append(f"  kernel time/step: {fmt_rng(s['kernel_us_per_step'], ' us', 1)}; step: {fmt_rng(s['step_ms'], ' ms', 4)}")
    out.append(f"  kernels {s['kernels']}, with a launch of the same correlation {s['kernels_matched']}, "
               f"outside every step {s['kernels_outside_steps']}; launches {s['launches']}; flows {s['flows']}")
    out.append(f"  kernel start - launch start: {fmt_rng(s['launch_to_kernel_us'], ' us', 2)}; "
               f"kernels starting before their launch: {s['kernels_starting_before_launch']}; window {fmt_rng(s['window_ms'], ' ms', 2)}")
    out.append(f"  kernels outside window_us: {s['kernels_outside_window']} (max excess {s['max_excess_us']:.3f} us); "
               f"overlapping kernels on a stream: {s['stream_overlaps']} (max {s['max_overlap_us']:.3f} us); "
               f"streams/file {fmt_rng(s['streams_per_file'], digits=0)}")
    out.append(f"  metadata: written {s['written']}; outside_window {s['outside_window']}; "
               f"dropped_by_collector {s['dropped_by_collector']}; orphan_kernels {s['orphan_kernels']}; problems {s['problems']}")
    out.append(f"  clock: offset_ns {fmt_rng(s['clock_offset_ns'], digits=0)}; drift_ppm {fmt_rng(s['clock_drift_ppm'], digits=3)}; "
               f"uncertainty_ns {fmt_rng(s['clock_uncertainty_ns'], digits=0)}")
    out.append(f"  file bytes: {fmt_rng(s['file_bytes'], digits=0)}; distinct kernel names {s['distinct_kernel_names']}")
    for k, v in s["top_kernels_by_time_us"]:
        out.append(f"    {v:12.1f} us  {k[:100]}")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", action="append", required=True, help="a directory of trace files (repeatable)")
    ap.add_argument("--json", help="write every directory's summary and per-file figures here")
    a = ap.parse_args(argv)
    result = {}
    for d in a.traces:
        paths = sorted(os.path.join(root, n) for root, _, names in os.walk(d) for n in names
                       if n.endswith(".json") or n.endswith(".json.gz"))
        files, errors = [], []
        for p in paths:
            try:
                files.append(file_stats(p))
            except (ValueError, OSError, KeyError, TypeError) as e:
                errors.append(f"{p}: {type(e).__name__}: {e}")
        s = summarise(files, errors)
        print(render(d, s))
        for f in files:
            f.pop("kernel_names", None)
            f.pop("launch_to_kernel_us", None)
        result[d] = {"summary": s, "files": files}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
