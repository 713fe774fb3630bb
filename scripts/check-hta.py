#!/usr/bin/env python3
"""Does HolisticTraceAnalysis (HTA) 0.5 understand a trace directory?

    python3 scripts/check-hta.py [-v] TRACE_DIR [TRACE_DIR ...]

HTA reads one directory per run: every *.json / *.gz file in it is one rank.
For each directory this loads TraceAnalysis(trace_dir=DIR,
include_last_profiler_step=True), runs get_temporal_breakdown(),
get_idle_time_breakdown() and get_gpu_kernel_breakdown(), and checks that

- each analysis returns a non-empty result (and the temporal breakdown a
  kernel time above zero),
- every `ProfilerStep#N` span in the file is one of HTA's profiler steps
  (TraceAnalysis.get_profiler_steps()),
- HTA kept at least one GPU kernel (cat "kernel" on a stream >= 0),
- HTA loaded as many ranks as the directory has trace files (files without a
  `"rank": N` all become rank 0, and HTA then silently analyses only one), and
  exactly the ranks the files declare.

It prints a short summary per directory. The trace files are only read, never
rewritten: a trace HTA cannot use is a finding about the writer.

include_last_profiler_step=True: without it HTA drops the GPU kernels launched
in the last ProfilerStep (on fake_gpu_workload's trace 76 of 101 kernels were
kept; on the Kineto fixture 70 of 105).

HTA logs a lot (and pandas warns about HTA's code). That is hidden unless -v;
on failure the last lines of HTA's log are shown.

Exit status: 0 all directories pass, 1 a directory fails, 2 usage or setup error.
Needs: HolisticTraceAnalysis==0.5.0 with pandas<3 and psutil (see docs/hta.md).
"""

import argparse
import contextlib
import gzip
import io
import json
import logging
import os
import re
import sys
import traceback
import warnings

HTA_VERSION = "0.5.0"
INSTALL = f"python3 -m pip install HolisticTraceAnalysis=={HTA_VERSION} 'pandas<3' psutil"
STEP_RE = re.compile(r"^ProfilerStep#(\d+)")
RANK_RE = re.compile(r'"rank":\s+(\d+)')  # hta/common/trace_file.py


class Failure(Exception):
    pass


def setup_error(msg):
    print(f"check-hta: error: {msg}", file=sys.stderr)
    sys.exit(2)


def import_hta():
    try:
        import pandas
    except ImportError:
        setup_error(f"pandas is not installed ({INSTALL})")
    # HTA 0.5.0 assigns row indices into a correlation column that pandas has
    # downcast (int8 when every correlation id is < 128); pandas 3 raises
    # TypeError there ("Invalid value ... for dtype 'int8'"), pandas 2 upcasts.
    if int(pandas.__version__.split(".")[0]) >= 3:
        setup_error(
            f"pandas {pandas.__version__} is installed; HTA {HTA_VERSION} needs pandas<3 "
            f"(it fails in transform_correlation_to_index). {INSTALL}"
        )
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError as e:  # HTA 0.5.0 imports psutil without declaring it
        setup_error(f"cannot import HTA ({e}); {INSTALL}")
    try:
        from importlib.metadata import version

        found = version("HolisticTraceAnalysis")
    except Exception:
        found = "?"
    if found != HTA_VERSION:
        print(f"check-hta: warning: HTA {found} is installed; this checks {HTA_VERSION}", file=sys.stderr)
    return TraceAnalysis, found


@contextlib.contextmanager
def quiet(verbose, log):
    """Hide HTA's logging and warnings (into `log`) unless verbose."""
    if verbose:
        yield
        return
    hta_logger = logging.getLogger("hta")
    level = hta_logger.level
    hta_logger.setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            try:
                yield
            finally:
                hta_logger.setLevel(level)


def trace_files(trace_dir):
    # HTA's own rule (hta/common/trace_file.py): names ending in .gz or .json.
    return sorted(f for f in os.listdir(trace_dir) if f.endswith(".gz") or f.endswith(".json"))


