#!/usr/bin/env bash
# Memory categories at the step's start on the H200 (the sample asked ahead of cubecl's device
# thread without waiting): for the MLP at batch 256 and 512, the ConvNet and the Transformer,
# `train --memory` and its report; the categories at the highest sample against in use, and
# parameters and optimizer state against the model's own count (f32, Adam: 4 and 8 bytes a
# parameter).
#
#   scripts/h200/run memory-start
#
# Knobs: BUDGET (default 400), CACHE, WORK.
# Needs .devbin/steptrace.xz. What comes back: $OUT/h200-memory-start.tgz.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../.."
W=${WORK:-/tmp/st-memory-start}
R=$W/results
FINAL=${OUT:-$W/out}
BUDGET=${BUDGET:-400}
CACHE=${CACHE:-/tmp/st-cubecl-cache}
. "$HERE/common.sh"

trap 'st_pack h200-memory-start' EXIT
st_start "$W"
mkdir -p "$FINAL"
schedule=(--schedule skip_first=10,wait=2,warmup=1,active=3 --steps 30 --loss-every 0 --memory)
CAP=200 st_train mlp-256 --model mlp --dataset digits --batch 256 "${schedule[@]}"
CAP=60 st_train mlp-512 --model mlp --dataset digits --batch 512 "${schedule[@]}"
CAP=150 st_train convnet --model convnet --dataset fashion-mnist --batch 256 "${schedule[@]}"
CAP=150 st_train transformer --model transformer --dataset shakespeare "${schedule[@]}"
for name in mlp-256 mlp-512 convnet transformer; do
  [ -d "$R/traces/$name" ] || continue
  (cd "$R" && "$B" report "traces/$name" > "report-$name.txt" 2>&1
   "$B" report "traces/$name" --json > "report-$name.json" 2> /dev/null) || true
  python3 - "$R/$name.json" "$R/report-$name.json" << 'PY' | tee -a "$R/check.txt"
import json, sys
run, rep = (json.load(open(p)) for p in sys.argv[1:3])
m, mb = rep.get("memory") or {}, 1024.0 * 1024.0
cats = {c["name"]: c["mb"] for c in m.get("categories", [])}
params = run.get("parameters") or 0
print(sys.argv[1].split("/")[-1], "| memory:", run.get("memory"))
print("  points:", [(p["after"], round(p["in_use_mb"]["median"], 3)) for p in m.get("points", [])],
      "| highest", m.get("highest_mb", {}).get("median"), "after", m.get("highest_after"))
print("  categories MB:", cats, "| sum", round(sum(cats.values()), 6))
print("  parameters: %d x 4 B = %.6f MB, category %s; optimizer state: %d x 8 B = %.6f MB, category %s"
      % (params, params * 4 / mb, cats.get("parameters"), params, params * 8 / mb, cats.get("optimizer_state")))
PY
done
echo "== done [${SECONDS}s]"
