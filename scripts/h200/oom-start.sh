#!/usr/bin/env bash
# The planted out-of-memory on the H200 (an MLP 16,384 wide at batch 300,000, in
# docs/benchmarks/archive-2026-12-03.md) must still explain itself with the step-start
# memory sample, and the MLP's peak inside the step (`--memory-phases`) at batch 256 against
# batch 512.
#
#   scripts/h200/run oom-start
#
# Knobs: BUDGET (default 450), OOM_CAP (default 280), CACHE, WORK.
# Needs .devbin/steptrace.xz. What comes back: $OUT/h200-oom-start.tgz.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../.."
W=${WORK:-/tmp/st-oom-start}
R=$W/results
FINAL=${OUT:-$W/out}
BUDGET=${BUDGET:-450}
CACHE=${CACHE:-/tmp/st-cubecl-cache}
. "$HERE/common.sh"

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
