#!/usr/bin/env bash
# Kernel attribution on the H200 (which op, which layer): its share and its cost, in one run
# of under 10 minutes:
#
#   scripts/h200/run attribution [all|overhead|verify]
#
# `all` (the default):
# 1. `train` on CUDA with device activity (CUPTI) and kernel attribution, into an empty
#    cubecl cache: the MLP and the ConvNet at batch 256, the Transformer at batch 64 and
#    sequence 64, 40 steps each; their traces come back for `report` (the share of kernel
#    time attributed, the op and span tables, the hypotheses).
# 2. The same ConvNet with attribution off (STEPTRACE_ATTRIBUTION=off): the same kernels,
#    unattributed.
# 3. `bench --profile interleaved` (RUNS processes) for the MLP (--baseline) and the ConvNet at
#    batch 256, with attribution on and then off: the in-process overhead of each, paired.
#    (Written when attribution was on whenever device activity was; it is now `--detail ops`,
#    which `verify` uses.)
#
# `overhead` runs step 3 alone, in the cache an earlier run left (when the machine is still
# the same; else its first process pays the cold start, before the measured steps).
#
# `verify`: the MLP with `--detail ops`, then with CUPTI turned off (STEPTRACE_CUPTI=off:
# kernels timed by CUDA events), then without either; the ConvNet with `--detail ops` at batch
# 256 and 512 (for `compare` by op and span); and `bench --profile interleaved --detail ops`
# against the same bench without it, for the ConvNet. QUICK=1 stops after the MLP runs.
#
# Knobs: BUDGET (seconds, default 560), RUNS (processes a condition, default 3), CACHE, CAP,
# QUICK. The release binary is carried as .devbin/steptrace.xz (the H200 has no Rust).
# Results land in $OUT/h200-attribution.tgz and the console log in $OUT/h200-attribution.log.
set -euo pipefail
MODE=${1:-all}
FINAL=${OUT:?OUT must name the output folder}
W=/tmp/st-h200-attribution
R=$W/results
BUDGET=${BUDGET:-560}
RUNS=${RUNS:-3}
CACHE=${CACHE:-/tmp/cubecl-attribution}
. "$(dirname "$0")/common.sh"

pack() { st_pack h200-attribution; }
train() { st_train "$@"; }

overhead() {
  local name=$1
  shift
  st_run_capped "$name" "${CAP:-90}" "$B" bench --profile interleaved --backend cuda --runs "$RUNS" \
    --cache-dir "$CACHE" --trace-dir "traces/$name" --json "$name.json" "$@"
}

main() {
  trap pack EXIT
  st_start "$R"
  if [ "${MODE:-all}" = all ]; then
  rm -rf "$CACHE"
  train mlp-256 --model mlp --dataset digits --batch 256 --steps 40 --loss-every 0
  train convnet-256 --model convnet --dataset fashion-mnist --batch 256 --steps 40 --loss-every 0
  CAP=200 train transformer --model transformer --dataset shakespeare --batch 64 --seq-len 64 --steps 40 --loss-every 0
  STEPTRACE_ATTRIBUTION=off train convnet-256-off --model convnet --dataset fashion-mnist --batch 256 --steps 40 --loss-every 0
  fi
  if [ "$MODE" != verify ]; then
  overhead bench-mlp-on --model mlp --dataset digits --batch 256 --baseline
  STEPTRACE_ATTRIBUTION=off overhead bench-mlp-off --model mlp --dataset digits --batch 256 --baseline
  overhead bench-convnet-on --model convnet --dataset fashion-mnist --batch 256
  STEPTRACE_ATTRIBUTION=off overhead bench-convnet-off --model convnet --dataset fashion-mnist --batch 256
  fi
  if [ "$MODE" = verify ]; then
  rm -rf "$CACHE"
  train mlp-ops --model mlp --dataset digits --batch 256 --steps 40 --loss-every 0 --detail ops
  STEPTRACE_CUPTI=off train mlp-ops-nocupti --model mlp --dataset digits --batch 256 --steps 40 --loss-every 0 --detail ops
  STEPTRACE_CUPTI=off train mlp-nocupti --model mlp --dataset digits --batch 256 --steps 40 --loss-every 0
  [ "${QUICK:-}" = 1 ] && return 0
  train convnet-ops-256 --model convnet --dataset fashion-mnist --batch 256 --steps 40 --loss-every 0 --detail ops
  train convnet-ops-512 --model convnet --dataset fashion-mnist --batch 512 --steps 40 --loss-every 0 --detail ops
  overhead bench-convnet-ops --model convnet --dataset fashion-mnist --batch 256 --detail ops
  overhead bench-convnet-steps --model convnet --dataset fashion-mnist --batch 256
  fi
  rm -rf "$R"/traces/bench-*
  echo "== done [${SECONDS}s]"
  cat "$R/rc.txt" 2>/dev/null || true
}

main 2>&1 | tee "$FINAL/h200-attribution.log"
