#!/usr/bin/env bash
# Where `--detail ops`' cost goes on CUDA: the wall time and calls of each attribution hook
# (operations registered, each fused block's operations noted, launches, span boundaries, the
# module tree noted) and the window's close, from a binary built with
# scripts/h200/attribution-probe.patch, which prints one `attribution-probe` line to stderr as
# each window closes. Runs the MLP and the ConvNet at batch 256 with `--detail ops`, then
# sums the lines into results/hooks.txt, per window and per recorded step.
#
#   git apply scripts/h200/attribution-probe.patch   # here, in a clean tree
#   cargo build --release -p steptrace-cli            # then strip and xz it as
#   .devbin/steptrace-probe.xz, and undo the patch: git checkout crates/steptrace-burn
#   scripts/h200/run attribution-probe                # on the device machine
#
# Knobs: BUDGET (default 400), STEPS (80), CACHE, WORK.
# Needs .devbin/steptrace-probe.xz. What comes back: $OUT/h200-attribution-probe.tgz.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../.."
W=${WORK:-/tmp/st-attribution-probe}
R=$W/results
FINAL=${OUT:-$W/out}
BUDGET=${BUDGET:-400}
STEPS=${STEPS:-80}
CACHE=${CACHE:-/tmp/st-cubecl-cache}
. "$HERE/common.sh"

trap 'st_pack h200-attribution-probe' EXIT
st_start "$W"
mkdir -p "$FINAL"
if [ -z "${STEPTRACE:-}" ]; then B=$W/bin/steptrace-probe; fi
if [ ! -x "$B" ]; then echo "error: $B is missing (.devbin/steptrace-probe.xz)" | tee -a "$R/rc.txt"; exit 1; fi
# Windows of a warmup and three active steps, the first after the startup.
schedule=(--schedule skip_first=20,wait=2,warmup=1,active=3 --steps "$STEPS" --loss-every 0 --detail ops)
CAP=200 st_train mlp --model mlp --dataset digits --batch 256 "${schedule[@]}"
CAP=150 st_train convnet --model convnet --dataset fashion-mnist --batch 256 "${schedule[@]}"
python3 - "$R" << 'PY' | tee "$R/hooks.txt"
import re, statistics, sys
from pathlib import Path
steps_a_window = 4  # warmup + active
for name in ("mlp", "convnet"):
    log = Path(sys.argv[1]) / f"{name}.log"
    if not log.exists():
        print(name, "no log"); continue
    rows = [dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", l))
            for l in log.read_text().splitlines() if l.startswith("attribution-probe ")]
    steady = rows[1:] or rows  # the first window grows its buffers
    print(f"{name}: {len(rows)} windows, {len(steady)} steady; medians per window, and per recorded step")
    for key in sorted(k for k in steady[0] if k.endswith("_ns")):
        med = statistics.median(r[key] for r in steady)
        calls = key[:-3] + "_calls"
        n = statistics.median(r[calls] for r in steady) if calls in steady[0] else None
        per = f", {med / n:.0f} ns a call ({n:.0f} calls)" if n else ""
        # The close runs once, at the boundary after the window's last step.
        step = "" if key == "close_ns" else f"  {med / 1000 / steps_a_window:8.1f} us a step"
        print(f"  {key[:-3]:<16} {med / 1000:9.1f} us a window{step}{per}")
PY
echo "== done [${SECONDS}s]"
