#!/usr/bin/env python3
"""Turns `steptrace train --json` summaries in a folder into a Markdown table."""
import json
import pathlib
import statistics
import sys

folder = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
print("| run | backend | first step (ms) | steady median ms/step | p90 | min | max | n | samples/s | trace bytes/step | loss first -> last | held-out |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for path in sorted(folder.glob("*.json")):
    s = json.loads(path.read_text())
    st = s.get("steady_ms") or {}
    traces = s.get("traces") or []
    steps = sum(len(t["steps"]) for t in traces)
    per_step = sum(t["bytes"] for t in traces) / steps if steps else None
    held = s.get("held_out")
    print(
        f"| {path.stem} | {s['backend'][:60]} | {s['first_step_ms']:.0f} | "
        f"{st.get('median', float('nan')):.2f} | {st.get('p90', float('nan')):.2f} | {st.get('min', float('nan')):.2f} | "
        f"{st.get('max', float('nan')):.2f} | {st.get('n', 0)} | {s.get('steady_samples_per_s') or 0:.0f} | "
        f"{per_step if per_step is None else round(per_step)} | {s.get('first_loss')} -> {s.get('last_loss')} | {held} |"
    )
for path in sorted(folder.glob("*.json")):
    s = json.loads(path.read_text())
    raw = [round(r["ms"], 3) for r in s["steps"]]
    print(f"\n{path.stem} raw step ms: {raw}")