def read_file_facts(path):
    """Counts from the raw file, to compare with what HTA made of it."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as fh:
        text = fh.read()
    data = json.loads(text)
    # HTA finds a file's rank with this regex on the raw text (first match), not by
    # parsing distributedInfo: compact JSON ("rank":0) is not found.
    rank = RANK_RE.search(text)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    steps, partial_steps, kernels, devices = set(), set(), 0, set()
    for e in events:
        m = STEP_RE.match(str(e.get("name", "")))
        if m:
            (steps if e.get("ph") == "X" else partial_steps).add(int(m.group(1)))
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            kernels += 1
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            devices.add((e.get("args") or {}).get("device"))
    meta = {k: v for k, v in data.items() if k != "traceEvents"} if isinstance(data, dict) else {}
    return {
        "steps": steps,
        "partial_steps": partial_steps - steps,
        "kernels": kernels,
        "meta": meta,
        "rank": int(rank.group(1)) if rank else None,
        "devices": devices,
    }


def pct(x):
    return f"{float(x):.1f}%"


def check_dir(TraceAnalysis, trace_dir, verbose):
    if not os.path.isdir(trace_dir):
        raise Failure("not a directory")
    files = trace_files(trace_dir)
    if not files:
        raise Failure("no *.json or *.gz trace file in it")
    facts = {}
    for f in files:
        try:
            facts[f] = read_file_facts(os.path.join(trace_dir, f))
        except (OSError, ValueError, AttributeError) as e:  # ValueError covers JSONDecodeError
            raise Failure(f"{f}: cannot read it as a JSON trace: {e}")
    for f, fa in facts.items():
        rank = "" if fa["rank"] is None else f", rank {fa['rank']}"
        print(f"  file {f}: {len(fa['steps'])} ProfilerStep spans, {fa['kernels']} kernels{rank}")
        if fa["partial_steps"]:
            print(f"    note: ProfilerStep {sorted(fa['partial_steps'])} only as B/E (HTA drops events without dur)")
        if fa["rank"] is None:
            if "distributedInfo" not in fa["meta"]:
                print('    note: no "distributedInfo": {"rank": N}: HTA warns and takes rank 0')
            else:
                print('    note: distributedInfo has no "rank": N with whitespace after the colon '
                      "(HTA's regex): HTA warns and takes rank 0")
        if len(fa["devices"]) > 1:
            print(f"    note: GPU events of devices {sorted(fa['devices'], key=str)} in one file: HTA treats a file as one "
                  "GPU (its breakdowns ignore pid and args.device; equal stream numbers are merged)")

    log = io.StringIO()
    failures = []
    try:
        with quiet(verbose, log):
            a = TraceAnalysis(trace_dir=trace_dir, include_last_profiler_step=True)
            ranks = a.t.get_ranks()
            steps = [int(s) for s in a.get_profiler_steps()]
            temporal = a.get_temporal_breakdown(visualize=False)
            idle, _ = a.get_idle_time_breakdown(ranks=ranks, visualize=False)
            by_type, by_kernel = a.get_gpu_kernel_breakdown(visualize=False)
    except Exception as e:
        tail = "".join(log.getvalue().splitlines(keepends=True)[-10:])
        frames = traceback.extract_tb(e.__traceback__)
        frames = [f for f in frames if f"{os.sep}hta{os.sep}" in f.filename][-2:] or frames[-2:]
        where = "".join(traceback.format_list(frames))
        raise Failure(
            f"HTA raised {type(e).__name__}: {e}\n{where}"
            + (f"--- last lines of HTA's log (-v shows all) ---\n{tail}" if tail else "")
        )

    # Ranks: one per file, or HTA analysed only some of them.
    if len(ranks) != len(files):
        failures.append(
            f"{len(files)} trace files but HTA loaded {len(ranks)} rank(s) {ranks}: files without a "
            f'distinct "rank": N (HTA\'s regex "rank":\\s+(\\d+)) all become rank 0 and only one is '
            "analysed; put each file in its own directory"
        )

    declared = sorted(fa["rank"] for fa in facts.values() if fa["rank"] is not None)
    if len(declared) == len(files) and sorted(int(r) for r in ranks) != declared:
        failures.append(f"the files declare ranks {declared} but HTA loaded ranks {sorted(ranks)}")

    # Steps.
    want = set().union(*(fa["steps"] for fa in facts.values()))
    print(f"  ranks {ranks}; HTA profiler steps {steps}")
    if not steps:
        failures.append("HTA found no ProfilerStep#N step (get_profiler_steps() is empty)")
    elif want - set(steps):
        failures.append(f"ProfilerStep {sorted(want - set(steps))} in the file(s) are not HTA profiler steps")

    # Kernels HTA kept (after dropping GPU work it cannot tie to a host launch in a step).
    kept = {}
    for r in ranks:
        df = a.t.get_trace(r)
        sym = a.t.symbol_table.get_sym_id_map()
        kernel_cat = sym.get("kernel")
        gpu = df[(df["stream"] >= 0) & (df["correlation"] >= 0)]
        kept[r] = int((gpu["cat"] == kernel_cat).sum()) if kernel_cat is not None else 0
    in_files = sum(fa["kernels"] for fa in facts.values())
    print(f"  kernels kept by HTA: {sum(kept.values())} of {in_files} in the file(s)")
    if sum(kept.values()) == 0:
        failures.append("HTA kept no GPU kernel (cat \"kernel\", args.stream >= 0, args.correlation >= 0, "
                        "linked by correlation to a host event inside a ProfilerStep)")
    elif sum(kept.values()) < in_files:
        print(f"    note: {in_files - sum(kept.values())} kernels dropped: no host event with the same "
              "correlation before the last ProfilerStep ends")

    # Temporal breakdown.
    if temporal is None or temporal.empty:
        failures.append("get_temporal_breakdown() returned nothing")
    else:
        for _, row in temporal.iterrows():
            print(
                f"  temporal (rank {int(row['rank'])}): idle {pct(row['idle_time_pctg'])}, "
                f"compute {pct(row['compute_time_pctg'])}, non-compute {pct(row['non_compute_time_pctg'])} "
                f"of {float(row['kernel_time(us)']):.0f} us"
            )
            if not row["kernel_time(us)"] > 0:
                failures.append(f"temporal breakdown: rank {int(row['rank'])} has no GPU time")

    # Idle time breakdown.
    if idle is None or idle.empty:
        failures.append("get_idle_time_breakdown() returned nothing")
    else:
        for (r, s), g in idle.groupby(["rank", "stream"]):
            parts = ", ".join(f"{c} {pct(100 * v)}" for c, v in zip(g["idle_category"], g["idle_time_ratio"]))
            print(f"  idle (rank {int(r)}, stream {int(s)}): {float(g['idle_time'].sum()):.0f} us: {parts}")

    # GPU kernel breakdown.
    if by_type is None or by_type.empty or by_kernel is None or by_kernel.empty:
        failures.append("get_gpu_kernel_breakdown() returned nothing")
    else:
        parts = ", ".join(f"{t} {pct(p)}" for t, p in zip(by_type["kernel_type"], by_type["percentage"]))
        print(f"  kernel types: {parts}")
        top = by_kernel.sort_values("sum (us)", ascending=False).head(3)
        names = "; ".join(f"{str(n)[:60]} {float(v):.0f} us" for n, v in zip(top["name"], top["sum (us)"]))
        print(f"  top kernels ({len(by_kernel)} rows): {names}")

    if failures:
        raise Failure("\n".join(f"- {f}" for f in failures))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], usage="%(prog)s [-v] TRACE_DIR [TRACE_DIR ...]")
    p.add_argument("dirs", nargs="+", metavar="TRACE_DIR", help="directory holding one run's trace file(s)")
    p.add_argument("-v", "--verbose", action="store_true", help="show HTA's own logging and warnings")
    args = p.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # keep stdout and stderr in order in CI logs

    TraceAnalysis, found = import_hta()
    failed = []
    for d in args.dirs:
        print(f"{d}: HTA {found}")
        try:
            check_dir(TraceAnalysis, d, args.verbose)
            print(f"{d}: ok")
        except Failure as e:
            failed.append(d)
            print(f"{d}: FAIL\n{e}", file=sys.stderr)
    if failed:
        print(f"check-hta: {len(failed)} of {len(args.dirs)} trace directories failed: {' '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
