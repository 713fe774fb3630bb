#!/usr/bin/env bash
# The paired bench on workloads other than the MLP at batch 256 and the ConvNet
# (`bench --profile interleaved`, host spans with the null check, then CUPTI's default): the
# MLP at a small batch (its steps the most launch-bound) and the character Transformer, with
# torch.profiler's cost on the MLP at the same batch beside it (benches/torch_twin.py).
#
#   scripts/h200/run workloads
#
# Knobs: RUNS (processes a condition, default 20), BUDGET (seconds, default 560), MLP_BATCH
# (default 32), TRANSFORMER=0, TRANSFORMER_RUNS (default 10), CUPTI=0, TORCH=0, CACHE, WORK.
# Needs .devbin/steptrace.xz. What comes back: $OUT/h200-workloads.tgz.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../.."
REPO=$PWD
W=${WORK:-/tmp/st-workloads}
R=$W/results
FINAL=${OUT:-$W/out}
BUDGET=${BUDGET:-560}
CACHE=${CACHE:-/tmp/st-cubecl-cache}
RUNS=${RUNS:-20}
MLP_BATCH=${MLP_BATCH:-32}
. "$HERE/common.sh"

trap 'st_pack h200-workloads' EXIT
st_start "$W"
mkdir -p "$FINAL"

common=(bench --profile interleaved --backend cuda --cache-dir "$CACHE" --schedule wait=7,warmup=1,active=2)
mlp=(--model mlp --dataset digits --batch "$MLP_BATCH")
transformer=(--model transformer --dataset shakespeare --batch 64 --seq-len 64)

st_run_capped mlp-host 150 "$B" "${common[@]}" --runs "$RUNS" "${mlp[@]}" --device-activity off --baseline --json mlp-host.json
[ "${CUPTI:-1}" = 1 ] && st_run_capped mlp-cupti 100 "$B" "${common[@]}" --runs "$RUNS" "${mlp[@]}" --json mlp-cupti.json
if [ "${TORCH:-1}" = 1 ]; then
  for p in 1 2 3; do
    st_run_capped "torch-mlp-$p" 60 env PYTHONUNBUFFERED=1 python3 "$REPO/benches/torch_twin.py" --model mlp \
      --batch "$MLP_BATCH" --runs 1 --warmup 20 --steps 100 --profile interleaved --schedule wait=7,warmup=1,active=2 \
      --activities cpu+cuda --out "torch-mlp-$p.json"
  done
fi
# The Transformer's first process compiles and autotunes (about 2 min on a fresh machine);
# the others find the cache.
[ "${TRANSFORMER:-1}" = 1 ] && st_run_capped transformer-host 420 "$B" "${common[@]}" --runs "${TRANSFORMER_RUNS:-10}" \
  "${transformer[@]}" --device-activity off --baseline --json transformer-host.json
echo "== done [${SECONDS}s]"
cat "$R/rc.txt" 2> /dev/null || true
