#!/usr/bin/env python3
"""Profiler cost inside one process, from a `steptrace train --json` summary.

    scripts/overhead.py SUMMARY.json --schedule S [--json OUT.json]

Each step gets its phase under torch.profiler's schedule semantics
(`skip_first, wait, warmup, active, repeat`, optional `skip_first_wait`):
steps before `skip_first` are `skip`; after them a cycle is
`wait + warmup + active` steps; once `repeat` cycles are done (repeat > 0)
the rest are `after`. Skip and after steps are dropped (skip holds the
startup: compilation, autotune). For wait, warmup and active it prints n,
median and IQR of the step times, the median step time by position in the
cycle, and the ratios active/wait and warmup/wait of the medians with a
bootstrap 95% interval (steps resampled within each phase, 2000 times,
fixed seed). Within one process, active minus wait is what recording costs.

No dependencies beyond the standard library.

For new measurements use `steptrace bench --profile interleaved`: it runs the
processes, labels every step with steptrace's own schedule code, repeats over
processes with `compare`'s bootstrap and verdict, and keeps every step in its
--json (docs/benchmarks.md). This script stays for existing `train --json`
summaries, as scripts/h200/device.sh produces them.
"""

import argparse
import json
import random
import statistics
import sys

SEED = 20261201
RESAMPLES = 2000


def parse_schedule(text):
    keys = {"skip_first": 0, "wait": 0, "warmup": 0, "active": 1, "repeat": 0, "skip_first_wait": 0}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        k, _, v = part.partition("=")
        k = k.strip()
        if k not in keys:
            raise SystemExit(f"unknown schedule key {k!r} in {text!r}")
        v = v.strip().lower()
        keys[k] = 1 if v in ("true", "yes") else 0 if v in ("false", "no") else int(v)
    if keys["wait"] + keys["warmup"] + keys["active"] <= 0:
        raise SystemExit(f"schedule {text!r} has an empty cycle")
    return keys


def phase_of(step, s):
    """(phase, cycle, position in cycle) of a step, torch.profiler.schedule's rules."""
    if step < s["skip_first"]:
        return "skip", None, None
    x = step - s["skip_first"]
    if s["skip_first_wait"]:
        x += s["wait"]
    n = s["wait"] + s["warmup"] + s["active"]
    if s["repeat"] > 0 and x // n >= s["repeat"]:
        return "after", None, None
    cycle, pos = divmod(x, n)
    if pos < s["wait"]:
        return "wait", cycle, pos
    if pos < s["wait"] + s["warmup"]:
        return "warmup", cycle, pos
    return "active", cycle, pos


def quartiles(xs):
    q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3
    return q[0], q[2]


def bootstrap_ratio(num, den, rng):
    """Percentile interval of median(num*)/median(den*) over resamples."""
    ratios = []
    for _ in range(RESAMPLES):
        a = statistics.median(rng.choices(num, k=len(num)))
        b = statistics.median(rng.choices(den, k=len(den)))
        ratios.append(a / b)
    ratios.sort()
    lo = ratios[int(0.025 * RESAMPLES)]
    hi = ratios[int(0.975 * RESAMPLES) - 1]
    return lo, hi


def analyse(summary, schedule_text):
    s = parse_schedule(schedule_text)
    steps = summary["steps"]
    by_phase = {"skip": [], "wait": [], "warmup": [], "active": [], "after": []}
    by_pos = {}
    for st in steps:
        phase, _cycle, pos = phase_of(int(st["step"]), s)
        by_phase[phase].append(float(st["ms"]))
        if pos is not None:
            by_pos.setdefault(pos, []).append(float(st["ms"]))
    out = {
        "schedule": schedule_text,
        "steps": len(steps),
        "dropped": {"skip": len(by_phase["skip"]), "after": len(by_phase["after"])},
        "phases": {},
        "by_position": {},
    }
    for ph in ("wait", "warmup", "active"):
        xs = by_phase[ph]
        if not xs:
            out["phases"][ph] = {"n": 0}
            continue
        q1, q3 = quartiles(xs)
        out["phases"][ph] = {
            "n": len(xs), "median_ms": statistics.median(xs), "p25_ms": q1, "p75_ms": q3,
            "iqr_ms": q3 - q1, "min_ms": min(xs), "max_ms": max(xs),
        }
    for pos in sorted(by_pos):
        ph = "wait" if pos < s["wait"] else "warmup" if pos < s["wait"] + s["warmup"] else "active"
        out["by_position"][str(pos)] = {"phase": ph, "n": len(by_pos[pos]),
                                        "median_ms": statistics.median(by_pos[pos])}
    rng = random.Random(SEED)
    for name, num in (("active_over_wait", "active"), ("warmup_over_wait", "warmup")):
        a, w = by_phase[num], by_phase["wait"]
        if a and w:
            lo, hi = bootstrap_ratio(a, w, rng)
            out[name] = {"ratio": statistics.median(a) / statistics.median(w), "ci95": [lo, hi],
                         "resamples": RESAMPLES, "seed": SEED}
        else:
            out[name] = None
    return out


def render(path, r):
    lines = [f"{path}: {r['steps']} steps, schedule {r['schedule']}; dropped skip={r['dropped']['skip']} after={r['dropped']['after']}"]
    lines.append(f"  {'phase':<7} {'n':>5} {'median ms':>10} {'p25':>8} {'p75':>8} {'IQR':>8} {'min':>8} {'max':>8}")
    for ph, v in r["phases"].items():
        if v["n"] == 0:
            lines.append(f"  {ph:<7} {0:>5}")
            continue
        lines.append(f"  {ph:<7} {v['n']:>5} {v['median_ms']:>10.4f} {v['p25_ms']:>8.4f} {v['p75_ms']:>8.4f} "
                     f"{v['iqr_ms']:>8.4f} {v['min_ms']:>8.4f} {v['max_ms']:>8.4f}")
    pos = ", ".join(f"{k} {v['phase']} {v['median_ms']:.4f}" for k, v in r["by_position"].items())
    lines.append(f"  median ms by position in cycle: {pos}")
    for name in ("active_over_wait", "warmup_over_wait"):
        v = r[name]
        if v is None:
            lines.append(f"  {name}: n/a")
        else:
            lines.append(f"  {name}: {v['ratio']:.4f} (95% bootstrap {v['ci95'][0]:.4f}-{v['ci95'][1]:.4f}, "
                         f"{v['resamples']} resamples, seed {v['seed']}) = {100 * (v['ratio'] - 1):+.2f}%")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("summary", nargs="+", help="steptrace train --json summaries")
    ap.add_argument("--schedule", required=True, help="the schedule the runs used")
    ap.add_argument("--json", help="write the results (a list, one per summary) here")
    a = ap.parse_args(argv)
    results = []
    for path in a.summary:
        with open(path) as f:
            r = analyse(json.load(f), a.schedule)
        r["summary"] = path
        results.append(r)
        print(render(path, r))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
