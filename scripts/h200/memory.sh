#!/usr/bin/env bash
# Memory on the H200: the Transformer's categories, and an out-of-memory that explains itself.
#
#   scripts/h200/run memory
#
# 1. A request too large for one allocation: the ConvNet on 1 x 512 x 512 synthetic images at
#    batch 8192 (conv1's output alone is 64 GiB; cubecl's CUDA pools take at most a quarter of
#    the device in one piece), with --memory, its warmup cycle open at step 0.
# 2. The batch the report says would fit (measured after the failure at two smaller batches),
#    run for real with --memory --memory-phases: does it fit (confirmed outside the report)?
#    And 10% above it, which should not. (Before it, the Transformer on Shakespeare with
#    --memory --memory-phases: categories against in use.)
# 3. A device that fills up: the same ConvNet at batch 4096 (conv1's output, 34 GB, is under the
#    largest allocation), with --memory --memory-phases: out of memory, or the true peak.
# Parts run in that order while the budget lasts (what it cut is in rc.txt). The cubecl cache
# is $CACHE (default /tmp/st-cubecl-cache, kept between runs on one machine).
# Knobs: BUDGET (default 560), OOM_CAP (default 390), TRANSFORMER_CAP (default 150), CACHE, WORK.
#
# Needs the release binary in .devbin/steptrace.xz (built with `--features nvtx` or without).
# What comes back: $OUT/h200-memory.tgz (results/: logs, --json files, reports, rc.txt).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../.."
W=${WORK:-/tmp/st-memory}
R=$W/results
FINAL=${OUT:-$W/out}
BUDGET=${BUDGET:-560}
CACHE=${CACHE:-/tmp/st-cubecl-cache}
. "$HERE/common.sh"

trap 'st_pack h200-memory' EXIT
st_start "$W"
mkdir -p "$FINAL"
train() { st_train "$@"; }
report() { (cd "$R" && "$B" report "traces/$1" > "report-$1.txt" 2>&1; "$B" report "traces/$1" --json > "report-$1.json" 2>/dev/null) || true; }

CONVNET=(--model convnet --dataset synthetic --synthetic-shape 1,512,512 --synthetic-samples 8192 --loss-every 0)

CAP=${OOM_CAP:-390} train oom-too-large "${CONVNET[@]}" --batch 8192 --steps 4 --schedule skip_first=0,wait=0,warmup=1,active=3 --memory
report oom-too-large
CAP=${TRANSFORMER_CAP:-150} train transformer --model transformer --dataset shakespeare --steps 30 --loss-every 0 --memory --memory-phases
report transformer
fits=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["out_of_memory"]["fitting_batch"]["value"])' \
  "$R/oom-too-large.json" 2>/dev/null || echo "")
echo "fitting batch said: ${fits:-none}" | tee -a "$R/rc.txt"
if [ -n "$fits" ]; then
  CAP=150 train fits "${CONVNET[@]}" --batch "$fits" --steps 8 --schedule skip_first=2,wait=0,warmup=1,active=3 \
    --memory --memory-phases
  report fits
  CAP=150 train fits-plus-10 "${CONVNET[@]}" --batch $((fits * 11 / 10)) --steps 4 \
    --schedule skip_first=0,wait=0,warmup=1,active=3 --memory
fi
CAP=200 train oom-4096 "${CONVNET[@]}" --batch 4096 --steps 4 --schedule skip_first=0,wait=0,warmup=1,active=3 \
  --memory --memory-phases
report oom-4096
nvidia-smi --query-gpu=memory.total,memory.used --format=csv > "$R/memory-total.txt" 2>&1 || true
echo "== done [${SECONDS}s]"
cat "$R/rc.txt" 2>/dev/null || true
