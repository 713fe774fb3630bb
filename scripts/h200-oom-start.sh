#!/usr/bin/env bash
# Issue 25 on the H200 after the step-start sample: the planted out-of-memory of session 10
# (an MLP 16,384 wide at batch 300,000, docs/benchmarks.md) must still explain itself, and the
# MLP's peak inside the step (`--memory-phases`) at batch 256 against batch 512.
#
#   bash scripts/h200-oom-start.sh
#
# Needs .devbin/steptrace.xz. What comes back: $OUT/h200-oom-start.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
W=${WORK:-/tmp/st-oom-start}
R=$W/results
FINAL=${OUT:-$W/out}
BUDGET=${BUDGET:-450}
CACHE=${CACHE:-/tmp/st-cubecl-cache}
. "$(dirname "$0")/h200-common.sh"

trap 'st_pack h200-oom-start' EXIT
st_start "$W"
mkdir -p "$FINAL"
for batch in 256 512; do
  CAP=150 st_train "phases-$batch" --model mlp --dataset digits --batch "$batch" --steps 30 --loss-every 0 --memory \
    --memory-phases --schedule skip_first=10,wait=2,warmup=1,active=3
  (cd "$R" && "$B" report "traces/phases-$batch" > "report-phases-$batch.txt" 2>&1) || true
  grep -A12 "Device memory" "$R/report-phases-$batch.txt" | head -14
done
CAP=${OOM_CAP:-280} st_train oom --model mlp --dataset synthetic --synthetic-shape 1,8,8 --synthetic-samples 300000 \
  --hidden 16384,16384,16384 --loss-every 0 --memory --steps 4 --schedule skip_first=0,wait=0,warmup=1,active=3 \
  --batch 300000
echo "== done [${SECONDS}s]"
